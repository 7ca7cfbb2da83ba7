import LedgerModel

/// A Citcon charge's life as one transition function: its status and an event give the next
/// status and whether an IPN tells the merchant, or a refusal. `CitconFront` asks it before every
/// change and does what it says; `LifecycleTests` checks it as a table.
public enum CitconLifecycle {
    /// What happens to a charge.
    public enum Event: Sendable, Equatable {
        /// The app confirmed a wallet charge and it waits for the payer.
        case confirmed
        /// The issuer or the payer's wallet approved; `captures` when the charge is captured at once.
        case approved(captures: Bool)
        /// The issuer or the wallet declined, or the 3-D Secure challenge failed.
        case declined
        /// The payer cancelled on the wallet's page.
        case payerCancelled
        /// The payer let the wallet's page expire.
        case expired
        /// A waiting challenge's card was lost (a restart): the charge cannot go on.
        case challengeExpired
        case capture
        case cancel
        case refund
    }

    /// Where an event takes a charge, and whether an IPN says so.
    public struct Transition: Sendable, Equatable {
        public let status: CitconChargeStatus
        public let ipn: Bool
    }

    /// An event the charge's status does not allow: the rule, for a 400 naming `transaction_id`.
    public struct Refusal: Error, Sendable, Equatable {
        public let rule: String
    }

    /// The next status of a charge in `status` after `event`, or why it cannot happen.
    public static func next(_ status: CitconChargeStatus, _ event: Event) -> Result<Transition, Refusal> {
        switch (status, event) {
        case (.initiated, .confirmed), (.pending, .confirmed):
            .success(Transition(status: .pending, ipn: false))
        case (.initiated, .approved(let captures)), (.pending, .approved(let captures)):
            .success(Transition(status: captures ? .succeeded : .authorized, ipn: true))
        case (.initiated, .declined), (.pending, .declined):
            .success(Transition(status: .failed, ipn: true))
        case (.initiated, .payerCancelled), (.pending, .payerCancelled):
            .success(Transition(status: .canceled, ipn: true))
        case (.initiated, .expired), (.pending, .expired):
            .success(Transition(status: .expired, ipn: true))
        case (.pending, .challengeExpired):
            .success(Transition(status: .failed, ipn: false))
        case (.authorized, .capture):
            .success(Transition(status: .succeeded, ipn: true))
        case (.initiated, .cancel), (.pending, .cancel), (.authorized, .cancel):
            .success(Transition(status: .canceled, ipn: true))
        case (.succeeded, .refund):
            .success(Transition(status: .succeeded, ipn: true))
        case (_, .confirmed), (_, .approved), (_, .declined), (_, .payerCancelled), (_, .expired), (_, .challengeExpired):
            .failure(Refusal(rule: "the payer already answered"))
        case (_, .capture):
            .failure(Refusal(rule: "only an authorized charge can be captured"))
        case (_, .cancel):
            .failure(Refusal(rule: "only an initiated, pending or authorized charge can be cancelled (refund a captured one)"))
        case (_, .refund):
            .failure(Refusal(rule: "only a succeeded (captured) charge can be refunded"))
        }
    }
}
