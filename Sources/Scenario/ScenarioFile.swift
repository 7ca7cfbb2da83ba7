import EMV
import Foundation
import Terminal
import Yams

/// A scenario file that cannot be run: the file, the line, and why.
public struct ScenarioError: Error, Sendable, Equatable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let reason: String

    public init(file: String, line: Int, reason: String) {
        self.file = file
        self.line = line
        self.reason = reason
    }

    public var description: String { "\(file):\(line): \(reason)" }
}

/// One scenario (docs/scenarios.md).
public struct Scenario: Sendable {
    /// The scenario run on another terminal of a daemon (`scenario run --terminal`): one whose
    /// reader is PC/SC or serial, to run the library through real reader stacks.
    public func on(terminal name: String) -> Scenario {
        var copy = self
        copy.terminal = name
        return copy
    }

    public let file: String
    public let name: String
    public let description: String?
    public private(set) var terminal: String
    /// The terminal action code "default" the terminal is created with (in process); a daemon's
    /// terminal must be configured so (`terminal.<name>.tac_default`).
    public let tacDefault: String?
    /// The scenario's terminal settings beyond the default: fallback, reader interfaces, contactless limits.
    public var terminalOptions = TerminalOptions()
    /// ISO 8601, when the scenario sets the clock.
    public let clockStart: String?
    /// How the scenario's waits go (`clock: {waits: real}`): virtual by default, the keypad's
    /// answers queued before each transaction (`WaitMode.scripted`).
    public var waits: WaitMode = .scripted
    /// Card names to profile files (absolute paths).
    public let cards: [String: String]
    /// The scripted external ISO 8583 host the scenario's terminal authorises against.
    public var iso8583Host: ISO8583HostScript?
    public let steps: [Step]

    public struct Step: Sendable {
        public let line: Int
        public let action: Action
        public let save: String?
        public let expect: Expectation?
    }

    public enum Action: Sendable {
        case open(String)
        /// `interface`: insert, tap or swipe; `then`: how the card is presented again when asked.
        case insertCard(card: String, removeAfter: String?, pinTries: Int?, corruptCryptogram: Bool, interface: String = "insert", then: [String] = [])
        case removeCard
        case keypad(pin: String?, select: Int?, confirm: Bool, cancel: Bool, after: Double?)
        case host(code: String?, unavailable: Bool, delayMilliseconds: Int?)
        case clockAdvance(Int64)
        case clockSet(String)
        case wait(Double)
        case createUser(name: String, msi: [String: Int64]?)
        case rotateUser(String)
        case invalidateUser(String)
        case issueDeviceToken(user: String, alias: String?)
        /// A request to the Worldline platform (docs/scenarios.md, "Worldline").
        case worldline(WorldlineStep)
        /// A request to the Citcon platform (docs/scenarios.md, "Citcon").
        case citcon(CitconStep)
        /// An 0800 from the terminal to its external ISO 8583 host: an echo test, or a sign-on.
        case iso8583Echo(signOn: Bool)
        /// A transaction's notifications listed, and some sent again (docs/scenarios.md, "Notifications").
        case notifications(NotificationsStep)
    }

    /// Whose notifications a `notifications:` step reads, and which it sends again.
    public struct NotificationsStep: Sendable {
        public enum Subject: Sendable {
            /// A ledger id or transactionId.
            case transaction(String)
            /// A Worldline payment's id: its authorisation's row.
            case worldlinePayment(String)
            /// A Citcon charge's id: its row.
            case citconCharge(String)
        }
        public let subject: Subject
        /// An event name (`payment.captured`, `success`), or `all`; nil sends nothing.
        public let resend: String?
    }

    /// What a `notifications:` step must find.
    public struct NotificationsExpectation: Sendable {
        /// The notifications' events, in order.
        public var events: [String]?
        /// Every notification's status.
        public var status: String?
        /// The outcome of each resend this step made.
        public var resent: String?
        public var count: Int?
        /// How many resend attempts the notifications' histories hold in all.
        public var resends: Int?
    }

    /// A Citcon platform step, made through the control API as merchant `merchant`'s backend
    /// (or, for `payer` and `challenge`, as the payer on the wallet or 3-D Secure page).
    public struct CitconStep: Sendable {
        public enum Kind: Sendable {
            case charge(fields: [String: String])
            case confirm(token: String, method: String?)
            case payer(charge: String, action: String)
            case challenge(charge: String, result: String)
            case capture(charge: String, amount: String?)
            case refund(charge: String, amount: String?)
            case cancel(charge: String)
            case inquire(charge: String)
            case requestOrder(token: String, method: String?)
            case host(code: String?, unavailable: Bool, delayMilliseconds: Int?)
            case request(method: String, path: String, body: String?)
            /// A chargeback opened on a charge, or its latest moved on (under_review, won, lost).
            case chargeback(charge: String, action: String, amount: String?)
        }
        public let merchant: String
        public let kind: Kind
        /// A capture's, refund's or cancel's `reference` (a fresh one per step when absent).
        public var reference: String? = nil
    }

    /// What a Citcon step's answer must show.
    public struct CitconExpectation: Sendable {
        public var http: Int?
        public var result: String?
        public var status: String?
        public var code: String?
        public var amountCaptured: String?
        public var amountRefunded: String?
        /// Members of the answer's `data`: a value to equal, `present` (there and not null) or
        /// `absent` (missing or null).
        public var data: [(field: String, value: String)]?
        public var ipns: [String]?
        public var ledger: [(field: String, value: String)]?
    }

    /// A Worldline platform step: made through the control API's `POST /v1/worldline/requests`
    /// as merchant `merchant`'s backend would make it.
    public struct WorldlineStep: Sendable {
        public enum Kind: Sendable {
            case session
            /// `card` names a profile (its number, expiry and CVV) unless `number` is given.
            /// `token` pays with a card-on-file token instead of a card; `onFile` are the
            /// card-on-file and recurring members of `cardPaymentMethodSpecificInput` as given.
            case pay(amount: String, currency: String, mode: String?, card: String?, number: String?, expiry: String?, cvv: String?,
                     reference: String?, returnURL: String?, token: String? = nil, onFile: [String: String] = [:])
            /// `POST tokens` with a profile's card (or a number), its expiry and a name.
            case token(card: String?, number: String?, expiry: String?, name: String?)
            case getToken(String)
            case deleteToken(String)
            /// `POST hostedcheckouts`: amount, currency, mode, reference, return_url, show_result_page,
            /// tokens, products, exclude, tokenize, is_recurring, attempts.
            case hostedCheckout(fields: [String: String])
            /// The checkout's page filled in: a profile's `card` (or number, expiry, cvv), a saved
            /// card (`saved_card`: its token), or `action: cancel`; `three_ds: pass|fail` answers 3-D Secure.
            case checkoutPage(checkout: String, fields: [String: String])
            case getHostedCheckout(String)
            /// A redirect method's page (PayPal, iDEAL) answered: approve, decline, cancel or pending.
            case redirectPage(payment: String, action: String)
            case capture(payment: String, amount: String?)
            case cancel(payment: String, amount: String?)
            case refund(payment: String, amount: String?)
            case get(payment: String)
            case challenge(payment: String, result: String)
            case webhook(url: String)
            case request(method: String, path: String, body: String?)
            /// A one-shot issuer answer for the merchant's next payment.
            case host(code: String?, unavailable: Bool, delayMilliseconds: Int?)
        }
        public let merchant: String
        public let kind: Kind
        public let idempotenceKey: String?
        /// A capture's or cancel's `isFinal`, when the step gives one.
        public var isFinal: Bool? = nil
    }

    /// What a Worldline step's answer must show.
    public struct WorldlineExpectation: Sendable {
        public var http: Int?
        public var status: String?
        public var statusCode: Int?
        public var errorID: String?
        public var property: String?
        public var replayed: Bool?
        public var webhooks: [String]?
        public var ledger: [(field: String, value: String)]?
        /// Members of the answer's body by their dotted path (`creationOutput.token`), each a matcher.
        public var body: [(path: String, matcher: Matcher)] = []
    }

    public enum Matcher: Sendable, Equatable {
        case equals(String)
        case matches(String)
        case absent
        case present
    }

    public struct Expectation: Sendable {
        public let line: Int
        public var callback: [(field: String, matcher: Matcher, line: Int)] = []
        public var callbackURL: Matcher?
        public var fieldsInOrder: [String]?
        /// nil: not checked; empty with `noLedgerRow`: no row.
        public var ledger: [(field: String, value: String)]?
        public var noLedgerRow = false
        public var traceContains: [String]?
        public var traceExcludes: [String]?
        public var original: [(field: String, value: String)]?
        /// The transaction's offline data authentication report: field (method, result, …) equals.
        public var oda: [(field: String, value: String)]?
        /// How the card was read: interface, posEntryMode, kernel, outcome, cvm, path (a part of it).
        public var entry: [(field: String, value: String)]?
        /// The API must refuse the request with a message containing this.
        public var error: String?
        /// A Worldline step's checks.
        public var worldline: WorldlineExpectation?
        /// A Citcon step's checks.
        public var citcon: CitconExpectation?
        /// The messages the scripted ISO 8583 host received during the step, in order.
        public var iso8583: [ISO8583Expectation]?
        /// The transaction's ISO 8583 messages as the ledger traced them: "0200 out", "0210 in".
        public var hostMessages: [String]?
        /// An `iso8583_echo` step's outcome: answered, responseCode, function (equals).
        public var echo: [(field: String, value: String)]?
        /// A `notifications` step's checks.
        public var notifications: NotificationsExpectation?
    }

    /// One message the scripted ISO 8583 host received: its MTI, and fields as the trace shows
    /// them (card numbers masked, the PIN block withheld); `55.9F27` names a tag of field 55.
    public struct ISO8583Expectation: Sendable {
        public let line: Int
        public let mti: String
        public let fields: [(field: String, matcher: Matcher)]
    }
}

/// A scenario's scripted external ISO 8583 host (`iso8583_host:`, docs/scenarios.md): the runner
/// starts it, points the scenario's terminal at it, and answers each authorisation (0100, 0200)
/// by the next of `answers`, then by the core's emulated issuer.
public struct ISO8583HostScript: Sendable, Equatable {
    public enum Answer: Sendable, Equatable {
        /// The emulated issuer's answer (ARQC checked, ARPC in field 55), reached over its own
        /// ISO 8583 listener; issuer scripts (hex commands) added in tags 71 and 72; with
        /// `corruptARPC`, one bit of tag 91's cryptogram flipped.
        case issuer(scriptBefore: [String], scriptAfter: [String], corruptARPC: Bool = false)
        /// This response code, with this authorisation code, and nothing in field 55.
        case code(String, authorisationCode: String?)
        /// No answer: the terminal's host timeout runs out.
        case timeout
        /// Bytes that are no ISO 8583 message.
        case malformed
    }

    /// A packager name (`host.iso8583.packager`).
    public var packager = "pyiso8583-default"
    /// binary2, nac or ascii4.
    public var framing = "binary2"
    public var answers: [Answer] = []
    /// Whether reversals (0400, 0420 and their repeats) are answered; the emulated issuer voids
    /// the approval they name.
    public var answerReversals = ReversalAnswers.always

    /// What the host does with reversals.
    public enum ReversalAnswers: String, Sendable {
        /// Each goes on to the issuer and its answer comes back.
        case always = "true"
        /// None is answered (the terminal repeats them as 0401 and gives up).
        case never = "false"
        /// Each goes on to the issuer, but the answer to the first is lost on the way back: the
        /// terminal's 0401 repeats a reversal the issuer already applied.
        case firstLost = "first_lost"
    }
}

/// A scenario's terminal settings beyond the default (`terminal: {fallback, interfaces, contactless}`).
public struct TerminalOptions: Hashable, Sendable {
    public var fallback = false
    public var interfaces: [String]? = nil
    /// transaction_limit, floor_limit, cvm_limit as amounts.
    public var contactless: [String: String] = [:]
}

extension Scenario {
    /// Reads and checks a scenario file. Card names resolve to files in the `cards` folder of the
    /// nearest directory above the file that has one.
    public static func load(_ path: String) throws(ScenarioError) -> Scenario {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ScenarioError(file: path, line: 0, reason: "cannot read the file: \(error.localizedDescription)")
        }
        return try parse(text, file: path)
    }

    public static func parse(_ text: String, file: String) throws(ScenarioError) -> Scenario {
        let root: Node?
        do { root = try Yams.compose(yaml: text) } catch {
            let line = (error as? YamlError).flatMap(Self.line(of:)) ?? 1
            throw ScenarioError(file: file, line: line, reason: "not valid YAML: \(String(describing: error).split(separator: "\n").first ?? "")")
        }
        guard let root else { throw ScenarioError(file: file, line: 1, reason: "the file is empty") }
        let top = try Mapping(root, file: file, what: "a scenario")
        try top.allow(["name", "description", "terminal", "clock", "cards", "iso8583_host", "steps"])
        let name = try top.string("name", required: true)!
        var terminal = "bench1"
        var tacDefault: String?
        var options = TerminalOptions()
        if let node = top.node("terminal") {
            if let name = node.scalar?.string {
                terminal = name
            } else {
                let t = try Mapping(node, file: file, what: "terminal")
                try t.allow(["name", "tac_default", "fallback", "interfaces", "contactless"])
                terminal = try t.string("name", required: true)!
                tacDefault = try t.string("tac_default")
                if let tac = tacDefault, tac.count != 10 || !tac.allSatisfy(\.isHexDigit) {
                    throw t.error("terminal.tac_default: 10 hex digits, got \"\(tac)\"")
                }
                options.fallback = try t.bool("fallback") ?? false
                if let node = t.node("interfaces") {
                    let names = node.sequence?.compactMap { $0.scalar?.string } ?? []
                    guard !names.isEmpty, names.allSatisfy({ ["contact", "contactless", "magstripe"].contains($0) }) else {
                        throw t.error("terminal.interfaces: a list of contact, contactless, magstripe")
                    }
                    options.interfaces = names
                }
                if let node = t.node("contactless") {
                    let c = try Mapping(node, file: file, what: "terminal.contactless")
                    try c.allow(["transaction_limit", "floor_limit", "cvm_limit"])
                    for key in ["transaction_limit", "floor_limit", "cvm_limit"] {
                        guard let v = try c.string(key) else { continue }
                        let parts = v.split(separator: ".")
                        guard (1...2).contains(parts.count), !v.hasSuffix("."), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
                              parts[0].count <= 8, parts.count == 1 || parts[1].count == 2 else {
                            throw c.error("terminal.contactless.\(key): an amount like 400.00, got \"\(v)\"")
                        }
                        options.contactless[key] = v
                    }
                }
            }
        }
        var clockStart: String?
        var waits = WaitMode.scripted
        if let clock = try top.mapping("clock") {
            try clock.allow(["start", "waits"])
            clockStart = try clock.string("start")
            if let w = try clock.string("waits") {
                guard let mode = WaitMode(rawValue: w), mode != .virtual else {
                    throw clock.error("clock.waits: scripted (the default: every wait virtual) or real (waits take real time), got \"\(w)\"")
                }
                waits = mode
            }
            guard clockStart != nil || clock.node("waits") != nil else { throw clock.error("clock: start: <ISO 8601 instant> and/or waits: real") }
        }
        let cardsDirectory = Self.cardsDirectory(for: file)
        var cards: [String: String] = [:]
        if let cardMap = try top.mapping("cards") {
            for (key, node) in cardMap.entries {
                guard let profile = node.scalar?.string, !profile.isEmpty else {
                    throw ScenarioError(file: file, line: Self.line(node), reason: "cards.\(key): must be a profile file name")
                }
                cards[key] = Self.resolve(profile, in: cardsDirectory)
            }
        }
        guard let stepsNode = top.node("steps"), case .sequence(let sequence) = stepsNode, !sequence.isEmpty else {
            throw ScenarioError(file: file, line: top.node("steps").map(Self.line) ?? top.line, reason: "steps: must be a list of at least one step")
        }
        var steps: [Step] = []
        for node in sequence {
            steps.append(try parseStep(node, file: file, cards: &cards, cardsDirectory: cardsDirectory))
        }
        return Scenario(file: file, name: name, description: try top.string("description"), terminal: terminal, tacDefault: tacDefault,
                        terminalOptions: options,
                        clockStart: clockStart, waits: waits, cards: cards, iso8583Host: try top.mapping("iso8583_host").map(parseISO8583Host), steps: steps)
    }

    static func parseISO8583Host(_ m: Mapping) throws(ScenarioError) -> ISO8583HostScript {
        try m.allow(["packager", "framing", "answers", "answer_reversals"])
        var script = ISO8583HostScript()
        let packagers = ["pyiso8583-default", "pyiso8583-default-ascii", "jpos-iso87a", "jpos-iso87b"]
        if let p = try m.string("packager") {
            guard packagers.contains(p) else { throw m.error("iso8583_host.packager: \(packagers.joined(separator: ", ")), got \"\(p)\"") }
            script.packager = p
        }
        if let f = try m.string("framing") {
            guard ["binary2", "nac", "ascii4"].contains(f) else { throw m.error("iso8583_host.framing: binary2, nac or ascii4, got \"\(f)\"") }
            script.framing = f
        }
        if let text = try m.string("answer_reversals") {
            guard let value = ISO8583HostScript.ReversalAnswers(rawValue: text) else {
                throw m.error("iso8583_host.answer_reversals: true, false or first_lost, got \"\(text)\"")
            }
            script.answerReversals = value
        }
        if let node = m.node("answers") {
            guard case .sequence(let items) = node else { throw m.error("iso8583_host.answers: a list of answers") }
            for item in items {
                if let word = item.scalar?.string {
                    switch word {
                    case "issuer": script.answers.append(.issuer(scriptBefore: [], scriptAfter: []))
                    case "timeout": script.answers.append(.timeout)
                    case "malformed": script.answers.append(.malformed)
                    default:
                        throw ScenarioError(file: m.file, line: Self.line(item),
                                            reason: "iso8583_host.answers: issuer, timeout, malformed, {code: NN}, {script_before/script_after: [hex]} or {corrupt_arpc: true}, got \"\(word)\"")
                    }
                    continue
                }
                let a = try Mapping(item, file: m.file, what: "an answer")
                try a.allow(["code", "authorisation_code", "script_before", "script_after", "corrupt_arpc"])
                if let code = try a.string("code") {
                    guard code.utf8.count == 2, code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                        throw a.error("code: two letters or digits (field 39), got \"\(code)\"")
                    }
                    guard a.node("script_before") == nil, a.node("script_after") == nil, a.node("corrupt_arpc") == nil else {
                        throw a.error("an answer is a code, or the issuer's answer with scripts, not both")
                    }
                    let auth = try a.string("authorisation_code")
                    if let auth, auth.count != 6 || !auth.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
                        throw a.error("authorisation_code: 6 letters or digits (field 38), got \"\(auth)\"")
                    }
                    script.answers.append(.code(code, authorisationCode: auth))
                    continue
                }
                func commands(_ key: String) throws(ScenarioError) -> [String] {
                    guard let node = a.node(key) else { return [] }
                    let list = node.sequence?.compactMap { $0.scalar?.string.uppercased() } ?? []
                    guard !list.isEmpty, list.allSatisfy({ command in (try? Hex.decode(command)).flatMap { try? CommandAPDU(bytes: $0) } != nil }) else {
                        throw a.error("\(key): a list of command APDUs in hex: CLA INS P1 P2, then Lc and its data, then Le")
                    }
                    return list
                }
                let before = try commands("script_before"), after = try commands("script_after")
                let corrupt = try a.bool("corrupt_arpc") ?? false
                guard !before.isEmpty || !after.isEmpty || corrupt else {
                    throw a.error("an answer needs code, script_before, script_after or corrupt_arpc: true")
                }
                script.answers.append(.issuer(scriptBefore: before, scriptAfter: after, corruptARPC: corrupt))
            }
        }
        return script
    }

    static func parseStep(_ node: Node, file: String, cards: inout [String: String], cardsDirectory: String) throws(ScenarioError) -> Step {
        let m = try Mapping(node, file: file, what: "a step")
        let actions = ["open", "card", "keypad", "host", "clock", "wait", "billpocket", "worldline", "citcon", "iso8583_echo", "notifications"]
        let present = actions.filter { m.node($0) != nil }
        guard present.count == 1 else {
            throw m.error(present.isEmpty ? "a step needs one of \(actions.joined(separator: ", "))" : "a step has one action, this one has \(present.joined(separator: " and "))")
        }
        try m.allow([present[0], "save", "expect"])
        var save = try m.string("save")
        // docs/scenarios.md writes a Billpocket step's `save` inside its mapping too.
        if present[0] == "billpocket", let inner = try m.mapping("billpocket")?.string("save") {
            guard save == nil else { throw m.error("save: given twice") }
            save = inner
        }
        if let save, save.isEmpty || !save.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) {
            throw m.error("save: a name of letters, digits, _ and -")
        }
        let action: Action
        switch present[0] {
        case "open":
            action = .open(try m.string("open", required: true)!)
        case "card":
            if let text = try? m.string("card"), text == "remove" {
                action = .removeCard
            } else {
                let c = try m.mapping("card")!
                try c.allow(["insert", "tap", "swipe", "then", "remove_after", "pin_tries", "corrupt_arqc"])
                let verbs = ["insert", "tap", "swipe"].filter { c.node($0) != nil }
                guard verbs.count == 1 else { throw c.error("card: exactly one of insert, tap and swipe, got \(verbs.isEmpty ? "none" : verbs.joined(separator: ", "))") }
                let verb = verbs[0]
                let card = try c.string(verb, required: true)!
                if cards[card] == nil { cards[card] = Self.resolve(card, in: cardsDirectory) }
                guard FileManager.default.fileExists(atPath: cards[card]!) else {
                    throw c.error("\(verb): no card named \(card) in cards: and no profile \(cards[card]!)")
                }
                var then: [String] = []
                if let node = c.node("then") {
                    then = node.scalar.map { [$0.string] } ?? (node.sequence?.compactMap { $0.scalar?.string } ?? [])
                    guard !then.isEmpty, then.count <= 4, then.allSatisfy({ ["insert", "tap", "swipe"].contains($0) }) else {
                        throw c.error("then: insert, tap or swipe, or a list of up to 4 of them")
                    }
                }
                action = .insertCard(card: card, removeAfter: try c.string("remove_after"), pinTries: try c.int("pin_tries"),
                                     corruptCryptogram: try c.bool("corrupt_arqc") ?? false, interface: verb, then: then)
            }
        case "keypad":
            let k = try m.mapping("keypad")!
            try k.allow(["pin", "select", "confirm", "cancel", "after"])
            let pin = try k.string("pin"), select = try k.int("select")
            let confirm = try k.bool("confirm") ?? false, cancel = try k.bool("cancel") ?? false
            guard [pin != nil, select != nil, confirm, cancel].filter({ $0 }).count == 1 else {
                throw k.error("keypad: exactly one of pin, select, confirm: true, cancel: true")
            }
            var after: Double?
            if let text = try k.string("after") {
                guard let seconds = Double(text), seconds.isFinite, (0...600).contains(seconds) else {
                    throw k.error("keypad.after: seconds after the prompt shows, 0 to 600, got \(text)")
                }
                after = seconds
            }
            action = .keypad(pin: pin, select: select, confirm: confirm, cancel: cancel, after: after)
        case "host":
            let (code, unavailable, delay) = try parseHost(try m.mapping("host")!)
            action = .host(code: code, unavailable: unavailable, delayMilliseconds: delay)
        case "clock":
            let c = try m.mapping("clock")!
            try c.allow(["advance", "set"])
            if let seconds = try c.int("advance") {
                action = .clockAdvance(Int64(seconds))
            } else if let set = try c.string("set") {
                action = .clockSet(set)
            } else {
                throw c.error("clock: advance: <seconds> or set: <ISO 8601 instant>")
            }
        case "notifications":
            let n = try m.mapping("notifications")!
            try n.allow(["transaction", "worldline_payment", "citcon_charge", "resend"])
            let transaction = try n.string("transaction"), payment = try n.string("worldline_payment"), charge = try n.string("citcon_charge")
            guard [transaction, payment, charge].compactMap({ $0 }).count == 1 else {
                throw n.error("notifications: transaction: <id>, worldline_payment: <id> or citcon_charge: <id>, one of them")
            }
            let subject: NotificationsStep.Subject = transaction.map { .transaction($0) } ?? payment.map { .worldlinePayment($0) } ?? .citconCharge(charge!)
            action = .notifications(NotificationsStep(subject: subject, resend: try n.string("resend")))
        case "worldline":
            action = .worldline(try parseWorldline(try m.mapping("worldline")!, cards: &cards, cardsDirectory: cardsDirectory))
        case "citcon":
            action = .citcon(try parseCitcon(try m.mapping("citcon")!, cards: &cards, cardsDirectory: cardsDirectory))
        case "iso8583_echo":
            let e = try m.mapping("iso8583_echo")!
            try e.allow(["sign_on"])
            action = .iso8583Echo(signOn: try e.bool("sign_on") ?? false)
        case "wait":
            guard let seconds = m.node("wait")?.scalar.flatMap({ Double($0.string) }), seconds >= 0, seconds <= 60 else {
                throw m.error("wait: seconds, 0 to 60")
            }
            action = .wait(seconds)
        default:
            let b = try m.mapping("billpocket")!
            let kinds = ["create_user", "rotate_user", "invalidate_user", "issue_device_token"]
            let which = kinds.filter { b.node($0) != nil }
            guard which.count == 1 else { throw b.error("billpocket: exactly one of \(kinds.joined(separator: ", "))") }
            try b.allow(Set(which + ["save"]))
            switch which[0] {
            case "create_user":
                let u = try b.mapping("create_user")!
                try u.allow(["name", "msi"])
                var msi: [String: Int64]?
                if let plans = try u.mapping("msi") {
                    msi = [:]
                    for (key, node) in plans.entries {
                        guard let v = node.scalar.flatMap({ Int64($0.string) }) else {
                            throw ScenarioError(file: file, line: Self.line(node), reason: "msi.\(key): a minimum amount in cents")
                        }
                        msi![key] = v
                    }
                }
                action = .createUser(name: try u.string("name", required: true)!, msi: msi)
            case "rotate_user": action = .rotateUser(try b.string("rotate_user", required: true)!)
            case "invalidate_user": action = .invalidateUser(try b.string("invalidate_user", required: true)!)
            default:
                let d = try b.mapping("issue_device_token")!
                try d.allow(["user", "alias"])
                action = .issueDeviceToken(user: try d.string("user", required: true)!, alias: try d.string("alias"))
            }
        }
        var expectation: Expectation?
        if let e = try m.mapping("expect") {
            if case .worldline = action {
                var x = Expectation(line: e.line)
                x.worldline = try parseWorldlineExpectation(e)
                expectation = x
            } else if case .citcon = action {
                var x = Expectation(line: e.line)
                x.citcon = try parseCitconExpectation(e)
                expectation = x
            } else if case .notifications = action {
                try e.allow(["notifications"])
                var x = Expectation(line: e.line)
                var n = NotificationsExpectation()
                if let o = try e.mapping("notifications") {
                    try o.allow(["events", "status", "resent", "count", "resends"])
                    if let node = o.node("events") {
                        guard case .sequence(let seq) = node else { throw o.error("events: a list of event names") }
                        n.events = seq.compactMap { $0.scalar?.string }
                    }
                    n.status = try o.string("status")
                    n.resent = try o.string("resent")
                    n.count = try o.int("count")
                    n.resends = try o.int("resends")
                }
                x.notifications = n
                expectation = x
            } else if case .iso8583Echo = action {
                try e.allow(["iso8583", "echo"])
                var x = Expectation(line: e.line)
                x.iso8583 = try parseISO8583Messages(e)
                if let o = try e.mapping("echo") {
                    try o.allow(["answered", "responseCode", "function"])
                    x.echo = o.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
                }
                expectation = x
            } else {
                expectation = try parseExpectation(e)
            }
        }
        return Step(line: m.line, action: action, save: save, expect: expectation)
    }

    /// A host outcome: exactly one of `respond: "05"`, `unavailable: true`, `delay_ms: N`.
    static func parseHost(_ h: Mapping) throws(ScenarioError) -> (code: String?, unavailable: Bool, delay: Int?) {
        try h.allow(["respond", "unavailable", "delay_ms"])
        let code = try h.string("respond"), unavailable = try h.bool("unavailable") ?? false, delay = try h.int("delay_ms")
        guard [code != nil, unavailable, delay != nil].filter({ $0 }).count == 1 else {
            throw h.error("host: exactly one of respond: \"05\", unavailable: true, delay_ms: N")
        }
        return (code, unavailable, delay)
    }

    static func parseWorldline(_ w: Mapping, cards: inout [String: String], cardsDirectory: String) throws(ScenarioError) -> WorldlineStep {
        let kinds = ["session", "pay", "capture", "cancel", "refund", "get", "challenge", "webhook", "request", "host", "token", "get_token",
                     "delete_token", "hosted_checkout", "checkout_page", "get_hosted_checkout", "redirect_page"]
        let which = kinds.filter { w.node($0) != nil }
        guard which.count == 1 else { throw w.error("worldline: exactly one of \(kinds.joined(separator: ", "))") }
        try w.allow(Set(which + ["merchant", "idempotence_key", "amount", "result", "final"]
                        + (which == ["checkout_page"] ? ["card", "number", "expiry", "cvv", "name", "saved_card", "action", "three_ds"] : [])
                        + (which == ["redirect_page"] ? ["action"] : [])))
        let merchant = try w.string("merchant") ?? "scenario-merchant"
        let kind: WorldlineStep.Kind
        switch which[0] {
        case "session": kind = .session
        case "pay":
            let p = try w.mapping("pay")!
            let onFileKeys = ["tokenize", "requestor", "sequence", "recurring", "initial_scheme_id", "wallet", "sealed", "cryptogram_amount",
                              "redirect", "requires_approval"]
            try p.allow(Set(["amount", "currency", "mode", "card", "number", "expiry", "cvv", "reference", "return_url", "token"] + onFileKeys))
            let card = try p.string("card"), number = try p.string("number"), token = try p.string("token")
            guard [card, number, token].compactMap({ $0 }).count == 1 || (p.node("redirect") != nil && card == nil && number == nil && token == nil) else {
                throw p.error("pay: card: <profile>, number: <card number> or token: <token>, one of them")
            }
            if let card {
                if cards[card] == nil { cards[card] = Self.resolve(card, in: cardsDirectory) }
                guard FileManager.default.fileExists(atPath: cards[card]!) else { throw p.error("pay.card: no profile \(cards[card]!)") }
            }
            var onFile: [String: String] = [:]
            for key in onFileKeys { if let v = try p.string(key) { onFile[key] = v } }
            kind = .pay(amount: try p.string("amount", required: true)!, currency: try p.string("currency") ?? "EUR", mode: try p.string("mode"),
                        card: card, number: number, expiry: try p.string("expiry"), cvv: try p.string("cvv"), reference: try p.string("reference"),
                        returnURL: try p.string("return_url"), token: token, onFile: onFile)
        case "token":
            let t = try w.mapping("token")!
            try t.allow(["card", "number", "expiry", "name"])
            let card = try t.string("card"), number = try t.string("number")
            guard (card == nil) != (number == nil) else { throw t.error("token: card: <profile> or number: <card number>, one of them") }
            if let card {
                if cards[card] == nil { cards[card] = Self.resolve(card, in: cardsDirectory) }
                guard FileManager.default.fileExists(atPath: cards[card]!) else { throw t.error("token.card: no profile \(cards[card]!)") }
            }
            kind = .token(card: card, number: number, expiry: try t.string("expiry"), name: try t.string("name"))
        case "hosted_checkout":
            let h = try w.mapping("hosted_checkout")!
            let allowed = ["amount", "currency", "mode", "reference", "return_url", "show_result_page", "tokens", "products", "exclude", "tokenize",
                           "is_recurring", "attempts", "locale"]
            try h.allow(Set(allowed))
            var fields: [String: String] = [:]
            for key in allowed { if let v = try h.string(key) { fields[key] = v } }
            guard fields["amount"] != nil else { throw h.error("hosted_checkout.amount: is required") }
            kind = .hostedCheckout(fields: fields)
        case "checkout_page":
            let allowed = ["card", "number", "expiry", "cvv", "name", "saved_card", "action", "three_ds"]
            var fields: [String: String] = [:]
            for key in allowed { if let v = try w.string(key) { fields[key] = v } }
            if let card = fields["card"] {
                if cards[card] == nil { cards[card] = Self.resolve(card, in: cardsDirectory) }
                guard FileManager.default.fileExists(atPath: cards[card]!) else { throw w.error("checkout_page.card: no profile \(cards[card]!)") }
            }
            guard [fields["card"], fields["number"], fields["saved_card"], fields["action"]].compactMap({ $0 }).count == 1 else {
                throw w.error("checkout_page: card: <profile>, number: <card number>, saved_card: <token> or action: cancel, one of them")
            }
            kind = .checkoutPage(checkout: try w.string("checkout_page", required: true)!, fields: fields)
        case "get_hosted_checkout": kind = .getHostedCheckout(try w.string("get_hosted_checkout", required: true)!)
        case "redirect_page":
            let action = try w.string("action", required: true)!
            guard ["approve", "decline", "cancel", "pending"].contains(action) else { throw w.error("action: approve, decline, cancel or pending") }
            kind = .redirectPage(payment: try w.string("redirect_page", required: true)!, action: action)
        case "get_token": kind = .getToken(try w.string("get_token", required: true)!)
        case "delete_token": kind = .deleteToken(try w.string("delete_token", required: true)!)
        case "capture": kind = .capture(payment: try w.string("capture", required: true)!, amount: try w.string("amount"))
        case "cancel": kind = .cancel(payment: try w.string("cancel", required: true)!, amount: try w.string("amount"))
        case "refund": kind = .refund(payment: try w.string("refund", required: true)!, amount: try w.string("amount"))
        case "get": kind = .get(payment: try w.string("get", required: true)!)
        case "challenge":
            let result = try w.string("result", required: true)!
            guard result == "pass" || result == "fail" else { throw w.error("result: pass or fail") }
            kind = .challenge(payment: try w.string("challenge", required: true)!, result: result)
        case "webhook": kind = .webhook(url: try w.string("webhook", required: true)!)
        case "host":
            let (code, unavailable, delay) = try parseHost(try w.mapping("host")!)
            kind = .host(code: code, unavailable: unavailable, delayMilliseconds: delay)
        default:
            let r = try w.mapping("request")!
            try r.allow(["method", "path", "body"])
            kind = .request(method: try r.string("method") ?? "POST", path: try r.string("path", required: true)!, body: try r.string("body"))
        }
        var step = WorldlineStep(merchant: merchant, kind: kind, idempotenceKey: try w.string("idempotence_key"))
        step.isFinal = try w.bool("final")
        return step
    }

    static func parseCitcon(_ c: Mapping, cards: inout [String: String], cardsDirectory: String) throws(ScenarioError) -> CitconStep {
        let kinds = ["charge", "confirm", "payer", "challenge", "capture", "refund", "cancel", "inquire", "request_order", "host", "request", "chargeback"]
        let which = kinds.filter { c.node($0) != nil }
        guard which.count == 1 else { throw c.error("citcon: exactly one of \(kinds.joined(separator: ", "))") }
        try c.allow(Set(which + ["merchant", "amount", "action", "result", "method", "reference"]))
        let merchant = try c.string("merchant") ?? "scenario-shop"
        let kind: CitconStep.Kind
        switch which[0] {
        case "charge":
            let m = try c.mapping("charge")!
            let allowed = ["reference", "amount", "currency", "country", "auto_capture", "method", "card", "number", "expiry", "cvv", "three_ds", "ipn",
                           "note", "request_token", "vault_token", "consumer", "scheme", "universal_link", "sdk"]
            try m.allow(Set(allowed))
            var fields: [String: String] = [:]
            for key in allowed { if let v = try m.string(key) { fields[key] = v } }
            guard fields["amount"] != nil else { throw m.error("charge.amount: is required") }
            if let card = fields["card"] {
                if cards[card] == nil { cards[card] = Self.resolve(card, in: cardsDirectory) }
                guard FileManager.default.fileExists(atPath: cards[card]!) else { throw m.error("charge.card: no profile \(cards[card]!)") }
                fields["card"] = cards[card]!
            }
            kind = .charge(fields: fields)
        case "chargeback":
            let action = try c.string("action", required: true)!
            guard ["open", "under_review", "won", "lost"].contains(action) else { throw c.error("action: open, under_review, won or lost") }
            kind = .chargeback(charge: try c.string("chargeback", required: true)!, action: action, amount: try c.string("amount"))
        case "confirm": kind = .confirm(token: try c.string("confirm", required: true)!, method: try c.string("method"))
        case "payer":
            let action = try c.string("action", required: true)!
            guard ["approve", "decline", "cancel", "expire"].contains(action) else { throw c.error("action: approve, decline, cancel or expire") }
            kind = .payer(charge: try c.string("payer", required: true)!, action: action)
        case "challenge":
            let result = try c.string("result", required: true)!
            guard result == "pass" || result == "fail" else { throw c.error("result: pass or fail") }
            kind = .challenge(charge: try c.string("challenge", required: true)!, result: result)
        case "capture": kind = .capture(charge: try c.string("capture", required: true)!, amount: try c.string("amount"))
        case "refund": kind = .refund(charge: try c.string("refund", required: true)!, amount: try c.string("amount"))
        case "cancel": kind = .cancel(charge: try c.string("cancel", required: true)!)
        case "inquire": kind = .inquire(charge: try c.string("inquire", required: true)!)
        case "request_order": kind = .requestOrder(token: try c.string("request_order", required: true)!, method: try c.string("method"))
        case "host":
            let (code, unavailable, delay) = try parseHost(try c.mapping("host")!)
            kind = .host(code: code, unavailable: unavailable, delayMilliseconds: delay)
        default:
            let r = try c.mapping("request")!
            try r.allow(["method", "path", "body"])
            kind = .request(method: try r.string("method") ?? "POST", path: try r.string("path", required: true)!, body: try r.string("body"))
        }
        var step = CitconStep(merchant: merchant, kind: kind)
        step.reference = try c.string("reference")
        return step
    }

    static func parseCitconExpectation(_ e: Mapping) throws(ScenarioError) -> CitconExpectation {
        try e.allow(["http", "result", "status", "code", "amount_captured", "amount_refunded", "data", "ipns", "ledger"])
        var x = CitconExpectation()
        x.http = try e.int("http")
        x.result = try e.string("result")
        x.status = try e.string("status")
        x.code = try e.string("code")
        x.amountCaptured = try e.string("amount_captured")
        x.amountRefunded = try e.string("amount_refunded")
        if let d = try e.mapping("data") {
            x.data = d.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        if let node = e.node("ipns") {
            guard case .sequence(let seq) = node else { throw e.error("ipns: a list of IPN statuses") }
            x.ipns = seq.compactMap { $0.scalar?.string }
        }
        if let l = try e.mapping("ledger") {
            try l.allow(["status", "responseCode", "action", "amount", "provider", "maskedPan"])
            x.ledger = l.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        return x
    }

    static func parseWorldlineExpectation(_ e: Mapping) throws(ScenarioError) -> WorldlineExpectation {
        try e.allow(["http", "status", "status_code", "error_id", "property", "replayed", "webhooks", "ledger", "body"])
        var x = WorldlineExpectation()
        if let b = try e.mapping("body") {
            x.body = try b.entries.map { key, node throws(ScenarioError) in (key, try matcher(node, file: e.file, what: "body.\(key)")) }
        }
        x.http = try e.int("http")
        x.status = try e.string("status")
        x.statusCode = try e.int("status_code")
        x.errorID = try e.string("error_id")
        x.property = try e.string("property")
        x.replayed = try e.bool("replayed")
        if let node = e.node("webhooks") {
            guard case .sequence(let seq) = node else { throw e.error("webhooks: a list of event types") }
            x.webhooks = seq.compactMap { $0.scalar?.string }
        }
        if let l = try e.mapping("ledger") {
            try l.allow(["status", "responseCode", "action", "amount", "provider", "maskedPan"])
            x.ledger = l.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        return x
    }

    static func parseExpectation(_ e: Mapping) throws(ScenarioError) -> Expectation {
        try e.allow(["callback", "callback_url", "fields_in_order", "ledger", "trace", "original", "oda", "entry", "error", "iso8583", "host_messages"])
        var x = Expectation(line: e.line)
        if let callback = try e.mapping("callback") {
            for (field, node) in callback.entries {
                x.callback.append((field, try matcher(node, file: e.file, what: "callback.\(field)"), Self.line(node)))
            }
        }
        if let node = e.node("callback_url") { x.callbackURL = try matcher(node, file: e.file, what: "callback_url") }
        if let node = e.node("fields_in_order") {
            guard case .sequence(let seq) = node else { throw ScenarioError(file: e.file, line: Self.line(node), reason: "fields_in_order: a list of field names") }
            x.fieldsInOrder = seq.compactMap { $0.scalar?.string }
        }
        if let node = e.node("ledger") {
            if node.scalar?.string == "none" {
                x.noLedgerRow = true
            } else {
                let l = try Mapping(node, file: e.file, what: "ledger")
                try l.allow(["status", "responseCode", "action", "amount", "tipAmount", "installments", "currency", "tvr", "entryMode", "cvm", "aid", "arqc",
                             "message"])
                x.ledger = l.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
            }
        }
        if let t = try e.mapping("trace") {
            try t.allow(["contains", "excludes"])
            func names(_ key: String) throws(ScenarioError) -> [String]? {
                guard let node = t.node(key) else { return nil }
                guard case .sequence(let seq) = node else { throw t.error("trace.\(key): a list of APDU names") }
                return seq.compactMap { $0.scalar?.string.uppercased() }
            }
            x.traceContains = try names("contains")
            x.traceExcludes = try names("excludes")
        }
        if let o = try e.mapping("original") {
            try o.allow(["status", "action"])
            x.original = o.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        if let o = try e.mapping("oda") {
            try o.allow(["method", "result", "failedCheck", "caIndex", "rid", "issuerIdentifier", "issuerKeyBits", "iccKeyBits", "issuerCertificateExpiry",
                         "iccCertificateExpiry"])
            x.oda = o.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        if let o = try e.mapping("entry") {
            try o.allow(["interface", "posEntryMode", "kernel", "outcome", "cvm", "path", "ttq", "ctq", "floorLimitExceeded", "cvmRequired", "tsi", "cvmResults"])
            x.entry = o.entries.compactMap { key, value in value.scalar.map { (key, $0.string) } }
        }
        x.error = try e.string("error")
        x.iso8583 = try parseISO8583Messages(e)
        if let node = e.node("host_messages") {
            let list = node.sequence?.compactMap { $0.scalar?.string } ?? []
            guard case .sequence = node, list.allSatisfy({ text in
                let p = text.split(separator: " ")
                let fieldOK = p.count == 2 || p.count == 3 && p[2].split(separator: "=", maxSplits: 1).first.flatMap { Int($0) } != nil && p[2].contains("=")
                return fieldOK && p[0].count == 4 && p[0].allSatisfy({ $0.isASCII && $0.isNumber }) && (p[1] == "in" || p[1] == "out")
            }) else { throw e.error("host_messages: a list like [\"0200 out\", \"0210 in 39=00\"] (an optional field=value to check)") }
            x.hostMessages = list
        }
        return x
    }

    /// `iso8583:`: the messages the scripted host must have received during the step.
    static func parseISO8583Messages(_ e: Mapping) throws(ScenarioError) -> [ISO8583Expectation]? {
        guard let node = e.node("iso8583") else { return nil }
        guard case .sequence(let items) = node else { throw e.error("iso8583: a list of the messages the host received, {mti, fields}") }
        var out: [ISO8583Expectation] = []
        for item in items {
            let m = try Mapping(item, file: e.file, what: "iso8583: a message")
            try m.allow(["mti", "fields"])
            let mti = try m.string("mti", required: true)!
            guard mti.count == 4, mti.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw m.error("mti: 4 digits, got \"\(mti)\"") }
            var fields: [(String, Matcher)] = []
            if let f = try m.mapping("fields") {
                for (key, value) in f.entries {
                    let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
                    guard let n = Int(parts[0]), (2...128).contains(n), parts.count == 1 || (n == 55 && parts[1].count >= 2 && parts[1].allSatisfy(\.isHexDigit)) else {
                        throw ScenarioError(file: e.file, line: Self.line(value), reason: "iso8583 fields: a field number 2 to 128, or 55.TAG, got \"\(key)\"")
                    }
                    fields.append((key.uppercased(), try matcher(value, file: e.file, what: "iso8583 field \(key)")))
                }
            }
            out.append(ISO8583Expectation(line: m.line, mti: mti, fields: fields))
        }
        return out
    }

    static func matcher(_ node: Node, file: String, what: String) throws(ScenarioError) -> Matcher {
        if let scalar = node.scalar { return .equals(scalar.string) }
        let m = try Mapping(node, file: file, what: what)
        try m.allow(["equals", "matches", "absent", "present"])
        if let v = try m.string("equals") { return .equals(v) }
        if let v = try m.string("matches") {
            // A pattern with {{saved.values}} is checked once they are filled in.
            if !v.contains("{{") {
                do { _ = try NSRegularExpression(pattern: v) } catch { throw m.error("\(what).matches: not a regular expression: \(v)") }
            }
            return .matches(v)
        }
        if try m.bool("absent") == true { return .absent }
        if try m.bool("present") == true { return .present }
        throw m.error("\(what): a string, or equals:, matches:, absent: true or present: true")
    }

    // MARK: Files

    /// The `cards` folder of the nearest directory above `file` that has one.
    static func cardsDirectory(for file: String) -> String {
        var dir = URL(fileURLWithPath: file).standardizedFileURL.deletingLastPathComponent()
        while dir.path != "/" {
            let cards = dir.appendingPathComponent("cards")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: cards.path, isDirectory: &isDirectory), isDirectory.boolValue { return cards.path }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: "Scenarios/cards").standardizedFileURL.path
    }

    static func resolve(_ profile: String, in directory: String) -> String {
        if profile.hasPrefix("/") { return profile }
        let name = profile.hasSuffix(".yaml") || profile.hasSuffix(".yml") ? profile : profile + ".yaml"
        return (directory as NSString).appendingPathComponent(name)
    }

    /// Scenario files under `paths` (files as given, directories searched for *.yaml; `cards`
    /// and `ca` folders and hidden ones skipped), sorted.
    public static func files(_ paths: [String]) throws(ScenarioError) -> [String] {
        var found: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw ScenarioError(file: path, line: 0, reason: "no such file or directory")
            }
            guard isDirectory.boolValue else {
                found.append(path)
                continue
            }
            let enumerator = FileManager.default.enumerator(atPath: path)
            while let entry = enumerator?.nextObject() as? String {
                let components = entry.split(separator: "/")
                if components.contains("cards") || components.contains("ca") || components.contains(where: { $0.hasPrefix(".") }) { continue }
                if entry.hasSuffix(".yaml") || entry.hasSuffix(".yml") { found.append((path as NSString).appendingPathComponent(entry)) }
            }
        }
        return found.sorted()
    }

    static func line(_ node: Node) -> Int { (node.mark?.line).map { $0 } ?? 0 }

    static func line(of error: YamlError) -> Int? {
        switch error {
        case .scanner(_, _, let mark, _), .parser(_, _, let mark, _), .composer(_, _, let mark, _): mark.line
        default: nil
        }
    }
}

/// A YAML mapping read strictly: keys it is not told about are errors with their line.
struct Mapping {
    let file: String
    let line: Int
    let entries: [(String, Node)]

    init(_ node: Node, file: String, what: String) throws(ScenarioError) {
        self.file = file
        line = Scenario.line(node)
        guard case .mapping(let mapping) = node else {
            throw ScenarioError(file: file, line: line, reason: "\(what) must be a mapping")
        }
        var entries: [(String, Node)] = []
        for (key, value) in mapping {
            guard let name = key.scalar?.string else { throw ScenarioError(file: file, line: Scenario.line(key), reason: "keys must be names") }
            entries.append((name, value))
        }
        self.entries = entries
    }

    func node(_ key: String) -> Node? { entries.first { $0.0 == key }?.1 }

    func error(_ reason: String) -> ScenarioError { ScenarioError(file: file, line: line, reason: reason) }

    func allow(_ keys: Set<String>) throws(ScenarioError) {
        for (key, node) in entries where !keys.contains(key) {
            throw ScenarioError(file: file, line: Scenario.line(node), reason: "unknown key \"\(key)\" (expected one of \(keys.sorted().joined(separator: ", ")))")
        }
    }

    func string(_ key: String, required: Bool = false) throws(ScenarioError) -> String? {
        guard let node = node(key) else {
            if required { throw error("\(key): is required") }
            return nil
        }
        guard let scalar = node.scalar else { throw ScenarioError(file: file, line: Scenario.line(node), reason: "\(key): must be a single value") }
        return scalar.string
    }

    func int(_ key: String) throws(ScenarioError) -> Int? {
        guard let text = try string(key) else { return nil }
        guard let v = Int(text) else { throw ScenarioError(file: file, line: Scenario.line(node(key)!), reason: "\(key): must be a whole number, got \"\(text)\"") }
        return v
    }

    func bool(_ key: String) throws(ScenarioError) -> Bool? {
        guard let text = try string(key) else { return nil }
        switch text.lowercased() {
        case "true", "yes": return true
        case "false", "no": return false
        default: throw ScenarioError(file: file, line: Scenario.line(node(key)!), reason: "\(key): must be true or false, got \"\(text)\"")
        }
    }

    func mapping(_ key: String) throws(ScenarioError) -> Mapping? {
        guard let node = node(key) else { return nil }
        return try Mapping(node, file: file, what: key)
    }
}
