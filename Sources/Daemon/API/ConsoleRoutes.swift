import Defaults
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The bench console (docs/console.md): a page, a style sheet and JavaScript modules compiled
/// into the binary, served on the API's listeners under `/console/`.
///
/// The files hold no data and no secret, so they are served without the API token (a browser
/// cannot send one when it opens a page); everything the page shows it fetches from the API with
/// the token, which the page keeps in the tab's session storage. The headers keep the page to
/// itself: no script, style, frame or connection from anywhere else, no framing by another site.
struct ConsoleRoutes {
    static let prefix = "/console/"

    /// The page's policy: its own files only, no inline script or style, no plug-ins, no framing.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        routes.get("/") { _, _ in Self.redirect() }
        // The router ignores a trailing slash: `/console` and `/console/` are one route. The page
        // names its files by absolute paths, so it works under either.
        routes.get("/console") { _, _ in try Self.file("index.html") }
        routes.get("/console/:file") { _, context in try Self.file(context.parameters.get("file") ?? "") }
        return routes
    }

    static func redirect() -> Response {
        Response(status: .seeOther, headers: [.location: prefix])
    }

    static func file(_ name: String) throws -> Response {
        guard let text = EmbeddedConsole.files[name] else {
            throw DaemonError.notFound("the console has no file \(name.prefix(80).debugDescription)")
        }
        var headers: HTTPFields = [.contentType: EmbeddedConsole.contentType(name), .cacheControl: "no-cache"]
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
