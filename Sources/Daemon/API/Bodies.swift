import EMV
import Foundation
import Hummingbird
import ISO8583
import Ledger
import NIOCore
import Terminal
import Workflows

/// `POST /v1/open`'s body.
public struct OpenRequest: Codable, Sendable {
    public var url: String
    public var terminal: String?
    /// false: answer 202 with an id at once; `GET /v1/requests/{id}` waits for the result.
    public var wait: Bool?

    public init(url: String, terminal: String? = nil, wait: Bool? = nil) {
        self.url = url
        self.terminal = terminal
        self.wait = wait
    }
}

/// `POST /v1/clock`'s body: exactly one of `set` (ISO 8601) and `advanceSeconds`.
public struct ClockBody: Codable, Sendable {
    public let set: String?
    public let advanceSeconds: Int64?
    /// Which waits are virtual: `virtual`, `scripted` or `real` (`WaitMode`).
    public let waits: String?
    /// The peers the terminals wait on will not answer (a scripted host told to time out): their
    /// timeouts come as soon as nothing else can happen.
    public let peersSilent: Bool?
    /// `manual` or `system`: switches the bench's clock (a scenario run's set-up, `scenarios.setup`).
    public let mode: String?

    public init(set: String? = nil, advanceSeconds: Int64? = nil, waits: String? = nil, peersSilent: Bool? = nil, mode: String? = nil) {
        self.mode = mode
        self.set = set
        self.advanceSeconds = advanceSeconds
        self.waits = waits
        self.peersSilent = peersSilent
    }
}

/// `POST /v1/terminals/{name}/card`: a card profile, by name (`profile`, one of the configured
/// card directories') or inline (`profileYAML`), and optionally the command after which the card
/// leaves (`GENERATE AC`, `GENERATE AC#2`) and its PIN try counter.
public struct CardBody: Codable, Sendable {
    public let profile: String?
    public let profileYAML: String?
    public let removeAfter: String?
    public let pinTries: Int?
    /// The card's first cryptogram comes out with a bit flipped: an ARQC the issuer rejects.
    public let corruptCryptogram: Bool?
    /// How the card is presented: `insert` (default), `tap` or `swipe`.
    public var interface: String? = nil
    /// How it is presented again when the terminal asks, in order.
    public var then: [String]? = nil

    public init(profile: String? = nil, profileYAML: String? = nil, removeAfter: String? = nil, pinTries: Int? = nil,
                corruptCryptogram: Bool? = nil, interface: String? = nil, then: [String]? = nil) {
        self.interface = interface
        self.then = then
        self.profile = profile
        self.profileYAML = profileYAML
        self.removeAfter = removeAfter
        self.pinTries = pinTries
        self.corruptCryptogram = corruptCryptogram
    }
}

extension CardBody {
    /// The presentations in order, from `interface` and `then`.
    func presentations() throws(DaemonError) -> [CardInterface] {
        var out: [CardInterface] = []
        for (i, verb) in ([interface ?? "insert"] + (then ?? [])).enumerated() {
            guard let interface = CardInterface(verb: verb) else {
                throw .badRequest(field: i == 0 ? "interface" : "then[\(i - 1)]", rule: "must be insert, tap or swipe, got \"\(verb)\"")
            }
            out.append(interface)
        }
        guard out.count <= 5 else { throw .badRequest(field: "then", rule: "at most 4 further presentations") }
        return out
    }
}

/// `POST /v1/host/accounts`: a card profile whose account the issuer takes afresh, by name
/// (`profile`) or inline (`profileYAML`).
public struct AccountBody: Codable, Sendable {
    public let profile: String?
    public let profileYAML: String?

    public init(profile: String? = nil, profileYAML: String? = nil) {
        self.profile = profile
        self.profileYAML = profileYAML
    }
}

/// `{"pin": "1234"}`, `{"select": 2}`, `{"confirm": true}` or `{"cancel": true}`.
public struct KeypadBody: Codable, Sendable {
    public let pin: String?
    public let select: Int?
    public let confirm: Bool?
    public let cancel: Bool?
    /// Give the answer this many seconds after its prompt shows (on the bench clock), as a
    /// cardholder who takes that long; queued until then. Past the prompt's timeout, it times out.
    public let afterSeconds: Double?

    public init(pin: String? = nil, select: Int? = nil, confirm: Bool? = nil, cancel: Bool? = nil, afterSeconds: Double? = nil) {
        self.pin = pin
        self.select = select
        self.confirm = confirm
        self.cancel = cancel
        self.afterSeconds = afterSeconds
    }

    /// `afterSeconds` as a duration, checked.
    func after() throws -> Duration? {
        guard let afterSeconds else { return nil }
        guard afterSeconds.isFinite, (0...600).contains(afterSeconds) else {
            throw DaemonError.badRequest(field: "afterSeconds", rule: "must be 0 to 600 seconds, got \(afterSeconds)")
        }
        return .milliseconds(Int64((afterSeconds * 1000).rounded()))
    }

    func input() throws -> KeypadInput {
        let given = [pin != nil, select != nil, confirm == true, cancel == true].filter { $0 }.count
        guard given == 1 else { throw DaemonError.badRequest(field: "keypad", rule: "give exactly one of pin, select, confirm and cancel") }
        if let pin {
            guard (4...12).contains(pin.count), pin.allSatisfy(\.isASCIIDigit) else {
                throw DaemonError.badRequest(field: "pin", rule: "must be 4 to 12 digits")
            }
            return .pin(pin)
        }
        if let select {
            guard select >= 1 else { throw DaemonError.badRequest(field: "select", rule: "must be 1 or more (options are numbered from 1)") }
            return .select(select)
        }
        return confirm == true ? .confirm : .cancel
    }
}

/// `{"code": "51"}`, `{"unavailable": true}` or `{"delayMs": 1500}`.
public struct HostOutcomeBody: Codable, Sendable {
    public let code: String?
    public let unavailable: Bool?
    public let delayMs: Int?

    public init(code: String? = nil, unavailable: Bool? = nil, delayMs: Int? = nil) {
        self.code = code
        self.unavailable = unavailable
        self.delayMs = delayMs
    }

    /// The most outcomes one terminal's queue holds: a scenario queues a few; more is a mistake.
    public static let maximumQueued = 100

    /// How the CLI shows a queued outcome.
    public var text: String { code.map { "respond \($0)" } ?? (unavailable == true ? "unavailable" : "delay \(delayMs ?? 0) ms") }

    init(_ outcome: QueuedOutcome) {
        switch outcome {
        case .respond(let c): code = c.code; unavailable = nil; delayMs = nil
        case .unavailable: code = nil; unavailable = true; delayMs = nil
        case .delay(let ms): code = nil; unavailable = nil; delayMs = ms
        }
    }

    func outcome() throws -> QueuedOutcome {
        let given = [code != nil, unavailable == true, delayMs != nil].filter { $0 }.count
        guard given == 1 else { throw DaemonError.badRequest(field: "outcome", rule: "give exactly one of code, unavailable and delayMs") }
        if let code {
            guard code.count == 2, code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw DaemonError.badRequest(field: "code", rule: "must be a 2-character ISO 8583 response code such as 00, 05 or 51")
            }
            return .respond(ResponseCode(code.uppercased()))
        }
        if let delayMs {
            guard (1...600_000).contains(delayMs) else { throw DaemonError.badRequest(field: "delayMs", rule: "must be 1 to 600000") }
            return .delay(milliseconds: delayMs)
        }
        return .unavailable
    }
}

/// `POST /v1/terminals/{name}/iso8583/echo`: an echo test, or a sign-on with `signOn: true`.
public struct ISO8583EchoBody: Codable, Sendable {
    public let signOn: Bool?

    public init(signOn: Bool? = nil) { self.signOn = signOn }
}

/// `POST /v1/terminals`: a terminal with a virtual reader made while the daemon runs (a
/// scenario's own terminal, docs/scenarios.md "Terminals in scenarios"); the settings are those of
/// `terminal.<name>.*` in the configuration.
public struct TerminalBody: Codable, Sendable {
    public var name: String
    /// 8 digits; one is chosen when absent.
    public var tid: String?
    /// 10 hex digits.
    public var tacDefault: String?
    public var fallback: Bool?
    /// contact, contactless, magstripe.
    public var interfaces: [String]?
    /// Minor units.
    public var contactlessTransactionLimit: Int?
    public var contactlessFloorLimit: Int?
    public var contactlessCVMLimit: Int?
    /// `iso8583://HOST:PORT`: an external host instead of the emulated issuer.
    public var host: String?
    public var iso8583Packager: String?
    public var iso8583Framing: String?
    /// The terminal's host timeout (1 to 120 s; the daemon's `host.timeout_seconds` when absent).
    public var hostTimeoutSeconds: Int?

    public init(name: String) { self.name = name }
}

extension TerminalBody {
    /// The terminal's settings, each field checked with the rule it breaks; and its host timeout.
    static func settings(_ body: TerminalBody, bench: Bench) throws(DaemonError) -> (TerminalSettings, Duration?) {
        guard DaemonConfiguration.isValidName(body.name) else {
            throw .badRequest(field: "name", rule: "must be 1 to 32 letters, digits, - and _, got \(body.name.prefix(40).debugDescription)")
        }
        // A name keeps its TID in the ledger for ever: the same name is given the same one.
        var tid = body.tid ?? "9" + String(format: "%07d", Self.stableHash(body.name) % 10_000_000)
        if let given = body.tid {
            guard given.count == 8, given.allSatisfy(\.isASCIIDigit) else { throw .badRequest(field: "tid", rule: "must be 8 digits, got \(given.prefix(20).debugDescription)") }
            tid = given
        }
        var settings = TerminalSettings(name: body.name, tid: tid, reader: .virtual(name: body.name))
        if let hex = body.tacDefault {
            guard hex.count == 10, let bytes = try? Hex.decode(hex) else {
                throw .badRequest(field: "tacDefault", rule: "must be 10 hex digits (5 bytes), got \(hex.prefix(20).debugDescription)")
            }
            settings.tacDefault = bytes
        }
        settings.fallback = body.fallback ?? false
        if let names = body.interfaces {
            let interfaces = names.compactMap(CardInterface.init(rawValue:))
            guard !names.isEmpty, interfaces.count == names.count else {
                throw .badRequest(field: "interfaces", rule: "must be a list of contact, contactless, magstripe, got \(names)")
            }
            settings.interfaces = Set(interfaces)
        }
        for (field, value) in [("contactlessTransactionLimit", body.contactlessTransactionLimit), ("contactlessFloorLimit", body.contactlessFloorLimit),
                               ("contactlessCVMLimit", body.contactlessCVMLimit)] {
            if let value, value < 0 || value > 99_999_999_99 { throw .badRequest(field: field, rule: "must be 0 to 9999999999 minor units, got \(value)") }
        }
        settings.contactlessTransactionLimit = body.contactlessTransactionLimit
        settings.contactlessFloorLimit = body.contactlessFloorLimit
        settings.contactlessCVMLimit = body.contactlessCVMLimit
        if let host = body.host {
            do throws(ConfigurationError) { settings.upstream = try ISO8583Upstream(parsing: host, key: "host") } catch {
                throw .badRequest(field: "host", rule: error.rule)
            }
        }
        if let name = body.iso8583Packager {
            guard let p = Packager.named(name) else {
                throw .badRequest(field: "iso8583Packager", rule: "must be one of \(Packager.all.map(\.name).joined(separator: ", ")), got \(name.prefix(40).debugDescription)")
            }
            settings.iso8583Packager = p
        }
        if let name = body.iso8583Framing {
            guard let f = Framing(rawValue: name) else {
                throw .badRequest(field: "iso8583Framing", rule: "must be one of \(Framing.allCases.map(\.rawValue).joined(separator: ", ")), got \(name.prefix(40).debugDescription)")
            }
            settings.iso8583Framing = f
        }
        if (body.iso8583Packager != nil || body.iso8583Framing != nil) && body.host == nil {
            throw .badRequest(field: "host", rule: "iso8583Packager and iso8583Framing need an external host (iso8583://HOST:PORT)")
        }
        var timeout: Duration?
        if let seconds = body.hostTimeoutSeconds {
            guard (1...120).contains(seconds) else { throw .badRequest(field: "hostTimeoutSeconds", rule: "must be 1 to 120, got \(seconds)") }
            timeout = .seconds(seconds)
        }
        return (settings, timeout)
    }

    /// FNV-1a of the name: the same TID for the same name in every daemon.
    static func stableHash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in text.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }
}

/// `POST /v1/worldline/hostedcheckouts/{id}/page`: the page's form as the consumer fills it, and
/// the 3-D Secure challenge's answer when one is asked.
public struct WorldlineCheckoutPageBody: Codable, Sendable, Equatable {
    /// `cardNumber`, `expiryDate` (MM/YY), `cvv`, `cardholderName`; or `token`; or `action: cancel`.
    public var form: [String: String]
    /// `pass` or `fail`.
    public var challenge: String?

    public init(form: [String: String], challenge: String? = nil) {
        self.form = form
        self.challenge = challenge
    }
}

/// `POST /v1/worldline/wallet-data`: a card profile as a mobile wallet's device card, and the
/// payment its cryptogram is for.
public struct WorldlineWalletDataBody: Codable, Sendable, Equatable {
    /// A profile's name, or `profileYAML`.
    public var profile: String?
    public var profileYAML: String?
    /// Minor units.
    public var amount: Int
    /// ISO 4217 alphabetic (EUR).
    public var currency: String
    /// Two digits; 05 (Visa) or 02 (Mastercard) when absent, by the card's brand.
    public var eci: String?

    public init(profile: String? = nil, profileYAML: String? = nil, amount: Int, currency: String, eci: String? = nil) {
        self.profile = profile
        self.profileYAML = profileYAML
        self.amount = amount
        self.currency = currency
        self.eci = eci
    }
}

/// What `POST /v1/worldline/wallet-data` answers: `decryptedPaymentData`, and the same sealed for
/// the platform as `encryptedPaymentData` (cardbench's format: docs/worldline.md).
public struct WorldlineWalletDataView: Codable, Sendable, Equatable {
    public struct Decrypted: Codable, Sendable, Equatable {
        public let dpan: String
        public let expiryDate: String
        public let cryptogram: String
        public let eci: String

        public init(dpan: String, expiryDate: String, cryptogram: String, eci: String) {
            self.dpan = dpan
            self.expiryDate = expiryDate
            self.cryptogram = cryptogram
            self.eci = eci
        }
    }
    public let decryptedPaymentData: Decrypted
    public let encryptedPaymentData: String
}

/// `POST /v1/worldline/payments/{id}/redirect`: the payer's answer on a redirect method's page.
public struct WorldlineRedirectBody: Codable, Sendable, Equatable {
    /// `approve`, `decline`, `cancel` or `pending`.
    public var action: String

    public init(action: String) { self.action = action }
}

/// `POST /v1/citcon/charges/{id}/chargebacks`: open a chargeback, or move the latest one on.
public struct CitconChargebackBody: Codable, Sendable, Equatable {
    /// `open`, `under_review`, `won` or `lost`.
    public var action: String
    /// What the cardholder disputes (minor units), when opening; all that is left when absent.
    public var amount: Int?
    /// The bank's reason, when opening (kept as the chargeback's reference).
    public var reason: String?

    public init(action: String, amount: Int? = nil, reason: String? = nil) {
        self.action = action
        self.amount = amount
        self.reason = reason
    }
}
