import LedgerModel

/// A Worldline payment's life as one transition function: its status and an event give the next
/// status and the webhooks to send, or a refusal. `WorldlineFront` asks it before every change
/// and does what it says; `WorldlineLifecycleTests` checks it as a table, every status by every
/// event.
///
/// As on the platform, a payment's status is that of its latest operation: a partial capture
/// leaves it CAPTURED (and capturable for the rest while it is open), a partial cancel CANCELLED
/// (likewise). Captures and refunds are requested first (CAPTURE_REQUESTED, REFUND_REQUESTED) and
/// settle on the bench clock (`worldline.settle_after`).
public enum WorldlineLifecycle {
    /// What happens to a payment. The amounts the transition depends on come with the event:
    /// `open` is whether an amount is left to capture or cancel, `refundable` whether what was
    /// captured and not refunded covers the refund.
    public enum Event: Sendable, Equatable {
        /// The payment needs the customer's 3-D Secure challenge before it is authorised.
        case challengeRequired
        /// The issuer approved: a `SALE` is captured at once, another mode waits for a capture.
        case approved(sale: Bool)
        /// The issuer declined, did not answer, or the challenge failed.
        case declined
        /// The card data of a waiting challenge was lost (a restart): the payment cannot go on.
        case challengeExpired
        /// A capture of all or part of what is left to capture.
        case capture(open: Bool)
        /// The requested captures settled.
        case captureSettled
        /// A cancel of all or part of what is left to capture.
        case cancel(open: Bool)
        /// A refund of all or part of what was captured and not refunded.
        case refund(refundable: Bool)
        /// The requested refunds settled; `whole` when everything captured is now refunded.
        case refundSettled(whole: Bool)
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

    /// The statuses an authorised payment can be captured, cancelled or refunded from (the
    /// amounts permitting): after a partial capture it is CAPTURED, after a partial cancel
    /// CANCELLED, and the rest is still the merchant's to capture or release.
    static let maintained: Set<WorldlinePaymentStatus> = [.pendingCapture, .captureRequested, .captured, .cancelled]

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
        // A challenge never answered is the customer's doing: no webhook, as the platform.
        case (.redirected, .cancel):
            .success(Transition(status: .cancelled, webhooks: ["payment.cancelled"]))
        case (let s, .capture(open: true)) where maintained.contains(s):
            .success(Transition(status: .captureRequested, webhooks: ["payment.capture_requested"]))
        case (let s, .cancel(open: true)) where maintained.contains(s):
            .success(Transition(status: .cancelled, webhooks: ["payment.cancelled"]))
        case (.captureRequested, .captureSettled):
            .success(Transition(status: .captured, webhooks: ["payment.captured"]))
        // A later operation set the status (a cancel of the rest, a refund): it stays.
        case (let s, .captureSettled) where s == .cancelled || s == .captured || s == .refundRequested:
            .success(Transition(status: s, webhooks: ["payment.captured"]))
        case (let s, .refund(refundable: true)) where s == .captureRequested || s == .captured || s == .cancelled || s == .refundRequested:
            .success(Transition(status: .refundRequested, webhooks: ["refund.refund_requested"]))
        case (.refundRequested, .refundSettled(let whole)):
            .success(whole ? Transition(status: .refunded, webhooks: ["refund.refunded", "payment.refunded"])
                           : Transition(status: .captured, webhooks: ["refund.refunded"]))
        case (_, .challengeRequired):
            .failure(Refusal(rule: "only a new payment can be sent to a challenge"))
        case (_, .approved), (_, .declined), (_, .challengeExpired):
            .failure(Refusal(rule: "its challenge was already answered"))
        case (.refundRequested, .capture), (.refundRequested, .cancel):
            .failure(Refusal(rule: "a refund is waiting to settle: capture or cancel once it has"))
        case (let s, .capture):
            .failure(Refusal(rule: maintained.contains(s)
                ? "nothing is left to capture (a final capture or cancel closed it, or all of it is captured or cancelled)"
                : "only an authorised payment with an amount left to capture can be captured"))
        case (let s, .cancel):
            .failure(Refusal(rule: maintained.contains(s)
                ? "nothing is left to cancel (refund what was captured)"
                : "only a REDIRECTED payment or an authorised one with an amount left to capture can be cancelled"))
        case (_, .captureSettled):
            .failure(Refusal(rule: "no capture was requested"))
        case (_, .refund):
            .failure(Refusal(rule: "only what was captured and not refunded can be refunded"))
        case (_, .refundSettled):
            .failure(Refusal(rule: "no refund was requested"))
        }
    }
}
