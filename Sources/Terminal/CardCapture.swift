import EMV

/// Reads a card as a terminal does, as far as the card allows, and keeps every answer byte for
/// byte: the ATR; the PSE (or PPSE) and its directory, or the known AIDs when there is none; and
/// for each application its FCI, GET PROCESSING OPTIONS with a PDOL filled from a plausible
/// terminal, every record the AFL names, the data cards commonly answer to GET DATA, the
/// transaction log, and one GENERATE AC asking for an AAC (the issuer application data, 9F10, is
/// in no other answer). `cardbench card capture` turns the result into a profile (docs/recording.md).
///
/// Pure: it drives a `CardLink`, the kernel's own view of a card.
public enum CardCapture {
    public struct Options: Sendable {
        public var interface: CardInterface = .contact
        /// The terminal's country and currency (ISO 3166 and 4217 numeric) in the DOL data.
        public var countryCode = 484
        public var currencyCode = 484
        /// Minor units: the amount in the PDOL and CDOL data.
        public var amount = 100
        /// Today as YYMMDD BCD (9A).
        public var date: [UInt8] = [0x26, 0x01, 0x01]
        /// Whether to ask for an AAC: the only way to see the card's issuer application data.
        /// Costs one ATC; an AAC is a decline the card records as one.
        public var generateAC = true
        /// Terminal transaction qualifiers for a tap (9F66).
        public var ttq: [UInt8] = ContactlessConfiguration().ttq
        /// The AIDs tried when the card has no PSE, as partial names (next occurrences followed).
        public var aids: [[UInt8]] = CardCapture.knownAIDs

        public init() {}
    }

    /// The RIDs (and common AIDs) a terminal tries when a card has no directory: Visa,
    /// Mastercard, American Express, JCB, Discover, UnionPay, Interac, Carnet.
    public static let knownAIDs: [[UInt8]] = [
        [0xA0, 0, 0, 0, 0x03], [0xA0, 0, 0, 0, 0x04], [0xA0, 0, 0, 0, 0x25], [0xA0, 0, 0, 0, 0x65], [0xA0, 0, 0, 0x01, 0x52],
        [0xA0, 0, 0, 0x03, 0x33], [0xA0, 0, 0, 0, 0x27, 0x77], [0xA0, 0, 0, 0x06, 0x72],
    ]

    /// One record as read.
    public struct Record: Sendable, Equatable {
        public let sfi: Int
        public let record: Int
        /// The record's data (a 70 template on an EMV card), without the status word.
        public let bytes: [UInt8]
        /// Whether the AFL marks it for offline data authentication.
        public let offlineAuthentication: Bool

        public init(sfi: Int, record: Int, bytes: [UInt8], offlineAuthentication: Bool) {
            self.sfi = sfi
            self.record = record
            self.bytes = bytes
            self.offlineAuthentication = offlineAuthentication
        }
    }

    /// One application as read.
    public struct Application: Sendable {
        public let aid: [UInt8]
        /// The whole FCI (6F) SELECT answered.
        public var fci: [UInt8] = []
        /// SELECT answered 6283: the application is blocked.
        public var blocked = false
        /// The kernel identifier the PPSE entry named (9F2A).
        public var kernel: Int?
        /// GET PROCESSING OPTIONS' answer (data), nil when refused.
        public var gpo: [UInt8]?
        /// The AFL as the card gave it.
        public var afl: [UInt8] = []
        public var records: [Record] = []
        /// Values GET DATA answered, by tag.
        public var getData: [UInt32: [UInt8]] = [:]
        /// The transaction log's SFI and records, when the FCI names one (9F4D).
        public var log: (sfi: Int, records: [[UInt8]])?
        /// GENERATE AC's answer (data), nil when not asked or refused.
        public var generateAC: [UInt8]?

        public init(aid: [UInt8]) { self.aid = aid }
    }

    public struct Result: Sendable {
        public let interface: CardInterface
        public var atr: [UInt8] = []
        /// The PSE's or PPSE's FCI (6F), nil when the card has none.
        public var directoryFCI: [UInt8]?
        /// The PSE directory's records (contact).
        public var directoryRecords: [[UInt8]] = []
        public var applications: [Application] = []
        /// What the capture did and what the card refused, in order: no card data in it.
        public var notes: [String] = []

        public init(interface: CardInterface) { self.interface = interface }
    }

    /// Reads the card on `link`.
    public static func run(_ link: any CardLink, options: Options = Options()) throws(KernelError) -> Result {
        var session = Session(link: link, options: options)
        return try session.run()
    }

    struct Session {
        let link: any CardLink
        let options: Options
        var result: Result

        init(link: any CardLink, options: Options) {
            self.link = link
            self.options = options
            result = Result(interface: options.interface)
        }

        /// A command and the card's whole answer, following 61xx and 6Cxx as a T=0 terminal does.
        func send(_ command: CommandAPDU) throws(KernelError) -> ResponseAPDU {
            func exchange(_ c: CommandAPDU) throws(KernelError) -> ResponseAPDU {
                let raw = try link.transmit(c.bytes)
                do { return try ResponseAPDU(bytes: raw) } catch {
                    throw KernelError.readerError(step: c.instructionName, detail: error.description)
                }
            }
            var response = try exchange(command)
            if let length = response.status.correctLength {
                response = try exchange(CommandAPDU(cla: command.cla, ins: command.ins, p1: command.p1, p2: command.p2, data: command.data, le: length))
            }
            var collected = response.data
            var rounds = 0
            while let available = response.status.bytesAvailable, rounds < 64 {
                response = try exchange(.getResponse(available))
                collected += response.data
                rounds += 1
            }
            return ResponseAPDU(data: collected, status: response.status)
        }

        mutating func note(_ text: String) { result.notes.append(text) }

        mutating func run() throws(KernelError) -> Result {
            result.atr = try link.powerOn()
            note("ATR: \(result.atr.count) bytes")
            let aids = options.interface == .contactless ? try readPPSE() : try readPSE()
            for (aid, kernel) in aids {
                var app = Application(aid: aid)
                app.kernel = kernel
                try read(&app)
                result.applications.append(app)
            }
            if result.applications.isEmpty { note("no application answered: the profile would have none") }
            return result
        }

        /// The PSE and its directory; the known AIDs when the card has none.
        mutating func readPSE() throws(KernelError) -> [([UInt8], Int?)] {
            let pse = try send(.selectPSE)
            guard pse.status.isSuccess else {
                note("SELECT 1PAY.SYS.DDF01: \(pse.status) (no PSE); tried the known AIDs")
                return try selectByAIDList()
            }
            result.directoryFCI = pse.data
            let sfi = (try? TLV.parse(pse.data))?.first(0x6F)?.first(0xA5)?.first(0x88)?.value.first.map(Int.init) ?? 1
            var aids: [([UInt8], Int?)] = []
            for number in 1...32 {
                let r = try send(.readRecord(sfi: sfi, record: number))
                guard r.status.isSuccess else {
                    if r.status != StatusWord(0x6A, 0x83) { note("READ RECORD directory SFI \(sfi) record \(number): \(r.status)") }
                    break
                }
                result.directoryRecords.append(r.data)
                for entry in (try? TLV.parse(r.data))?.first(0x70)?.children.filter({ $0.tag == 0x61 }) ?? [] {
                    if let aid = entry.first(0x4F)?.value, !aids.contains(where: { $0.0 == aid }) { aids.append((aid, nil)) }
                }
            }
            note("PSE: \(result.directoryRecords.count) directory record(s), \(aids.count) application(s)")
            if aids.isEmpty { return try selectByAIDList() }
            return aids
        }

        /// The PPSE's entries, with their kernel identifiers.
        mutating func readPPSE() throws(KernelError) -> [([UInt8], Int?)] {
            let ppse = try send(.select(name: Array("2PAY.SYS.DDF01".utf8)))
            guard ppse.status.isSuccess else {
                note("SELECT 2PAY.SYS.DDF01: \(ppse.status) (no PPSE): nothing to tap")
                return []
            }
            result.directoryFCI = ppse.data
            let entries = (try? TLV.parse(ppse.data))?.first(0x6F)?.first(0xA5)?.first(0xBF0C)?.children.filter { $0.tag == 0x61 } ?? []
            let aids: [([UInt8], Int?)] = entries.compactMap { entry in
                entry.first(0x4F).map { ($0.value, entry.first(0x9F2A)?.value.first.map(Int.init)) }
            }
            note("PPSE: \(aids.count) application(s)")
            return aids
        }

        mutating func selectByAIDList() throws(KernelError) -> [([UInt8], Int?)] {
            var found: [([UInt8], Int?)] = []
            for prefix in options.aids {
                var next = false
                for _ in 0..<8 {
                    let r = try send(.select(name: prefix, next: next))
                    guard r.status.isSuccess || r.status == StatusWord(0x62, 0x83),
                          let aid = (try? TLV.parse(r.data))?.first(0x6F)?.first(0x84)?.value else { break }
                    if !found.contains(where: { $0.0 == aid }) { found.append((aid, nil)) }
                    next = true
                }
            }
            note("AID list: \(found.count) application(s) answered")
            return found
        }

        /// A plausible terminal's value for a DOL entry.
        func terminalValue(_ tag: EMVTag, length: Int) -> [UInt8] {
            func bcd(_ value: Int, bytes: Int) -> [UInt8] {
                var digits = String(value).utf8.map { $0 - 0x30 }
                while digits.count < bytes * 2 { digits.insert(0, at: 0) }
                return stride(from: 0, to: bytes * 2, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
            }
            let value: [UInt8]
            switch tag.value {
            case 0x9F02: value = bcd(options.amount, bytes: 6)
            case 0x9F1A: value = bcd(options.countryCode, bytes: 2)
            case 0x5F2A: value = bcd(options.currencyCode, bytes: 2)
            case 0x9A: value = options.date
            case 0x9F37: value = SecureRandom.bytes(4)
            case 0x9F35: value = [0x22]
            case 0x9F34: value = [0x3F, 0x00, 0x00]
            case 0x9F66: value = options.ttq
            case 0x9F33: value = [0xE0, 0xF8, 0xC8]
            case 0x9F40: value = [0xF0, 0x00, 0xF0, 0xA0, 0x01]
            case 0x9F1E: value = Array("CARDBNCH".utf8)
            case 0x9F15: value = [0x59, 0x99]
            case 0x5F36: value = [0x02]
            default: value = []
            }
            // A DOL entry's length wins: numbers pad on the left, everything else on the right.
            if value.count >= length { return Array(value.suffix(length)) }
            let numeric: Set<UInt32> = [0x9F02, 0x9F03, 0x9F1A, 0x5F2A, 0x9A, 0x9F21]
            let pad = [UInt8](repeating: 0, count: length - value.count)
            return numeric.contains(tag.value) ? pad + value : value + pad
        }

        mutating func read(_ app: inout Application) throws(KernelError) {
            let name = Hex.encode(app.aid)
            let selected = try send(.select(name: app.aid))
            guard selected.status.isSuccess || selected.status == StatusWord(0x62, 0x83) else {
                note("\(name): SELECT \(selected.status): not captured")
                return
            }
            app.fci = selected.data
            app.blocked = selected.status == StatusWord(0x62, 0x83)
            if app.blocked {
                note("\(name): SELECT 6283: the application is blocked; nothing more to read")
                return
            }
            let fci = (try? TLV.parse(selected.data))?.first(0x6F)?.first(0xA5)
            var terminal: [EMVTag: [UInt8]] = [:]
            let pdolBytes: [UInt8]
            if let dol = fci?.first(0x9F38).flatMap({ try? DOL.parse($0.value) }) {
                var data: [UInt8] = []
                for entry in dol.entries {
                    let v = terminalValue(entry.tag, length: entry.length)
                    terminal[entry.tag] = v
                    data += v
                }
                pdolBytes = data
            } else {
                pdolBytes = []
            }
            let gpo = try send(.getProcessingOptions(pdolData: pdolBytes))
            guard gpo.status.isSuccess else {
                note("\(name): GET PROCESSING OPTIONS \(gpo.status): no AIP, AFL or records")
                return
            }
            app.gpo = gpo.data
            let parsed = try? TLV.parse(gpo.data)
            if let format1 = parsed?.first(0x80), format1.value.count >= 2 {
                app.afl = Array(format1.value.dropFirst(2))
            } else {
                app.afl = parsed?.first(0x77)?.first(0x94)?.value ?? []
            }
            var records = 0
            if let entries = try? AFLEntry.parseList(app.afl) {
                for entry in entries {
                    for number in entry.firstRecord...entry.lastRecord {
                        let r = try send(.readRecord(sfi: entry.sfi, record: number))
                        guard r.status.isSuccess else {
                            note("\(name): READ RECORD SFI \(entry.sfi) record \(number): \(r.status)")
                            continue
                        }
                        app.records.append(Record(sfi: entry.sfi, record: number, bytes: r.data,
                                                  offlineAuthentication: number < entry.firstRecord + entry.offlineAuthenticationRecords))
                        records += 1
                    }
                }
            } else if !app.afl.isEmpty {
                note("\(name): the AFL \(Hex.encode(app.afl)) does not parse: no records read")
            }
            note("\(name): GET PROCESSING OPTIONS, \(records) record(s)")
            for tag: UInt32 in [0x9F36, 0x9F13, 0x9F17, 0x9F4F] {
                let r = try send(.getData(EMVTag(tag)))
                if r.status.isSuccess, let value = (try? TLV.parse(r.data))?.first(EMVTag(tag))?.value {
                    app.getData[tag] = value
                } else {
                    note("\(name): GET DATA \(EMVTag(tag)): \(r.status)")
                }
            }
            if let entry = fci?.first(0xBF0C)?.first(0x9F4D)?.value, entry.count == 2, (11...30).contains(Int(entry[0])) {
                var log: [[UInt8]] = []
                for number in 1...max(1, Int(entry[1])) {
                    let r = try send(.readRecord(sfi: Int(entry[0]), record: number))
                    guard r.status.isSuccess else { break }
                    log.append(r.data)
                }
                app.log = (Int(entry[0]), log)
                note("\(name): transaction log SFI \(entry[0]): \(log.count) entr\(log.count == 1 ? "y" : "ies")")
            }
            // A Visa tap's GPO is its transaction: it already carries the cryptogram and 9F10.
            let qualified = parsed?.first(0x77)?.first(0x9F26) != nil
            guard options.generateAC, !qualified else { return }
            let cdol1 = recordValue(app.records, tag: 0x8C).flatMap { try? DOL.parse($0) }
            guard let cdol1 else {
                note("\(name): no CDOL1 (8C) in the records: GENERATE AC not sent")
                return
            }
            var cdolData: [UInt8] = []
            for entry in cdol1.entries { cdolData += terminal[entry.tag].map { Array($0.prefix(entry.length)) } ?? terminalValue(entry.tag, length: entry.length) }
            let ac = try send(.generateAC(.aac, cdolData: cdolData))
            if ac.status.isSuccess {
                app.generateAC = ac.data
                note("\(name): GENERATE AC (AAC requested): answered")
            } else {
                note("\(name): GENERATE AC (AAC requested): \(ac.status)")
            }
        }

        /// The first value of `tag` in the records.
        func recordValue(_ records: [Record], tag: EMVTag) -> [UInt8]? {
            for record in records {
                if let value = (try? TLV.parse(record.bytes))?.first(0x70)?.first(tag)?.value { return value }
            }
            return nil
        }
    }
}
