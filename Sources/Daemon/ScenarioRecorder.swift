import Defaults
import EMV
import Foundation
import Fronts
import ISO8583
import LedgerModel
import Terminal
import VirtualCard

/// A transaction recorded as a scenario (`GET /v1/transactions/{id}/scenario`,
/// `cardbench scenario record`, the console's "Save as scenario"): the scenario's YAML and the
/// card profiles it names, to be written in a `cards` folder beside it.
public struct RecordedScenario: Codable, Sendable, Equatable {
    /// A file name for the scenario: `recorded-<transaction id>.yaml`.
    public let file: String
    public let scenario: String
    public let cards: [RecordedCard]
    /// What could not be copied faithfully, also written in the scenario's description.
    public let notes: [String]
}

/// A card profile a recorded scenario names, with the file name it is written under.
public struct RecordedCard: Codable, Sendable, Equatable {
    public let file: String
    public let profile: String
}

extension Bench {
    /// The scenario that replays the transaction `key` (a ledger id or transactionId).
    public func recordScenario(_ key: String) throws(DaemonError) -> RecordedScenario {
        guard let (t, trace, outbox) = try transaction(key) else { throw .notFound("no transaction with id or transactionId \"\(key)\"") }
        var recorder = ScenarioRecorder(transaction: t, trace: trace, outbox: outbox, hostMessages: try hostMessages(transactionID: t.id))
        recorder.library = profileLibrary.compactMap { name, entry in
            guard let profile = try? Self.loadProfile(entry, key: "host.cards"), (try? ledger.panHash(profile.pan)) == t.panHash else { return nil }
            let text: String? = switch entry {
            case .embedded(let embedded): EmbeddedDefaults.cardProfiles[embedded]
            case .file(let path): try? String(contentsOfFile: path, encoding: .utf8)
            }
            return text.map { (name, $0, profile) }
        }.sorted { $0.0 < $1.0 }
        recorder.settings = terminals.first { $0.settings.name == t.terminalName }?.settings
        do {
            // The operations on the payment and on them (a refund acts on the capture), in order.
            var found: [StoredTransaction] = [], pending = [t.id]
            while let next = pending.popLast() {
                let children = try ledger.transactions(originalID: next)
                found += children
                pending += children.map(\.id)
            }
            recorder.operations = try found.filter { $0.action != .reversal }.sorted { $0.id < $1.id }
                .map { ($0, try ledger.outbox(transactionID: $0.id)) }
        } catch { throw DaemonError(ledger: error, "ledger") }
        recorder.ca = try? CardCaptureService.benchCA(configuration.benchCAFile)
        recorder.caKeys = sharedODA.caKeys
        if let link = upstream(of: t.terminalName) {
            recorder.external = (link.settings.packager.name, link.settings.framing.rawValue)
        }
        return try recorder.record()
    }
}

/// Writes the scenario of one transaction from what the ledger holds: the request rebuilt from
/// the row, the card (the daemon's profile whose number it is, when that profile answers the
/// trace's commands as the card did; otherwise a profile made from the trace, number replaced),
/// the presentations from the entry report, the keypad answers from the trace (a PIN's VERIFY
/// and its status word; the PIN itself is never stored), a card removal from where the trace
/// ends, the host's answers, and the expectations: callback fields (the unstable ones by form),
/// the ledger row, the APDU names in order, the host messages.
struct ScenarioRecorder {
    let transaction: StoredTransaction
    let trace: [TraceEntry]
    let outbox: [OutboxEntry]
    let hostMessages: [HostMessageEntry]
    /// The daemon's profiles with the transaction's card number: name, text, profile.
    var library: [(String, String, CardProfile)] = []
    var ca: CertificationAuthority?
    var caKeys: [CAPublicKey] = []
    /// The terminal's external host format (packager, framing), when it has one.
    var external: (packager: String, framing: String)?
    /// The terminal's settings, when it still exists.
    var settings: TerminalSettings?
    /// The captures, cancels and refunds on the transaction, with their notifications.
    var operations: [(StoredTransaction, [OutboxEntry])] = []
    var notes: [String] = []

    init(transaction: StoredTransaction, trace: [TraceEntry], outbox: [OutboxEntry], hostMessages: [HostMessageEntry]) {
        self.transaction = transaction
        self.trace = trace
        self.outbox = outbox
        self.hostMessages = hostMessages
    }

    var t: StoredTransaction { transaction }

    mutating func record() throws(DaemonError) -> RecordedScenario {
        switch (t.provider, t.action) {
        case (.viva, .sale), (.billpocket, .sale): return try cardPresent()
        case (.worldline, .sale), (.worldline, .preAuth), (.citcon, .sale), (.citcon, .preAuth): return try platform()
        case (.iso8583, _), (.cli, _):
            throw .conflict("transaction \(t.id) is the \(t.provider.rawValue) side of a transaction (an external terminal's request to the issuer, or `cardbench sale`): record a front's or a platform's transaction")
        default:
            throw .conflict("transaction \(t.id) is a \(t.provider.rawValue) \(t.action.rawValue): only sales and authorisations are recorded (record the sale it acts on)")
        }
    }

    // MARK: Card present

    mutating func cardPresent() throws(DaemonError) -> RecordedScenario {
        // An external host answered when the ledger holds the messages to it, whether or not the
        // terminal is still there to tell its format.
        if external == nil, hostMessages.contains(where: { $0.direction == .outgoing && ["0100", "0200"].contains($0.mti) }) {
            external = ("pyiso8583-default", "binary2")
            notes.append("terminal \(t.terminalName) is gone: its external host's format is taken as the default (pyiso8583-default, binary2)")
        }
        let names = trace.map { entry -> String in
            guard let header = try? Hex.decode(String(entry.command.prefix(8))), header.count == 4 else { return "?" }
            return CommandAPDU(cla: header[0], ins: header[1], p1: header[2], p2: header[3]).instructionName
        }
        let entry = t.cardEntry.flatMap { try? JSONDecoder().decode(EntryPathView.self, from: Data($0.utf8)) }
        let path = entry?.path ?? []
        var presentations = path.compactMap { element -> String? in
            let verb = element.split(separator: ":").first.map(String.init) ?? ""
            return ["insert", "tap", "swipe"].contains(verb) ? verb : nil
        }
        if presentations.isEmpty { presentations = [t.entryMode == "contactless" ? "tap" : t.entryMode == "magstripe" ? "swipe" : "insert"] }
        let (cardFile, cardText, profile) = try card()

        var lines: [String] = []
        func add(_ text: String) { lines.append(text) }
        let name = "Recorded: \(t.provider.rawValue) \(t.action.rawValue) \(t.id), \(t.status.rawValue)\(t.responseCode.map { " \($0)" } ?? "")"
        add("name: \(q(name))")
        var description = "Recorded from transaction \(t.id) (\(t.uuid)) of terminal \(t.terminalName) by cardbench scenario record (docs/recording.md)."
        // The terminal's settings that change what a transaction does.
        var declared: [String] = []
        if let settings {
            if let tac = settings.tacDefault { declared.append("tac_default: \(q(Hex.encode(tac)))") }
            if settings.fallback { declared.append("fallback: true") }
            if settings.interfaces != Set(CardInterface.allCases) {
                declared.append("interfaces: [\(CardInterface.allCases.filter(settings.interfaces.contains).map(\.rawValue).joined(separator: ", "))]")
            }
            var limits: [String] = []
            func money(_ n: Int) -> String { q(String(format: "%d.%02d", n / 100, n % 100)) }
            if let n = settings.contactlessTransactionLimit { limits.append("transaction_limit: \(money(n))") }
            if let n = settings.contactlessFloorLimit { limits.append("floor_limit: \(money(n))") }
            if let n = settings.contactlessCVMLimit { limits.append("cvm_limit: \(money(n))") }
            if !limits.isEmpty { declared.append("contactless: {\(limits.joined(separator: ", "))}") }
        } else {
            notes.append("terminal \(t.terminalName) is gone: its settings are not known, the scenario runs on a default terminal")
        }
        if !declared.isEmpty || external != nil {
            let name = external != nil ? "recorded-iso8583" : "recorded-\(t.terminalName)"
            add("terminal: {name: \(name)\(declared.map { ", " + $0 }.joined())}")
        }
        if let external {
            var answers: [String] = []
            var pending = 0
            for m in hostMessages {
                let fields = (try? JSONDecoder().decode([DescribedField].self, from: Data(m.fields.utf8))) ?? []
                if m.direction == .outgoing, ["0100", "0200"].contains(m.mti) { pending += 1 }
                if m.direction == .incoming, ["0110", "0210"].contains(m.mti) {
                    pending = max(0, pending - 1)
                    let code = fields.first { $0.field == 39 }?.value ?? "00"
                    let chip = fields.first { $0.field == 55 }?.tlv ?? []
                    let arpc = chip.contains { $0.tag == "91" }
                    // Issuer scripts: the commands (86) that follow a 72 (after) or 71 (before)
                    // template in the described field, which lists a template's members after it.
                    var after: [String] = [], before: [String] = [], template = ""
                    for item in chip {
                        if item.tag == "71" || item.tag == "72" { template = item.tag }
                        if item.tag == "86" { if template == "72" { after.append(item.value) } else if template == "71" { before.append(item.value) } }
                    }
                    if code == "00", arpc, !after.isEmpty {
                        answers.append("{script_after: [\(after.map(q).joined(separator: ", "))]}")
                    } else if code == "00", arpc, !before.isEmpty {
                        answers.append("{script_before: [\(before.map(q).joined(separator: ", "))]}")
                    } else if code == "00", arpc {
                        answers.append("issuer")
                    } else if let auth = fields.first(where: { $0.field == 38 })?.value, code == "00" {
                        answers.append("{code: \(q(code)), authorisation_code: \(q(auth))}")
                    } else {
                        answers.append("{code: \(q(code))}")
                    }
                }
            }
            answers += Array(repeating: "timeout", count: pending)
            add("iso8583_host:")
            add("  packager: \(external.packager)")
            add("  framing: \(external.framing)")
            add("  answers: [\(answers.joined(separator: ", "))]")
            notes.append("an external host answered: the scripted host gives the same codes, whatever made the real one give them")
        }
        add("cards:")
        add("  card: \(cardFile)")
        add("steps:")
        if t.provider == .billpocket { add("  - billpocket: {create_user: {name: \"Recorded\"}, save: user}") }

        // The card and how it was presented.
        var cardStep = "  - card: {\(presentations[0]): card"
        if presentations.count > 1 { cardStep += ", then: [\(presentations.dropFirst().joined(separator: ", "))]" }
        let removed = (t.message ?? "").lowercased().contains("card removed") || (t.message ?? "").lowercased().contains("removed")
        if removed, let last = names.last {
            cardStep += ", remove_after: \(q("\(last)#\(names.filter { $0 == last }.count)"))"
        }
        add(cardStep + "}")

        // The keypad. Each PIN as the card (VERIFY's status word) or the host (55) took it: the
        // profile's PIN, or a wrong one; the PIN typed is never stored.
        let pin = profile?.pin ?? "1234"
        let wrong = String(pin.dropLast()) + String(((Int(String(pin.last!)) ?? 0) + 1) % 10)
        var verdicts = zip(trace, names).filter { $0.1 == "VERIFY" }.map { String($0.0.response.suffix(4)) == "9000" }
        if t.cvm == "Enciphered PIN verified online" { verdicts.append(t.responseCode != "55") }
        if let prompts = entry?.prompts, !prompts.isEmpty {
            // The prompts as the keypad logged them: each answer, and when it came.
            var pins = verdicts.makeIterator()
            for record in prompts {
                let seconds = Double(record.waitedMilliseconds) / 1000
                let after = record.waitedMilliseconds >= 500 ? ", after: \(String(format: "%.1f", seconds))" : ""
                let words = record.answer.split(separator: " ")
                switch words.first {
                case "pin"?: add("  - keypad: {pin: \(q((pins.next() ?? true) ? pin : wrong))\(after)}")
                case "auto"? where record.prompt == "pin": add("  - keypad: {pin: \(q((pins.next() ?? true) ? pin : wrong))}")
                case "auto"?: add("  - keypad: {confirm: true}")
                case "select"? where words.count == 2: add("  - keypad: {select: \(words[1])\(after)}")
                case "confirm"?: add("  - keypad: {confirm: true\(after)}")
                case "cancel"?: add("  - keypad: {cancel: true\(after)}")
                case "timeout"?: break  // nothing is entered: the prompt times out again
                default: notes.append("a \(record.prompt) prompt ended \(record.answer): not replayed")
                }
            }
        } else {
            // A transaction recorded before prompts were logged: the answers are inferred, and come at once.
            let choice = selection()
            if let choice { add("  - keypad: {select: \(choice)}") }
            for verdict in verdicts { add("  - keypad: {pin: \(q(verdict ? pin : wrong))}") }
            if choice != nil || !verdicts.isEmpty {
                notes.append("the transaction's prompts were not logged (recorded before prompts were): the keypad answers are inferred from the trace and given at once")
            }
        }
        // The emulated issuer's answer, when it was not an approval.
        if external == nil, let code = t.responseCode, hostAsked() {
            if code == "Y3" || code == "Z3" {
                add("  - host: {unavailable: true}")
            } else if code != "00", code.count == 2, code.allSatisfy({ $0.isNumber }) {
                add("  - host: {respond: \(q(code))}")
            }
        }

        // The request, rebuilt from the row.
        guard let callback = outbox.first(where: { $0.kind == .callback }) else {
            throw .conflict("transaction \(t.id) has no callback recorded: nothing to expect")
        }
        let reference = t.clientReference.map { "\($0)-{{run.id}}" }
        let url: String
        switch t.provider {
        case .viva:
            var u = "vivapayclient://pay/v1?callback=\(callback.target)&action=sale&amount=\(t.amount - t.tipAmount)"
            if t.tipAmount > 0 { u += "&tipAmount=\(t.tipAmount)" }
            if let installments = t.installments { u += "&installments=\(installments)" }
            if let reference { u += "&clientTransactionId=\(reference)" }
            url = u
        default:
            let amount = String(format: "%d.%02d", (t.amount - t.tipAmount) / 100, (t.amount - t.tipAmount) % 100)
            var u = "billpocket://transaction=venta&usertoken={{user.token}}&amount=\(amount)"
            if t.tipAmount > 0 { u += String(format: "&tip=%d.%02d", t.tipAmount / 100, t.tipAmount % 100) }
            if let installments = t.installments { u += "&msi=\(installments)" }
            u += "&identifier=\(reference ?? "rec-{{run.id}}")&urlScheme=\(callback.target.split(separator: ":").first.map(String.init) ?? "Sender")"
            url = u
        }
        add("  - open: \(q(url))")
        add("    expect:")
        let fields = Self.queryFields(callback.payload)
        add("      callback:")
        for (key, value) in fields {
            add("        \(key): \(expectation(key, value, reference: t.clientReference))")
        }
        add("      fields_in_order: [\(fields.map(\.0).joined(separator: ", "))]")
        var ledger = ["status: \(t.status.rawValue)", "amount: \(t.amount)"]
        if let code = t.responseCode { ledger.append("responseCode: \(q(code))") }
        if let tvr = t.tvr { ledger.append("tvr: \(q(tvr))") }
        if let entry = t.entryMode { ledger.append("entryMode: \(entry)") }
        if let cvm = t.cvm { ledger.append("cvm: \(q(cvm))") }
        if let aid = t.aid { ledger.append("aid: \(q(aid))") }
        add("      ledger: {\(ledger.joined(separator: ", "))}")
        if let entry {
            var checks = [String]()
            if let interface = entry.interface { checks.append("interface: \(interface)") }
            if let mode = entry.posEntryMode { checks.append("posEntryMode: \(q(mode))") }
            if let kernel = entry.kernel { checks.append("kernel: \(q(String(kernel)))") }
            if let tsi = entry.tsi { checks.append("tsi: \(q(tsi))") }
            if let results = entry.cvmResults { checks.append("cvmResults: \(q(results))") }
            if !entry.path.isEmpty { checks.append("path: \(q(entry.path.joined(separator: " → ")))") }
            if !checks.isEmpty { add("      entry: {\(checks.joined(separator: ", "))}") }
        }
        if let oda = t.oda.flatMap({ try? JSONDecoder().decode(ODAResultView.self, from: Data($0.utf8)) }), oda.method != "none" {
            add("      oda: {method: \(oda.method), result: \(q(oda.result))}")
        }
        if !names.isEmpty { add("      trace: {contains: [\(names.joined(separator: ", "))]}") }
        if external != nil, !hostMessages.isEmpty {
            let shown = hostMessages.map { m -> String in
                let code = (try? JSONDecoder().decode([DescribedField].self, from: Data(m.fields.utf8)))?.first { $0.field == 39 }?.value
                return "\(m.mti) \(m.direction == .outgoing ? "out" : "in")" + (m.direction == .incoming && code != nil ? " 39=\(code!)" : "")
            }
            add("      host_messages: [\(shown.map(q).joined(separator: ", "))]")
        }
        if !notes.isEmpty { description += " Not copied faithfully: " + notes.joined(separator: "; ") + "." }
        lines.insert("description: \(q(description))", at: 1)
        return RecordedScenario(file: "recorded-\(t.id).yaml", scenario: lines.joined(separator: "\n") + "\n",
                                cards: [RecordedCard(file: cardFile, profile: cardText)], notes: notes)
    }

    /// Whether the transaction went to the host: any answer in the row but the terminal's own
    /// offline decisions (Y1, Z1); Y3 and Z3 say the host was asked and could not be reached.
    func hostAsked() -> Bool {
        guard let code = t.responseCode else { return false }
        return !["Y1", "Z1"].contains(code)
    }

    /// The application the cardholder chose, as the keypad's option number, when the kernel asked:
    /// a contact directory of two applications or more.
    func selection() -> Int? {
        var candidates: [(aid: String, priority: Int)] = []
        var inPSE = false
        var chosen: String?
        for entry in trace {
            let command = entry.command
            if command.hasPrefix("00A40400") {
                inPSE = command.contains(Hex.encode(Array("1PAY.SYS.DDF01".utf8)))
                if !inPSE, entry.response.hasSuffix("9000"), let fci = try? TLV.parse(Hex.decode(String(entry.response.dropLast(4)))),
                   let aid = fci.first(0x84)?.value {
                    chosen = Hex.encode(aid)
                }
            } else if command.hasPrefix("00B2"), inPSE, entry.response.hasSuffix("9000"),
                      let record = try? TLV.parse(Hex.decode(String(entry.response.dropLast(4)))) {
                for item in record.first(0x70)?.children.filter({ $0.tag == 0x61 }) ?? [] {
                    if let aid = item.first(0x4F)?.value {
                        candidates.append((Hex.encode(aid), Int(item.first(0x87)?.value.first ?? 0) & 0x0F))
                    }
                }
            }
        }
        guard candidates.count > 1, let chosen else { return nil }
        let ordered = candidates.enumerated().sorted {
            let (a, b) = ($0.element.priority == 0 ? 16 : $0.element.priority, $1.element.priority == 0 ? 16 : $1.element.priority)
            return a == b ? $0.offset < $1.offset : a < b
        }.map(\.element.aid)
        return ordered.firstIndex(of: chosen).map { $0 + 1 }
    }

    /// A callback field's expectation: the value itself, or its form for what changes every run.
    func expectation(_ key: String, _ value: String, reference: String?) -> String {
        if value.isEmpty { return "\"\"" }
        if (key == "clientTransactionId" || key == "identifier"), let reference, value == reference {
            return "{matches: \(q("^" + NSRegularExpression.escapedPattern(for: reference) + "-[0-9a-f]{8}$"))}"
        }
        let unstable: Set<String> = ["rrn", "referenceNumber", "authorisationCode", "orderCode", "transactionDate", "transactionId", "tid",
                                     "transactionid", "authorization", "reference", "url", "arqc", "aid"]
        guard unstable.contains(key) else { return q(value) }
        if key == "aid" { return q(value) }
        if value.allSatisfy(\.isNumber) { return "{matches: \(q("^[0-9]{\(value.count)}$"))}" }
        if value.allSatisfy(\.isHexDigit) { return "{matches: \(q("^[0-9A-Fa-f]{\(value.count)}$"))}" }
        if UUID(uuidString: value) != nil { return "{matches: \"^[0-9a-f-]{36}$\"}" }
        return "{present: true}"
    }

    /// The fields of a callback URL's query, in order, percent-decoded.
    static func queryFields(_ url: String) -> [(String, String)] {
        // Viva's callbacks carry a query; Billpocket's put the fields straight after the scheme.
        let query: Substring
        if let q = url.split(separator: "?", maxSplits: 1).dropFirst().first {
            query = q
        } else if let range = url.range(of: "://") {
            query = url[range.upperBound...]
        } else {
            return []
        }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (s: Substring) in (String(s).replacingOccurrences(of: "+", with: "%20").removingPercentEncoding ?? String(s)) }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    // MARK: The card

    /// The card's profile: the daemon's own whose number it is when that profile answers the
    /// trace's SELECT and READ RECORD commands as the card did, else one made from the trace.
    mutating func card() throws(DaemonError) -> (file: String, text: String, profile: CardProfile?) {
        for (name, text, profile) in library where answersLikeTrace(profile) {
            return (name + ".yaml", text, profile)
        }
        if !library.isEmpty {
            notes.append("the card's number is the daemon's profile \(library[0].0), but that profile answers otherwise than the card did: the card's profile is made from the trace")
        }
        guard !trace.isEmpty else {
            throw .conflict("transaction \(t.id): the card is none of the daemon's profiles and its trace is empty (a swipe): there is nothing to make its profile of")
        }
        return try profileFromTrace()
    }

    /// Replays the trace's commands to a fresh card of `profile` and compares what it answers to
    /// SELECT and READ RECORD (the number masked as the trace masks it).
    func answersLikeTrace(_ profile: CardProfile) -> Bool {
        guard !trace.isEmpty else { return true }
        guard var card = try? VirtualCard(profile: profile) else { return false }
        _ = card.powerOn(.contact)
        var compared = 0
        for entry in trace {
            guard let command = try? Hex.decode(entry.command) else { continue }
            if command.count > 5, command[1] == 0xA4 {
                if command.count >= 19, Array(command[5..<19]) == Array("2PAY.SYS.DDF01".utf8) { _ = card.powerOn(.contactless) }
                if command.count >= 19, Array(command[5..<19]) == Array("1PAY.SYS.DDF01".utf8), card.interface != .contact { _ = card.powerOn(.contact) }
            }
            let answer = TraceRedaction.masking(pan: profile.pan, in: Hex.encode(card.respond(to: command)))
            if command[1] == 0xA4 || command[1] == 0xB2 {
                guard answer == entry.response else { return false }
                compared += 1
            }
        }
        return compared > 0
    }

    /// A profile made from the trace as `card capture` makes one from a card: the masked number
    /// replaced by one of the same BIN and last four digits, keys and certificates the bench's.
    mutating func profileFromTrace() throws(DaemonError) -> (file: String, text: String, profile: CardProfile?) {
        guard let masked = t.maskedPAN, masked.count >= 12 else {
            throw .conflict("transaction \(t.id) has no masked card number: no profile can be made of its trace")
        }
        let digits = masked.count
        let first = String(masked.prefix(6)), last = String(masked.suffix(4))
        var pan = ""
        for _ in 0..<100 {
            var middle = SecureRandom.bytes(digits - 10).map { String($0 % 10) }.joined()
            for d in 0...9 {
                middle = String(middle.dropLast()) + String(d)
                if Luhn.isValid(first + middle + last) { pan = first + middle + last; break }
            }
            if !pan.isEmpty { break }
        }
        var result = CardCapture.Result(interface: trace.contains { $0.command.contains(Hex.encode(Array("2PAY.SYS.DDF01".utf8))) } ? .contactless : .contact)
        result.atr = CardProfile.defaultATR
        var inDirectory = false
        var current: CardCapture.Application?
        func finish() { if let app = current { result.applications.append(app) }; current = nil }
        for entry in trace {
            guard let command = try? Hex.decode(entry.command),
                  let response = try? Hex.decode(entry.response.replacingOccurrences(of: masked, with: pan)), response.count >= 2 else { continue }
            let data = Array(response.dropLast(2)), ok = response.suffix(2) == [0x90, 0x00]
            switch command[1] {
            case 0xA4:
                let name = Array(command.dropFirst(5).prefix(Int(command.count > 4 ? command[4] : 0)))
                if name == Array("1PAY.SYS.DDF01".utf8) || name == Array("2PAY.SYS.DDF01".utf8) {
                    finish()
                    inDirectory = true
                    if ok { result.directoryFCI = data }
                } else if ok || response.suffix(2) == [0x62, 0x83], let aid = (try? TLV.parse(data))?.first(0x84)?.value {
                    inDirectory = false
                    finish()
                    current = CardCapture.Application(aid: aid)
                    current?.fci = data
                    current?.blocked = !ok
                }
            case 0xB2 where ok:
                let sfi = Int(command[3] >> 3), number = Int(command[2])
                if inDirectory { result.directoryRecords.append(data); continue }
                guard current != nil else { continue }
                let entries = (try? AFLEntry.parseList(current!.afl)) ?? []
                let oda = entries.contains { $0.sfi == sfi && number >= $0.firstRecord && number < $0.firstRecord + $0.offlineAuthenticationRecords }
                if !current!.records.contains(where: { $0.sfi == sfi && $0.record == number }) {
                    current!.records.append(CardCapture.Record(sfi: sfi, record: number, bytes: data, offlineAuthentication: oda))
                }
            case 0xA8 where ok:
                current?.gpo = data
                let parsed = try? TLV.parse(data)
                if let f1 = parsed?.first(where: { $0.tag == 0x80 }), f1.value.count >= 2 { current?.afl = Array(f1.value.dropFirst(2)) } else {
                    current?.afl = parsed?.first(0x77)?.first(0x94)?.value ?? []
                }
            case 0xCA where ok:
                let tag = UInt32(command[2]) << 8 | UInt32(command[3])
                if let v = (try? TLV.parse(data))?.first(EMVTag(tag))?.value { current?.getData[tag] = v }
            case 0xAE where ok:
                if current?.generateAC == nil { current?.generateAC = data }
            default: break
            }
        }
        finish()
        // The applications the directory listed that the kernel did not go on with: their FCI is
        // made from the directory entry (label, priority), their records are the profile's
        // defaults, so the cardholder is asked to choose again.
        var seen = Set(result.applications.map(\.aid))
        let entries = result.directoryRecords.flatMap { record in
            ((try? TLV.parse(record))?.first(0x70)?.children ?? []).filter { $0.tag == 0x61 }
        } + (((try? TLV.parse(result.directoryFCI ?? []))?.first(0xBF0C)?.children ?? []).filter { $0.tag == 0x61 })
        for entry in entries {
            guard let aid = entry.first(0x4F)?.value, seen.insert(aid).inserted else { continue }
            var proprietary: [TLV] = []
            if let label = entry.first(0x50) { proprietary.append(label) }
            if let priority = entry.first(0x87) { proprietary.append(priority) }
            var app = CardCapture.Application(aid: aid)
            app.fci = TLV(0x6F, children: [TLV(0x84, aid), TLV(0xA5, children: proprietary)]).encoded()
            result.applications.append(app)
            notes.append("application \(Hex.encode(aid)) was listed but not read: its profile is made (default records and keys)")
        }
        var options = CapturedProfile.Options()
        options.keepPAN = true
        options.ca = ca
        options.caKeys = caKeys
        options.name = "recorded card of transaction \(t.id)"
        let made: (yaml: String, report: CapturedProfile.Report)
        do throws(CapturedProfile.Failure) { made = try CapturedProfile.make(from: result, options: options) } catch {
            throw .conflict("transaction \(t.id): no profile can be made of its trace: \(error.reason)")
        }
        notes.append("the card is none of the daemon's profiles: its profile is made from the trace (number replaced, keys, certificates and PIN the bench's, ATR the default)")
        let file = "recorded-\(t.id)-card.yaml"
        return (file, made.yaml, try? CardProfile.parse(yaml: made.yaml, file: file))
    }

    // MARK: The platforms

    mutating func platform() throws(DaemonError) -> RecordedScenario {
        guard let (name, text, _) = library.first else {
            throw .conflict("transaction \(t.id): its card number is none of the daemon's profiles, and a platform request's card data is not stored: nothing to pay with")
        }
        let worldline = t.provider == .worldline
        let currency = ISO4217.numbers.first { $0.value == t.currency }?.key ?? String(t.currency)
        var lines = ["name: \(q("Recorded: \(t.provider.rawValue) \(t.action.rawValue) \(t.id), \(t.status.rawValue)\(t.responseCode.map { " \($0)" } ?? "")"))",
                     "description: \(q("Recorded from transaction \(t.id) (\(t.uuid)) by cardbench scenario record (docs/recording.md): the payment request with the same card and amount, the issuer's answer, the operations on it and the notifications each queued."))",
                     "cards:", "  card: \(name).yaml", "steps:"]
        let platform = worldline ? "worldline" : "citcon"
        let merchant = worldline ? "merchant: \"recorded-{{run.id}}\", " : ""
        let saved = worldline ? "p" : "c"
        // The notifications each step queued: a webhook's type, an IPN's status.
        func notifications(_ outbox: [OutboxEntry]) -> [String] {
            outbox.filter { $0.kind == .webhook }.compactMap { o in
                let payload = (try? JSONSerialization.jsonObject(with: Data(o.payload.utf8))) as? [String: Any] ?? [:]
                return (worldline ? payload["type"] : payload["status"]) as? String
            }
        }
        let target = (outbox + operations.flatMap(\.1)).first { $0.kind == .webhook }?.target
        if worldline, let target { lines.append("  - worldline: {\(merchant)webhook: \(q(target))}") }
        if let code = t.responseCode, code != "00", code.count == 2, code.allSatisfy(\.isNumber) {
            lines.append("  - \(platform): {\(merchant)host: {respond: \(q(code))}}")
        }
        if worldline {
            // The ledger keeps a final authorisation and a pre-authorisation alike as pre_auth.
            let mode = t.action == .preAuth ? "FINAL_AUTHORIZATION" : "SALE"
            lines.append("  - worldline: {\(merchant)pay: {amount: \(t.amount), currency: \(currency), mode: \(mode), card: card}}")
        } else {
            let ipn = target.map { ", ipn: \(q($0))" } ?? ""
            lines.append("  - citcon: {charge: {amount: \(t.amount), currency: \(currency), card: card\(ipn)}}")
        }
        var queued = notifications(outbox)
        func expect(_ row: StoredTransaction) {
            var ledger = ["action: \(row.action.rawValue)", "status: \(row.status.rawValue)", "amount: \(q(String(row.amount)))", "provider: \(row.provider.rawValue)"]
            if let code = row.responseCode { ledger.append("responseCode: \(q(code))") }
            lines.append("    expect:")
            lines.append("      ledger: {\(ledger.joined(separator: ", "))}")
            if target != nil { lines.append("      \(worldline ? "webhooks" : "ipns"): [\(queued.joined(separator: ", "))]") }
        }
        lines.append("    save: \(saved)")
        expect(t)
        for (operation, outbox) in operations {
            let verb: String
            switch operation.action {
            case .capture: verb = "capture"
            case .refund: verb = "refund"
            case .cancel: verb = "cancel"
            default: continue
            }
            let amount = verb == "cancel" ? "" : ", amount: \(q(String(operation.amount)))"
            if let code = operation.responseCode, code != "00", code.count == 2, code.allSatisfy(\.isNumber) {
                notes.append("the \(verb) of \(operation.amount) was declined \(code): the replay's may not be")
            }
            lines.append("  - \(platform): {\(merchant)\(verb): \"{{\(saved).id}}\"\(amount)}")
            queued += notifications(outbox)
            expect(operation)
        }
        return RecordedScenario(file: "recorded-\(t.id).yaml", scenario: lines.joined(separator: "\n") + "\n",
                                cards: [RecordedCard(file: name + ".yaml", profile: text)], notes: notes)
    }

    /// A YAML double-quoted scalar.
    func q(_ text: String) -> String { YAMLText.quoted(text) }
}

/// The members of a transaction's entry report a recording checks.
struct EntryPathView: Decodable {
    let path: [String]
    let interface: String?
    let posEntryMode: String?
    let kernel: Int?
    let tsi: String?
    let cvmResults: String?
    let prompts: [PromptRecord]?
}

/// The members of a transaction's ODA report a recording checks.
struct ODAResultView: Decodable {
    let method: String
    let result: String
}
