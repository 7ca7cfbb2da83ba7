import Daemon
import Foundation
@testable import Fronts
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// The demo card's PAN: what must never be stored, logged or authorised-but-unrecorded.
let demoPAN = "4761739001010010"

func encoded(_ value: String) -> String { PercentEncoding.encodeValue(value) }

/// Each defect found by trying the daemon as an attacker would, as a test that failed before its fix.
@Suite("hostile input", .serialized)
struct HostileInputTests {
    // MARK: 1. Redirects

    @Test("callbacks and webhooks follow no redirect, of any 3xx, to any address (the 3xx is the recorded answer)")
    func redirectsAreNotFollowed() async throws {
        let target = try await ScriptedHTTPServer()
        defer { target.stop() }
        let hop = "http://127.1:\(target.port)/x"
        let redirector = try await ScriptedHTTPServer(redirectTo: hop)
        defer { redirector.stop() }
        let daemon = try await DaemonProcess(["--demo"], config: """
            callbacks:
              allowed_hosts: [127.0.0.1, localhost]
              max_attempts: 1
            """)
        defer { daemon.remove() }

        // Every 3xx, to every spelling of loopback, to an allowed host itself, and two hops.
        let hops = ["http://127.1:\(target.port)/x", "http://2130706433:\(target.port)/x", "http://0x7f000001:\(target.port)/x",
                    "http://017700000001:\(target.port)/x", "http://[::ffff:127.0.0.1]:\(target.port)/x",
                    "http://localhost:\(target.port)/x", "http://127.0.0.1:\(target.port)/x",
                    "\(redirector.base)/redirect/302?to=\(encoded("http://127.0.0.1:\(target.port)/x"))"]
        var ids: [Int64] = []
        for code in [301, 302, 303, 307, 308] {
            for (i, to) in hops.enumerated() {
                let callback = "\(redirector.base)/redirect/\(code)?to=\(encoded(to))"
                let result = try #require(try await daemon.open(saleURL(reference: "redir-\(code)-\(i)", callback: encoded(callback))).result)
                #expect(result.status == "success")
                ids.append(try #require(result.transaction?.id))
            }
        }
        // Billpocket's webhook urlScheme goes through the same delivery.
        let user = try createUser(daemon, "qa")
        let venta = try #require(try await daemon.open(ventaURL(token: user.token, urlScheme: encoded("\(redirector.base)/r"))).result)
        ids.append(try #require(venta.transaction?.id))

        var rows: [[String: Any]] = []
        let settled = try await daemon.waitUntil(seconds: 30) {
            rows = []
            for id in ids { rows += try await daemon.callbacks(of: id).filter { ($0["target"] as? String)?.hasPrefix("http") == true } }
            return rows.count == ids.count && rows.allSatisfy { $0["status"] as? String == "failed" }
        }
        #expect(settled, "every redirected callback is given up: \(rows.map { "\($0["status"] ?? "") \($0["lastError"] ?? "")" })")
        for row in rows {
            let error = row["lastError"] as? String ?? ""
            #expect(error.contains("redirect") && error.contains("not followed"), "\(error)")
        }
        #expect(redirector.requests.items.count >= ids.count, "every callback reached the allowed host")
        #expect(target.requests.items.isEmpty, "a redirect was followed to \(target.requests.items)")
    }

    // MARK: 2. Card numbers in request text

    @Test("a card number in any request field is refused before anything is authorised, and stored nowhere")
    func panInRequestText() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let user = try createUser(daemon, "qa")
        // Viva: answered with the failure callback naming the field (the callback itself is fine).
        for reference in [demoPAN, "4761 7390 0101 0010", "4761-7390-0101-0010", "order \(demoPAN) of today", "5413330089604004"] {
            let result = try #require(try await daemon.open(saleURL(reference: encoded(reference))).result)
            #expect(result.status == "failed")
            #expect(result.message.hasPrefix("Invalid request. clientTransactionId: must not hold a card number"), "\(result.message)")
            #expect(result.transaction == nil)
            #expect(result.callback.map { containsBytes(Array($0.utf8), demoPAN) } != true)
        }
        // In the callback: no callback can be used, so it is an API error.
        for callback in ["myapp://result/\(demoPAN)", "myapp://result?card=\(demoPAN)", "http://127.0.0.1/cb/%34%37%36%31%37%33%39%30%30%31%30%31%30%30%31%30"] {
            let reply = try await daemon.open(saleURL(reference: "cb-pan", callback: encoded(callback)))
            #expect(reply.status == 400, "\(callback): \(reply.error)")
            #expect(reply.error.hasPrefix("callback: must not hold a card number"), "\(reply.error)")
        }
        // Billpocket: reference, identifier, email.
        for extra in ["&reference=\(demoPAN)", "&email=\(demoPAN)%40example.com"] {
            let result = try #require(try await daemon.open(ventaURL(token: user.token, extra: extra)).result)
            #expect(result.status == "rechazada" || result.status == "error", "\(result.status) \(result.message)")
            #expect(result.transaction == nil)
        }
        let identifier = try #require(try await daemon.open(ventaURL(token: user.token, identifier: demoPAN)).result)
        #expect(identifier.transaction == nil)

        let (_, list) = try await daemon.json("GET", "/v1/transactions")
        #expect((list as? [Any])?.isEmpty == true, "nothing was begun, so nothing was authorised: \(String(describing: list))")
        #expect(!containsBytes(daemon.ledgerBytes, demoPAN), "the PAN is in the ledger's files")
        #expect(!daemon.logText.contains(demoPAN), "the PAN is in the log")
        // The daemon is healthy and the card still sells.
        #expect(try await daemon.open(saleURL(reference: "after-pan")).result?.status == "success")
    }

    // MARK: 3. Reference lengths

    @Test("clientTransactionId takes up to 2048 characters end to end; 2049 is the front's failure, not a 500")
    func referenceLengths() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        for length in [256, 257, 1000, 2048] {
            let reference = String(repeating: "r", count: length - 4) + String(format: "%04d", length)
            let result = try #require(try await daemon.open(saleURL(reference: reference)).result, "length \(length)")
            #expect(result.status == "success", "length \(length): \(result.message)")
            #expect(result.transaction?.clientReference == reference)
        }
        let long = try await daemon.open(saleURL(reference: String(repeating: "r", count: 2049)))
        #expect(long.status == 200)
        #expect(long.result?.message == "Invalid request. clientTransactionId: must be at most 2048 characters (Viva's merchant reference); got 2049")
    }

    // MARK: 4. NUL and control characters

    @Test("a NUL is refused, not cut at: a later shorter reference is a new sale; Billpocket user names too")
    func nulTruncation() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let probe = try #require(try await daemon.open(saleURL(reference: "nulprobe%00tail")).result)
        #expect(probe.status == "failed")
        #expect(probe.message == "Invalid request. clientTransactionId: must not contain control characters; found U+0000 at position 9")
        let plain = try #require(try await daemon.open(saleURL(reference: "nulprobe")).result)
        #expect(plain.status == "success")
        #expect(!plain.replayed, "a different reference was taken for a replay")
        for reference in ["line%0Abreak", "tab%09", "del%7F", "c1%C2%85"] {
            #expect(try await daemon.open(saleURL(reference: reference)).result?.message.contains("control characters") == true, "\(reference)")
        }

        for (body, field) in [(#"{"name": "ab\u0000cd"}"#, "body.name"), (#"{"name": "\u0000"}"#, "body.name"), (#"{"name": "ab\u0007cd"}"#, "name")] {
            let reply = try await daemon.client.send(method: "POST", "/v1/billpocket/users", rawBody: Array(body.utf8))
            #expect(reply.status == 400, "\(body): \(reply.status) \(reply.errorMessage)")
            let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
            #expect(object?["field"] as? String == field, "\(body): \(String(describing: object))")
        }
        let (status, users) = try await daemon.json("GET", "/v1/billpocket/users")
        #expect(status == 200 && (users as? [Any])?.isEmpty == true, "no user was created: \(String(describing: users))")
        // A NUL in a path stays an escape (404), never a 500 or a cut-short lookup.
        #expect(try await daemon.client.send(method: "GET", "/v1/transactions/abc%00def").status == 404)
    }

    // MARK: 6. Delivery is concurrent

    @Test("a slow callback endpoint holds up only its own callbacks")
    func slowTargetDoesNotBlockOthers() async throws {
        let slow = try await ScriptedHTTPServer()
        defer { slow.stop() }
        let fast = try await ScriptedHTTPServer()
        defer { fast.stop() }
        let daemon = try await DaemonProcess(["--demo"], config: "callbacks:\n  allowed_hosts: [127.0.0.1]\n")
        defer { daemon.remove() }
        var slowIDs: [Int64] = []
        for i in 0..<4 {
            let result = try #require(try await daemon.open(saleURL(reference: "slow-\(i)", callback: encoded("\(slow.base)/slow/6000/cb"))).result)
            slowIDs.append(try #require(result.transaction?.id))
        }
        _ = try await daemon.waitUntil(seconds: 5) { slow.requests.items.count >= 1 }
        let other = try #require(try await daemon.open(saleURL(reference: "fast-1", callback: encoded("\(fast.base)/cb"))).result)
        let otherID = try #require(other.transaction?.id)
        var slowDelivered = -1
        let delivered = try await daemon.waitUntil(seconds: 30) {
            guard try await daemon.callbacks(of: otherID).first?["status"] as? String == "delivered" else { return false }
            slowDelivered = 0
            for id in slowIDs where try await daemon.callbacks(of: id).first?["status"] as? String == "delivered" { slowDelivered += 1 }
            return true
        }
        #expect(delivered)
        #expect(slowDelivered == 0, "the other target's callback waited for \(slowDelivered) slow ones")
        // Each slow answer takes 6 s (time enough for the other sale on a loaded machine: 3 s was not).
        #expect(try await daemon.waitUntil(seconds: 60) {
            var all = true
            for id in slowIDs where try await daemon.callbacks(of: id).first?["status"] as? String != "delivered" { all = false }
            return all
        }, "the slow callbacks are delivered too")
    }

    // MARK: 7. Profile paths

    @Test("a profile is a name or inline YAML: no path is read, and no reply tells what a file holds or whether it exists")
    func profilePaths() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        var messages: [String: String] = [:]
        for path in ["/etc/shadow", "/etc/passwd", "/etc/hostname", "/nonexistent/x.yaml", "../../../../etc/passwd",
                     "/proc/self/environ", repositoryRoot.appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml").path] {
            for route in ["/v1/host/accounts", "/v1/terminals/bench1/card"] {
                let reply = try await daemon.client.send(method: "POST", route, json: AccountBody(profile: path))
                #expect(reply.status == 400, "\(route) \(path): \(reply.status)")
                let message = reply.errorMessage
                #expect(!message.contains("root:") && !message.contains("PATH=") && !message.contains("pan:"), "\(message)")
                messages[path] = message.replacingOccurrences(of: path.debugDescription, with: "<name>")
            }
        }
        #expect(Set(messages.values).count == 1, "the answers differ by file: \(messages)")
        #expect(try await daemon.client.send(method: "POST", "/v1/host/accounts", json: AccountBody(profile: "visa-credit-cvn10")).status == 201)
        #expect(try await daemon.client.send(method: "POST", "/v1/host/accounts", json: AccountBody(profile: "visa-credit-cvn10.yaml")).status == 201)
        let both = try await daemon.client.send(method: "POST", "/v1/host/accounts", json: AccountBody(profile: "visa-credit-cvn10", profileYAML: "pan: 1"))
        #expect(both.status == 400)
    }

    // MARK: 8. The access model

    @Test("TCP wants the token and this listener's own host; no listener takes another site's page, a non-JSON body or (TCP) the admin routes")
    func accessModel() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let port = daemon.httpPort, token = daemon.apiToken
        #expect(port > 0 && token.count == 64)
        var info = stat()
        #expect(stat(daemon.runtime + "/" + APIToken.fileName, &info) == 0 && info.st_mode & 0o777 == 0o640, "api.token is 0640")

        func request(_ method: String, _ path: String, host: String = "127.0.0.1:\(daemon.httpPort)", token: String? = nil,
                     headers: [String] = [], body: String? = nil) throws -> (status: Int, head: String, body: String) {
            var lines = ["\(method) \(path) HTTP/1.1", "Host: \(host)", "Connection: close"]
            if let token { lines.append("Authorization: Bearer \(token)") }
            lines += headers
            if let body { lines.append("Content-Length: \(body.utf8.count)") }
            return try rawHTTP(port: port, lines.joined(separator: "\r\n") + "\r\n\r\n" + (body ?? ""))
        }
        let open = #"{"url": "\#(saleURL(reference: "tcp-1"))"}"#
        let none = try request("GET", "/v1/health")
        #expect(none.status == 401)
        #expect(none.head.contains("WWW-Authenticate: Bearer"))
        #expect(try request("GET", "/v1/health", token: String(repeating: "0", count: 64)).status == 401)
        #expect(try request("GET", "/v1/health", token: token).status == 200)
        #expect(try request("GET", "/v1/health", host: "localhost:\(port)", token: token).status == 200)
        // DNS rebinding: a page of evil.example reaching 127.0.0.1 still says Host: evil.example.
        #expect(try request("GET", "/v1/health", host: "evil.example:\(port)", token: token).status == 403)
        #expect(try request("GET", "/v1/health", host: "evil.example", token: token).status == 403)
        // A page of another site, even with the token (a tester's browser could hold it).
        let crossSite = try request("POST", "/v1/open", token: token, headers: ["Origin: http://evil.example", "Content-Type: application/json"], body: open)
        #expect(crossSite.status == 403, "\(crossSite)")
        #expect(try request("POST", "/v1/open", token: token, headers: ["Sec-Fetch-Site: cross-site", "Content-Type: application/json"], body: open).status == 403)
        // The form and text/plain POSTs a page sends without asking.
        for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            #expect(try request("POST", "/v1/open", token: token, headers: ["Content-Type: \(type)"], body: open).status == 415, "\(type)")
        }
        #expect(try request("POST", "/v1/open", token: token, body: open).status == 415, "a body without a type")
        let (_, before) = try await daemon.json("GET", "/v1/transactions")
        #expect((before as? [Any])?.isEmpty == true, "no refused request ran a sale")
        let sale = try request("POST", "/v1/open", token: token, headers: ["Content-Type: application/json"], body: open)
        #expect(sale.status == 200 && sale.body.contains("\"status\":\"success\""), "\(sale)")
        // Same-origin (a page this listener served itself) passes.
        #expect(try request("GET", "/v1/health", token: token, headers: ["Origin: http://127.0.0.1:\(port)"]).status == 200)
        // Admin routes: the socket only, by default.
        #expect(try request("GET", "/v1/billpocket/users", token: token).status == 403)
        // However the path is spelt: the check runs once the route is matched.
        for path in ["/v1//billpocket/users", "/v1/billpocket//users", "//v1/billpocket/users/", "/v1/billpocket/device-tokens"] {
            #expect(try request("GET", path, token: token).status == 403, "\(path)")
        }
        #expect(try request("POST", "/v1/billpocket/users", token: token, headers: ["Content-Type: application/json"], body: #"{"name":"x"}"#).status == 403)
        // Each family's refusal names that family, not another's (docs/openapi.yaml's AdminOnly).
        for (path, family) in [("/v1/billpocket/users", "Billpocket users"), ("/v1/worldline/api-keys", "Worldline API keys"),
                               ("/v1/citcon/merchants", "Citcon merchants")] {
            let refused = try request("GET", path, token: token)
            #expect(refused.status == 403 && refused.body.contains("admin routes (\(family)") && refused.body.contains("http.admin"), "\(path): \(refused.body)")
        }
        #expect(try await daemon.client.send(method: "GET", "/v1/billpocket/users").status == 200)
        // The CLI over TCP reads the token from the runtime directory it is told of.
        let viaCLI = try cliWithEnvironment(["tx", "list"], socket: "http://127.0.0.1:\(port)", environment: ["CARDBENCH_TOKEN_FILE": daemon.runtime + "/" + APIToken.fileName])
        #expect(viaCLI.status == 0, "\(viaCLI.stderr)")
        #expect(viaCLI.stdout.contains("viva sale 12.00 approved"), "\(viaCLI.stdout)")
        let noToken = try cliWithEnvironment(["tx", "list"], socket: "http://127.0.0.1:\(port)", environment: ["CARDBENCH_TOKEN": "nope"])
        #expect(noToken.status != 0 && noToken.stderr.contains("token"), "\(noToken.stderr)")
    }

    @Test("the control socket refuses another origin and non-JSON bodies too")
    func socketRefusesBrowsers() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let body = #"{"url": "\#(saleURL(reference: "sock-1"))"}"#
        let request = "POST /v1/open HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        #expect(try rawUnixHTTP(socketPath: daemon.socket, Array(request.utf8)).status == 403)
        let form = "POST /v1/open HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        #expect(try rawUnixHTTP(socketPath: daemon.socket, Array(form.utf8)).status == 415)
        let plain = try await daemon.client.send(method: "POST", "/v1/open", json: nil)
        #expect(plain.status != 415, "a POST without a body needs no type")
    }

    @Test("the TCP listener speaks TLS when given a certificate, and refuses to listen beyond loopback without it")
    func tls() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-tls-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path, certificate = directory.appendingPathComponent("cert.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
                             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        #expect(openssl.terminationStatus == 0)
        let daemon = try await DaemonProcess(["--demo"], config: "http:\n  tls:\n    certificate: \(certificate)\n    key: \(key)\n", directory: directory)
        defer { daemon.remove() }
        let over = try cliWithEnvironment(["terminals"], socket: "https://127.0.0.1:\(daemon.httpPort)",
                                          environment: ["CARDBENCH_CA_FILE": certificate, "CARDBENCH_TOKEN": daemon.apiToken])
        #expect(over.status == 0, "\(over.stderr)")
        #expect(over.stdout.contains("bench1"))
        #expect(daemon.logText.contains("https://127.0.0.1:"))
        let plain = try? rawHTTP(port: daemon.httpPort, "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(plain?.status != 200, "plain HTTP is not answered on the TLS listener")

        for (config, key) in [("http:\n  address: 0.0.0.0\n", "http.address"), ("http:\n  tls:\n    certificate: \(certificate)\n", "http.tls.key")] {
            let file = directory.appendingPathComponent("bad.yaml")
            try config.write(to: file, atomically: true, encoding: .utf8)
            let exit = try runDaemonToExit(["--config", file.path, "--state-directory", directory.appendingPathComponent("s2").path])
            #expect(exit.status == 2, "\(config): \(exit.stderr)")
            #expect(exit.stderr.contains(key), "\(exit.stderr)")
        }
    }

    // MARK: 9. The CLI and an unreachable daemon

    @Test("the CLI says at once that no daemon answers, naming the socket or URL and what to check")
    func unreachableDaemon() throws {
        for (socket, words) in [("/nonexistent/control.sock", "no socket file"), ("http://127.0.0.1:1", "connection refused")] {
            let started = Date()
            let out = try cliWithEnvironment(["tx", "list"], socket: socket, environment: [:], killAfter: 30)
            #expect(out.status == 1, "\(socket): \(out.status) \(out.stderr)")
            #expect(out.stderr.contains(socket) && out.stderr.contains(words), "\(out.stderr)")
            #expect(Date().timeIntervalSince(started) < 30, "killed while waiting")
        }
    }

    // MARK: Minor

    @Test("a JSON body with a key twice is refused (no first-wins), however the key is spelled")
    func duplicateKeys() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        for body in [#"{"url": "\#(saleURL(reference: "dup-1"))", "url": "x"}"#, #"{"url": "x", "\u0075rl": "y"}"#,
                     #"{"url": "x", "terminal": "bench1", "terminal": "bench1"}"#] {
            let reply = try await daemon.client.send(method: "POST", "/v1/open", rawBody: Array(body.utf8))
            #expect(reply.status == 400, "\(body)")
            #expect(reply.errorMessage.contains("appears twice"), "\(reply.errorMessage)")
        }
        let (_, list) = try await daemon.json("GET", "/v1/transactions")
        #expect((list as? [Any])?.isEmpty == true)
    }

    @Test("an IPv6 loopback callback (bracketed) is taken and delivered when ::1 is allowed")
    func bracketedIPv6Callback() async throws {
        guard let server = try? await ScriptedHTTPServer(bind: "::1") else {
            Issue.record("this machine has no IPv6 loopback")
            return
        }
        defer { server.stop() }
        let daemon = try await DaemonProcess(["--demo"], config: "callbacks:\n  allowed_hosts: [\"::1\"]\n")
        defer { daemon.remove() }
        let result = try #require(try await daemon.open(saleURL(reference: "v6-1", callback: encoded("\(server.base)/cb"))).result)
        #expect(result.status == "success")
        #expect(result.callback?.hasPrefix("http://[::1]:\(server.port)/cb?status=success") == true)
        let id = try #require(result.transaction?.id)
        #expect(try await daemon.waitUntil { try await daemon.callbacks(of: id).first?["status"] as? String == "delivered" })
        #expect(server.requests.items.contains { $0.hasPrefix("/cb?status=success") })
    }

    @Test("an abort is recorded as an abort; transactionDetails tells a running or failed sale from a card error")
    func abortAndDetails() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        let pending = try await daemon.client.send(method: "POST", "/v1/open", json: OpenRequest(url: saleURL(reference: "stuck-1"), wait: false))
        #expect(pending.status == 202)
        // Running: the terminal is taken and the ledger holds the sale in progress.
        #expect(try await daemon.waitUntil {
            let (_, list) = try await daemon.json("GET", "/v1/transactions")
            return (list as? [[String: Any]])?.first?["status"] as? String == "in_progress"
        })
        let details = "vivapayclient://pay/v1?callback=myapp://r&action=transactionDetails&clientTransactionId=stuck-1"
        let running = try #require(try await daemon.open(details).result)
        #expect(running.message == "Transaction in progress.", "\(running.message)")
        let (status, _) = try await daemon.json("POST", "/v1/terminals/bench1/abort")
        #expect(status == 200)
        #expect(try await daemon.waitUntil { !(try await busy(daemon)) })
        let (_, list) = try await daemon.json("GET", "/v1/transactions")
        let row = (list as? [[String: Any]])?.first
        #expect(row?["status"] as? String == "cancelled")
        #expect((row?["message"] as? String)?.hasPrefix("aborted during waiting for the card") == true, "\(String(describing: row))")
        let failed = try #require(try await daemon.open(details).result)
        #expect(failed.status == "failed")
        #expect(failed.message == "Transaction failed.", "\(failed.message)")
    }

    @Test("the answer's status and fields are the result's, not the callback's own query items")
    func callbackWithItsOwnQuery() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        #expect(try await daemon.json("POST", "/v1/terminals/bench1/host-queue", HostOutcomeBody(code: "05")).0 == 201)
        let callback = "myapp://r?status=success&message=forged"
        let result = try #require(try await daemon.open(saleURL(reference: "own-query", callback: encoded(callback))).result)
        #expect(result.status == "failed", "\(result.fields)")
        #expect(result.fields.first?.name == "status" && result.fields.first?.value == "failed")
        #expect(result.callback?.hasPrefix(callback + "&status=failed&") == true)
        // The stored answer, replayed, says the same.
        let replay = try #require(try await daemon.open(saleURL(reference: "own-query", callback: encoded(callback))).result)
        #expect(replay.replayed && replay.status == "failed" && replay.fields == result.fields)
    }

    @Test("a manual clock is set only to a date from 1970 to 9999")
    func clockBounds() async throws {
        let daemon = try await DaemonProcess(["--demo"], config: "clock:\n  mode: manual\n")
        defer { daemon.remove() }
        for set in ["1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z"] {
            let (status, body) = try await daemon.json("POST", "/v1/clock", ClockBody(set: set))
            #expect(status == 400, "\(set)")
            #expect((body as? [String: Any])?["field"] as? String == "set")
        }
        #expect(try await daemon.json("POST", "/v1/clock", ClockBody(set: "1970-01-01T00:00:01Z")).0 == 200)
        #expect(try await daemon.open(saleURL(reference: "clock-1")).result?.status == "success", "a sale still records at the earliest date")
    }

    @Test("a terminal's host queue holds 100 outcomes; the 101st is refused")
    func hostQueueBound() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        for _ in 0..<HostOutcomeBody.maximumQueued {
            #expect(try await daemon.json("POST", "/v1/terminals/bench1/host-queue", HostOutcomeBody(code: "05")).0 == 201)
        }
        let (status, body) = try await daemon.json("POST", "/v1/terminals/bench1/host-queue", HostOutcomeBody(code: "05"))
        #expect(status == 409)
        #expect(((body as? [String: Any])?["error"] as? String)?.contains("holds 100") == true)
    }

    @Test("a card file that cannot be read is a configuration error: exit 2, naming the key")
    func missingCardFileExitsTwo() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-exit-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let exit = try runDaemonToExit(["--demo-card", "/nonexistent/card.yaml", "--state-directory", directory.path,
                                        "--runtime-directory", directory.appendingPathComponent("run").path, "--http-port", "off"])
        #expect(exit.status == 2, "\(exit.stderr)")
        #expect(exit.stderr.contains("host.cards") && exit.stderr.contains("/nonexistent/card.yaml"), "\(exit.stderr)")
    }
}

/// Whether terminal bench1 is in a transaction.
func busy(_ daemon: DaemonProcess) async throws -> Bool {
    let (_, body) = try await daemon.json("GET", "/v1/terminals/bench1")
    return (body as? [String: Any])?["activity"] is String
}

/// Runs `cardbench` with an environment of its own; killed after `killAfter` seconds if still running.
func cliWithEnvironment(_ arguments: [String], socket: String, environment: [String: String], killAfter: Double = 60) throws
    -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("cardbench")
    process.arguments = arguments + ["--socket", socket]
    var env = ProcessInfo.processInfo.environment
    for key in ["CARDBENCH_SOCKET", "CARDBENCH_TOKEN", "CARDBENCH_TOKEN_FILE", "CARDBENCH_CA_FILE"] { env[key] = nil }
    env.merge(environment) { $1 }
    process.environment = env
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + killAfter, execute: watchdog)
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    watchdog.cancel()
    return (process.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

/// Runs `cardbenchd` expecting it to exit by itself (a configuration error).
func runDaemonToExit(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("cardbenchd")
    process.arguments = arguments
    process.currentDirectoryURL = repositoryRoot
    let err = Pipe()
    process.standardError = err
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
    DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    watchdog.cancel()
    return (process.terminationStatus, String(decoding: e, as: UTF8.self))
}
