import EMV
import Fronts
import LedgerModel
import Synchronization
import Terminal

/// Every transaction workflow of every front: a sale or pre-authorisation with a card, a cancel,
/// a capture, a refund, an abort, a batch, a lookup, and what happens when an outcome cannot be
/// recorded. Workflows are pure: they run against the small protocols below (the ledger as a
/// `TransactionStore`, the terminal as a `TerminalSession` with its card and its prompts, the
/// emulated issuer, a clock, an event sink) and return an `Answer` or a `WorkflowError`. The daemon
/// wires real ones in; tests and `cardbench sale` wire their own.
public enum Workflows {}

/// Why a request got no callback: the HTTP layer maps each case to its status.
public enum WorkflowError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A value broke a rule: the field and the rule.
    case badRequest(field: String, rule: String)
    case notFound(String)
    /// The terminal is busy, or the keypad is asking for something else.
    case conflict(String)
    /// A transaction whose outcome the ledger refused: taken back at the host and recorded as
    /// failed; the request gets this instead of a callback.
    case unrecordable(String)
    case failure(String)

    public var description: String {
        switch self {
        case .badRequest(let field, let rule): "\(field): \(rule)"
        case .notFound(let what), .conflict(let what), .unrecordable(let what), .failure(let what): what
        }
    }

    /// A ledger failure: a value that broke one of the ledger's rules is the request's fault
    /// (naming the field), anything else the daemon's.
    public init(ledger error: any Error, _ doing: String) {
        if let error = error as? WorkflowError {
            self = error
        } else if case .invalid(let field, let rule)? = error as? LedgerError {
            self = .badRequest(field: field, rule: rule)
        } else {
            self = .failure("\(doing): \(error)")
        }
    }
}


/// A card in the reader, powered on: the kernel's link to it, and the way to let it go.
public protocol CardSession: CardLink {
    func powerOff()
}

/// The terminal data the kernel takes from the terminal a transaction runs on.
public struct TerminalData: Sendable {
    public var countryCode: Int
    public var currencyCode: Int
    /// The terminal action code "default", when not the kernel's.
    public var tacDefault: [UInt8]?
    /// CA keys and revocations for offline data authentication.
    public var oda: ODAConfiguration
    /// Entry Point's combinations and limits.
    public var contactless = ContactlessConfiguration()
    /// Whether a chip that cannot be read may be swiped (POS entry mode 80).
    public var fallback = false

    public init(countryCode: Int, currencyCode: Int, tacDefault: [UInt8]? = nil, oda: ODAConfiguration = ODAConfiguration()) {
        self.countryCode = countryCode
        self.currencyCode = currencyCode
        self.tacDefault = tacDefault
        self.oda = oda
    }
}

/// One emulated device as a workflow uses it: taken for one transaction at a time, its card, its
/// prompts, and the thread blocking card work runs on (the kernel talks to the card synchronously).
public protocol TerminalSession: AnyObject, Sendable {
    var name: String { get }
    /// The Viva terminal id (8 digits).
    var tid: String { get }
    var terminalData: TerminalData { get }
    var prompts: any Prompts { get }
    /// Whether the transaction in progress was stopped from outside (the API's abort).
    var isAborted: Bool { get }
    /// Takes the terminal for one transaction; a second caller gets a conflict ("terminal busy").
    func acquire(_ what: String) throws(WorkflowError)
    func release()
    /// Stops the transaction in progress; false when the terminal was idle.
    func abort() -> Bool
    /// Runs `body` where blocking is allowed (the terminal's own thread): card work, prompts and
    /// the ledger's durable writes.
    func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T
    /// Waits for a card and powers it on.
    func waitForCard(timeout: Duration) throws(KernelError) -> any CardSession
}

/// The terminals a request may name.
public protocol TerminalDirectory: Sendable {
    /// The terminal named `name`, or the first one when `name` is nil or empty.
    func terminal(_ name: String?) throws(WorkflowError) -> any TerminalSession
}

/// How long things may take and which scripted tables apply: the daemon's configuration.
public struct WorkflowSettings: Sendable {
    /// How long a terminal waits for a card.
    public var cardTimeout: Duration = .seconds(60)
    /// How long the cardholder or operator has for a prompt.
    public var promptTimeout: Duration = .seconds(30)
    /// How long a terminal waits for the host before deciding offline.
    public var hostTimeout: Duration = .seconds(30)
    /// The offset of the times the fronts show (Viva's transactionDate).
    public var utcOffsetSeconds = 0
    public var vivaAmountTable: AmountTable = .stripeCents
    public var billpocketAmountTable: AmountTable = .billpocket
    /// `statusinfo`'s language and the instalment plan's name in Billpocket callbacks.
    public var billpocketCallbacks = BillpocketCallbackStyle()
    /// Whether app-scheme callbacks are handed to something besides the reply (a command,
    /// xdg-open); when not, their outbox rows are recorded delivered with the transaction.
    public var appSchemeCallbacksHandedOn = true

    public init() {}
}

/// Everything a workflow runs against.
public struct WorkflowContext: Sendable {
    /// The durable record.
    public let store: any TransactionStore
    /// The emulated issuer: authorisations, voids, reversals.
    public let host: EmulatedHost
    /// The transaction clock (manual in scenarios).
    public let clock: any Clock
    /// Where workflows report what happens.
    public let events: any EventSink
    /// The issuer's facts about cards beyond their accounts.
    public let cards: any CardDirectory
    /// The terminals a request may name.
    public let terminals: any TerminalDirectory
    /// Timeouts and scripted tables.
    public let settings: WorkflowSettings
    /// The external hosts terminals authorise against, by terminal name; a terminal not named
    /// asks the emulated issuer. Shared: a terminal made while the daemon runs adds its own.
    public let upstream = UpstreamLinks()
    /// Operations on one payment, one at a time, for every surface (`PaymentSerialiser`).
    public let payments = PaymentSerialiser()

    public init(store: any TransactionStore, host: EmulatedHost, clock: any Clock, events: any EventSink, cards: any CardDirectory,
                terminals: any TerminalDirectory, settings: WorkflowSettings) {
        self.store = store
        self.host = host
        self.clock = clock
        self.events = events
        self.cards = cards
        self.terminals = terminals
        self.settings = settings
    }

    /// A ledger call whose failure is the request's answer.
    func stored<T>(_ body: () throws -> T) throws(WorkflowError) -> T {
        try stored("ledger", body)
    }

    /// A ledger call whose failure is the request's answer, saying what it was doing.
    func stored<T>(_ doing: String, _ body: () throws -> T) throws(WorkflowError) -> T {
        do { return try body() } catch { throw WorkflowError(ledger: error, doing) }
    }

    /// The kernel's terminal data for `terminal`.
    func kernelConfiguration(_ terminal: any TerminalSession) -> TerminalConfiguration {
        var c = TerminalConfiguration(pinKey: host.pinKey)
        let data = terminal.terminalData
        c.countryCode = data.countryCode
        c.currencyCode = data.currencyCode
        c.promptTimeout = settings.promptTimeout
        if let tac = data.tacDefault { c.tacDefault = tac }
        c.oda = data.oda
        c.contactless = data.contactless
        c.fallback = data.fallback
        return c
    }

    func publish(_ event: BenchEvent, terminal: String?) { events.publish(event, terminal: terminal) }
}

/// The external hosts terminals authorise against, by terminal name.
public final class UpstreamLinks: Sendable {
    private let links = Mutex<[String: any UpstreamLink]>([:])

    public init() {}

    public subscript(terminal: String) -> (any UpstreamLink)? {
        get { links.withLock { $0[terminal] } }
        set { links.withLock { $0[terminal] = newValue } }
    }
}
