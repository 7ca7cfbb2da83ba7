import AsyncHTTPClient
import Crypto
import EMV
import Foundation
import Fronts
import HTTPTypes
import Hummingbird
import Ledger
import Logging
import NIOCore
import Workflows

/// The Worldline Online Payments platform's listener (docs/worldline.md): the Server API under
/// `/v2/{merchantId}/` (v1HMAC signatures), the Client API under `/client/v1/{customerId}/` and
/// `/v1/{customerId}/` (v1Client sessions), and the 3-D Secure challenge page under `/threeds/`.
/// Every answer, errors included, has the platform's JSON shape.
struct WorldlineServer: Sendable {
    let bench: Bench
    /// The URL this listener is reached at, for `clientApiUrl`, `assetUrl` and challenge links.
    let publicURL: @Sendable () -> String

    static let idempotenceKey = HTTPField.Name("X-GCS-Idempotence-Key")!
    static let idempotenceTimestamp = HTTPField.Name("X-GCS-Idempotence-Request-Timestamp")!
    static let maximumBody = 1 << 20

    var front: WorldlineFront { bench.worldline }

    /// The listener's routes (a route collection per API), in the platform's error shape.
    func responder() -> RouterResponder<PlatformContext> { router().buildResponder() }

    func router() -> Router<PlatformContext> {
        let router = Router(context: PlatformContext.self)
        router.add(middleware: WorldlineErrors())
        router.addRoutes(serverAPI())
        router.addRoutes(clientAPI(), atPath: "client/v1/:customerId")
        router.addRoutes(clientAPI(), atPath: "v1/:customerId")
        router.addRoutes(challengePages())
        router.addRoutes(checkoutPages())
        router.addRoutes(tokenizationPages())
        router.addRoutes(redirectPages())
        return router
    }

    /// A Server API request on behalf of `merchantID`, without a signature: the control API's
    /// way in for scenarios and scripts (the caller is trusted as an admin is). It goes through
    /// the listener's own routes: validation, idempotence, the answer.
    func perform(method: HTTPRequest.Method, path rawPath: String, body: [UInt8], idempotenceKey: String?,
                 from context: some RequestContext) async -> Replied {
        let path = String(rawPath.prefix { $0 != "?" })
        let segments = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard segments.first == "v2", segments.count >= 2 else {
            return Self.failure(.notFound("UNKNOWN_RESOURCE", "the path must be /v2/{merchantId}/…, got \(shownValue(path, 100))"))
        }
        var head = HTTPRequest(method: method, scheme: "http", authority: "cardbench", path: rawPath)
        if let idempotenceKey, !idempotenceKey.isEmpty { head.headerFields[Self.idempotenceKey] = idempotenceKey }
        if !body.isEmpty { head.headerFields[.contentType] = "application/json" }
        let request = Request(head: head, body: .init(buffer: ByteBuffer(bytes: body)))
        do {
            let response = try await responder().respond(to: request, context: PlatformContext(trustedMerchant: segments[1], from: context))
            let text = try await PlatformContext.text(of: response)
            return Replied(status: Int(response.status.code), text: text,
                           timestamp: response.headers[Self.idempotenceTimestamp].flatMap { Int64($0) })
        } catch {
            return Self.failure(.internalError("\(error)"))
        }
    }

    // MARK: Server API

    /// An answer before it is a `Response`: idempotence keeps its text.
    struct Replied: Sendable {
        var status: Int
        var text: String
        var timestamp: Int64? = nil

        var response: Response {
            var r = WorldlineServer.raw(status, text)
            if let timestamp { r.headers[WorldlineServer.idempotenceTimestamp] = String(timestamp) }
            return r
        }
    }

    /// `/v2/{merchantId}/…`: signed by one of the merchant's keys (unless the control API is the
    /// caller), JSON bodies, idempotence keys.
    func serverAPI() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        let v2 = routes.group("v2/:merchantId").add(middleware: WorldlineServerAPIGate(server: self))
        v2.post("sessions") { request, context in
            let m = try context.merchant, base = publicURL(), body = try await Self.body(request)
            return try await reply { try front.createSession(merchantID: m, body: body, clientAPIURL: base + "/client", assetURL: base + "/assets/") }.response
        }
        v2.post("payments") { request, context in
            let m = try context.merchant, base = publicURL(), body = try await Self.body(request)
            return try await reply {
                try front.createPayment(merchantID: m, body: body, challengeURL: { base + "/threeds/" + $0 }, redirectURL: { base + "/redirect/" + $0 })
            }.response
        }
        for (path, method, call) in Self.paymentCalls {
            v2.on(RouterPath(stringLiteral: path), method: method) { request, context in
                let m = try context.merchant, id = context.parameters.get("id") ?? "", front = self.front
                let body = method == .post ? try await Self.body(request) : []
                return try await reply { try call(front, m, id, body) }.response
            }
        }
        v2.post("hostedcheckouts") { request, context in
            let m = try context.merchant, base = publicURL(), body = try await Self.body(request)
            return try await reply { try front.createHostedCheckout(merchantID: m, body: body) { base + "/hostedcheckout/" + $0 + "/" + $1 } }.response
        }
        v2.get("hostedcheckouts/:id") { _, context in
            let m = try context.merchant, id = context.parameters.get("id") ?? ""
            return try await reply { try front.getHostedCheckout(merchantID: m, id: id) }.response
        }
        v2.post("hostedtokenizations") { request, context in
            let m = try context.merchant, base = publicURL(), body = try await Self.body(request)
            return try await reply { try front.createHostedTokenization(merchantID: m, body: body) { base + "/hostedtokenization/" + $0 + "/" + $1 } }.response
        }
        v2.get("hostedtokenizations/:id") { _, context in
            let m = try context.merchant, id = context.parameters.get("id") ?? ""
            return try await reply { try front.getHostedTokenization(merchantID: m, id: id) }.response
        }
        v2.post("tokens") { request, context in
            let m = try context.merchant, body = try await Self.body(request)
            return try await reply { try front.createToken(merchantID: m, body: body) }.response
        }
        v2.get("tokens/:id") { _, context in
            let m = try context.merchant, id = context.parameters.get("id") ?? ""
            return try await reply { try front.getToken(merchantID: m, id: id) }.response
        }
        v2.delete("tokens/:id") { _, context in
            let m = try context.merchant, id = context.parameters.get("id") ?? ""
            return try await reply { try front.deleteToken(merchantID: m, id: id) }.response
        }
        v2.post("webhooks/validateCredentials") { request, context in
            let m = try context.merchant, json = try WorldlineJSON.parse(try await Self.body(request))
            let key = try json.requiredString("key", maxLength: 100), secret = try json.requiredString("secret", maxLength: 200)
            let stored = try bench.ledger.worldlineWebhookKey(merchantID: m)
            // Compared in constant time, as a signature is.
            let valid = stored.map { $0.keyID == key && WorldlineAuth.matches($0.secret, secret) } ?? false
            return Self.json(200, ["result": valid ? "Valid" : "Invalid"]).response
        }
        v2.post("webhooks/sendtest") { request, context in
            let m = try context.merchant, json = try WorldlineJSON.parse(try await Self.body(request))
            return try await sendTestWebhook(merchantID: m, url: try json.requiredString("url", maxLength: 512)).response
        }
        v2.get("services/testconnection") { _, _ in Self.json(200, ["result": "OK"]).response }
        v2.post("services/getIINdetails") { request, _ in try iin(try await Self.body(request)).response }
        v2.get("products") { request, _ in try products([], query: request).response }
        v2.get("products/:id") { _, context in try products([context.parameters.get("id") ?? ""]).response }
        v2.get("products/:id/networks") { _, context in try products([context.parameters.get("id") ?? "", "networks"]).response }
        // A known path asked with another method is 405, as the platform answers; any other path
        // under the merchant is 404 — both behind the gate, so an unsigned caller learns nothing.
        for (path, method) in Self.serverRoutes {
            for other in Self.methods where other != method {
                v2.on(RouterPath(stringLiteral: path), method: other) { _, _ -> Response in
                    throw WorldlineError(httpStatus: 405, errorCode: "21000010", id: "METHOD_NOT_ALLOWED",
                                         message: "\(other.rawValue) is not allowed here; use \(method.rawValue)")
                }
            }
        }
        for method in Self.methods {
            v2.on("**", method: method) { request, _ -> Response in
                let path = String((request.head.path ?? "/").prefix { $0 != "?" })
                throw WorldlineError.notFound("UNKNOWN_RESOURCE", "no resource \(shownValue(path, 100))")
            }
        }
        return routes
    }

    /// The calls on one payment (`payments/{id}…`): the platform's call with the merchant, the
    /// payment's id and the body.
    static let paymentCalls: [(String, HTTPRequest.Method, @Sendable (WorldlineFront, String, String, [UInt8]) throws -> WorldlineResult)] = [
        ("payments/:id", .get, { front, m, id, _ in try front.getPayment(merchantID: m, id: id) }),
        ("payments/:id/details", .get, { front, m, id, _ in try front.details(merchantID: m, id: id) }),
        ("payments/:id/captures", .get, { front, m, id, _ in try front.captures(merchantID: m, id: id) }),
        ("payments/:id/refunds", .get, { front, m, id, _ in try front.refunds(merchantID: m, id: id) }),
        ("payments/:id/capture", .post, { front, m, id, body in try front.capture(merchantID: m, id: id, body: body) }),
        ("payments/:id/cancel", .post, { front, m, id, body in try front.cancel(merchantID: m, id: id, body: body) }),
        ("payments/:id/refund", .post, { front, m, id, body in try front.refund(merchantID: m, id: id, body: body) }),
    ]

    /// The Server API's paths under `/v2/{merchantId}/` and the method each takes.
    static let serverRoutes: [(String, HTTPRequest.Method)] = [
        ("sessions", .post), ("payments", .post), ("payments/:id", .get), ("payments/:id/details", .get),
        ("payments/:id/captures", .get), ("payments/:id/refunds", .get), ("payments/:id/capture", .post),
        ("payments/:id/cancel", .post), ("payments/:id/refund", .post), ("services/testconnection", .get),
        ("services/getIINdetails", .post), ("products", .get), ("products/:id", .get), ("products/:id/networks", .get),
        ("tokens", .post), ("webhooks/validateCredentials", .post), ("webhooks/sendtest", .post), ("hostedcheckouts", .post),
        ("hostedcheckouts/:id", .get), ("hostedtokenizations", .post), ("hostedtokenizations/:id", .get),
    ]
    static let methods: [HTTPRequest.Method] = [.get, .post, .put, .delete, .patch]

    /// A request's body, as the gate read it (at most `maximumBody`).
    static func body(_ request: Request) async throws -> [UInt8] {
        do { return Array(try await request.body.collect(upTo: maximumBody).readableBytesView) } catch {
            throw tooLarge
        }
    }

    static let tooLarge = WorldlineError(httpStatus: 413, errorCode: "21000120", id: "REQUEST_TOO_LARGE", message: "the body is over \(maximumBody) bytes")

    /// Checks `Authorization: GCS v1HMAC:{keyId}:{signature}` against the key's secret, the
    /// `Date` against the clock, and that the key is this merchant's.
    func authenticate(_ request: Request, rawPath: String, merchantID: String) throws {
        guard let authorization = request.headers[.authorization] else {
            throw WorldlineError.unauthorised("the Authorization header is missing (GCS v1HMAC:{apiKeyId}:{signature})")
        }
        guard let (keyID, signature) = WorldlineAuth.parseHMAC(authorization) else {
            throw WorldlineError.unauthorised("the Authorization header must be GCS v1HMAC:{apiKeyId}:{signature}")
        }
        guard let date = request.headers[.date] else { throw WorldlineError.unauthorised("the Date header is missing") }
        guard let seconds = WorldlineAuth.parseDate(date) else { throw WorldlineError.unauthorised("the Date header is not an RFC 1123 date") }
        // Wall time: the signature's freshness has nothing to do with a scenario's manual clock.
        let skew = abs(Int64(Date().timeIntervalSince1970) - seconds)
        guard skew <= WorldlineAuth.maximumSkewSeconds else {
            throw WorldlineError.unauthorised("the Date header is \(skew) s away from the platform's clock (at most \(WorldlineAuth.maximumSkewSeconds) s)")
        }
        guard let (key, secret) = try bench.ledger.worldlineAPISecret(keyID: keyID) else {
            throw WorldlineError.unauthorised("unknown API key id")
        }
        guard key.revokedAt == nil else { throw WorldlineError.unauthorised("the API key was revoked") }
        let gcs = request.headers.filter { $0.name.canonicalName.hasPrefix("x-gcs-") }.map { (name: $0.name.canonicalName, value: $0.value) }
        let text = WorldlineAuth.stringToSign(method: request.method.rawValue, contentType: request.headers[.contentType], date: date,
                                              gcsHeaders: gcs, pathAndQuery: rawPath)
        guard WorldlineAuth.matches(WorldlineAuth.signature(text, secret: secret), signature) else {
            throw WorldlineError.unauthorised("the signature does not verify with this API key")
        }
        guard key.merchantID == merchantID else {
            throw WorldlineError.forbidden("the API key is not one of merchant \(shownValue(merchantID, 40))'s")
        }
    }

    func checkContentType(_ request: Request, _ body: [UInt8]) throws {
        guard !body.isEmpty else { return }
        let type = (request.headers[.contentType] ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard type == "application/json" else {
            throw WorldlineError(httpStatus: 415, errorCode: "21000120", id: "UNSUPPORTED_MEDIA_TYPE", propertyName: "Content-Type",
                                 message: "the body must be application/json, got \(shownValue((request.headers[.contentType] ?? "none"), 60))")
        }
    }

    /// `X-GCS-Idempotence-Key`: a repeated request gets the first answer again with the time it
    /// was first made; one still running gets 409.
    func idempotent(method: HTTPRequest.Method, rawPath: String, key: String, merchantID: String, body: [UInt8],
                    _ run: () async throws -> Replied) async throws -> Replied {
        guard key.utf8.count <= 128 else { throw WorldlineError.invalid("X-GCS-Idempotence-Key", "must be at most 128 characters") }
        let hash = Data(SHA256.hash(data: Array((method.rawValue + " " + rawPath + "\n").utf8) + body))
            .map { String(format: "%02x", $0) }.joined()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        switch try bench.ledger.claimWorldlineIdempotence(merchantID: merchantID, key: key, requestHash: hash, at: now) {
        case .new:
            let replied: Replied
            do { replied = try await run() } catch let error as WorldlineError {
                // An error answer is the answer to this key too, unless the platform failed.
                let r = Self.failure(error)
                try? bench.ledger.finishWorldlineIdempotence(merchantID: merchantID, key: key, status: r.status >= 500 ? nil : r.status,
                                                             body: r.status >= 500 ? nil : r.text)
                return r
            } catch {
                try? bench.ledger.finishWorldlineIdempotence(merchantID: merchantID, key: key, status: nil, body: nil)
                throw error
            }
            // A platform failure is not remembered: a retry with the key may run the request.
            try bench.ledger.finishWorldlineIdempotence(merchantID: merchantID, key: key, status: replied.status >= 500 ? nil : replied.status,
                                                        body: replied.status >= 500 ? nil : replied.text)
            return replied
        case .done(let at, let status, let body):
            return Replied(status: status, text: body, timestamp: at)
        case .inProgress(let at):
            let e = WorldlineError.idempotenceInProgress(key)
            return Replied(status: e.httpStatus, text: WorldlineRender.errorText(e, errorID: UUID().uuidString.lowercased()), timestamp: at)
        case .differentRequest(let at):
            let e = WorldlineError(httpStatus: 409, errorCode: "30001003", id: "IDEMPOTENCE_KEY_REUSED",
                                   message: "idempotence key \(shownValue(key, 64)) was used for a different request")
            return Replied(status: e.httpStatus, text: WorldlineRender.errorText(e, errorID: UUID().uuidString.lowercased()), timestamp: at)
        }
    }

    /// `POST …/webhooks/sendtest`: a test webhook (`type: webhook.test`), signed with the
    /// merchant's webhook key as every webhook is, POSTed to `url` now; 204 when the endpoint
    /// took it. The URL must be on the merchant's webhook host or `callbacks.allowed_hosts`:
    /// whoever holds an API key must not make the platform call anywhere it likes.
    func sendTestWebhook(merchantID: String, url: String) async throws -> Replied {
        guard let (_, host, _) = CallbackTarget.parse(url) else { throw WorldlineError.invalid("url", "must be an absolute http(s) URL") }
        let merchant = try bench.ledger.worldlineMerchant(merchantID)
        let webhookHost = merchant?.webhookURL.flatMap(CallbackTarget.parse)?.host
        guard host == webhookHost || CallbackTarget.isAllowed(host: host, bench.configuration.callbacks.allowedHosts) else {
            throw WorldlineError.invalid("url", "host \(shownValue(host, 60)) is neither the merchant's webhook host nor in callbacks.allowed_hosts")
        }
        guard try bench.ledger.worldlineWebhookKey(merchantID: merchantID) != nil else {
            throw WorldlineError.invalid("url", "the merchant has no webhook key to sign with: set its webhook first (cardbench worldline webhook set)")
        }
        let body = WorldlineRender.webhookText(type: "webhook.test", id: UUID().uuidString.lowercased(),
                                               created: Self.isoNow(), merchantID: merchantID, payment: nil, refund: nil)
        let entry = OutboxEntry(id: 0, transactionID: 0, kind: .webhook, target: url, payload: body, status: .pending, attempts: 0,
                                nextAttemptAt: 0, lastError: nil, createdAt: 0, deliveredAt: nil)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: CallbackDelivery.clientConfiguration)
        let outcome = await CallbackDelivery(bench: bench, logger: Logger(label: "cardbench.worldline")).deliverWebhook(entry, bench.configuration.callbacks, client: client)
        try? await client.shutdown()
        switch outcome {
        case .success: return Replied(status: 204, text: "")
        case .failure(let error): throw WorldlineError.invalid("url", "the test webhook was not taken: \(error.description)")
        }
    }

    static func isoNow() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }

    // MARK: Client API

    func authenticateClient(_ request: Request, customerID: String) throws -> WorldlineSession {
        guard let authorization = request.headers[.authorization], let sessionID = WorldlineAuth.parseClient(authorization) else {
            throw WorldlineError.unauthorised("the Authorization header must be GCS v1Client:{clientSessionId}")
        }
        return try front.clientSession(sessionID, customerID: customerID)
    }

    /// The Client API, under `/client/v1/{customerId}/` and `/v1/{customerId}/`: a live client
    /// session of the path's customer (`GCS v1Client:{clientSessionId}`).
    func clientAPI() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        let gated = routes.group().add(middleware: WorldlineClientGate(server: self))
        gated.get("crypto/publickey") { _, _ in
            let (keyID, der) = try bench.worldlineKeys.currentPublicKey()
            return Self.json(200, ["keyId": keyID, "publicKey": Data(der).base64EncodedString()]).response
        }
        gated.get("products") { request, context in try products([], query: request, accountsOnFile: accounts(request, context)).response }
        gated.get("products/:id") { request, context in
            try products([context.parameters.get("id") ?? ""], accountsOnFile: accounts(request, context)).response
        }
        gated.get("products/:id/networks") { _, context in try products([context.parameters.get("id") ?? "", "networks"]).response }
        gated.post("services/getIINdetails") { request, _ in try iin(try await Self.body(request)).response }
        // Any other path under the customer: 404, behind the session check.
        for method in Self.methods {
            gated.on("**", method: method) { request, _ -> Response in
                let path = String((request.head.path ?? "/").prefix { $0 != "?" })
                throw WorldlineError.notFound("UNKNOWN_RESOURCE", "no client resource \(shownValue(path, 100))")
            }
        }
        return routes
    }

    /// The accounts on file of a Client API request's session (the gate checked the session).
    func accounts(_ request: Request, _ context: PlatformContext) throws -> [WorldlineToken] {
        guard let sessionID = request.headers[.authorization].flatMap(WorldlineAuth.parseClient) else { return [] }
        let session = try authenticateClient(request, customerID: try context.parameters.require("customerId"))
        return try front.accountsOnFile(sessionID: sessionID, merchantID: session.merchantID)
    }

    func products(_ s: [String], query request: Request? = nil, accountsOnFile: [WorldlineToken] = []) throws -> Replied {
        if let request {
            let q = request.uri.queryParameters
            try WorldlineProducts.checkProductsQuery(countryCode: q.get("countryCode"), currencyCode: q.get("currencyCode"))
        }
        let assets = publicURL() + "/assets/"
        if s.isEmpty {
            return Self.json(200, WorldlineProducts.adding(accountsOnFile: accountsOnFile, to: WorldlineProducts.products(assetURL: assets), assetURL: assets))
        }
        guard let id = Int(s[0]), let product = WorldlineProducts.product(id, assetURL: assets) else {
            throw WorldlineError.notFound("UNKNOWN_PRODUCT_ID", "no payment product \(shownValue(s[0], 20))")
        }
        if s.count == 1 { return Self.json(200, WorldlineProducts.adding(accountsOnFile: accountsOnFile, to: product, assetURL: assets)) }
        if s.count == 2, s[1] == "networks", let networks = WorldlineProducts.networks(id) { return Self.json(200, networks) }
        throw WorldlineError.notFound("UNKNOWN_RESOURCE", "no such product resource")
    }

    func iin(_ body: [UInt8]) throws -> Replied {
        // A card's first digits, sent by the SDKs as the customer types: a whole number is not
        // kept nor echoed (the answer names the IIN only).
        let json = try WorldlineJSON.parse(body, cardNumberAt: ["bin"])
        let bin = try json.requiredString("bin", maxLength: 19)
        guard let details = try WorldlineProducts.iinDetails(bin) else {
            throw WorldlineError(httpStatus: 404, errorCode: "300450", id: "CARD_NUMBER_NOT_RECOGNIZED", propertyName: "bin",
                                 message: "no card brand this platform offers issues IIN \(bin.prefix(6))")
        }
        return Self.json(200, details)
    }

    // MARK: 3-D Secure

    /// `GET /threeds/{id}/{token}`: the challenge page (a pass and a fail button); `POST` with
    /// `result=pass|fail` (a form, as the page's buttons send) answers it and sends the customer
    /// back to the merchant's return URL.
    func challengePages() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        routes.get("threeds/:id/:token") { _, context in
            let p = try front.challengePayment(paymentID: context.parameters.get("id") ?? "", token: context.parameters.get("token") ?? "")
            return Self.page(Self.challengePage(p))
        }
        routes.post("threeds/:id/:token") { request, context in
            let id = context.parameters.get("id") ?? ""
            _ = try front.challengePayment(paymentID: id, token: context.parameters.get("token") ?? "")
            if let refused = PagePost.refusal(request) { throw WorldlineError.forbidden(refused) }
            let body = try await Self.body(request)
            let form = RenderedCallback.fields(of: "x:?" + String(decoding: body, as: UTF8.self))
            guard let result = form.first(where: { $0.name == "result" })?.value, result == "pass" || result == "fail" else {
                throw WorldlineError.invalid("result", "must be pass or fail")
            }
            let (_, back) = try await offPool { try front.answerChallenge(paymentID: id, passed: result == "pass") }
            return Response(status: .seeOther, headers: [.location: back, .contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: "See \(back)\n")))
        }
        return routes
    }

    static func challengePage(_ p: WorldlinePayment) -> String {
        func escape(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
                .replacingOccurrences(of: "\"", with: "&quot;")
        }
        let amount = String(format: "%.2f", Double(p.amount) / 100)
        let state = p.status == .redirected
            ? """
              <form method="post"><button name="result" value="pass" id="pass">Pass the challenge</button>
              <button name="result" value="fail" id="fail">Fail the challenge</button></form>
              """
            : "<p id=\"answered\">This challenge was answered: the payment is \(escape(p.status.rawValue)).</p>"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>3-D Secure challenge — cardbench</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"></head>
            <body><h1>3-D Secure challenge</h1>
            <p>Payment <code>\(escape(p.id))</code> of <strong>\(amount) \(escape(p.currency))</strong> with card <code>\(escape(p.maskedCardNumber ?? ""))</code>.</p>
            \(state)
            <p><small>cardbench stands in for the issuer's access control server: no code is asked for.</small></p>
            </body></html>
            """
    }

    // MARK: Replies


    /// Runs a platform call off the event loops and answers its typed result with the platform's
    /// status and body: the one place the platform's results become HTTP.
    func reply(_ body: @escaping @Sendable () throws -> WorldlineResult) async throws -> Replied {
        Self.answer(try await offPool(body))
    }

    /// A result as the platform answers it: 201 for what a POST created, 402 for a rejected
    /// payment (the SDKs' `DeclinedPaymentException`), 200 otherwise; its body in the platform's shape.
    static func answer(_ result: WorldlineResult) -> Replied {
        switch result {
        case .sessionCreated(let id, let customer, let api, let assets, let invalid):
            Replied(status: 201, text: WorldlineRender.sessionText(sessionID: id, customerID: customer, clientAPIURL: api, assetURL: assets,
                                                                   invalidTokens: invalid))
        case .paymentCreated(let p, let redirectURL):
            Replied(status: p.status == .rejected ? 402 : 201,
                    text: WorldlineRender.createdText(p, redirectURL: redirectURL, errorID: UUID().uuidString.lowercased()))
        case .payment(let p): Replied(status: 200, text: WorldlineRender.paymentOnlyText(p))
        case .details(let p): Replied(status: 200, text: WorldlineRender.detailsText(p))
        case .captures(let p): Replied(status: 200, text: WorldlineRender.capturesText(p))
        case .refunds(let p): Replied(status: 200, text: WorldlineRender.refundsText(p))
        case .captured(let o, let p): Replied(status: 200, text: WorldlineRender.captureText(o, p))
        case .cancelled(let p): Replied(status: 200, text: WorldlineRender.paymentText(p))
        case .refunded(let o, let p): Replied(status: 201, text: WorldlineRender.refundText(o, p))
        // A card stored again answers 200 with its existing token; a new one is created, 201.
        case .tokenCreated(let t, let status): Replied(status: status == .created ? 201 : 200, text: WorldlineRender.createdTokenText(t, status: status))
        case .token(let t): Replied(status: 200, text: WorldlineRender.tokenText(t))
        case .tokenDeleted: Replied(status: 204, text: "")
        case .hostedCheckoutCreated(let c, let url, let invalid):
            Replied(status: 201, text: WorldlineRender.hostedCheckoutCreatedText(c, redirectURL: url, invalidTokens: invalid))
        case .hostedCheckout(let c, let p): Replied(status: 200, text: WorldlineRender.hostedCheckoutText(c, payment: p))
        case .hostedTokenizationCreated(let t, let url, let invalid):
            Replied(status: 201, text: WorldlineRender.hostedTokenizationCreatedText(t, url: url, invalidTokens: invalid))
        case .hostedTokenization(let t, let token): Replied(status: 200, text: WorldlineRender.hostedTokenizationText(t, token: token))
        }
    }

    static func json(_ status: Int, _ object: Any) -> Replied { Replied(status: status, text: WorldlineRender.text(object)) }

    /// An error in the platform's shape, with its status.
    static func failure(_ e: WorldlineError) -> Replied {
        Replied(status: e.httpStatus, text: WorldlineRender.errorText(e, errorID: UUID().uuidString.lowercased()))
    }

    static func raw(_ status: Int, _ text: String) -> Response {
        Response(status: HTTPResponse.Status(code: status), headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func page(_ html: String) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: "default-src 'none'; form-action 'self' http: https:"],
                 body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func errorResponse(_ e: WorldlineError) -> Response {
        failure(e).response
    }
}

/// The context of a platform request: the route's parameters, and the merchant a request acts
/// for when the control API is the caller (trusted as an admin is: no signature).
struct PlatformContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// Set for a request through the control API: the merchant it acts for, unsigned.
    var trustedMerchant: String? = nil

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// A request the control API makes for `merchant`, within its own request's context.
    init(trustedMerchant merchant: String, from context: some RequestContext) {
        coreContext = .init(source: context)
        trustedMerchant = merchant
    }

    /// The path's merchant.
    var merchant: String {
        get throws { try parameters.require("merchantId") }
    }

    /// A response's body, as text (what the control API returns of a platform's answer).
    static func text(of response: Response) async throws -> String {
        final class Collected: @unchecked Sendable {
            // Unchecked: written by one writer, read after it finished.
            var buffer = ByteBuffer()
        }
        struct Writer: ResponseBodyWriter {
            let collected: Collected
            mutating func write(_ buffer: ByteBuffer) async throws {
                var buffer = buffer
                collected.buffer.writeBuffer(&buffer)
            }
            consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
        }
        let collected = Collected()
        try await response.body.write(Writer(collected: collected))
        return String(buffer: collected.buffer)
    }
}

/// Every answer of the Worldline listener in the platform's shape: a `WorldlineError` a route
/// threw, a path no route has (404 `UNKNOWN_RESOURCE`), anything else (500).
struct WorldlineErrors: RouterMiddleware {
    typealias Context = PlatformContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as WorldlineError {
            return WorldlineServer.failure(error).response
        } catch let error as HTTPError where error.status == .notFound {
            let path = String((request.head.path ?? "/").prefix { $0 != "?" })
            return WorldlineServer.failure(.notFound("UNKNOWN_RESOURCE", "no resource \(request.method.rawValue) \(shownValue(path, 100)) on this platform")).response
        } catch {
            return WorldlineServer.failure(.internalError("\(error)")).response
        }
    }
}

/// The Server API's gate: the body read (at most `maximumBody`), the v1HMAC signature by one of
/// the path's merchant's keys (not for the control API's trusted requests), a JSON body, and
/// `X-GCS-Idempotence-Key` on a POST.
struct WorldlineServerAPIGate: RouterMiddleware {
    typealias Context = PlatformContext
    let server: WorldlineServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let merchantID = try context.merchant
        var request = request
        // A body is read for a POST or PUT only: any other method's is ignored, as before.
        let body = request.method == .post || request.method == .put ? try await WorldlineServer.body(request) : []
        request.body = .init(buffer: ByteBuffer(bytes: body))
        if context.trustedMerchant == nil {
            try server.authenticate(request, rawPath: request.head.path ?? "/", merchantID: merchantID)
        }
        try server.checkContentType(request, body)
        guard request.method == .post, let key = request.headers[WorldlineServer.idempotenceKey], !key.isEmpty else {
            return try await next(request, context)
        }
        // The key is stored as it is sent: one holding a card number is refused, as any request text is.
        if PAN.looksLikeItHoldsAPAN(key) { throw WorldlineError.invalid(WorldlineServer.idempotenceKey.canonicalName, TextRules.panRule) }
        let replied = try await server.idempotent(method: request.method, rawPath: request.head.path ?? "", key: key, merchantID: merchantID,
                                                  body: body) {
            let response = try await next(request, context)
            return WorldlineServer.Replied(status: Int(response.status.code), text: try await PlatformContext.text(of: response))
        }
        return replied.response
    }
}

/// The Client API's gate: a live client session of the path's customer.
struct WorldlineClientGate: RouterMiddleware {
    typealias Context = PlatformContext
    let server: WorldlineServer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        _ = try server.authenticateClient(request, customerID: try context.parameters.require("customerId"))
        return try await next(request, context)
    }
}

