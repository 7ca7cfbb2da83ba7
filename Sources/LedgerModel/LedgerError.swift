/// A ledger failure: every case names the field (or the object) at fault and the rule it broke.
public enum LedgerError: Error, Equatable, CustomStringConvertible {
    /// A value broke a rule: "tid: must be 8 digits".
    case invalid(field: String, rule: String)
    /// No terminal by that name.
    case unknownTerminal(name: String)
    /// No Billpocket user with that id.
    case unknownBillpocketUser(id: Int64)
    /// No transaction with that id; `field` says which argument carried it (`id`, `originalID`).
    case unknownTransaction(field: String, id: Int64)
    /// `complete` on a transaction that is no longer in progress.
    case notInProgress(id: Int64, status: TransactionStatus)
    /// No outbox row with that id.
    case unknownOutbox(id: Int64)
    /// An outbox row that is no longer pending.
    case outboxNotPending(id: Int64, status: OutboxStatus)
    /// SQLite failed; `operation` says what the ledger was doing.
    case database(operation: String, message: String)

    /// The field or object at fault.
    public var field: String {
        switch self {
        case .invalid(let field, _): field
        case .unknownTerminal: "terminal"
        case .unknownBillpocketUser: "user"
        case .unknownTransaction(let field, _): field
        case .notInProgress: "status"
        case .unknownOutbox, .outboxNotPending: "outbox"
        case .database: "database"
        }
    }

    /// The rule, without the field.
    public var rule: String {
        switch self {
        case .invalid(_, let rule):
            rule
        case .unknownTerminal(let name):
            "no terminal named \"\(name)\" (ensureTerminal creates it)"
        case .unknownBillpocketUser(let id):
            "no Billpocket user \(id)"
        case .unknownTransaction(_, let id):
            "no transaction with id \(id)"
        case .notInProgress(let id, let status):
            "transaction \(id) is \(status.rawValue); only an in_progress transaction can be completed"
        case .unknownOutbox(let id):
            "no outbox message with id \(id)"
        case .outboxNotPending(let id, let status):
            "outbox message \(id) is \(status.rawValue); only a pending message can be marked"
        case .database(let operation, let message):
            "\(operation) failed: \(message)"
        }
    }

    public var description: String { "\(field): \(rule)" }
}
