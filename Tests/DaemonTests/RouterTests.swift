import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@testable import Daemon

/// The API through Hummingbird's router test mode: the real routes, middleware and bench, no
/// socket (the access checks of the socket and TCP listeners have their own tests against a
/// running daemon).
@Suite("API routes in process")
struct RouterTests {
    func withAPI(_ body: @Sendable (any TestClientProtocol, Bench) async throws -> Void) async throws {
        let harness = try BenchHarness()
        defer { harness.remove() }
        let bench = harness.bench
        let app = Application(router: API(bench: bench).router())
        try await app.test(.router) { client in try await body(client, bench) }
    }

    static func body(_ json: String) -> ByteBuffer { ByteBuffer(string: json) }
    static let jsonHeaders: HTTPFields = [.contentType: "application/json"]

    func object(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    @Test("a Viva sale with the demo card: the callback, then the transaction with its trace")
    func sale() async throws {
        try await withAPI { client, _ in
            let open = #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=rt1"}"#
            let id: Int = try await client.execute(uri: "/v1/open", method: .post, headers: Self.jsonHeaders, body: Self.body(open)) { response in
                #expect(response.status == .ok)
                let reply = try object(response.body)
                #expect(reply["status"] as? String == "success")
                #expect((reply["callback"] as? String)?.hasPrefix("pos://r?status=success&") == true)
                return try #require((reply["transaction"] as? [String: Any])?["id"] as? Int)
            }
            try await client.execute(uri: "/v1/transactions/\(id)", method: .get) { response in
                #expect(response.status == .ok)
                let t = try object(response.body)
                #expect(t["status"] as? String == "approved")
                #expect(((t["trace"] as? [[String: Any]])?.count ?? 0) > 5)
            }
        }
    }

    @Test("refusals: the field and the rule, the status they map to, and no route in the API's error shape")
    func refusals() async throws {
        try await withAPI { client, _ in
            try await client.execute(uri: "/v1/terminals/bench1/keypad", method: .post, headers: Self.jsonHeaders,
                                     body: Self.body(#"{"pin": "1234", "cancel": true}"#)) { response in
                #expect(response.status == .badRequest)
                let e = try object(response.body)
                #expect(e["field"] as? String == "keypad" && (e["rule"] as? String)?.contains("exactly one") == true)
            }
            try await client.execute(uri: "/v1/terminals/nope/abort", method: .post) { response in
                #expect(response.status == .notFound)
                let e = try object(response.body)
                #expect((e["error"] as? String)?.contains("no terminal named \"nope\"") == true)
            }
            try await client.execute(uri: "/v1/open", method: .post, headers: Self.jsonHeaders, body: Self.body(#"{"url": "nope://x"}"#)) { response in
                #expect(response.status == .badRequest)
                let e = try object(response.body)
                #expect(e["field"] as? String == "url")
                #expect(e["rule"] as? String == #"the scheme must be vivapayclient (Viva Card Terminal app) or billpocket (Billpocket app), got "nope""#)
            }
            try await client.execute(uri: "/v1/nope", method: .get) { response in
                #expect(response.status == .notFound)
                let e = try object(response.body)
                #expect(e["error"] as? String == #"no route GET "/v1/nope" (docs/openapi.yaml lists them)"#)
            }
        }
    }

    @Test("the host queue takes at most its limit, and a DELETE gives back what it held")
    func hostQueue() async throws {
        try await withAPI { client, bench in
            for _ in 0..<HostOutcomeBody.maximumQueued {
                try await client.execute(uri: "/v1/terminals/bench1/host-queue", method: .post, headers: Self.jsonHeaders,
                                         body: Self.body(#"{"code": "05"}"#)) { #expect($0.status == .created) }
            }
            try await client.execute(uri: "/v1/terminals/bench1/host-queue", method: .post, headers: Self.jsonHeaders,
                                     body: Self.body(#"{"code": "05"}"#)) { response in
                #expect(response.status == .conflict)
            }
            try await client.execute(uri: "/v1/terminals/bench1/host-queue", method: .delete) { response in
                #expect(response.status == .ok)
                let held = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [Any]
                #expect(held?.count == HostOutcomeBody.maximumQueued)
            }
            #expect(try bench.hostQueue(terminal: "bench1").isEmpty)
        }
    }
}
