import AsyncHTTPClient
import CardIO
import Daemon
import EMV
import Foundation
import Fronts
import ISO8583
import NIOCore
import Synchronization
import Terminal
import Testing
import DaemonTestSupport
import TestSupport

/// SIGKILL in the middle of hundreds of concurrent platform operations and ISO 8583
/// authorisations, then a restart on the same state: what every client saw is what the ledger
/// has, nothing stays in progress, and every notification of what was recorded still arrives.
@Suite("a crash under load", .serialized)
struct CrashUnderLoadTests {
    /// What a client saw of one operation.
    enum Seen: Sendable, Equatable { case done, refused, unknown }

    final class Log: @unchecked Sendable {
        // Unchecked: everything is behind the mutex.
        private let entries = Mutex<[String: Seen]>([:])
        func set(_ key: String, _ seen: Seen) { entries.withLock { $0[key] = seen } }
        var all: [String: Seen] { entries.withLock { $0 } }
        var done: Int { entries.withLock { $0.values.filter { $0 == .done }.count } }
    }

    static func seen(_ status: Int, ok: Set<Int>) -> Seen { ok.contains(status) ? .done : (status == 0 ? .unknown : .refused) }

    @Test("SIGKILL during 300 concurrent Worldline, Citcon and ISO 8583 operations, then a restart: the ledger agrees with every client, nothing in progress, every notification arrives")
    func sigkillUnderLoad() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        let config = "callbacks:\n  allowed_hosts: [127.0.0.1]\nhost:\n  iso8583:\n    listen: 0\n"
        let first = try await DaemonProcess(["--worldline-port", "0", "--citcon-port", "0"], config: config)
        let directory = first.directory
        defer { first.kill() }
        defer { try? FileManager.default.removeItem(at: directory) }
        let w = try await OneCoreTests.worldline(first, merchant: "crash")
        _ = try await first.client.send(method: "PUT", "/v1/worldline/merchants/crash/webhook", json: ["url": "http://127.0.0.1:\(receiver.port)/hooks"])
        let merchant = try JSONDecoder().decode(CitconEndToEndTests.Merchant.self, from: try await first.client.send(
            method: "POST", "/v1/citcon/merchants", json: ["merchantId": "crashc"]).body)
        let citconPort = try String(contentsOfFile: first.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let (_, host) = try await first.json("GET", "/v1/host")
        let listen = try #require(((host as? [String: Any])?["iso8583"] as? [String: Any])?["listen"] as? String)
        let isoPort = try #require(UInt16(listen.split(separator: ":").last ?? ""))

        let worldline = Log(), citcon = Log(), iso = Log()
        let paymentIDs = Log(), chargeIDs = Log()
        try await OneCoreTests.closing(w.http) {
            let token = try #require(((try await OneCoreTests.exchange(w.http, {
                var r = HTTPClientRequest(url: "http://127.0.0.1:\(citconPort)/v1/access-tokens")
                r.method = .POST
                r.headers.add(name: "Authorization", value: "Bearer \(merchant.key ?? "")")
                r.headers.add(name: "Content-Type", value: "application/json")
                r.body = .bytes(ByteBuffer(string: #"{"token_type":"server"}"#))
                return r
            }())).json["data"] as? [String: Any])?["access_token"] as? String)
            @Sendable func citconPost(_ path: String, _ body: String) async -> (Int, [String: Any]) {
                var r = HTTPClientRequest(url: "http://127.0.0.1:\(citconPort)\(path)")
                r.method = .POST
                r.headers.add(name: "Authorization", value: "Bearer \(token)")
                r.headers.add(name: "Content-Type", value: "application/json")
                r.body = .bytes(ByteBuffer(string: body))
                guard let answer = try? await OneCoreTests.exchange(w.http, r) else { return (0, [:]) }
                return (answer.status, answer.json)
            }
            let killer = Task {
                // Kill once a fair part of the load has been answered, while the rest is in flight.
                let deadline = Date().addingTimeInterval(60)
                while worldline.done + citcon.done + iso.done < 60, Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
                first.kill()
            }
            await withTaskGroup(of: Void.self) { group in
                for i in 0..<100 {
                    group.addTask {
                        let body = OneCoreTests.payment(amount: 200 + i, mode: "PRE_AUTHORIZATION")
                        guard let created = try? await w.send(.POST, "/v2/crash/payments", body) else {
                            worldline.set("create-\(i)", .unknown)
                            return
                        }
                        worldline.set("create-\(i)", Self.seen(created.status, ok: [201]))
                        guard created.status == 201, let id = (created.json["payment"] as? [String: Any])?["id"] as? String else { return }
                        paymentIDs.set(id, .done)
                        let captured = try? await w.send(.POST, "/v2/crash/payments/\(id)/capture", "{}")
                        worldline.set("capture-\(id)", Self.seen(captured?.status ?? 0, ok: [200]))
                    }
                    group.addTask {
                        let (status, json) = await citconPost("/v1/charges", #"{"transaction":{"reference":"crash-\#(i)","amount":\#(300 + i),"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}},"urls":{"ipn":"http://127.0.0.1:\#(receiver.port)/ipn"}}"#)
                        citcon.set("charge-crash-\(i)", Self.seen(status, ok: [200]))
                        guard status == 200, let id = (json["data"] as? [String: Any])?["id"] as? String else { return }
                        chargeIDs.set(id, .done)
                        let (captured, _) = await citconPost("/v1/captures", #"{"transaction_id":"\#(id)"}"#)
                        citcon.set("capture-\(id)", Self.seen(captured, ok: [200]))
                    }
                }
                for connection in 0..<4 {
                    group.addTask {
                        guard let c = try? FramedConnection.connect(host: "127.0.0.1", port: isoPort, framing: .binary2, timeout: .seconds(10)) else {
                            for n in 0..<25 { iso.set(Self.isoKey(connection, n), .unknown) }
                            return
                        }
                        defer { c.close() }
                        for n in 0..<25 {
                            let stan = connection * 100 + n + 1
                            let context = MessageContext(terminalID: "CRASH00\(connection)", merchantID: "M1", stan: STAN(stan)!,
                                                         rrn: String(format: "%012d", stan), date: UTCDateParts(year: 2026, month: 1, day: 1))
                            var sale = AuthorisationRequest(pan: "4761739001010010", aid: [], amount: 100 + n, currency: 978, arqc: nil,
                                                            cryptogramData: nil, date: context.date)
                            sale.posEntryMode = "01"
                            do {
                                try c.send(try Packager.pyiso8583Default.pack(TerminalMessages.authorisation(sale, context)))
                                let answer = try Packager.pyiso8583Default.unpack(try c.receive(until: .now + .seconds(10)).message)
                                iso.set(Self.isoKey(connection, n), answer[39] == "00" ? .done : .refused)
                            } catch {
                                for rest in n..<25 { iso.set(Self.isoKey(connection, rest), .unknown) }
                                return
                            }
                        }
                    }
                }
            }
            _ = try? await killer.value
            first.kill()
        }
        let outcomes = [worldline, citcon, iso].flatMap { $0.all.values }
        let answered = outcomes.filter { $0 == .done }.count, cut = outcomes.filter { $0 == .unknown }.count
        print("crash under load: \(answered) operations answered done, \(outcomes.filter { $0 == .refused }.count) refused, \(cut) cut by the kill")
        #expect(answered > 0 && cut > 0, "the kill must come while operations are answered and others are in flight: \(answered) done, \(cut) cut")

        // The restart: the same state directory and configuration.
        let second = try await DaemonProcess(["--worldline-port", "0", "--citcon-port", "0"], config: config, directory: directory)
        defer { second.stop() }
        let w2 = try await OneCoreTests.worldline(second, merchant: "crash")
        try await OneCoreTests.closing(w2.http) {
            let rows = try await Self.allTransactions(second)
            #expect(!rows.contains { $0["status"] as? String == "in_progress" }, "a row stayed in progress")

            // Worldline: every payment the client saw created is there; every capture it saw done is recorded.
            var expectedHooks: Set<String> = []
            for id in paymentIDs.all.keys.sorted() {
                let p = try await w2.send(.GET, "/v2/crash/payments/\(id)")
                let status = p.json["status"] as? String
                // A capture is requested (CAPTURE_REQUESTED) and settles later (CAPTURED): either is a capture recorded.
                let captured = status == "CAPTURE_REQUESTED" || status == "CAPTURED"
                #expect(p.status == 200 && (captured || status == "PENDING_CAPTURE"), "\(id): \(p.text)")
                switch worldline.all["capture-\(id)"] {
                case .done?: #expect(captured, "\(id): the client saw its capture done")
                case .refused?: #expect(status == "PENDING_CAPTURE", "\(id): the client saw its capture refused")
                default: break
                }
                expectedHooks.insert("\(id) payment.pending_capture")
                if captured { expectedHooks.insert("\(id) payment.capture_requested") }
                if status == "CAPTURED" { expectedHooks.insert("\(id) payment.captured") }
            }
            // Citcon: the same for charges and their captures.
            var expectedIPNs: Set<String> = []
            let token = try await Self.citconToken(second, key: merchant.key ?? "", http: w2.http)
            let port2 = try String(contentsOfFile: second.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            for id in chargeIDs.all.keys.sorted() {
                var r = HTTPClientRequest(url: "http://127.0.0.1:\(port2)/v1/transactions/\(id)")
                r.method = .GET
                r.headers.add(name: "Authorization", value: "Bearer \(token)")
                let inquiry = try await OneCoreTests.exchange(w2.http, r)
                let status = (inquiry.json["data"] as? [String: Any])?["status"] as? String
                #expect(["authorized", "succeeded"].contains(status), "\(id): \(inquiry.text)")
                switch citcon.all["capture-\(id)"] {
                case .done?: #expect(status == "succeeded", "\(id): the client saw its capture done")
                case .refused?: #expect(status == "authorized", "\(id): the client saw its capture refused")
                default: break
                }
                expectedIPNs.insert("\(id) authorized")
                if status == "succeeded" { expectedIPNs.insert("\(id) captured") }
            }
            // A charge the client saw refused is not recorded as done.
            let citconRows = rows.filter { $0["provider"] as? String == "citcon" }
            for (key, seen) in citcon.all where key.hasPrefix("charge-") && seen == .refused {
                let reference = String(key.dropFirst("charge-".count))
                #expect(!citconRows.contains { $0["clientReference"] as? String == reference && $0["status"] as? String == "approved" }, "\(reference)")
            }
            // ISO 8583: every 00 the terminal got is an approved host-side row.
            let hostRows = rows.filter { $0["provider"] as? String == "iso8583" }
            for (key, seen) in iso.all where seen == .done {
                #expect(hostRows.contains { $0["clientReference"] as? String == key && $0["status"] as? String == "approved" }, "\(key) was approved and is not recorded")
            }
            // Every notification of what was recorded arrives (at least once across the crash).
            let deadline = Date().addingTimeInterval(60)
            var missing: Set<String> = []
            repeat {
                var got: Set<String> = []
                for body in receiver.bodies {
                    let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
                    if let type = json["type"] as? String, let id = (json["payment"] as? [String: Any])?["id"] as? String { got.insert("\(id) \(type)") }
                    if let id = json["id"] as? String, let status = json["status"] as? String, json["transaction_type"] as? String == "charge" { got.insert("\(id) \(status)") }
                }
                missing = expectedHooks.union(expectedIPNs).subtracting(got)
                if missing.isEmpty { break }
                try await Task.sleep(for: .milliseconds(200))
            } while Date() < deadline
            #expect(missing.isEmpty, "\(missing.count) notifications never arrived: \(missing.sorted().prefix(5))")
        }
    }

    static func isoKey(_ connection: Int, _ n: Int) -> String { "CRASH00\(connection)/" + String(format: "%06d", connection * 100 + n + 1) }

    static func allTransactions(_ daemon: DaemonProcess) async throws -> [[String: Any]] {
        var rows: [[String: Any]] = []
        var before: Int? = nil
        while true {
            let reply = try await daemon.client.send(method: "GET", "/v1/transactions?limit=1000" + (before.map { "&before=\($0)" } ?? ""))
            let page = (try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]]) ?? []
            rows += page
            guard page.count == 1000, let last = page.last?["id"] as? Int else { return rows }
            before = last
        }
    }

    static func citconToken(_ daemon: DaemonProcess, key: String, http: HTTPClient) async throws -> String {
        let port = try String(contentsOfFile: daemon.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var r = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/access-tokens")
        r.method = .POST
        r.headers.add(name: "Authorization", value: "Bearer \(key)")
        r.headers.add(name: "Content-Type", value: "application/json")
        r.body = .bytes(ByteBuffer(string: #"{"token_type":"server"}"#))
        return try #require(((try await OneCoreTests.exchange(http, r)).json["data"] as? [String: Any])?["access_token"] as? String)
    }
}
