import Ledger
import Testing
@testable import Workflows

/// The platforms' lifecycles as tables: every status by every event, the next status and its
/// notifications, or a refusal.
@Suite("platform lifecycles")
struct LifecycleTests {
    typealias W = WorldlinePaymentStatus

    static let worldlineEvents: [WorldlineLifecycle.Event] = [
        .challengeRequired, .approved(sale: true), .approved(sale: false), .declined, .challengeExpired, .capture(open: true), .capture(open: false),
        .captureSettled, .cancel(open: true), .cancel(open: false), .refund(refundable: true), .refund(refundable: false),
        .refundSettled(whole: false), .refundSettled(whole: true),
    ]

    /// What an authorised payment may do, the amounts permitting: the status after a partial
    /// capture (CAPTURED) or a partial cancel (CANCELLED) keeps the rest capturable.
    static let maintenance: [(WorldlineLifecycle.Event, W, [String])] = [
        (.capture(open: true), .captureRequested, ["payment.capture_requested"]), (.cancel(open: true), .cancelled, ["payment.cancelled"]),
    ]
    static let refundable: (WorldlineLifecycle.Event, W, [String]) = (.refund(refundable: true), .refundRequested, ["refund.refund_requested"])

    /// The allowed transitions; every other pair is refused.
    static let worldline: [W: [(WorldlineLifecycle.Event, W, [String])]] = [
        .created: [(.challengeRequired, .redirected, []), (.approved(sale: true), .captured, ["payment.captured"]),
                   (.approved(sale: false), .pendingCapture, ["payment.pending_capture"]), (.declined, .rejected, ["payment.rejected"])],
        .redirected: [(.approved(sale: true), .captured, ["payment.captured"]), (.approved(sale: false), .pendingCapture, ["payment.pending_capture"]),
                      (.declined, .rejected, ["payment.rejected"]), (.challengeExpired, .rejected, []), (.cancel(open: true), .cancelled, ["payment.cancelled"]),
                      (.cancel(open: false), .cancelled, ["payment.cancelled"])],
        .pendingCapture: maintenance,
        .captureRequested: maintenance + [(.captureSettled, .captured, ["payment.captured"]), refundable],
        .captured: maintenance + [(.captureSettled, .captured, ["payment.captured"]), refundable],
        .cancelled: maintenance + [(.captureSettled, .cancelled, ["payment.captured"]), refundable],
        .refundRequested: [(.captureSettled, .refundRequested, ["payment.captured"]), refundable,
                           (.refundSettled(whole: false), .captured, ["refund.refunded"]),
                           (.refundSettled(whole: true), .refunded, ["refund.refunded", "payment.refunded"])],
        .rejected: [], .refunded: [],
    ]

    @Test("Worldline: every status by every event", arguments: W.allCases)
    func worldlineTable(status: W) {
        let allowed = Self.worldline[status] ?? []
        for event in Self.worldlineEvents {
            let result = WorldlineLifecycle.next(status, event)
            if let (_, next, hooks) = allowed.first(where: { $0.0 == event }) {
                #expect(result == .success(WorldlineLifecycle.Transition(status: next, webhooks: hooks)), "\(status) × \(event)")
            } else {
                guard case .failure(let refusal) = result else {
                    Issue.record("\(status) × \(event) should be refused, got \(result)")
                    continue
                }
                #expect(!refusal.rule.isEmpty, "\(status) × \(event): a refusal names its rule")
            }
        }
    }

    @Test("Worldline: the refusals say what the status allows (kept for the log: the answer's message is ACTION_NOT_ALLOWED_ON_TRANSACTION)")
    func worldlineRefusals() {
        #expect(WorldlineLifecycle.next(.captured, .capture(open: false))
                == .failure(.init(rule: "nothing is left to capture (a final capture or cancel closed it, or all of it is captured or cancelled)")))
        #expect(WorldlineLifecycle.next(.refunded, .capture(open: true))
                == .failure(.init(rule: "only an authorised payment with an amount left to capture can be captured")))
        #expect(WorldlineLifecycle.next(.pendingCapture, .refund(refundable: true))
                == .failure(.init(rule: "only what was captured and not refunded can be refunded")))
        #expect(WorldlineLifecycle.next(.captured, .cancel(open: false)) == .failure(.init(rule: "nothing is left to cancel (refund what was captured)")))
        #expect(WorldlineLifecycle.next(.pendingCapture, .declined) == .failure(.init(rule: "its challenge was already answered")))
    }

    @Test("Worldline: a status is stored by the platform's name")
    func worldlineNames() {
        #expect(W.allCases.map(\.rawValue) == ["CREATED", "REDIRECTED", "PENDING_CAPTURE", "CAPTURE_REQUESTED", "CAPTURED", "REFUND_REQUESTED",
                                               "REJECTED", "CANCELLED", "REFUNDED"])
    }

    typealias C = CitconChargeStatus

    static let citconEvents: [CitconLifecycle.Event] = [
        .confirmed, .approved(captures: true), .approved(captures: false), .declined, .payerCancelled, .expired, .challengeExpired,
        .capture, .cancel, .refund,
    ]

    /// The allowed transitions (next status, whether an IPN is sent); every other pair is refused.
    static let citcon: [C: [(CitconLifecycle.Event, C, Bool)]] = {
        let open: [(CitconLifecycle.Event, C, Bool)] = [
            (.confirmed, .pending, false), (.approved(captures: true), .succeeded, true), (.approved(captures: false), .authorized, true),
            (.declined, .failed, true), (.payerCancelled, .canceled, true), (.expired, .expired, true), (.cancel, .canceled, true),
        ]
        return [
            .initiated: open,
            .pending: open + [(.challengeExpired, .failed, false)],
            .authorized: [(.capture, .succeeded, true), (.cancel, .canceled, true)],
            .succeeded: [(.refund, .succeeded, true)],
            .failed: [], .canceled: [], .expired: [],
        ]
    }()

    @Test("Citcon: every status by every event", arguments: C.allCases)
    func citconTable(status: C) {
        let allowed = Self.citcon[status] ?? []
        for event in Self.citconEvents {
            let result = CitconLifecycle.next(status, event)
            if let (_, next, ipn) = allowed.first(where: { $0.0 == event }) {
                #expect(result == .success(CitconLifecycle.Transition(status: next, ipn: ipn)), "\(status) × \(event)")
            } else {
                guard case .failure(let refusal) = result else {
                    Issue.record("\(status) × \(event) should be refused, got \(result)")
                    continue
                }
                #expect(!refusal.rule.isEmpty, "\(status) × \(event): a refusal names its rule")
            }
        }
    }

    @Test("Citcon: statuses are stored in the SDK document's words; initiated and pending wait for the payer")
    func citconNames() {
        #expect(C.allCases.map(\.rawValue) == ["initiated", "pending", "authorized", "succeeded", "failed", "canceled", "expired"])
        #expect(C.allCases.filter(\.isOpen) == [.initiated, .pending])
        #expect(CitconLifecycle.next(.succeeded, .capture) == .failure(.init(rule: "only an authorized charge can be captured")))
    }

    /// Every (status, next) a chargeback may take; anything else is refused with a rule.
    static let chargeback: [CitconChargebackLifecycle.Status?: [CitconChargebackLifecycle.Status]] = [
        nil: [.opened], .opened: [.underReview, .won, .lost], .underReview: [.won, .lost], .won: [], .lost: [],
    ]

    @Test("Citcon chargebacks: the whole table, allowed moves and refusals", arguments: [nil] + CitconChargebackLifecycle.Status.allCases.map { Optional($0) })
    func chargebackTable(status: CitconChargebackLifecycle.Status?) {
        for to in CitconChargebackLifecycle.Status.allCases {
            let result = CitconChargebackLifecycle.next(status, to)
            if Self.chargeback[status]?.contains(to) == true {
                #expect(result == .success(to), "\(String(describing: status)) → \(to)")
            } else {
                guard case .failure(let refusal) = result else {
                    Issue.record("\(String(describing: status)) → \(to) should be refused, got \(result)")
                    continue
                }
                #expect(!refusal.rule.isEmpty)
            }
        }
    }
}
