import Defaults
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import DaemonTestSupport
import TestSupport
import Testing
@testable import Daemon

/// The console's files and the API it reads (docs/console.md), through the router in process.
/// The page itself is tested in a real browser (Tests/Console/console_test.py, `make console`).
@Suite("bench console")
struct ConsoleTests {
    static let token = String(repeating: "t", count: 40)
    static let jsonHeaders: HTTPFields = [.contentType: "application/json"]

    func withAPI(policy: ListenerPolicy = .socket, _ adjust: @escaping (inout DaemonConfiguration) -> Void = { $0.demoCard = nil },
                 _ body: @Sendable (any TestClientProtocol, Bench) async throws -> Void) async throws {
        let harness = try BenchHarness(adjust)
        defer { harness.remove() }
        let app = Application(router: API(bench: harness.bench).router(policy: policy))
        try await app.test(.router) { client in try await body(client, harness.bench) }
    }

    func value(_ buffer: ByteBuffer) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))
    }

    func text(_ buffer: ByteBuffer) -> String { String(buffer: buffer) }

    @Test("the console's files are served without the token, with a policy that keeps the page to itself; the API still wants it")
    func files() async throws {
        // The router test client's authority is `localhost`, a name the TCP listener answers to.
        let host: HTTPFields = [:]
        try await withAPI(policy: .tcp(token: Self.token)) { client, _ in
            try await client.execute(uri: "/console/", method: .get, headers: host) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/html; charset=utf-8")
                let policy = response.headers[.contentSecurityPolicy] ?? ""
                #expect(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe"))
                #expect(response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
                #expect(text(response.body).contains("<script type=\"module\" src=\"/console/console.js\">"))
            }
            try await client.execute(uri: "/console/terminals.js", method: .get, headers: host) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType] == "text/javascript; charset=utf-8")
            }
            try await client.execute(uri: "/console/nope.js", method: .get, headers: host) { response in
                #expect(response.status == .notFound)
                #expect(text(response.body).contains("the console has no file") && text(response.body).contains("nope.js"))
            }
            try await client.execute(uri: "/", method: .get, headers: host) { response in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/console/")
            }
            // The files' token-free prefix lends nothing to the API: the router does not resolve dot
            // segments, so a path through /console/ to a data route is no route at all.
            for path in ["/console/../v1/cards", "/console/%2e%2e/v1/cards", "/console/..%2Fv1%2Fcards", "/console//../v1/host",
                         "/console/./../v1/transactions"] {
                try await client.execute(uri: path, method: .get, headers: host) { response in
                    #expect(response.status == .notFound, "\(path)")
                    #expect(!text(response.body).contains("maskedPAN"), "\(path)")
                }
            }
            // The files are free; the data is not.
            for path in ["/v1/cards", "/v1/terminals", "/v1/host", "/v1/scenarios", "/v1/transactions/1?decode=true"] {
                try await client.execute(uri: path, method: .get, headers: host) { #expect($0.status == .unauthorized, "\(path)") }
            }
            var authorised = host
            authorised[.authorization] = "Bearer \(Self.token)"
            try await client.execute(uri: "/v1/cards", method: .get, headers: authorised) { #expect($0.status == .ok) }
            // A page of another site cannot use the console's routes to reach the API.
            var foreign = authorised
            foreign[.origin] = "http://evil.example"
            try await client.execute(uri: "/v1/cards", method: .get, headers: foreign) { #expect($0.status == .forbidden) }
        }
    }

    @Test("the embedded files are Console/'s, byte for byte, and every file the page names is one of them")
    func embedded() throws {
        let directory = repositoryRoot.appendingPathComponent("Console")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }
        #expect(Set(names) == Set(EmbeddedConsole.files.keys))
        for name in names {
            let onDisk = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            #expect(onDisk == EmbeddedConsole.files[name], "\(name)")
        }
        // Every `/console/x` an HTML attribute or a module import names exists: a missing one is a blank page.
        let pattern = try Regex(#"/console/([A-Za-z0-9_.-]+)"#)
        for (name, text) in EmbeddedConsole.files where name.hasSuffix(".html") || name.hasSuffix(".js") {
            for match in text.matches(of: pattern) {
                let file = String(match.output[1].substring ?? "")
                #expect(EmbeddedConsole.files[file] != nil, "\(name) names /console/\(file), which is not embedded")
            }
        }
        // No markup from data: the modules build the page with text nodes only.
        for (name, text) in EmbeddedConsole.files where name.hasSuffix(".js") {
            #expect(!text.contains(".innerHTML") && !text.contains("insertAdjacentHTML") && !text.contains("document.write"), "\(name)")
        }
    }

    @Test("card profiles, the card slot's counters and the issuer's balance move with a sale")
    func cardSlot() async throws {
        try await withAPI { client, _ in
            let cards = try await client.execute(uri: "/v1/cards", method: .get) { try value($0.body) as? [[String: Any]] ?? [] }
            let visa = try #require(cards.first { $0["name"] as? String == "visa-credit-cvn10" })
            #expect(visa["maskedPAN"] as? String == "476173******0010")
            #expect((visa["interfaces"] as? [String])?.contains("insert") == true)
            let balance = try #require((visa["account"] as? [String: Any])?["balance"] as? Int)
            try await client.execute(uri: "/v1/cards", method: .get) { #expect(!text($0.body).contains("4761739001010010")) }

            try await client.execute(uri: "/v1/terminals/bench1/card", method: .get) { response in
                let slot = try value(response.body) as? [String: Any]
                #expect(slot?["present"] as? Bool == false && slot?["profile"] == nil)
            }
            try await client.execute(uri: "/v1/terminals/bench1/card", method: .post, headers: Self.jsonHeaders,
                                     body: ByteBuffer(string: #"{"profile": "visa-credit-cvn10"}"#)) { #expect($0.status == .created) }
            let before = try await client.execute(uri: "/v1/terminals/bench1/card", method: .get) { try value($0.body) as? [String: Any] ?? [:] }
            #expect(before["present"] as? Bool == true && before["card"] as? String == "in-process")
            #expect(before["profile"] as? String == "visa-credit-cvn10" && before["interface"] as? String == "insert")
            let atcBefore = try #require((before["atc"] as? [String: Int])?["A0000000031010"])
            #expect(before["pinTriesRemaining"] as? Int == 3)

            // The PIN typed before the URL is opened waits for the prompt.
            try await client.execute(uri: "/v1/terminals/bench1/keypad", method: .post, headers: Self.jsonHeaders,
                                     body: ByteBuffer(string: #"{"pin": "1234"}"#)) { #expect($0.status == .ok) }
            let open = #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1500&clientTransactionId=c1"}"#
            try await client.execute(uri: "/v1/open", method: .post, headers: Self.jsonHeaders, body: ByteBuffer(string: open)) { response in
                #expect(text(response.body).contains("\"status\":\"success\""))
            }
            let after = try await client.execute(uri: "/v1/terminals/bench1/card", method: .get) { try value($0.body) as? [String: Any] ?? [:] }
            #expect((after["atc"] as? [String: Int])?["A0000000031010"] == atcBefore + 1)
            #expect((after["account"] as? [String: Any])?["balance"] as? Int == balance - 1500)
        }
    }

    @Test("the host's settings: each front's amount table and each terminal's queue")
    func host() async throws {
        try await withAPI { client, _ in
            try await client.execute(uri: "/v1/terminals/bench1/host-queue", method: .post, headers: Self.jsonHeaders,
                                     body: ByteBuffer(string: #"{"code": "51"}"#)) { #expect($0.status == .created) }
            let host = try await client.execute(uri: "/v1/host", method: .get) { try value($0.body) as? [String: Any] ?? [:] }
            #expect(host["amountTables"] as? [String: String] == ["viva": "stripe-cents", "billpocket": "billpocket", "worldline": "worldline", "citcon": "none",
                                                                  "iso8583": "none"])
            #expect(host["upstreams"] as? [String: String] == ["bench1": "emulated"])
            #expect((host["iso8583"] as? [String: String])?["packager"] == "pyiso8583-default")
            #expect((host["queues"] as? [String: [[String: Any]]])?["bench1"]?.first?["code"] as? String == "51")
            #expect(host["timeoutSeconds"] as? Double == 30)
        }
    }

    @Test("transaction filters: by front, status and day, applied before the limit; a bad value names its field")
    func filters() async throws {
        try await withAPI({ _ in }) { client, _ in
            for (amount, ref) in [(1200, "f1"), (1005, "f2")] {  // .05 declines under stripe-cents
                let open = "{\"url\": \"vivapayclient://pay/v1?callback=pos://r&action=sale&amount=\(amount)&clientTransactionId=\(ref)\"}"
                try await client.execute(uri: "/v1/open", method: .post, headers: Self.jsonHeaders, body: ByteBuffer(string: open)) { _ in }
            }
            func ids(_ query: String) async throws -> [String] {
                try await client.execute(uri: "/v1/transactions?\(query)", method: .get) { response in
                    #expect(response.status == .ok, "\(query)")
                    return (try value(response.body) as? [[String: Any]] ?? []).compactMap { $0["clientReference"] as? String }
                }
            }
            #expect(try await ids("") == ["f2", "f1"])
            #expect(try await ids("status=approved") == ["f1"])
            #expect(try await ids("status=declined&limit=1") == ["f2"])
            #expect(try await ids("status=approved&limit=1") == ["f1"], "the filter applies before the limit")
            #expect(try await ids("provider=billpocket") == [])
            #expect(try await ids("provider=viva&terminal=bench1") == ["f2", "f1"])
            // The manual clock starts at 2026-01-01T00:00:00Z.
            #expect(try await ids("from=2026-01-01&to=2026-01-01") == ["f2", "f1"])
            #expect(try await ids("from=2026-01-02") == [])
            #expect(try await ids("to=2025-12-31T23:59:59Z") == [])
            for (query, field) in [("provider=visa", "provider"), ("status=ok", "status"), ("from=yesterday", "from"), ("to=2026-13-01", "to")] {
                try await client.execute(uri: "/v1/transactions?\(query)", method: .get) { response in
                    #expect(response.status == .badRequest, "\(query)")
                    let refusal = try value(response.body) as? [String: Any]
                    #expect(refusal?["field"] as? String == field, "\(query)")
                }
            }
        }
    }

    @Test("a transaction decoded: commands named, TLV with tag names and the PAN still masked, bits explained, cryptograms")
    func decoded() async throws {
        try await withAPI({ _ in }) { client, _ in
            let open = #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=d1"}"#
            let id = try await client.execute(uri: "/v1/open", method: .post, headers: Self.jsonHeaders, body: ByteBuffer(string: open)) { response in
                try #require(((try value(response.body) as? [String: Any])?["transaction"] as? [String: Any])?["id"] as? Int)
            }
            try await client.execute(uri: "/v1/transactions/\(id)", method: .get) { response in
                let plain = try value(response.body) as? [String: Any]
                #expect(plain?["decoded"] == nil, "only when asked")
            }
            let body = try await client.execute(uri: "/v1/transactions/\(id)?decode=true", method: .get) { text($0.body) }
            #expect(!body.contains("4761739001010010"))
            let t = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let decoded = try #require(t["decoded"] as? [String: Any])
            let steps = try #require(decoded["steps"] as? [[String: Any]])
            #expect(steps.map { $0["name"] as? String ?? "" }.filter { $0 == "GENERATE AC" }.count == 2)
            #expect(steps.contains { $0["detail"] as? String == "asks for ARQC" })
            #expect(steps.contains { ($0["detail"] as? String)?.contains("PIN block withheld") == true })
            let tlv = steps.compactMap { $0["tlv"] }.map { "\($0)" }.joined()
            #expect(tlv.contains("Application Primary Account Number (PAN)") && tlv.contains("476173******0010"))
            let bits = try #require(decoded["bits"] as? [[String: Any]])
            #expect(bits.map { $0["field"] as? String ?? "" } == ["TVR", "TSI", "CVM Results", "AIP", "CVR (Visa)"])
            #expect((bits[1]["set"] as? [String])?.contains("Issuer authentication was performed") == true)
            let crypto = try #require(decoded["cryptograms"] as? [String: Any])
            #expect(crypto["firstCryptogram"] as? String == t["arqc"] as? String)
            #expect(crypto["cvn"] as? String == "Visa CVN 10")
            #expect((crypto["arpc"] as? String)?.count == 16)
            #expect((crypto["verdict"] as? String)?.contains("verified the ARQC") == true)
            #expect((crypto["verdict"] as? String)?.contains("Visa credit (CVN 10, offline PIN)") == true, "the profile found by the PAN's hash")
        }
    }

    @Test("cardbench console prints the signed-in link from a runtime directory, and says why it cannot")
    func consoleCommand() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-console-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let run = ["console", "--runtime-directory", directory.path]

        let noToken = try cliOffline(run, environment: [:])
        #expect(noToken.status == 1 && noToken.stderr.contains("no api.token in \(directory.path)"), "\(noToken)")

        try (Self.token + "\n").write(to: directory.appendingPathComponent("api.token"), atomically: true, encoding: .utf8)
        let noPort = try cliOffline(run, environment: [:])
        #expect(noPort.status == 1 && noPort.stderr.contains("TCP listener is off"), "\(noPort)")

        try "43127\n".write(to: directory.appendingPathComponent("http.port"), atomically: true, encoding: .utf8)
        let link = try cliOffline(run, environment: [:])
        #expect(link.status == 0 && link.stdout == "http://127.0.0.1:43127/console/#token=\(Self.token)\n", "\(link)")

        let tls = try cliOffline(run + ["--url", "https://bench7.lab.example:8443/"], environment: [:])
        #expect(tls.stdout == "https://bench7.lab.example:8443/console/#token=\(Self.token)\n", "\(tls)")
        let bad = try cliOffline(run + ["--url", "ftp://bench7"], environment: [:])
        #expect(bad.status == 2 && bad.stderr.contains("--url: must be an http(s)://HOST:PORT base URL"), "\(bad)")
    }

    @Test("scenario runs: none without scenarios.directory, and the configuration refuses a directory that is not there")
    func scenariosUnconfigured() async throws {
        try await withAPI { client, _ in
            try await client.execute(uri: "/v1/scenarios", method: .get) { response in
                #expect(response.status == .ok)
                let list = try value(response.body) as? [String: Any]
                #expect(list?["directory"] == nil)
            }
            try await client.execute(uri: "/v1/scenario-runs", method: .post, headers: Self.jsonHeaders, body: ByteBuffer(string: #"{"path": "."}"#)) { response in
                #expect(response.status == .conflict)
                #expect(text(response.body).contains("scenarios.directory"))
            }
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-console-\(UUID().uuidString.prefix(8)).yaml")
        try "scenarios:\n  directory: /nonexistent/scenarios\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        do {
            _ = try await DaemonConfiguration.load(file: file.path, environment: [:])
            Issue.record("a missing scenarios.directory was accepted")
        } catch let error as ConfigurationError {
            #expect(error.key == "scenarios.directory")
        }
    }
}
