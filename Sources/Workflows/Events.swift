import EMV
import LedgerModel
import Terminal

/// Something that happened on the bench. `GET /v1/events` streams each as its `name` and its
/// `data` (never a PAN or a PIN).
public enum BenchEvent: Sendable, Equatable {
    case cardInserted
    case cardRemoved
    /// A terminal waits for a card: for the transaction with this STAN, or to read one (a cancel).
    case waitingForCard(stan: STAN?)
    /// The keypad asks something.
    case prompt(PromptKind)
    /// An input answered the prompt that was up.
    case promptAnswered(KeypadInput)
    /// An input came while no prompt was up: it waits for the next one.
    case keypadQueued(KeypadInput)
    case transactionStarted(stan: STAN, action: TransactionAction, amount: Int64? = nil, currency: Int? = nil)
    /// A card transaction's outcome, with the host's response code and message, and how long it
    /// took from begin to commit (for the daemon's metrics; not streamed).
    case outcome(stan: STAN, status: TransactionStatus, responseCode: String, message: String, microseconds: Int64?)
    /// A transaction with no card (a cancel, a capture, a refund) was recorded.
    case recorded(stan: STAN, status: TransactionStatus, action: TransactionAction)
    /// A Billpocket user's tokens configured the terminal.
    case billpocketConfigured(user: Int64)
    /// A reader a terminal follows appeared: a udev tty (`path` is its device node) or a PC/SC
    /// reader pcscd listed (`reader` is its PC/SC name, no path).
    case readerAdded(reader: String, path: String?)
    case readerRemoved(reader: String, path: String?)
    /// pcscd went away (stopped, restarted, or never started): a `pcsc:` terminal's reader and
    /// card are gone until it answers again.
    case pcscdLost(detail: String)
    /// pcscd answers again: a new PC/SC context, and the readers it lists.
    case pcscdRestarted(readers: [String])
    /// The manual clock was set or advanced (microseconds since 1970).
    case clock(now: Int64)
    /// A Citcon charge was confirmed (`POST /v1/charges/{charge_token}`), under the 2.1.0
    /// document, whose SDK posts `ORDER_CONFIRMED` in the app then (2.2.0 dropped it).
    case citconOrderConfirmed(charge: String, status: String)

    /// The names events go by: the `event:` line of the stream.
    public enum Name: String, CaseIterable, Sendable {
        case cardInserted = "card-inserted"
        case cardRemoved = "card-removed"
        case waitingForCard = "waiting-for-card"
        case prompt
        case promptAnswered = "prompt-answered"
        case keypadQueued = "keypad-queued"
        case transactionStarted = "transaction-started"
        /// Both card outcomes and recorded transactions with no card.
        case outcome
        case billpocketConfigured = "billpocket-configured"
        case readerAdded = "reader-added"
        case readerRemoved = "reader-removed"
        case pcscdLost = "pcscd-lost"
        case pcscdRestarted = "pcscd-restarted"
        case clock
        case citconOrderConfirmed = "citcon-order-confirmed"
    }

    /// The event's name on the stream.
    public var name: Name {
        switch self {
        case .cardInserted: .cardInserted
        case .cardRemoved: .cardRemoved
        case .waitingForCard: .waitingForCard
        case .prompt: .prompt
        case .promptAnswered: .promptAnswered
        case .keypadQueued: .keypadQueued
        case .transactionStarted: .transactionStarted
        case .outcome, .recorded: .outcome
        case .billpocketConfigured: .billpocketConfigured
        case .readerAdded: .readerAdded
        case .readerRemoved: .readerRemoved
        case .pcscdLost: .pcscdLost
        case .pcscdRestarted: .pcscdRestarted
        case .clock: .clock
        case .citconOrderConfirmed: .citconOrderConfirmed
        }
    }

    /// The event's fields as the stream shows them.
    public var data: [String: String] {
        switch self {
        case .cardInserted, .cardRemoved: [:]
        case .waitingForCard(let stan): stan.map { ["stan": $0.description] } ?? [:]
        case .prompt(let kind):
            switch kind {
            case .pin(_, let tries?): ["prompt": kind.name, "kind": kind.kind, "triesLeft": String(tries)]
            case .pin(_, nil), .confirm, .photo: ["prompt": kind.name, "kind": kind.kind]
            case .select(_, let options): ["prompt": kind.name, "kind": kind.kind, "options": options.joined(separator: "\n")]
            }
        case .promptAnswered(let input), .keypadQueued(let input): ["input": input.description]
        case .transactionStarted(let stan, let action, let amount, let currency):
            ["stan": stan.description, "action": action.rawValue].merging(
                [amount.map { ("amount", String($0)) }, currency.map { ("currency", String($0)) }].compactMap { $0 }) { a, _ in a }
        case .outcome(let stan, let status, let code, let message, _):
            ["stan": stan.description, "status": status.rawValue, "responseCode": code, "message": message]
        case .recorded(let stan, let status, let action): ["stan": stan.description, "status": status.rawValue, "action": action.rawValue]
        case .billpocketConfigured(let user): ["user": String(user)]
        case .readerAdded(let reader, let path?), .readerRemoved(let reader, let path?): ["reader": reader, "path": path]
        case .readerAdded(let reader, nil), .readerRemoved(let reader, nil): ["reader": reader, "kind": "pcsc"]
        case .pcscdLost(let detail): ["detail": detail]
        case .pcscdRestarted(let readers): ["readers": readers.joined(separator: "\n")]
        case .clock(let now): ["now": String(now)]
        case .citconOrderConfirmed(let charge, let status): ["charge": charge, "status": status]
        }
    }
}

/// Where workflows and terminals report events; the daemon stamps and streams them.
public protocol EventSink: Sendable {
    func publish(_ event: BenchEvent, terminal: String?)
}
