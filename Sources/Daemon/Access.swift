import Crypto
import Foundation
import Hummingbird
import HummingbirdAuth
import HTTPTypes

/// Who a request came from, as the listener that took it saw it.
public enum Caller: Sendable, Equatable {
    /// The control socket: its group is the permission.
    case socket
    /// The TCP listener, with the API token; `admin` when `http.admin` lets it use the admin routes.
    case token(admin: Bool)

    /// Whether this caller may use the admin routes (who gets credentials).
    public var mayAdminister: Bool {
        switch self {
        case .socket: true
        case .token(let admin): admin
        }
    }
}

/// The API's request context: Hummingbird's, with the caller the access check found.
public typealias APIContext = BasicAuthRequestContext<Caller>

/// What one listener lets in (docs/security.md).
///
/// Every listener refuses what a web page in the tester's browser could send: a request with an
/// `Origin` of another site (or any `Origin`, on the socket), and a body that is not
/// `application/json` (a form or `text/plain` POST needs no CORS preflight, so a page could send
/// one). The TCP listener also answers only to the host names it is reached by (a DNS-rebinding
/// page names its own), wants the API token as `Authorization: Bearer`, and keeps the admin
/// routes (Billpocket users and device tokens) to the socket unless told otherwise.
public struct ListenerPolicy: Sendable {
    public enum Kind: Sendable, Equatable { case socket, tcp }

    public let kind: Kind
    /// SHA-256 of the API token (TCP): the token itself is not kept.
    let tokenHash: [UInt8]?
    /// Host names (lower case, without port; IPv6 without brackets) the TCP listener answers to.
    let hostNames: Set<String>
    /// Whether the admin routes answer on this listener.
    let admin: Bool

    /// The control socket's policy.
    public static let socket = ListenerPolicy(kind: .socket, tokenHash: nil, hostNames: [], admin: true)

    /// A TCP listener's: `token` is required; `hostNames` are added to the loopback names.
    public static func tcp(token: String, hostNames: [String] = [], admin: Bool = false) -> ListenerPolicy {
        let names = Set(["127.0.0.1", "localhost", "::1"] + hostNames.map { Self.bare($0.lowercased()) })
        return ListenerPolicy(kind: .tcp, tokenHash: Array(SHA256.hash(data: Array(token.utf8))), hostNames: names, admin: admin)
    }

    /// Paths anyone reaching the TCP listener may GET without the token: a voucher's UUID is its
    /// capability, and the Billpocket callback hands its URL to a browser; the console's files
    /// hold no data (the page asks for the token before it fetches any).
    static let tokenFreePrefixes = ["/v1/vouchers/", ConsoleRoutes.prefix]
    static let tokenFreePaths: Set<String> = ["/", "/console"]

    /// The path as the router matches it: empty segments do not count (`/v1//x` is `/v1/x`).
    static func routedPath(_ path: String) -> String {
        "/" + path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// The host name of a `Host` header or an origin's authority, without the port.
    static func hostName(_ authority: Substring) -> String {
        let lower = authority.lowercased()
        if lower.hasPrefix("["), let close = lower.firstIndex(of: "]") {
            return String(lower[lower.index(after: lower.startIndex)..<close])
        }
        return String(lower.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// Why `request` is refused here, or nil when it may go on.
    func refusal(_ request: Request) -> DaemonError? {
        let headers = request.headers
        let host = request.head.authority
        if kind == .tcp {
            guard let host, hostNames.contains(Self.hostName(host[...])) else {
                return .forbidden("this listener answers to \(hostNames.sorted().joined(separator: ", ")) only, not to the Host \(host.map { "\"\($0.prefix(80))\"" } ?? "(none)") (a page of another site reaching it through DNS rebinding names its own)")
            }
        }
        if let origin = headers[.origin] {
            // Same-origin only: the page must have come from this listener itself.
            let sameOrigin = kind == .tcp && host.map { origin.lowercased() == "http://\($0.lowercased())" || origin.lowercased() == "https://\($0.lowercased())" } == true
            if !sameOrigin {
                return .forbidden("a request from the web page of another origin (\(origin.prefix(80))) is refused: the API is for the bench's own clients")
            }
        }
        if headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased() == "cross-site" {
            return .forbidden("a cross-site request from a browser is refused: the API is for the bench's own clients")
        }
        if [.post, .put, .patch, .delete].contains(request.method) {
            let type = headers[.contentType]
            let hasBody = headers[.transferEncoding] != nil || (headers[.contentLength].flatMap { Int($0) } ?? 0) > 0
            if let type {
                let media = type.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                if media != "application/json" {
                    return .unsupportedMediaType("Content-Type must be application/json, got \"\(type.prefix(80))\"")
                }
            } else if hasBody {
                return .unsupportedMediaType("a request with a body must say Content-Type: application/json")
            }
        }
        let path = Self.routedPath(request.uri.path)
        if kind == .tcp, let tokenHash {
            let free = request.method == .get
                && (Self.tokenFreePaths.contains(path) || Self.tokenFreePrefixes.contains { path.hasPrefix($0) })
            if !free {
                guard let bearer = headers.bearer else {
                    return .unauthorized("this listener needs the API token: Authorization: Bearer <token> (the daemon's api.token file in its runtime directory; cardbench reads it)")
                }
                let presented = Array(SHA256.hash(data: Array(bearer.token.utf8)))
                // Equal-length digests compared in full: no early exit to time.
                var difference: UInt8 = 0
                for (a, b) in zip(presented, tokenHash) { difference |= a ^ b }
                guard difference == 0 else { return .unauthorized("the API token is not this daemon's") }
            }
        }
        return nil
    }
}

/// Checks every request against its listener's policy before any route runs.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let policy: ListenerPolicy
    let bench: Bench

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let refused = policy.refusal(request) {
            var response = try refused.response(from: request, context: context)
            if case .unauthorized = refused { response.headers[.wwwAuthenticate] = "Bearer realm=\"cardbench\"" }
            bench.metrics.recordRequest(route: "refused", status: refused.statusCode)
            return response
        }
        var context = context
        context.identity = policy.kind == .socket ? .socket : .token(admin: policy.admin)
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed {
            // The router's own answer has no body: say what was asked, in the API's error shape.
            bench.metrics.recordRequest(route: "unrouted", status: Int(error.status.code))
            let path = request.uri.path.count > 80 ? String(request.uri.path.prefix(80)) + "…" : request.uri.path
            return json(ErrorBody(error: "no route \(request.method) \(path.debugDescription) (docs/openapi.yaml lists them)", field: nil, rule: nil),
                        status: error.status)
        }
    }
}

/// Keeps a group of routes (the admin routes) to callers that may administer. It runs once the
/// router has matched the route, so no spelling of the path gets around it.
struct AdminOnlyMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let bench: Bench

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.identity?.mayAdminister == true else {
            let refused = DaemonError.forbidden("the admin routes (\(Self.family(request.uri.path))) answer on the control socket only; set http.admin: true to allow them on TCP")
            bench.metrics.recordRequest(route: "refused", status: refused.statusCode)
            return try refused.response(from: request, context: context)
        }
        return try await next(request, context)
    }

    /// What the refused route administers, for its message.
    static func family(_ path: String) -> String {
        if path.hasPrefix("/v1/worldline/") { return "Worldline API keys, webhooks and crypto keys" }
        if path.hasPrefix("/v1/citcon/") { return "Citcon merchants" }
        if path.hasPrefix("/v1/terminals") { return "terminals made and removed while the daemon runs" }
        return "Billpocket users and device tokens"
    }
}

/// The API token of the TCP listener: the configured file's, or a fresh one the daemon writes to
/// `<runtime>/api.token` (mode 0640: the daemon's group reads it, as the socket's group may connect).
public enum APIToken {
    public static let fileName = "api.token"

    /// Reads `file`, or makes a token and writes it into `runtimeDirectory`.
    public static func load(file: String?, runtimeDirectory: String) throws -> String {
        if let file {
            let text: String
            do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw ConfigurationError(key: "http.token_file", rule: "cannot read \(file): \(error.localizedDescription)")
            }
            let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard token.count >= 32, token.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw ConfigurationError(key: "http.token_file", rule: "must hold one token of at least 32 printable ASCII characters")
            }
            return token
        }
        var generator = SystemRandomNumberGenerator()
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let path = (runtimeDirectory as NSString).appendingPathComponent(fileName)
        try? FileManager.default.removeItem(atPath: path)
        // Created with its final mode, so no other user can open it between create and chmod.
        guard FileManager.default.createFile(atPath: path, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o640]) else {
            throw ConfigurationError(key: "runtime_directory", rule: "cannot write the API token to \(path)")
        }
        return token
    }

    /// The token a client uses for `endpoint` (an http(s) URL): `CARDBENCH_TOKEN`, the file
    /// `CARDBENCH_TOKEN_FILE` names, or the api.token of the default runtime directories.
    public static func forClient(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let token = environment["CARDBENCH_TOKEN"], !token.isEmpty { return token }
        var files: [String] = []
        if let file = environment["CARDBENCH_TOKEN_FILE"], !file.isEmpty { files.append(file) }
        files.append((DaemonConfiguration().effectiveRuntimeDirectory as NSString).appendingPathComponent(fileName))
        files.append("/run/cardbench/\(fileName)")
        for file in files {
            if let text = try? String(contentsOfFile: file, encoding: .utf8) {
                let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !token.isEmpty { return token }
            }
        }
        return nil
    }
}

/// The origin rule for a page's form on a platform listener (a 3-D Secure challenge, a wallet):
/// the answer must come from the page itself. A browser says where a post comes from
/// (`Sec-Fetch-Site`, `Origin`); a post from another site — a page tricking the customer's
/// browser into passing a challenge — is refused, as the control API refuses one. A client
/// that is not a browser sends neither header and is let through (a test's HTTP client, a
/// script). Navigating to the page (a GET, from the merchant's site) is what it is for.
enum PagePost {
    /// Why a post to a page is refused, or nil.
    static func refusal(_ request: Request) -> String? {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!]?.lowercased(), site != "same-origin", site != "none" {
            return "a post to this page from another site (Sec-Fetch-Site: \(site.prefix(40))) is refused: only the page itself answers it"
        }
        if let origin = request.headers[.origin]?.lowercased() {
            let authority = request.head.authority?.lowercased() ?? ""
            guard !authority.isEmpty, origin == "http://" + authority || origin == "https://" + authority else {
                return "a post to this page from the origin \(origin.prefix(80)) is refused: only the page itself answers it"
            }
        }
        return nil
    }
}
