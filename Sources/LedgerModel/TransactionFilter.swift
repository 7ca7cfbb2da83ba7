/// Which of a terminal's transactions a listing keeps (`Ledger.transactions(terminal:…)`).
public struct TransactionFilter: Sendable, Equatable {
    public var provider: Provider?
    public var status: TransactionStatus?
    /// Microseconds since 1970: created at or after.
    public var createdSince: Int64?
    /// Microseconds since 1970: created before.
    public var createdBefore: Int64?

    public init(provider: Provider? = nil, status: TransactionStatus? = nil, createdSince: Int64? = nil, createdBefore: Int64? = nil) {
        self.provider = provider
        self.status = status
        self.createdSince = createdSince
        self.createdBefore = createdBefore
    }
}
