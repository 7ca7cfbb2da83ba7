import EMV

/// What a card keeps across power cycles: the ATC of each application, the PIN try counter, and
/// which applications are blocked. A caller that wants it to survive restarts saves it (JSON).
public struct CardState: Codable, Equatable, Sendable {
    /// ATC by AID (hex).
    public var atc: [String: Int]
    /// Last online ATC register (9F13) by AID (hex).
    public var lastOnlineATC: [String: Int]
    public var pinTriesRemaining: Int
    /// AIDs (hex) blocked on the card.
    public var blockedApplications: [String]
    /// A device with a pending consumer device CVM: the holder has since authenticated on it (set
    /// by the tap that asked them to, so the next tap goes through).
    public var deviceVerified: Bool? = nil

    /// The state a freshly personalised card has.
    public init(profile: CardProfile) {
        atc = Dictionary(uniqueKeysWithValues: profile.applications.map { (Hex.encode($0.aid), profile.atcStart) })
        lastOnlineATC = Dictionary(uniqueKeysWithValues: profile.applications.map { (Hex.encode($0.aid), profile.lastOnlineATC) })
        pinTriesRemaining = profile.pinTriesRemaining
        blockedApplications = profile.applications.filter(\.blocked).map { Hex.encode($0.aid) }
    }
}

/// An emulated EMV contact card driven by a `CardProfile`: it answers C-APDUs as a card would,
/// down to scheme-valid cryptograms (see EMV Book 3 §6.5 for the commands).
///
/// A value type with no I/O: the reader link hands it APDUs and it returns R-APDUs.
public struct VirtualCard: Sendable {
    public let profile: CardProfile
    public private(set) var state: CardState
    private let keys: [CryptogramKeys]
    /// Each application's contactless keys, when its contactless CVN is another.
    private let contactlessKeys: [CryptogramKeys?]
    /// Each application's records, encoded once at personalisation as a card stores them.
    private let records: [[RecordKey: [UInt8]]]
    private var session = Session()
    /// The interface the card was last powered on through.
    public private(set) var interface = CardInterface.contact
    /// The UID a contactless reader reads (`FF CA 00 00`), fixed for the card's life as a card's is.
    private let uid: [UInt8] = [0x08] + SecureRandom.bytes(3)
    /// Response data a `t0GetResponse` card holds for GET RESPONSE, and the status to end it with.
    private var pending: (data: [UInt8], sw: [UInt8])?

    struct RecordKey: Hashable {
        let sfi: Int
        let record: Int
    }

    /// What the card forgets when it loses power.
    struct Session {
        enum Selected: Equatable { case pse, application(Int) }
        enum IssuerAuthentication { case notPerformed, succeeded, failed }

        var selected: Selected?
        /// Contactless: the PPSE was selected last.
        var ppse = false
        /// Visa qVSDC: GPO returned the transaction's only cryptogram; GENERATE AC is refused.
        var qualifiedGPO = false
        var selectName: [UInt8] = []
        var processingOptionsDone = false
        /// Terminal data received through the PDOL and CDOLs, latest value wins.
        var terminalData: [EMVTag: [UInt8]] = [:]
        var generateACCount = 0
        var firstCryptogram: (type: CryptogramType, value: [UInt8])?
        var issuerAuthentication = IssuerAuthentication.notPerformed
        var offlinePINPerformed = false
        var offlinePINFailed = false
        var unableToGoOnline = false
        /// The PDOL and CDOL data as sent, which a CDA signature hashes (Book 2 §6.6.1).
        var pdolData: [UInt8] = []
        var cdolData: [[UInt8]] = []
    }

    /// Personalises a card from its profile, optionally with saved state.
    public init(profile: CardProfile, state: CardState? = nil) throws(EMVError) {
        self.profile = profile
        self.state = state ?? CardState(profile: profile)
        var keys: [CryptogramKeys] = []
        var contactlessKeys: [CryptogramKeys?] = []
        for app in profile.applications {
            keys.append(try app.cryptogramKeys(pan: profile.pan, psn: profile.psn))
            contactlessKeys.append(try app.contactlessCryptogramKeys(pan: profile.pan, psn: profile.psn))
        }
        self.keys = keys
        self.contactlessKeys = contactlessKeys
        records = profile.applications.map { app in
            var out: [RecordKey: [UInt8]] = [:]
            for layout in app.records {
                let items = layout.tags.compactMap { tag in profile.value(of: tag, in: app).map { TLV(tag, $0) } }
                out[RecordKey(sfi: layout.sfi, record: layout.record)] = TLV(0x70, children: items).encoded()
            }
            return out
        }
    }

    /// The ATR the card answers a reset with.
    public var atr: [UInt8] { profile.atr }

    /// Power on or warm reset: the card forgets the transaction in progress.
    public mutating func reset() {
        session = Session()
        pending = nil
    }

    /// Powers the card on through `interface` and returns the ATR the reader reports: the card's
    /// own on contact, the PC/SC part 3 one a contactless reader makes from the ATS.
    public mutating func powerOn(_ interface: CardInterface) -> [UInt8] {
        reset()
        self.interface = interface
        return interface == .contactless ? profile.contactlessATR : profile.atr
    }

    /// Answers one C-APDU with data ‖ SW1 SW2.
    ///
    /// A `t0GetResponse` card answers as T=0 cards do on the wire, where a terminal sends TPDUs
    /// (ISO 7816-3 §12.2): a command carrying data and no Le (case 3 or 4) that has data to
    /// return gets `61 La`, the data waiting for GET RESPONSE (after a warning, the warning
    /// alone, EMV Book 1 §9.3.1.4); a command with no data whose Le is not the data's length
    /// gets `6C La`; so does a GET RESPONSE asking for more than is waiting. Commands in their
    /// APDU form (case 4 with Le) are answered whole, as through an APDU-level reader.
    public mutating func respond(to bytes: [UInt8]) -> [UInt8] {
        let command: CommandAPDU
        do { command = try CommandAPDU(bytes: bytes) } catch { return SW.wrongLength }
        guard profile.t0GetResponse else { return respond(command) }
        if command.ins == 0xC0, command.cla == 0x00, let waiting = pending {
            let le = command.le ?? 256
            guard le <= waiting.data.count else { return [0x6C, UInt8(waiting.data.count & 0xFF)] }
            let rest = Array(waiting.data.dropFirst(le))
            if rest.isEmpty {
                pending = nil
                return Array(waiting.data.prefix(le)) + waiting.sw
            }
            pending = (rest, waiting.sw)
            return Array(waiting.data.prefix(le)) + [0x61, UInt8(min(rest.count, 256) & 0xFF)]
        }
        pending = nil
        let answer = respond(command)
        let data = Array(answer.dropLast(2)), sw = Array(answer.suffix(2))
        guard !data.isEmpty else { return answer }
        if !command.data.isEmpty, command.le == nil {
            let warning = sw[0] == 0x62 || sw[0] == 0x63 || (sw[0] & 0xF0 == 0x90 && sw != SW.ok)
            if warning {
                pending = (data, SW.ok)
                return sw
            }
            pending = (data, sw)
            return [0x61, UInt8(min(data.count, 256) & 0xFF)]
        }
        if command.data.isEmpty, let le = command.le, le != data.count {
            return [0x6C, UInt8(data.count & 0xFF)]
        }
        return answer
    }

    private mutating func respond(_ command: CommandAPDU) -> [UInt8] {
        let (cla, ins) = (command.cla, command.ins)
        // PC/SC part 3 GET DATA: a contactless reader answers it with the card's UID.
        if cla == 0xFF, ins == 0xCA, interface == .contactless {
            return command.p1 == 0 && command.p2 == 0 ? uid + SW.ok : SW.functionNotSupported
        }
        let expectedCLA: UInt8
        switch ins {
        case 0xA4, 0xB2, 0x20, 0x84, 0x82, 0x88, 0xC0: expectedCLA = 0x00
        case 0xA8, 0xAE, 0xCA: expectedCLA = 0x80
        default: return SW.instructionNotSupported
        }
        guard cla == expectedCLA else { return SW.classNotSupported }
        do {
            switch ins {
            case 0xA4: return select(command)
            case 0xB2: return readRecord(command)
            case 0xA8: return try getProcessingOptions(command)
            case 0xCA: return try getData(command)
            case 0x20: return try verify(command)
            case 0x84: return getChallenge(command)
            case 0xAE: return try generateAC(command)
            case 0x82: return try externalAuthenticate(command)
            case 0x88: return try internalAuthenticate(command)
            default: return SW.conditionsNotSatisfied  // GET RESPONSE: nothing is pending, answers are sent whole
            }
        } catch {
            return error.sw
        }
    }

    // MARK: Commands

    private static let pseName = Array("1PAY.SYS.DDF01".utf8)
    private static let ppseName = Array("2PAY.SYS.DDF01".utf8)

    /// The PPSE's FCI (Book B §3.3.2): one directory entry per tappable application, in the FCI
    /// itself (there is no directory file to read), with the kernel identifier when the profile names one.
    private func ppseFCI() -> [UInt8] {
        let entries = profile.applications.filter { $0.contactless != nil }.map { app in
            var entry = [TLV(0x4F, app.aid), TLV(0x50, Array(app.label.utf8)), TLV(0x87, profile.value(of: 0x87, in: app)!)]
            if let kernel = app.contactless?.kernel { entry.append(TLV(0x9F2A, [UInt8(kernel)])) }
            return TLV(0x61, children: entry)
        }
        return TLV(0x6F, children: [TLV(0x84, Self.ppseName), TLV(0xA5, children: [TLV(0xBF0C, children: entries)])]).encoded()
    }

    private mutating func select(_ c: CommandAPDU) -> [UInt8] {
        guard c.p1 == 0x04, c.p2 == 0x00 || c.p2 == 0x02 else { return SW.incorrectP1P2 }
        guard (1...16).contains(c.data.count) else { return SW.wrongLength }
        if c.data == Self.ppseName {
            guard interface == .contactless else { return SW.fileNotFound }
            session = Session()
            session.ppse = true
            return (profile.ppseFCI ?? ppseFCI()) + SW.ok
        }
        if c.data == Self.pseName {
            guard profile.hasPSE, interface == .contact else { return SW.fileNotFound }
            session = Session()
            session.selected = .pse
            let fci = TLV(0x6F, children: [TLV(0x84, Self.pseName), TLV(0xA5, children: [TLV(0x88, [0x01]), TLV(0x5F2D, Array("en".utf8))])])
            return (profile.pseFCI ?? fci.encoded()) + SW.ok
        }
        let tapped = interface == .contactless
        let matches = profile.applications.indices.filter {
            profile.applications[$0].aid.starts(with: c.data) && (!tapped || profile.applications[$0].contactless != nil)
        }
        var chosen: Int?
        if c.p2 == 0x00 {
            chosen = matches.first
        } else if case .application(let current)? = session.selected, session.selectName == c.data {
            chosen = matches.first { $0 > current }
        }
        guard let index = chosen else { return SW.fileNotFound }
        let app = profile.applications[index]
        session = Session()
        session.selected = .application(index)
        session.selectName = c.data
        var proprietary = [TLV(0x50, Array(app.label.utf8)), TLV(0x87, profile.value(of: 0x87, in: app)!)]
        if let pdol = tapped ? app.contactless?.pdol ?? app.pdol : app.pdol { proprietary.append(TLV(0x9F38, pdol.bytes)) }
        proprietary.append(TLV(0x5F2D, Array("en".utf8)))
        if let name = app.preferredName { proprietary.append(TLV(0x9F12, Array(name.utf8))) }
        if tapped, !app.cvn.isVisa {
            // Mastercard third-party data (9F6E): country, unique identifier 0000, device type (an2).
            let country = profile.value(of: 0x5F28, in: app) ?? [0x04, 0x84]
            let device = Array(profile.formFactor.mastercardDeviceType.utf8)
            proprietary.append(TLV(0xBF0C, children: [TLV(0x9F6E, country + [0x00, 0x00] + device + [0x00])]))
        }
        let fci: [UInt8]
        if let given = tapped ? app.contactless?.fci : app.fci {
            fci = TLV(0x6F, children: [TLV(0x84, app.aid), TLV(0xA5, given)]).encoded()
        } else {
            fci = TLV(0x6F, children: [TLV(0x84, app.aid), TLV(0xA5, children: proprietary)]).encoded()
        }
        // A blocked application still answers SELECT, with 6283, so the terminal can skip it.
        return fci + (isBlocked(app) ? SW.selectedFileInvalidated : SW.ok)
    }

    private func isBlocked(_ app: ApplicationProfile) -> Bool { state.blockedApplications.contains(Hex.encode(app.aid)) }

    /// The selected, unblocked application, or the status word to refuse the command with.
    private func currentApplication() throws(StatusError) -> Int {
        guard case .application(let index)? = session.selected, !isBlocked(profile.applications[index]) else {
            throw StatusError(SW.conditionsNotSatisfied)
        }
        return index
    }

    private func readRecord(_ c: CommandAPDU) -> [UInt8] {
        guard c.p2 & 0x07 == 0x04, c.p1 != 0 else { return SW.incorrectP1P2 }
        let sfi = Int(c.p2 >> 3), number = Int(c.p1)
        switch session.selected {
        case .pse?:
            guard sfi == 1 else { return SW.fileNotFound }
            if let directory = profile.pseDirectory {
                return number <= directory.count ? directory[number - 1] + SW.ok : SW.recordNotFound
            }
            guard number <= profile.applications.count else { return SW.recordNotFound }
            let app = profile.applications[number - 1]
            var entry = [TLV(0x4F, app.aid), TLV(0x50, Array(app.label.utf8)), TLV(0x87, profile.value(of: 0x87, in: app)!)]
            if let name = app.preferredName { entry.append(TLV(0x9F12, Array(name.utf8))) }
            return TLV(0x70, children: [TLV(0x61, children: entry)]).encoded() + SW.ok
        case .application(let index)?:
            let app = profile.applications[index]
            guard !isBlocked(app) else { return SW.conditionsNotSatisfied }
            if let log = app.log, log.sfi == sfi {
                return number <= log.records.count ? log.records[number - 1] + SW.ok : SW.recordNotFound
            }
            guard app.records.contains(where: { $0.sfi == sfi }) else { return SW.fileNotFound }
            guard let record = records[index][RecordKey(sfi: sfi, record: number)] else { return SW.recordNotFound }
            return record + SW.ok
        case nil:
            return SW.conditionsNotSatisfied
        }
    }

    private mutating func getProcessingOptions(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        guard c.p1 == 0, c.p2 == 0 else { return SW.incorrectP1P2 }
        let index = try currentApplication()
        guard !session.processingOptionsDone else { return SW.conditionsNotSatisfied }
        guard let items = try? TLV.parse(c.data), items.count == 1, items[0].tag == 0x83 else { return SW.wrongData }
        let app = profile.applications[index]
        let pdolData = items[0].value
        if interface == .contactless, let contactless = app.contactless, let pdol = contactless.pdol {
            guard let values = try? pdol.split(pdolData) else { return SW.wrongLength }
            session.terminalData.merge(values) { $1 }
            return try qualifiedGPO(index: index, contactless)
        }
        if let pdol = app.pdol {
            guard let values = try? pdol.split(pdolData) else { return SW.wrongLength }
            session.terminalData.merge(values) { $1 }
        } else if !pdolData.isEmpty {
            return SW.wrongLength
        }
        session.processingOptionsDone = true
        session.pdolData = pdolData
        let afl = profile.afl(for: app).flatMap(\.bytes)
        let aip = interface == .contactless ? app.contactless?.aip ?? app.aip : app.aip
        let response = app.gpoFormat == 1
            ? TLV(0x80, aip.bytes + afl)
            : TLV(0x77, children: [TLV(0x82, aip.bytes), TLV(0x94, afl)])
        return response.encoded() + SW.ok
    }

    private func getData(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        let tag = EMVTag(UInt32(c.p1) << 8 | UInt32(c.p2))
        let index = try currentApplication()
        let aid = Hex.encode(profile.applications[index].aid)
        let value: [UInt8]
        switch tag.value {
        case 0x9F36: value = Self.twoBytes(state.atc[aid] ?? 0)
        case 0x9F13: value = Self.twoBytes(state.lastOnlineATC[aid] ?? 0)
        case 0x9F17: value = [UInt8(state.pinTriesRemaining)]
        default:
            guard let given = profile.applications[index].data[tag] else { return SW.referencedDataNotFound }
            value = given
        }
        return TLV(tag, value).encoded() + SW.ok
    }

    private mutating func verify(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        guard c.p1 == 0 else { return SW.incorrectP1P2 }
        guard c.p2 == 0x80 else { return SW.functionNotSupported }  // only plaintext offline PIN
        _ = try currentApplication()
        guard let pin = profile.pin else { return SW.functionNotSupported }
        guard state.pinTriesRemaining > 0 else { return SW.authenticationBlocked }
        guard let offered = try? PlaintextPINBlock.decode(c.data) else { return SW.wrongData }
        session.offlinePINPerformed = true
        if offered == pin {
            state.pinTriesRemaining = profile.pinTryLimit
            session.offlinePINFailed = false
            return SW.ok
        }
        state.pinTriesRemaining -= 1
        session.offlinePINFailed = true
        return [0x63, 0xC0 | UInt8(state.pinTriesRemaining)]
    }

    private func getChallenge(_ c: CommandAPDU) -> [UInt8] {
        guard c.p1 == 0, c.p2 == 0 else { return SW.incorrectP1P2 }
        return SecureRandom.bytes(8) + SW.ok
    }

    private mutating func generateAC(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        guard c.p2 == 0 else { return SW.incorrectP1P2 }
        guard let requested = CryptogramType(rawValue: c.p1 >> 6), requested != .notRequested else { return SW.incorrectP1P2 }
        let index = try currentApplication()
        guard session.processingOptionsDone, !session.qualifiedGPO else { return SW.conditionsNotSatisfied }
        let app = profile.applications[index]
        let aid = Hex.encode(app.aid)
        var seePhone = false

        var returned: CryptogramType
        switch session.generateACCount {
        case 0:
            guard let values = try? app.cdol1.split(c.data) else { return SW.wrongLength }
            session.terminalData.merge(values) { $1 }
            session.cdolData = [c.data]
            // The ATC counts transactions: it moves once, at the first GENERATE AC, so the TC or
            // AAC of the second carries the same ATC as the ARQC it completes.
            let atc = state.atc[aid] ?? 0
            guard atc < 0xFFFF else { return SW.conditionsNotSatisfied }
            state.atc[aid] = atc + 1
            // Card action analysis may only lower what the terminal asked for (AAC < ARQC < TC).
            let offline = interface == .contactless ? app.contactless?.offlineApproval ?? false : app.offlineApproval
            switch requested {
            case .aac: returned = .aac
            case .tc: returned = offline ? .tc : .arqc
            default: returned = .arqc
            }
            // A device whose holder has yet to authenticate declines and asks them to look at it
            // (Book C-2: POS cardholder interaction information, DF4B); they do before tapping again.
            if interface == .contactless, profile.consumerDeviceCVM == .pending, state.deviceVerified != true {
                returned = .aac
                seePhone = true
                state.deviceVerified = true
            }
        case 1:
            guard session.firstCryptogram?.type == .arqc else { return SW.conditionsNotSatisfied }
            guard requested != .arqc else { return SW.incorrectP1P2 }
            guard let values = try? app.cdol2.split(c.data) else { return SW.wrongLength }
            session.terminalData.merge(values) { $1 }
            session.cdolData.append(c.data)
            if let arc = values[0x8A], arc == Array("Y3".utf8) || arc == Array("Z3".utf8) {
                session.unableToGoOnline = true
            }
            // Mastercard-style cards take the issuer authentication data in CDOL2.
            if let issuerData = values[0x91], session.issuerAuthentication == .notPerformed {
                session.issuerAuthentication = checkIssuerAuthentication(issuerData, index: index) ? .succeeded : .failed
            }
            let issuerApproved = session.issuerAuthentication != .failed
            if requested == .tc, issuerApproved, !session.unableToGoOnline || app.offlineApproval {
                returned = .tc
            } else {
                returned = .aac
            }
            if !session.unableToGoOnline { state.lastOnlineATC[aid] = state.atc[aid] }
        default:
            return SW.conditionsNotSatisfied
        }
        session.generateACCount += 1

        let atc = Self.twoBytes(state.atc[aid] ?? 0)
        let iad = issuerApplicationData(app, first: session.generateACCount == 1 ? returned : session.firstCryptogram!.type,
                                        second: session.generateACCount == 2 ? returned : .notRequested)
        var tags = session.terminalData
        tags[0x82] = (interface == .contactless ? app.contactless?.aip ?? app.aip : app.aip).bytes
        tags[0x9F36] = atc
        let cryptogram: [UInt8]
        do {
            cryptogram = try keys(index).cryptogram(CryptogramData(tags: tags, issuerApplicationData: iad))
        } catch {
            // Only reachable when a CDOL lacks a tag the CVN needs, which profile loading refuses.
            return SW.conditionsNotSatisfied
        }
        if session.generateACCount == 1 { session.firstCryptogram = (returned, cryptogram) }
        let cid: UInt8 = returned == .aac ? 0x00 : returned == .tc ? 0x40 : 0x80
        // CDA (P1 bit 5): a TC or an ARQC is signed instead of returned in the clear; an AAC never is (Book 2 §6.6.1).
        if c.p1 & 0x10 != 0, returned != .aac, let oda = app.oda, oda.methods.contains(.cda), let key = oda.iccKey {
            let objects = [TLV(0x9F27, [cid]), TLV(0x9F36, atc), TLV(0x9F10, iad)]
            let hashInput = session.pdolData + session.cdolData.joined() + objects.flatMap { $0.encoded() }
            let number = SecureRandom.bytes(8)
            let dynamic = ODA.combinedDynamicData(dynamicNumber: number, cid: cid, cryptogram: cryptogram, hashInput: hashInput)
            guard let signature = try? ODA.makeDynamicSignature(icc: key, dynamicData: dynamic, terminalData: session.terminalData[0x9F37] ?? []) else {
                return SW.conditionsNotSatisfied
            }
            return TLV(0x77, children: [objects[0], objects[1], TLV(0x9F4B, signature), objects[2]]).encoded() + SW.ok
        }
        if seePhone {
            return TLV(0x77, children: [TLV(0x9F27, [cid]), TLV(0x9F36, atc), TLV(0x9F26, cryptogram), TLV(0x9F10, iad),
                                        TLV(0xDF4B, [0x00, 0x00, 0x01])]).encoded() + SW.ok
        }
        let response = app.generateACFormat == 1
            ? TLV(0x80, [cid] + atc + cryptogram + iad)
            : TLV(0x77, children: [TLV(0x9F27, [cid]), TLV(0x9F36, atc), TLV(0x9F26, cryptogram), TLV(0x9F10, iad)])
        return response.encoded() + SW.ok
    }

    /// Visa qVSDC (Book C-3; VCPS): GET PROCESSING OPTIONS with the TTQ returns the transaction's
    /// one cryptogram, computed over the PDOL data, with the card transaction qualifiers that say
    /// which CVM the card wants, and — for fDDA — the signed dynamic data (9F4B) over the
    /// unpredictable number, amount, currency and the card authentication related data (9F69).
    private mutating func qualifiedGPO(index: Int, _ contactless: ContactlessApplication) throws(StatusError) -> [UInt8] {
        let app = profile.applications[index]
        let aid = Hex.encode(app.aid)
        let terminal = session.terminalData
        let ttq = terminal[0x9F66] ?? []
        guard TTQ.has(ttq, TTQ.emvModeSupported) else { return SW.conditionsNotSatisfied }
        // 6986: the holder is to authenticate on the device and tap again ("See Phone").
        if profile.consumerDeviceCVM == .pending, state.deviceVerified != true, TTQ.has(ttq, TTQ.consumerDeviceCVMSupported) {
            state.deviceVerified = true
            return [0x69, 0x86]
        }
        let offlineOnly = TTQ.has(ttq, TTQ.offlineOnlyReader)
        var returned: CryptogramType
        if offlineOnly {
            returned = contactless.offlineApproval ? .tc : .aac
        } else {
            returned = TTQ.has(ttq, TTQ.onlineCryptogramRequired) || !contactless.offlineApproval ? .arqc : .tc
        }
        var ctq = contactless.ctq
        if TTQ.has(ttq, TTQ.cvmRequired) {
            let methods = app.cvmList.rules.map(\.method)
            if profile.consumerDeviceCVM != .none, TTQ.has(ttq, TTQ.consumerDeviceCVMSupported) {
                ctq[1] |= CTQ.consumerDeviceCVMPerformed.mask
            } else if TTQ.has(ttq, TTQ.onlinePINSupported), !offlineOnly, methods.contains(.encipheredPINOnline) {
                ctq[0] |= CTQ.onlinePINRequired.mask
                returned = .arqc  // the PIN is verified by the issuer
            } else if TTQ.has(ttq, TTQ.signatureSupported), methods.contains(.signature) {
                ctq[0] |= CTQ.signatureRequired.mask
            } else {
                // No CVM both sides support: the card asks for another interface (Book C-3 5.2.2.2).
                return [0x69, 0x84]
            }
        }
        let count = state.atc[aid] ?? 0
        guard count < 0xFFFF else { return SW.conditionsNotSatisfied }
        state.atc[aid] = count + 1
        session.processingOptionsDone = true
        session.qualifiedGPO = true
        session.generateACCount = 1
        session.firstCryptogram = nil
        let atc = Self.twoBytes(count + 1)
        let iad = issuerApplicationData(app, first: returned, second: .notRequested)
        var tags = terminal
        tags[0x82] = contactless.aip.bytes
        tags[0x9F36] = atc
        let cryptogram: [UInt8]
        do { cryptogram = try keys(index).cryptogram(CryptogramData(tags: tags, issuerApplicationData: iad)) } catch {
            return SW.conditionsNotSatisfied
        }
        session.firstCryptogram = (returned, cryptogram)
        let cid: UInt8 = returned == .aac ? 0x00 : returned == .tc ? 0x40 : 0x80
        var items = [TLV(0x82, contactless.aip.bytes)]
        if contactless.readRecords { items.append(TLV(0x94, profile.afl(for: app).flatMap(\.bytes))) }
        items += [TLV(0x57, profile.value(of: 0x57, in: app)!), TLV(0x5F34, profile.value(of: 0x5F34, in: app)!), TLV(0x9F10, iad), TLV(0x9F26, cryptogram),
                  TLV(0x9F27, [cid]), TLV(0x9F36, atc), TLV(0x9F6C, ctq), TLV(0x9F6E, profile.formFactor.visaFFI)]
        // fDDA (Book C-3 Annex C): for a TC, or an ARQC when the reader asks for ODA online too.
        if returned != .aac, contactless.aip.contains(AIP.ddaSupported), TTQ.has(ttq, TTQ.fDDAVersion01Supported),
           returned == .tc || TTQ.has(ttq, TTQ.odaForOnlineSupported), let oda = app.oda, let key = oda.iccKey {
            let cardData = [0x01] + SecureRandom.bytes(4) + ctq
            let terminalData = (terminal[0x9F37] ?? []) + (terminal[0x9F02] ?? []) + (terminal[0x5F2A] ?? []) + cardData
            let number = SecureRandom.bytes(8)
            if let signature = try? ODA.makeDynamicSignature(icc: key, dynamicData: [UInt8(number.count)] + number, terminalData: terminalData) {
                items += [TLV(0x9F4B, signature), TLV(0x9F69, cardData)]
            }
        }
        return TLV(0x77, children: items).encoded() + SW.ok
    }

    /// INTERNAL AUTHENTICATE for DDA (Book 2 §6.5, Book 3 §6.5.9): signs a fresh ICC dynamic
    /// number with the terminal's DDOL data.
    private func internalAuthenticate(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        guard c.p1 == 0, c.p2 == 0 else { return SW.incorrectP1P2 }
        let index = try currentApplication()
        let app = profile.applications[index]
        guard let oda = app.oda, oda.methods.contains(.dda) || oda.methods.contains(.cda), let key = oda.iccKey else {
            return SW.instructionNotSupported
        }
        guard !c.data.isEmpty else { return SW.wrongLength }
        let number = SecureRandom.bytes(8)
        guard let signature = try? ODA.makeDynamicSignature(icc: key, dynamicData: [UInt8(number.count)] + number, terminalData: c.data) else {
            return SW.conditionsNotSatisfied
        }
        let response = app.generateACFormat == 1 ? TLV(0x80, signature) : TLV(0x77, children: [TLV(0x9F4B, signature)])
        return response.encoded() + SW.ok
    }

    private mutating func externalAuthenticate(_ c: CommandAPDU) throws(StatusError) -> [UInt8] {
        guard c.p1 == 0, c.p2 == 0 else { return SW.incorrectP1P2 }
        let index = try currentApplication()
        guard profile.applications[index].aip.contains(AIP.issuerAuthenticationSupported),
              session.generateACCount == 1, session.firstCryptogram?.type == .arqc,
              session.issuerAuthentication == .notPerformed else { return SW.conditionsNotSatisfied }
        guard (8...16).contains(c.data.count) else { return SW.wrongLength }
        let ok = checkIssuerAuthentication(c.data, index: index)
        session.issuerAuthentication = ok ? .succeeded : .failed
        return ok ? SW.ok : SW.authenticationFailed
    }

    /// Checks issuer authentication data (tag 91): ARPC‖ARC (method 1) or ARPC‖CSU‖data (method 2).
    private func checkIssuerAuthentication(_ data: [UInt8], index: Int) -> Bool {
        guard let arqc = session.firstCryptogram?.value else { return false }
        let k = keys(index)
        let atc = Self.twoBytes(state.atc[Hex.encode(profile.applications[index].aid)] ?? 0)
        let input: ARPCInput, offered: [UInt8]
        if k.cvn.arpcMethod == 1 {
            guard data.count == 10 else { return false }
            offered = Array(data[0..<8])
            input = .responseCode(Array(data[8..<10]))
        } else {
            guard data.count >= 8 else { return false }
            offered = Array(data[0..<4])
            input = .cardStatusUpdate(Array(data[4..<8]), proprietaryData: Array(data[8...]))
        }
        guard let expected = try? k.arpc(arqc: arqc, input, atc: atc) else { return false }
        return expected == offered
    }

    /// The keys of the application at `index` on the interface in use.
    private func keys(_ index: Int) -> CryptogramKeys {
        interface == .contactless ? contactlessKeys[index] ?? keys[index] : keys[index]
    }

    /// Issuer application data (9F10) in the layout of the CVN, with CVRs describing this
    /// transaction so far.
    private func issuerApplicationData(_ app: ApplicationProfile, first: CryptogramType, second: CryptogramType) -> [UInt8] {
        let dki = app.keyDerivationIndex
        let cvn = interface == .contactless ? app.contactless?.cvn ?? app.cvn : app.cvn
        let ptlExceeded = state.pinTriesRemaining == 0
        let secondRequested = second != .notRequested
        if cvn.isVisa {
            var cvr = VisaCVR.empty()
            cvr.firstGenerateAC = first
            cvr.secondGenerateAC = second
            if session.issuerAuthentication == .failed { cvr.set(VisaCVR.issuerAuthenticationFailed) }
            if session.offlinePINPerformed { cvr.set(VisaCVR.offlinePINPerformed) }
            if session.offlinePINFailed { cvr.set(VisaCVR.offlinePINFailed) }
            if session.unableToGoOnline { cvr.set(VisaCVR.unableToGoOnline) }
            if ptlExceeded { cvr.set(VisaCVR.pinTryLimitExceeded) }
            if secondRequested, session.issuerAuthentication == .notPerformed, !session.unableToGoOnline {
                cvr.set(VisaCVR.issuerAuthenticationNotPerformed)
            }
            if cvn == .visa22 {
                // IAD format 2 (32 bytes): length 1F, CVN '22' (hex), the DKI, a 5-byte CVR (its first
                // byte, left 00 here, carries CDCVM details on cards that report them; then the
                // 4-byte CVR), and issuer discretionary data (zeros).
                let iad: [UInt8] = [0x1F, 0x22, dki, 0x00] + cvr.bytes
                return iad + [UInt8](repeating: 0, count: 32 - iad.count)
            }
            return [0x06, dki, UInt8(cvn.rawValue)] + cvr.bytes + app.issuerDiscretionaryData
        }
        var cvr = MastercardCVR()
        cvr.firstGenerateAC = first
        cvr.secondGenerateAC = second
        if session.offlinePINPerformed {
            cvr.set(MastercardCVR.offlinePINPerformed)
            if !session.offlinePINFailed { cvr.set(MastercardCVR.offlinePINSuccessful) }
        } else {
            cvr.set(MastercardCVR.offlinePINNotPerformed)
        }
        if session.offlinePINFailed { cvr.set(MastercardCVR.offlinePINFailed) }
        if ptlExceeded { cvr.set(MastercardCVR.pinTryLimitExceeded) }
        if session.unableToGoOnline { cvr.set(MastercardCVR.unableToGoOnline) }
        if session.issuerAuthentication != .notPerformed { cvr.set(MastercardCVR.issuerAuthenticationPerformed) }
        if session.issuerAuthentication == .failed { cvr.set(MastercardCVR.issuerAuthenticationFailed) }
        cvr.pinTryCounter = state.pinTriesRemaining
        // KDI, CVN, CVR, DAC/IDN (left zero: the terminal's ODA result is not fed back to this card), counters (none kept).
        return [dki, UInt8(cvn.rawValue)] + cvr.bytes + [0x00, 0x00] + [UInt8](repeating: 0, count: 8) + app.issuerDiscretionaryData
    }

    static func twoBytes(_ n: Int) -> [UInt8] { [UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
}

/// A status word to refuse a command with, thrown out of the command that refuses.
struct StatusError: Error {
    let sw: [UInt8]
    init(_ sw: [UInt8]) { self.sw = sw }
}

/// The status words the card answers with (ISO 7816-4, EMV Book 3 §6.3.5).
enum SW {
    static let ok: [UInt8] = [0x90, 0x00]
    static let selectedFileInvalidated: [UInt8] = [0x62, 0x83]
    static let authenticationFailed: [UInt8] = [0x63, 0x00]
    static let wrongLength: [UInt8] = [0x67, 0x00]
    static let authenticationBlocked: [UInt8] = [0x69, 0x83]
    static let conditionsNotSatisfied: [UInt8] = [0x69, 0x85]
    static let wrongData: [UInt8] = [0x6A, 0x80]
    static let functionNotSupported: [UInt8] = [0x6A, 0x81]
    static let fileNotFound: [UInt8] = [0x6A, 0x82]
    static let recordNotFound: [UInt8] = [0x6A, 0x83]
    static let incorrectP1P2: [UInt8] = [0x6A, 0x86]
    static let referencedDataNotFound: [UInt8] = [0x6A, 0x88]
    static let instructionNotSupported: [UInt8] = [0x6D, 0x00]
    static let classNotSupported: [UInt8] = [0x6E, 0x00]
}

extension VirtualCard {
    /// One record of an application as the card stores it, for tools that show or sign records.
    public struct StoredRecord: Sendable {
        public let sfi: Int
        public let record: Int
        /// Whether the AFL marks it for offline data authentication.
        public let offlineAuthentication: Bool
        /// The record template (70) as READ RECORD returns it.
        public let bytes: [UInt8]
    }

    /// The records of the application at `index`, in AFL order.
    public func storedRecords(application index: Int) -> [StoredRecord] {
        let app = profile.applications[index]
        return profile.afl(for: app).flatMap { entry in
            entry.records.compactMap { number -> StoredRecord? in
                guard let bytes = records[index][RecordKey(sfi: entry.sfi, record: number)] else { return nil }
                return StoredRecord(sfi: entry.sfi, record: number, offlineAuthentication: number < entry.firstRecord + entry.offlineAuthenticationRecords,
                                    bytes: bytes)
            }
        }
    }

    /// The static data to be authenticated of the application at `index` (EMV Book 2 §5.4): what
    /// its certificates and signed static data are computed over.
    public func staticDataToBeAuthenticated(application index: Int) throws(ODAFailure) -> [UInt8] {
        let app = profile.applications[index]
        return try ODA.staticData(records: storedRecords(application: index).filter(\.offlineAuthentication).map { ($0.sfi, $0.bytes) },
                                  aip: app.aip.bytes, tagList: app.oda?.staticDataTagList)
    }
}
