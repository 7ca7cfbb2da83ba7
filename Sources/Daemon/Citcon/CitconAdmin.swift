import EMV
import Foundation
import Fronts
import HTTPTypes
import Hummingbird
import Ledger
import NIOCore
import Workflows

/// `POST /v1/citcon/merchants`: a merchant and its key (a new key for an existing merchant).
public struct CitconMerchantBody: Codable, Sendable {
    public let merchantId: String
    public init(merchantId: String) { self.merchantId = merchantId }
}

/// A merchant as the admin API shows it; `key` only in the answer that made it.
public struct CitconMerchantView: Codable, Sendable, Equatable {
    public let merchantId: String
    public let createdAt: Int64
    public let key: String?
}

/// `POST /v1/citcon/charges/{id}/payer`: the payer's answer on the wallet (approve, decline,
/// cancel, expire); `POST …/challenge`: a card's 3-D Secure answer (pass, fail).
public struct CitconAnswerBody: Codable, Sendable {
    public let action: String
    public init(action: String) { self.action = action }
}

/// `POST /v1/citcon/requests`: an API request of merchant `merchantId` made through the control
/// API (no access token: the caller is trusted as an admin is), for scenarios and scripts.
public struct CitconRequestBody: Codable, Sendable {
    public let merchantId: String
    public let method: String
    /// `/v1/…` or `/citcon/sdk/…`.
    public let path: String
    public let body: String?

    public init(merchantId: String, method: String, path: String, body: String? = nil) {
        self.merchantId = merchantId
        self.method = method
        self.path = path
        self.body = body
    }
}

/// The Citcon platform's routes on the control API.
struct CitconAdminRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        let admin = routes.group().add(middleware: AdminOnlyMiddleware(bench: bench))
        admin.post("/v1/citcon/merchants") { request, context in
            let body = try await decode(CitconMerchantBody.self, request, context)
            let key = "sk-development-" + WorldlineAdminRoutes.random(16)
            let m = try WorldlineAdminRoutes.ledger { try bench.ledger.setCitconMerchantKey(body.merchantId, key: key, at: WorldlineAdminRoutes.now) }
            return json(CitconMerchantView(merchantId: m.merchantID, createdAt: m.createdAt, key: key), status: .created)
        }
        admin.get("/v1/citcon/merchants") { _, _ in
            json(try bench.ledger.citconMerchants().map { CitconMerchantView(merchantId: $0.merchantID, createdAt: $0.createdAt, key: nil) })
        }
        routes.post("/v1/citcon/merchants/:id/host-queue") { request, context in
            let outcome = try await decode(HostOutcomeBody.self, request, context).outcome()
            let queue = "citcon.\(context.parameters.get("id") ?? "")"
            return json(try bench.enqueueHostOutcome(outcome, queue: queue).map(HostOutcomeBody.init), status: .created)
        }
        routes.delete("/v1/citcon/merchants/:id/host-queue") { _, context in
            json(bench.host.clearQueue("citcon.\(context.parameters.get("id") ?? "")").map(HostOutcomeBody.init))
        }
        routes.post("/v1/citcon/charges/:id/payer") { request, context in
            let body = try await decode(CitconAnswerBody.self, request, context)
            let id = context.parameters.get("id") ?? ""
            let answered = try await Self.offload { () throws(CitconError) in try bench.citcon.payerAction(chargeID: id, action: body.action) }
            return Self.answer(bench, answered.charge, redirect: answered.redirect)
        }
        routes.post("/v1/citcon/charges/:id/challenge") { request, context in
            let body = try await decode(CitconAnswerBody.self, request, context)
            guard body.action == "pass" || body.action == "fail" else { throw DaemonError.badRequest(field: "action", rule: "must be pass or fail") }
            let id = context.parameters.get("id") ?? ""
            let answered = try await Self.offload { () throws(CitconError) in try bench.citcon.answerChallenge(chargeID: id, passed: body.action == "pass") }
            return Self.answer(bench, answered.charge, redirect: answered.redirect)
        }
        // A chargeback on a charge, opened or moved on (docs/citcon.md, "Chargebacks"): the
        // cardholder's bank and the merchant's answer, as an admin plays them.
        routes.post("/v1/citcon/charges/:id/chargebacks") { request, context in
            let body = try await decode(CitconChargebackBody.self, request, context)
            let id = context.parameters.get("id") ?? ""
            if let amount = body.amount, amount < 1 { throw DaemonError.badRequest(field: "amount", rule: "must be 1 or more, in minor units") }
            if let reason = body.reason, reason.count > 100 || PAN.looksLikeItHoldsAPAN(reason) {
                throw DaemonError.badRequest(field: "reason", rule: "at most 100 characters, and no card number")
            }
            let result = try await Self.offload { () throws(CitconError) in
                try bench.citcon.chargeback(chargeID: id, action: body.action, amount: body.amount.map(Int64.init), reason: body.reason)
            }
            guard case .operation(_, let c) = result else { throw DaemonError.failure("the chargeback made no charge") }
            return Self.answer(bench, c, redirect: nil)
        }
        // The charge a ledger transaction is the row of (the console's way from a transaction to its charge).
        routes.get("/v1/citcon/charges") { request, _ in
            guard let text = request.uri.queryParameters.get("transaction"), let row = Int64(text) else {
                throw DaemonError.badRequest(field: "transaction", rule: "is required: the ledger id of the charge's transaction")
            }
            guard let c = try bench.ledger.citconCharge(transactionID: row) else { throw DaemonError.notFound("no Citcon charge has transaction \(row)") }
            return Self.answer(bench, c, redirect: nil)
        }
        routes.get("/v1/citcon/charges/:id") { _, context in
            let id = context.parameters.get("id") ?? ""
            guard let c = try bench.ledger.citconCharge(id: id) else { throw DaemonError.notFound("no Citcon charge \(shownValue(id, 40))") }
            return Self.answer(bench, c, redirect: nil)
        }
        routes.post("/v1/citcon/requests") { request, context in
            let body = try await decode(CitconRequestBody.self, request, context)
            guard ["GET", "POST"].contains(body.method) else { throw DaemonError.badRequest(field: "method", rule: "must be GET or POST") }
            let server = CitconServer(bench: bench, publicURL: { bench.citconPublicURL })
            let reply = await server.perform(method: body.method == "GET" ? .get : .post, path: body.path, body: Array((body.body ?? "").utf8),
                                             merchantID: body.merchantId, from: context)
            let answer: [String: Any] = ["status": reply.status, "body": (try? JSONSerialization.jsonObject(with: Data(reply.body.utf8))) ?? reply.body]
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.text(answer))))
        }
        return routes
    }

    /// A charge with its ledger rows and IPNs, and where the payer is sent back to.
    static func answer(_ bench: Bench, _ c: CitconCharge, redirect: String?) -> Response {
        var transactions: [[String: Any]] = []
        var ipns: [[String: Any]] = []
        let ids = ([c.transactionID] + c.operations.map(\.transactionID)).compactMap { $0 }
        for tid in Set(ids).sorted() {
            guard let t = try? bench.ledger.transaction(id: tid) else { continue }
            transactions.append(["id": t.id, "action": t.action.rawValue, "status": t.status.rawValue, "responseCode": t.responseCode ?? "",
                                 "amount": t.amount, "provider": t.provider.rawValue, "maskedPan": t.maskedPAN ?? ""])
            for o in (try? bench.ledger.outbox(transactionID: tid)) ?? [] where o.kind == .webhook {
                let payload = (try? JSONSerialization.jsonObject(with: Data(o.payload.utf8))) as? [String: Any] ?? [:]
                ipns.append(["status": payload["status"] ?? "", "transaction_type": payload["transaction_type"] ?? "", "delivery": o.status.rawValue,
                             "attempts": o.attempts, "target": o.target])
            }
        }
        let charge = (try? JSONSerialization.jsonObject(with: Data(CitconRender.inquiryText(c).utf8))) ?? [String: Any]()
        var body: [String: Any] = ["charge": charge, "transactions": transactions, "ipns": ipns]
        if let redirect { body["redirect"] = redirect }
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.text(body))))
    }

    static func offload<T: Sendable>(_ body: @escaping @Sendable () throws(CitconError) -> T) async throws -> T {
        let result: Result<T, CitconError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(CitconError) { continuation.resume(returning: .success(try body())) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        switch result {
        case .success(let value): return value
        case .failure(let e):
            switch e.httpStatus {
            case 404: throw DaemonError.notFound(e.message)
            case 409: throw DaemonError.conflict(e.message)
            case 400: throw DaemonError.badRequest(field: e.debug ?? "body", rule: e.message)
            default: throw DaemonError.failure(e.message)
            }
        }
    }
}
