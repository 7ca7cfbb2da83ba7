import Foundation
import Fronts
import HTTPTypes
import Hummingbird
import Ledger
import NIOCore
import Workflows

/// The Citcon UPI platform's listener (docs/citcon.md): the API under `/v1` (access tokens,
/// charges, confirm, inquiry, captures, cancels, refunds), the wallet and 3-D Secure pages under
/// `/citcon/`, and the SDK's results (`/citcon/sdk/requestOrder`, `/citcon/sdk/inquireOrder`).
struct CitconServer: Sendable {
    let bench: Bench
    let publicURL: @Sendable () -> String

    var front: CitconFront { bench.citcon }

    /// The listener's routes (the API, the SDK's results, the pages), in the platform's error shape.
    func responder() -> RouterResponder<PlatformContext> { router().buildResponder() }

    func router() -> Router<PlatformContext> {
        let router = Router(context: PlatformContext.self)
        router.add(middleware: CitconErrors())
        router.addRoutes(api())
        router.addRoutes(pages())
        return router
    }

    /// A request of the API or the SDK endpoints on behalf of `merchantID`, without an access
    /// token: the control API's way in (scenarios, scripts). It goes through the listener's own routes.
    func perform(method: HTTPRequest.Method, path: String, body: [UInt8], merchantID: String, from context: some RequestContext) async -> CitconReply {
        var head = HTTPRequest(method: method, scheme: "http", authority: "cardbench", path: path)
        head.headerFields[.contentType] = "application/json"
        let request = Request(head: head, body: .init(buffer: ByteBuffer(bytes: body)))
        do {
            let response = try await responder().respond(to: request, context: PlatformContext(trustedMerchant: merchantID, from: context))
            return CitconReply(status: Int(response.status.code), body: try await PlatformContext.text(of: response))
        } catch {
            return CitconReply(failure: .internalError("\(error)"))
        }
    }

    /// The merchant a request acts for: the control API's, or the access token's (a server
    /// token for captures, cancels and refunds).
    func merchant(_ request: Request, _ context: PlatformContext, needsServer: Bool = false) throws(CitconError) -> String {
        if let trusted = context.trustedMerchant { return trusted }
        return try front.merchant(authorization: request.headers[.authorization], needsServer: needsServer)
    }

    /// The page links of this listener.
    var pageURL: @Sendable (String, String) -> String {
        let base = publicURL()
        return { kind, id in "\(base)/citcon/\(kind)/\(id)" }
    }

    /// The API under `/v1` and the SDK's results under `/citcon/sdk/`, behind the JSON gate.
    func api() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        let api = routes.group().add(middleware: CitconJSONGate())
        api.post("v1/access-tokens") { request, _ in
            let body = try await Self.body(request), authorization = request.headers[.authorization]
            return Self.reply(CitconReply(try await offload { try front.accessToken(authorization: authorization, body: body) }, pageURL: pageURL))
        }
        api.post("v1/charges") { request, context in
            let m = try merchant(request, context), body = try await Self.body(request)
            return Self.reply(CitconReply(try await offload { try front.createCharge(merchantID: m, body: body) }, pageURL: pageURL))
        }
        api.post("v1/charges/:token") { request, context in
            let m = try merchant(request, context), body = try await Self.body(request)
            // Early SDKs sent the token in literal braces (`charges/{…}`).
            let raw = context.parameters.get("token") ?? ""
            let token = raw.removingPercentEncoding?.trimmingCharacters(in: CharacterSet(charactersIn: "{}")) ?? raw
            return Self.reply(CitconReply(try await offload { try front.confirm(merchantID: m, chargeToken: token, body: body) }, pageURL: pageURL))
        }
        api.get("v1/transactions/:id") { request, context in
            let m = try merchant(request, context)
            return Self.reply(CitconReply(try front.inquiry(merchantID: m, id: context.parameters.get("id") ?? ""), pageURL: pageURL))
        }
        api.post("v1/captures") { request, context in
            let m = try merchant(request, context, needsServer: true), body = try await Self.body(request)
            return Self.reply(CitconReply(try await offload { try front.capture(merchantID: m, body: body) }, pageURL: pageURL))
        }
        api.post("v1/cancels") { request, context in
            let m = try merchant(request, context, needsServer: true), body = try await Self.body(request)
            return Self.reply(CitconReply(try await offload { try front.cancel(merchantID: m, body: body) }, pageURL: pageURL))
        }
        api.post("v1/refunds") { request, context in
            let m = try merchant(request, context, needsServer: true), body = try await Self.body(request)
            return Self.reply(CitconReply(try await offload { try front.refund(merchantID: m, body: body) }, pageURL: pageURL))
        }
        api.post("citcon/sdk/requestOrder") { request, context in
            let m = try merchant(request, context), body = try await Self.body(request)
            return Self.reply(CitconReply(try await offload { try front.sdkRequestOrder(merchantID: m, body: body) }, pageURL: pageURL))
        }
        api.post("citcon/sdk/inquireOrder") { request, context in
            let m = try merchant(request, context), body = try await Self.body(request)
            return Self.reply(CitconReply(try front.sdkInquireOrder(merchantID: m, body: body), pageURL: pageURL))
        }
        return routes
    }

    /// The wallet and 3-D Secure pages: whoever holds a charge's id; their posts only from the page itself.
    func pages() -> RouteCollection<PlatformContext> {
        let routes = RouteCollection(context: PlatformContext.self)
        for kind in ["wallet", "3ds"] {
            routes.get("citcon/\(kind)/:id") { request, context in
                await page(request.method, kind: kind, id: context.parameters.get("id") ?? "", body: [])
            }
            routes.post("citcon/\(kind)/:id") { request, context in
                if let refused = PagePost.refusal(request) {
                    throw CitconError(httpStatus: 403, code: "4030", message: "forbidden: \(refused)")
                }
                return await page(request.method, kind: kind, id: context.parameters.get("id") ?? "", body: try await Self.body(request))
            }
        }
        return routes
    }

    /// A request's body (the JSON gate read it; a page's form is read here), at most 1 MiB.
    static func body(_ request: Request) async throws -> [UInt8] {
        do { return Array(try await request.body.collect(upTo: 1 << 20).readableBytesView) } catch {
            throw CitconError.badRequest("body", "is over 1 MiB")
        }
    }

    /// The wallet page (approve, decline, cancel, let expire) and the 3-D Secure page (pass,
    /// fail): plain HTML forms; a POST answers and sends the payer back with a 303.
    func page(_ method: HTTPRequest.Method, kind: String, id: String, body: [UInt8]) async -> Response {
        do {
            guard let charge = try bench.ledger.citconCharge(id: id) else { throw CitconError.notFound("not found: no charge \(shownValue(id, 40))") }
            if method == .get { return Self.html(Self.pageHTML(charge, kind: kind)) }
            let form = RenderedCallback.fields(of: "x:?" + String(decoding: body, as: UTF8.self))
            let answer: (charge: CitconCharge, redirect: String?)
            if kind == "3ds" {
                guard let result = form.first(where: { $0.name == "result" })?.value, result == "pass" || result == "fail" else {
                    throw CitconError.badRequest("result", "must be pass or fail")
                }
                answer = try await offload { try front.answerChallenge(chargeID: id, passed: result == "pass") }
            } else {
                let action = form.first(where: { $0.name == "action" })?.value ?? ""
                answer = try await offload { try front.payerAction(chargeID: id, action: action) }
            }
            guard let back = answer.redirect else { return Self.html(Self.pageHTML(answer.charge, kind: kind)) }
            return Response(status: .seeOther, headers: [.location: back, .contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: "See \(back)\n")))
        } catch let error as CitconError {
            return Self.reply(CitconReply(failure: error))
        } catch {
            return Self.reply(CitconReply(failure: .internalError("\(error)")))
        }
    }

    static func pageHTML(_ c: CitconCharge, kind: String) -> String {
        func escape(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
                .replacingOccurrences(of: "\"", with: "&quot;")
        }
        let open = kind == "3ds" ? c.challengePending : c.status.isOpen
        let buttons = kind == "3ds"
            ? #"<button name="result" value="pass" id="pass">Pass the challenge</button> <button name="result" value="fail" id="fail">Fail the challenge</button>"#
            : #"<button name="action" value="approve" id="approve">Approve</button> <button name="action" value="decline" id="decline">Decline</button> <button name="action" value="cancel" id="cancel">Cancel</button> <button name="action" value="expire" id="expire">Let it expire</button>"#
        let title = kind == "3ds" ? "3-D Secure challenge" : "\(escape(c.method)) wallet"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(title) — cardbench</title>
            <meta name="viewport" content="width=device-width, initial-scale=1"></head>
            <body><h1>\(title)</h1>
            <p>Charge <code>\(escape(c.id))</code> (<code>\(escape(c.reference))</code>) of <strong>\(c.amount) \(escape(c.currency))</strong> (minor units).</p>
            \(open ? "<form method=\"post\">\(buttons)</form>" : "<p id=\"answered\">Answered: the charge is \(escape(c.status.rawValue)).</p>")
            <p><small>cardbench stands in for the payer's \(kind == "3ds" ? "issuer" : "wallet app"): nothing is asked but the answer.</small></p>
            </body></html>
            """
    }

    func offload<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    static func reply(_ r: CitconReply) -> Response {
        Response(status: HTTPResponse.Status(code: r.status), headers: [.contentType: "application/json"],
                 body: .init(byteBuffer: ByteBuffer(string: r.body)))
    }

    static func html(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .contentSecurityPolicy: "default-src 'none'; form-action 'self' http: https:"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// A Citcon answer as it goes out: the status and the JSON text. The platform's typed results
/// become this here, in the daemon, and nowhere else.
struct CitconReply: Sendable {
    let status: Int
    let body: String

    init(status: Int, body: String) {
        self.status = status
        self.body = body
    }

    /// A result: 200 with the platform's success envelope.
    init(_ result: CitconResult, pageURL: (String, String) -> String) {
        status = 200
        body = switch result {
        case .accessToken(let token, let type, let expiry, let permission):
            CitconRender.accessTokenText(token: token, type: type, expiry: expiry, permission: permission)
        case .charge(let c, let client): CitconRender.chargeText(c, client: client, pageURL: pageURL)
        case .inquiry(let c): CitconRender.inquiryReplyText(c)
        case .operation(let o, let c): CitconRender.operationText(o, c)
        case .sdkResult(let c): CitconRender.sdkResultText(c)
        }
    }

    /// A refusal: its status with the platform's fail envelope.
    init(failure e: CitconError) {
        status = e.httpStatus
        body = CitconRender.failureText(e)
    }
}

/// Every answer of the Citcon listener in the platform's shape: a `CitconError` a route threw, a
/// path no route has (404 4103), anything else (500).
struct CitconErrors: RouterMiddleware {
    typealias Context = PlatformContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as CitconError {
            return CitconServer.reply(CitconReply(failure: error))
        } catch let error as HTTPError where error.status == .notFound {
            let path = String((request.head.path ?? "/").prefix { $0 != "?" })
            return CitconServer.reply(CitconReply(failure: .notFound("not found: no route \(request.method.rawValue) \(shownValue(path, 100))")))
        } catch {
            return CitconServer.reply(CitconReply(failure: .internalError("\(error)")))
        }
    }
}

/// The API's gate: a body of at most 1 MiB, and a POST's body is JSON.
struct CitconJSONGate: RouterMiddleware {
    typealias Context = PlatformContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        let body = try await CitconServer.body(request)
        request.body = .init(buffer: ByteBuffer(bytes: body))
        if request.method == .post, !body.isEmpty {
            let type = (request.headers[.contentType] ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard type == "application/json" else {
                throw CitconError(httpStatus: 415, code: "4102", message: "invalid header: Content-Type must be application/json", debug: "Content-Type")
            }
        }
        return try await next(request, context)
    }
}
