/// One deferred-payment plan a user may offer: "meses sin intereses" (months without interest).
public struct BillpocketInstallmentPlan: Sendable, Hashable {
    /// 3, 6, 9 or 12.
    public var months: Int
    /// The smallest sale the plan takes, in cents, tip included (0: any amount).
    public var minimumAmount: Int

    /// Makes a plan.
    public init(months: Int, minimumAmount: Int = 0) {
        self.months = months
        self.minimumAmount = minimumAmount
    }
}

/// Why a user may not use the `msi` a sale asks for.
public enum BillpocketMSIRefusal: Sendable, Equatable, Error {
    /// The user has no plan of that many months ("May vary between users").
    case planNotEnabled(months: Int)
    /// The sale, tip included, is below the plan's minimum (cents).
    case belowMinimum(months: Int, minimumAmount: Int)

    /// The callback's `statusinfo`, at most 40 characters: `msi: 6 not enabled for this user`,
    /// `msi: 12 needs amount >= 1500.00`.
    public func statusInfo(_ language: BillpocketCallbackStyle.Language) -> String {
        guard language == .es else { return statusInfo }
        return switch self {
        case .planNotEnabled(let months): BillpocketText.statusInfo(field: "msi", rule: "\(months) meses no habilitado")
        case .belowMinimum(let months, let minimum):
            BillpocketText.statusInfo(field: "msi", rule: "\(months) meses, mínimo \(BillpocketFormat.amount(cents: minimum))")
        }
    }

    public var statusInfo: String {
        switch self {
        case .planNotEnabled(let months):
            BillpocketText.statusInfo(field: "msi", rule: "\(months) not enabled for this user")
        case .belowMinimum(let months, let minimum):
            BillpocketText.statusInfo(field: "msi", rule: "\(months) needs amount >= \(BillpocketFormat.amount(cents: minimum))")
        }
    }

    /// The same at length, for the API and the logs.
    public var rule: String {
        switch self {
        case .planNotEnabled(let months):
            "this user has no \(months)-month plan without interest; ask for one of the user's plans, or 0 for one payment"
        case .belowMinimum(let months, let minimum):
            "the \(months)-month plan takes sales of \(BillpocketFormat.amount(cents: minimum)) or more, tip included"
        }
    }
}

/// The document's `msi` rules: the plans exist as 0, 3, 6, 9 and 12 months, and each user has
/// some of them, each with a minimum amount, agreed "during the integration process".
public enum BillpocketMSI {
    /// Every `msi` value the app knows; 0 is one payment, the rest are months without interest.
    public static let plans = [0, 3, 6, 9, 12]

    /// Whether the user with `userPlans` may sell `amount` plus `tip` (cents) in `msi` months.
    ///
    /// `msi` 0 (one payment) is always allowed. Otherwise the user must have a plan of exactly
    /// `msi` months, and the total charged, tip included, must reach its minimum: it is the total
    /// the bank finances. (The vendor sample's reference, "con propina a 3 meses sin intereses",
    /// is a sale with a tip in 3 months, so a tip does not bar a plan.)
    ///
    /// - Returns: nil when allowed, else why not.
    public static func check(msi: Int, amount: Int, tip: Int = 0, userPlans: [BillpocketInstallmentPlan]) -> BillpocketMSIRefusal? {
        guard msi != 0 else { return nil }
        guard let plan = userPlans.first(where: { $0.months == msi }) else { return .planNotEnabled(months: msi) }
        guard amount + tip >= plan.minimumAmount else {
            return .belowMinimum(months: msi, minimumAmount: plan.minimumAmount)
        }
        return nil
    }
}
