import LedgerModel

/// A Worldline payment's life as one transition function: its status and an event give the next
/// status and the webhooks to send, or a refusal. `WorldlineFront` asks it before every change
/// and does what it says; `WorldlineLifecycleTests` checks it as a table, every status by every
/// event.
public enum WorldlineLifecycle {
    /// What happens to a payment.
    public enum Event: Sendable, Equatable {
        /// The payment needs the customer's 3-D Secure challenge before it is authorised.
        case challengeRequired
        /// The issuer approved: a `SALE` is captured at once, another mode waits for a capture.
        case approved(sale: Bool)
        /// The issuer declined, did not answer, or the challenge failed.
        case declined
        /// The card data of a waiting challenge was lost (a restart): the payment cannot go on.
        case challengeExpired
        case capture
        case cancel
        /// A refund; `whole` when it brings what is refunded up to what was captured.
        case refund(whole: Bool)
    }

    /// Where an event takes a payment, and which webhooks say so.
    public struct Transition: Sendable, Equatable {
        public let status: WorldlinePaymentStatus
        /// Webhook types, in the order they are sent.
        public let webhooks: [String]
    }

    /// An event the payment's status does not allow: the rule, for `ACTION_NOT_ALLOWED_ON_TRANSACTION`.
    public struct Refusal: Error, Sendable, Equatable {
        public let rule: String
    }

    /// The next status of a payment in `status` after `event`, or why it cannot happen.
    public static func next(_ status: WorldlinePaymentStatus, _ event: Event) -> Result<Transition, Refusal> {
        switch (status, event) {
        case (.created, .challengeRequired):
            .success(Transition(status: .redirected, webhooks: []))
        case (.created, .approved(let sale)), (.redirected, .approved(let sale)):
            .success(sale ? Transition(status: .captured, webhooks: ["payment.captured"])
                          : Transition(status: .pendingCapture, webhooks: ["payment.pending_capture"]))
        case (.created, .declined), (.redirected, .declined):
            .success(Transition(status: .rejected, webhooks: ["payment.rejected"]))
        case (.redirected, .challengeExpired):
            .success(Transition(status: .rejected, webhooks: []))
        case (.pendingCapture, .capture):
            .success(Transition(status: .captured, webhooks: ["payment.captured"]))
        // A challenge never answered is the customer's doing: no webhook, as the platform.
        case (.redirected, .cancel):
            .success(Transition(status: .cancelled, webhooks: []))
        case (.pendingCapture, .cancel):
            .success(Transition(status: .cancelled, webhooks: ["payment.cancelled"]))
        case (.captured, .refund(let whole)):
            .success(whole ? Transition(status: .refunded, webhooks: ["refund.refund_requested", "payment.refunded"])
                           : Transition(status: .captured, webhooks: ["refund.refund_requested"]))
        case (_, .challengeRequired):
            .failure(Refusal(rule: "only a new payment can be sent to a challenge"))
        case (_, .approved), (_, .declined), (_, .challengeExpired):
            .failure(Refusal(rule: "its challenge was already answered"))
        case (_, .capture):
            .failure(Refusal(rule: "only a PENDING_CAPTURE payment can be captured"))
        case (_, .cancel):
            .failure(Refusal(rule: "only a REDIRECTED or PENDING_CAPTURE payment can be cancelled (refund a captured one)"))
        case (_, .refund):
            .failure(Refusal(rule: "only a CAPTURED payment can be refunded"))
        }
    }
}
