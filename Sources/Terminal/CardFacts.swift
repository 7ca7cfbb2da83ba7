/// What the issuer knows of a card beyond its account: what a front asks about (installments,
/// the bank's name, the account type).
public struct CardFacts: Sendable, Equatable {
    public var installmentsMaximum: Int?
    public var issuerName: String?
    /// A debit account (false: credit).
    public var debit: Bool

    public init(installmentsMaximum: Int? = nil, issuerName: String? = nil, debit: Bool = false) {
        self.installmentsMaximum = installmentsMaximum
        self.issuerName = issuerName
        self.debit = debit
    }
}

/// The issuer's card facts by PAN.
public protocol CardDirectory: Sendable {
    func facts(pan: String) -> CardFacts?
}
