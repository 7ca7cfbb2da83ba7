import EMV
import Foundation
import Fronts
import Hummingbird
import Ledger
import NIOCore
import Workflows

/// `POST /v1/worldline/api-keys`: a key for a merchant (made when new).
public struct WorldlineAPIKeyBody: Codable, Sendable {
    public let merchantId: String
    public init(merchantId: String) { self.merchantId = merchantId }
}

/// An API key as the admin API shows it; `secretApiKey` only in the answer that made it.
public struct WorldlineAPIKeyView: Codable, Sendable, Equatable {
    public let keyId: String
    public let merchantId: String
    public let createdAt: Int64
    public let revokedAt: Int64?
    public let secretApiKey: String?

    init(_ k: WorldlineAPIKey, secret: String? = nil) {
        keyId = k.keyID; merchantId = k.merchantID; createdAt = k.createdAt; revokedAt = k.revokedAt; secretApiKey = secret
    }
}

/// `PUT /v1/worldline/merchants/{id}/webhook`: where the merchant's webhooks go; a new key
/// signs them (its secret shown once). `url: null` stops them.
public struct WorldlineWebhookBody: Codable, Sendable {
    public let url: String?
    public init(url: String?) { self.url = url }
}

/// A merchant's webhook endpoint as the admin API shows it; `secret` only in the answer that set it.
public struct WorldlineWebhookView: Codable, Sendable, Equatable {
    public let merchantId: String
    public let url: String?
    public let keyId: String?
    public let secret: String?
}

/// `POST /v1/worldline/payments/{id}/challenge`: answers a 3-D Secure challenge, as the page's buttons do.
public struct WorldlineChallengeBody: Codable, Sendable {
    public let result: String
    public init(result: String) { self.result = result }
}

/// `POST /v1/worldline/requests`: a Server API request made through the control API, for
/// scenarios and scripts: no signature (the control API's caller is trusted), the rest as on the
/// platform's listener.
public struct WorldlineRequestBody: Codable, Sendable {
    public let method: String
    /// `/v2/{merchantId}/…`, with its query.
    public let path: String
    /// The JSON body, as text.
    public let body: String?
    public let idempotenceKey: String?

    public init(method: String, path: String, body: String? = nil, idempotenceKey: String? = nil) {
        self.method = method
        self.path = path
        self.body = body
        self.idempotenceKey = idempotenceKey
    }
}

/// The Worldline platform's admin routes on the control API: API keys, webhook endpoints and
/// keys, the Client API's RSA key rotation, and 3-D Secure challenges for scripts.
struct WorldlineAdminRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        let admin = routes.group().add(middleware: AdminOnlyMiddleware(bench: bench))
        admin.post("/v1/worldline/api-keys") { request, context in
            let body = try await decode(WorldlineAPIKeyBody.self, request, context)
            let keyID = Self.random(10), secret = Self.random(32)
            let key = try Self.ledger { try bench.ledger.createWorldlineAPIKey(merchantID: body.merchantId, keyID: keyID, secret: secret, at: Self.now) }
            return json(WorldlineAPIKeyView(key, secret: secret), status: .created)
        }
        admin.get("/v1/worldline/api-keys") { _, _ in
            json(try Self.ledger { try bench.ledger.worldlineAPIKeys() }.map { WorldlineAPIKeyView($0) })
        }
        admin.post("/v1/worldline/api-keys/:id/revoke") { _, context in
            let id = context.parameters.get("id") ?? ""
            return json(WorldlineAPIKeyView(try Self.ledger { try bench.ledger.revokeWorldlineAPIKey(keyID: id, at: Self.now) }))
        }
        admin.put("/v1/worldline/merchants/:id/webhook") { request, context in
            let body = try await decode(WorldlineWebhookBody.self, request, context)
            let merchant = context.parameters.get("id") ?? ""
            if let url = body.url {
                guard let u = URL(string: url), ["http", "https"].contains(u.scheme?.lowercased() ?? ""), u.host != nil else {
                    throw DaemonError.badRequest(field: "url", rule: "must be an absolute http(s) URL")
                }
            }
            let keyID = body.url == nil ? nil : Self.random(10), secret = body.url == nil ? nil : Self.random(32)
            let m = try Self.ledger { try bench.ledger.setWorldlineWebhook(merchantID: merchant, url: body.url, keyID: keyID, secret: secret, at: Self.now) }
            return json(WorldlineWebhookView(merchantId: m.merchantID, url: m.webhookURL, keyId: m.webhookKeyID, secret: secret))
        }
        admin.post("/v1/worldline/crypto-keys/rotate") { _, _ in
            let (keyID, der) = try bench.worldlineKeys.rotate()
            return json(["keyId": keyID, "publicKey": Data(der).base64EncodedString()])
        }
        routes.post("/v1/worldline/payments/:id/challenge") { request, context in
            let body = try await decode(WorldlineChallengeBody.self, request, context)
            guard body.result == "pass" || body.result == "fail" else { throw DaemonError.badRequest(field: "result", rule: "must be pass or fail") }
            let id = context.parameters.get("id") ?? ""
            let passed = body.result == "pass"
            let answered = try await Self.offload { () throws(WorldlineError) in try bench.worldline.answerChallenge(paymentID: id, passed: passed) }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.paymentText(answered.payment, adding: ["returnUrl": answered.returnURL]))))
        }
        // A redirect method's page answered as the payer would (a scenario's way, trusted as an
        // admin is: no page token).
        routes.post("/v1/worldline/payments/:id/redirect") { request, context in
            let body = try await decode(WorldlineRedirectBody.self, request, context)
            guard let action = WorldlineFront.RedirectAction(rawValue: body.action) else {
                throw DaemonError.badRequest(field: "action", rule: "must be approve, decline, cancel or pending")
            }
            let id = context.parameters.get("id") ?? ""
            let answered = try await Self.offload { () throws(WorldlineError) in try bench.worldline.answerRedirect(paymentID: id, action: action) }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.paymentText(answered.payment, adding: ["returnUrl": answered.returnURL]))))
        }
        // A card profile as a wallet's device card: the payment data Apple Pay or Google Pay would
        // give the merchant for this payment, made with the card's keys (docs/worldline.md).
        routes.post("/v1/worldline/wallet-data") { request, context in
            let body = try await decode(WorldlineWalletDataBody.self, request, context)
            guard (1...999_999_999_999).contains(body.amount) else { throw DaemonError.badRequest(field: "amount", rule: "must be 1 or more, in minor units") }
            guard let currency = ISO4217.numbers[body.currency] else {
                throw DaemonError.badRequest(field: "currency", rule: "must be an ISO 4217 code the bench knows, got \(shownValue(body.currency, 8))")
            }
            let profile = try bench.profile(from: try ProfileSource(name: body.profile, yaml: body.profileYAML))
            let eci = body.eci ?? (CardBrand.detect(pan: profile.pan) == .mastercard ? "02" : "05")
            guard eci.count == 2, eci.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw DaemonError.badRequest(field: "eci", rule: "must be two digits") }
            let data: (dpan: String, expiryDate: String, cryptogram: String, eci: String)?
            do { data = try profile.walletPaymentData(amount: body.amount, currency: currency, eci: eci, counter: UInt16.random(in: 1...UInt16.max)) } catch {
                throw DaemonError.badRequest(field: "profile", rule: "its keys cannot be derived: \(error)")
            }
            guard let data else { throw DaemonError.badRequest(field: "profile", rule: "the card has no application to make a cryptogram with") }
            let decrypted = WorldlineWalletDataView.Decrypted(dpan: data.dpan, expiryDate: data.expiryDate, cryptogram: data.cryptogram, eci: data.eci)
            let (keyID, der) = try bench.worldlineKeys.currentPublicKey()
            let payload = try JSONEncoder().encode(decrypted)
            return json(WorldlineWalletDataView(decryptedPaymentData: decrypted,
                                                encryptedPaymentData: try WorldlineJWE.encrypt(Array(payload), keyID: keyID, publicKeyDER: der)))
        }
        // A hosted checkout's page filled in as the consumer would (a scenario's way, trusted as
        // an admin is: no page token): the form's fields, and the 3-D Secure challenge's answer
        // if one is asked.
        routes.post("/v1/worldline/hostedcheckouts/:id/page") { request, context in
            let body = try await decode(WorldlineCheckoutPageBody.self, request, context)
            let id = context.parameters.get("id") ?? ""
            if let c = body.challenge, c != "pass", c != "fail" { throw DaemonError.badRequest(field: "challenge", rule: "must be pass or fail") }
            let front = bench.worldline
            let base = bench.worldlinePublicURL + "/hostedcheckout/\(id)"
            let form = body.form
            var step = try await Self.offload { () throws(WorldlineError) in
                try front.submitCheckout(id: id, token: nil, form: form, returnPage: base + "/return") { bench.worldlinePublicURL + "/threeds/" + $0 }
            }
            var challenged = false
            if case .redirect(let url) = step, url.contains("/threeds/") {
                challenged = true
                guard let answer = body.challenge else {
                    throw DaemonError.badRequest(field: "challenge", rule: "the payment asks for 3-D Secure: give challenge: pass or fail")
                }
                let (c, _, latest) = try await Self.offload { () throws(WorldlineError) in try front.checkoutPage(id: id, token: nil) }
                guard let paymentID = latest?.id ?? c.paymentIDs.last else { throw DaemonError.failure("the challenged payment is missing") }
                _ = try await Self.offload { () throws(WorldlineError) in try front.answerChallenge(paymentID: paymentID, passed: answer == "pass") }
                step = try await Self.offload { () throws(WorldlineError) in try front.checkoutReturned(id: id, token: nil) }
            }
            let (c, _, latest) = try await Self.offload { () throws(WorldlineError) in try front.checkoutPage(id: id, token: nil) }
            var answer: [String: Any] = ["challenged": challenged]
            switch step {
            case .page(let message): answer["step"] = "page"; answer["message"] = message
            case .redirect(let url): answer["step"] = "redirect"; answer["location"] = url
            case .result(_, _, let back): answer["step"] = "result"; if let back { answer["location"] = back }
            }
            answer["hostedCheckout"] = (try? JSONSerialization.jsonObject(with: Data(WorldlineRender.hostedCheckoutText(c, payment: latest).utf8))) ?? [:]
            if let latest { answer["payment"] = (try? JSONSerialization.jsonObject(with: Data(WorldlineRender.paymentOnlyText(latest).utf8))) ?? [:] }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.text(["status": 200, "body": answer]))))
        }
        // The issuer's one-shot answers for a merchant's payments (the queue the front asks
        // through: its ledger terminal's name), as a terminal's host queue.
        routes.post("/v1/worldline/merchants/:id/host-queue") { request, context in
            let outcome = try await decode(HostOutcomeBody.self, request, context).outcome()
            let queue = "worldline.\(context.parameters.get("id") ?? "")"
            return json(try bench.enqueueHostOutcome(outcome, queue: queue).map(HostOutcomeBody.init), status: .created)
        }
        routes.delete("/v1/worldline/merchants/:id/host-queue") { _, context in
            json(bench.host.clearQueue("worldline.\(context.parameters.get("id") ?? "")").map(HostOutcomeBody.init))
        }
        routes.post("/v1/worldline/requests") { request, context in
            let body = try await decode(WorldlineRequestBody.self, request, context)
            let methods: [String: HTTPRequest.Method] = ["GET": .get, "POST": .post, "DELETE": .delete]
            guard let method = methods[body.method] else { throw DaemonError.badRequest(field: "method", rule: "must be GET, POST or DELETE") }
            let server = WorldlineServer(bench: bench, publicURL: { bench.worldlinePublicURL })
            let replied = await server.perform(method: method, path: body.path, body: Array((body.body ?? "").utf8),
                                               idempotenceKey: body.idempotenceKey, from: context)
            var answer: [String: Any] = ["status": replied.status,
                                         "body": (try? JSONSerialization.jsonObject(with: Data(replied.text.utf8))) ?? replied.text]
            if let at = replied.timestamp { answer["idempotenceRequestTimestamp"] = at }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.text(answer))))
        }
        routes.get("/v1/worldline/payments/:id/record") { _, context in
            let id = context.parameters.get("id") ?? ""
            guard let p = try Self.ledger({ try bench.ledger.worldlinePayment(id: id) }) else { throw DaemonError.notFound("no Worldline payment \(shownValue(id, 40))") }
            let ids = ([p.transactionID] + p.operations.map(\.transactionID)).compactMap { $0 }
            var transactions: [[String: Any]] = []
            var webhooks: [[String: Any]] = []
            for tid in ids {
                guard let t = try bench.ledger.transaction(id: tid) else { continue }
                transactions.append(["id": t.id, "action": t.action.rawValue, "status": t.status.rawValue, "responseCode": t.responseCode ?? "",
                                     "amount": t.amount, "provider": t.provider.rawValue, "maskedPan": t.maskedPAN ?? ""])
                for o in try bench.ledger.outbox(transactionID: tid) where o.kind == .webhook {
                    let type = ((try? JSONSerialization.jsonObject(with: Data(o.payload.utf8))) as? [String: Any])?["type"] as? String ?? ""
                    webhooks.append(["type": type, "status": o.status.rawValue, "target": o.target])
                }
            }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.text(["transactions": transactions, "webhooks": webhooks]))))
        }
        routes.get("/v1/worldline/payments/:id") { _, context in
            let id = context.parameters.get("id") ?? ""
            guard let p = try Self.ledger({ try bench.ledger.worldlinePayment(id: id) }) else { throw DaemonError.notFound("no Worldline payment \(shownValue(id, 40))") }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(string: WorldlineRender.detailsText(p))))
        }
        return routes
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000) }

    static func random(_ bytes: Int) -> String { RandomHex.make(bytes) }

    static func ledger<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let LedgerError.invalid(field, rule) {
            throw DaemonError.badRequest(field: field, rule: rule)
        }
    }

    static func offload<T: Sendable>(_ body: @escaping @Sendable () throws(WorldlineError) -> T) async throws -> T {
        let result: Result<T, WorldlineError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(WorldlineError) { continuation.resume(returning: .success(try body())) } catch { continuation.resume(returning: .failure(error)) }
            }
        }
        switch result {
        case .success(let value): return value
        case .failure(let e):
            if e.id == "ACTION_NOT_ALLOWED_ON_TRANSACTION" { throw DaemonError.conflict(e.rule ?? e.message) }
            switch e.httpStatus {
            case 404: throw DaemonError.notFound(e.message)
            case 409: throw DaemonError.conflict(e.message)
            case 400: throw DaemonError.badRequest(field: e.propertyName ?? "body", rule: e.message)
            default: throw DaemonError.failure(e.message)
            }
        }
    }
}
