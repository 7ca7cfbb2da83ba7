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

    func responder() -> CallbackResponder<BasicRequestContext> {
        CallbackResponder { request, context in await self.respond(request, context) }
    }

    func respond(_ request: Request, _ context: BasicRequestContext) async -> Response {
        let rawPath = request.head.path ?? "/"
        var segments = String(rawPath.prefix { $0 != "?" }).split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        while segments.count > 1, segments.last == "" { segments.removeLast() }
        var body: [UInt8] = []
        if request.method == .post {
            guard let buffer = try? await request.body.collect(upTo: 1 << 20) else {
                return Self.reply(CitconReply(failure: .badRequest("body", "is over 1 MiB")))
            }
            body = Array(buffer.readableBytesView)
        }
        let authorization = request.headers[.authorization]
        if segments.first == "citcon", segments.count == 3, ["wallet", "3ds"].contains(segments[1]) {
            if request.method == .post, let refused = PagePost.refusal(request) {
                return Self.reply(CitconReply(failure: CitconError(httpStatus: 403, code: "4030", message: "forbidden: \(refused)")))
            }
            return await page(request.method, kind: segments[1], id: segments[2], body: body)
        }
        return Self.reply(await perform(method: request.method, segments: segments, authorization: authorization, contentType: request.headers[.contentType],
                                        body: body))
    }

    /// A request of the API or the SDK endpoints, from its path's segments.
    /// `asMerchant` stands for an access token: the control API's way in (scenarios, scripts).
    func perform(method: HTTPRequest.Method, segments: [String], authorization: String?, contentType: String?, body: [UInt8],
                 asMerchant: String? = nil) async -> CitconReply {
        let base = publicURL()
        let pageURL: @Sendable (String, String) -> String = { kind, id in "\(base)/citcon/\(kind)/\(id)" }
        func merchant(needsServer: Bool = false) throws(CitconError) -> String {
            if let asMerchant { return asMerchant }
            return try front.merchant(authorization: authorization, needsServer: needsServer)
        }
        do {
            if method == .post, !body.isEmpty {
                let type = (contentType ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                guard type == "application/json" else {
                    throw CitconError(httpStatus: 415, code: "4102", message: "invalid header: Content-Type must be application/json", debug: "Content-Type")
                }
            }
            let path = segments.joined(separator: "/")
            switch (method, path) {
            case (.post, "v1/access-tokens"):
                return CitconReply(try await offload { try front.accessToken(authorization: authorization, body: body) }, pageURL: pageURL)
            case (.post, "v1/charges"):
                let m = try merchant()
                return CitconReply(try await offload { try front.createCharge(merchantID: m, body: body) }, pageURL: pageURL)
            case (.post, _) where segments.count == 3 && segments[0] == "v1" && segments[1] == "charges":
                let m = try merchant()
                // Early SDKs sent the token in literal braces (`charges/{…}`).
                let token = segments[2].removingPercentEncoding?.trimmingCharacters(in: CharacterSet(charactersIn: "{}")) ?? segments[2]
                return CitconReply(try await offload { try front.confirm(merchantID: m, chargeToken: token, body: body) }, pageURL: pageURL)
            case (.get, _) where segments.count == 3 && segments[0] == "v1" && segments[1] == "transactions":
                let m = try merchant()
                return CitconReply(try front.inquiry(merchantID: m, id: segments[2]), pageURL: pageURL)
            case (.post, "v1/captures"):
                let m = try merchant(needsServer: true)
                return CitconReply(try await offload { try front.capture(merchantID: m, body: body) }, pageURL: pageURL)
            case (.post, "v1/cancels"):
                let m = try merchant(needsServer: true)
                return CitconReply(try await offload { try front.cancel(merchantID: m, body: body) }, pageURL: pageURL)
            case (.post, "v1/refunds"):
                let m = try merchant(needsServer: true)
                return CitconReply(try await offload { try front.refund(merchantID: m, body: body) }, pageURL: pageURL)
            case (.post, "citcon/sdk/requestOrder"):
                let m = try merchant()
                return CitconReply(try await offload { try front.sdkRequestOrder(merchantID: m, body: body) }, pageURL: pageURL)
            case (.post, "citcon/sdk/inquireOrder"):
                let m = try merchant()
                return CitconReply(try front.sdkInquireOrder(merchantID: m, body: body), pageURL: pageURL)
            default:
                throw CitconError.notFound("not found: no route \(method.rawValue) /\(shownValue(path, 100))")
            }
        } catch let error as CitconError {
            return CitconReply(failure: error)
        } catch {
            return CitconReply(failure: .internalError("\(error)"))
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

    /// A result: 200 with the platform's success envelope.
    init(_ result: CitconResult, pageURL: (String, String) -> String) {
        status = 200
        body = CitconRender.body(result, pageURL: pageURL)
    }

    /// A refusal: its status with the platform's fail envelope.
    init(failure e: CitconError) {
        status = e.httpStatus
        body = CitconRender.failureText(e)
    }
}
