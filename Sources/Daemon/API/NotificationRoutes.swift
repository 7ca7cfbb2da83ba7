import Foundation
import Hummingbird
import Ledger
import Fronts
import Workflows

/// One attempt to deliver a notification, as the API shows it.
public struct AttemptView: Codable, Sendable, Equatable {
    public let seq: Int
    /// ISO 8601, on the bench clock.
    public let at: String
    /// `delivered` or `failed`.
    public let outcome: String
    /// What the endpoint answered (`HTTP 200 from …`), or why the attempt failed.
    public let answer: String
    /// Asked for (a resend), not made by the delivery loop.
    public let resend: Bool

    init(_ a: OutboxAttempt) {
        seq = a.seq; at = isoTime(a.at); outcome = a.outcome.rawValue; answer = a.answer; resend = a.resend
    }
}

/// A notification — a callback URL an app is handed, a Worldline webhook, a Citcon IPN — with
/// every attempt to deliver it (docs/daemon.md, "Notifications").
public struct NotificationView: Codable, Sendable, Equatable {
    public let id: Int64
    /// The ledger transaction it was committed with.
    public let transactionId: Int64
    /// `callback` or `webhook` (a Citcon IPN is a webhook).
    public let kind: String
    /// The event it announces: a webhook's `type` (`payment.captured`), an IPN's `status`, a
    /// callback's `status` field, when it has one.
    public let event: String?
    /// The event's own id (a webhook's `id`): the same in every attempt, a resend's too.
    public let eventId: String?
    public let target: String
    public let payload: String
    /// `pending`, `delivered` or `failed` (given up).
    public let status: String
    /// The delivery loop's attempts (its retry limit counts these).
    public let attempts: Int
    public let lastError: String?
    public let createdAt: String
    public let deliveredAt: String?
    /// Every attempt, the loop's and the resends, in order. A callback that went only into its
    /// app's reply has none: the reply carried it.
    public let history: [AttemptView]

    init(_ e: OutboxEntry, attempts history: [OutboxAttempt]) {
        id = e.id; transactionId = e.transactionID; kind = e.kind.rawValue; target = e.target; payload = e.payload
        status = e.status.rawValue; attempts = e.attempts; lastError = e.lastError
        createdAt = isoTime(e.createdAt); deliveredAt = e.deliveredAt.map(isoTime)
        self.history = history.map(AttemptView.init)
        let object = e.kind == .webhook ? (try? JSONSerialization.jsonObject(with: Data(e.payload.utf8))) as? [String: Any] : nil
        if let object {
            event = (object["type"] as? String) ?? (object["status"] as? String).map { "ipn." + $0 }
            eventId = object["id"] as? String
        } else {
            event = RenderedCallback.fields(of: e.payload, renderedAfter: e.target).first { ["status", "result"].contains($0.name) }?.value
            eventId = nil
        }
    }
}

/// What `POST /v1/notifications/{id}/resend` answers: the attempt and the notification after it.
public struct ResendView: Codable, Sendable, Equatable {
    public let attempt: AttemptView
    public let notification: NotificationView
}

private func isoTime(_ micros: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
}

/// Every surface's notifications, listed with their attempts and sent again on demand.
struct NotificationRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.get("/v1/notifications") { request, _ in
            guard let key = request.uri.queryParameters.get("transaction").map({ String($0) }), !key.isEmpty else {
                throw DaemonError.badRequest(field: "transaction", rule: "is required: a transaction's id or transactionId")
            }
            return json(try bench.notifications(transaction: key))
        }
        routes.get("/v1/notifications/:id") { _, context in
            json(try bench.notification(try Self.id(context)))
        }
        routes.post("/v1/notifications/:id/resend") { _, context in
            let id = try Self.id(context)
            let entry = try bench.outboxEntry(id)
            switch await CallbackDelivery.resend(entry, bench: bench) {
            case .busy: throw DaemonError.conflict("notification \(id) is being delivered right now; ask again in a moment")
            case .unrecorded(let why): throw DaemonError.failure("notification \(id) was sent, but its attempt could not be recorded: \(why)")
            case .attempted(let attempt): return json(ResendView(attempt: AttemptView(attempt), notification: try bench.notification(id)))
            }
        }
        return routes
    }

    static func id(_ context: APIContext) throws -> Int64 {
        let text = context.parameters.get("id") ?? ""
        guard let id = Int64(text), id > 0 else { throw DaemonError.badRequest(field: "id", rule: "a notification's id is a positive number, got \"\(text.prefix(40))\"") }
        return id
    }
}

extension Bench {
    /// The notifications of a transaction and of the operations on it (a payment's captures,
    /// refunds and cancels), oldest first.
    func notifications(transaction key: String) throws(DaemonError) -> [NotificationView] {
        guard let (t, _, outbox) = try transaction(key) else { throw DaemonError.notFound("no transaction with id or transactionId \"\(key)\"") }
        do {
            var entries = outbox
            for operation in try ledger.transactions(originalID: t.id) { entries += try ledger.outbox(transactionID: operation.id) }
            return try entries.sorted { $0.id < $1.id }.map { NotificationView($0, attempts: try ledger.outboxAttempts(id: $0.id)) }
        } catch { throw DaemonError(ledger: error, "ledger") }
    }

    func outboxEntry(_ id: Int64) throws(DaemonError) -> OutboxEntry {
        let entry: OutboxEntry?
        do { entry = try ledger.outboxEntry(id: id) } catch { throw DaemonError(ledger: error, "ledger") }
        guard let entry else { throw DaemonError.notFound("no notification \(id)") }
        return entry
    }

    func notification(_ id: Int64) throws(DaemonError) -> NotificationView {
        let entry = try outboxEntry(id)
        do { return NotificationView(entry, attempts: try ledger.outboxAttempts(id: id)) } catch { throw DaemonError(ledger: error, "ledger") }
    }
}
