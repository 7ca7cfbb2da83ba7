import CardIO
import Foundation
import ISO8583
import Ledger
import Synchronization
import Terminal
import Testing
@testable import Daemon
import Fronts
import Workflows

@Suite("strict JSON bodies")
struct JSONBodyTests {
    @Test("a key twice is refused with its path, whatever escapes spell it; one of each is fine", arguments: [
        (#"{"url": "a", "url": "b"}"#, "body.url"),
        (#"{"url": "a", "\u0075rl": "b"}"#, "body.url"),
        (#"{"a": {"b": 1, "b": 2}}"#, "body.a.b"),
        (#"[{"x": 1}, {"x": 1, "x": 2}]"#, "body[1].x"),
    ])
    func duplicates(_ text: String, _ path: String) {
        #expect(throws: JSONBody.Problem(path: path, rule: "appears twice in one object; send each key once")) {
            try JSONBody.check(Array(text.utf8))
        }
    }

    @Test("NUL, deep nesting and trailing text are refused; ordinary bodies pass")
    func other() throws {
        #expect(throws: JSONBody.Problem(path: "body.name", rule: "must not contain NUL (\\u0000)")) {
            try JSONBody.check(Array(#"{"name": "ab\u0000cd"}"#.utf8))
        }
        #expect(throws: JSONBody.Problem.self) { try JSONBody.check(Array((String(repeating: "[", count: 40) + String(repeating: "]", count: 40)).utf8)) }
        #expect(throws: JSONBody.Problem.self) { try JSONBody.check(Array(#"{"a": 1} {"b": 2}"#.utf8)) }
        #expect(throws: JSONBody.Problem.self) { try JSONBody.check(Array(#"{"a": "unterminated}"#.utf8)) }
        for ok in [#"{}"#, #"{"url": "x", "terminal": "bench1", "wait": true}"#, #"{"a": [1, 2.5e3, null, false, "\ud83d\ude00"]}"#, " [ ] "] {
            #expect(throws: Never.self) { try JSONBody.check(Array(ok.utf8)) }
        }
        let decoded = try JSONBody.decode(OpenRequest.self, from: Array(#"{"url": "vivapayclient://x", "wait": false}"#.utf8))
        #expect(decoded.url == "vivapayclient://x" && decoded.wait == false)
    }
}

@Suite("wait:false requests")
struct OpenRequestsTests {
    @Test("at most `capacity` are kept, the oldest dropped first; a finished one keeps no task")
    func capacity() async throws {
        let requests = OpenRequests(capacity: 100)
        var ids: [String] = []
        for i in 0..<1000 {
            ids.append(requests.start { () async throws(DaemonError) -> OpenResult in
                OpenResult(callback: nil, fields: [], status: "failed", message: "m\(i)", transaction: nil)
            })
        }
        #expect(requests.count <= 100)
        guard case .answer(let last)? = try await requests.outcome(ids.last!, wait: true) else {
            Issue.record("the newest request has no answer")
            return
        }
        #expect(last.message == "m999")
        await #expect(throws: DaemonError.self) { _ = try await requests.outcome(ids.first!, wait: true) }
    }

    @Test("a request is dropped once its lifetime is over, at the next start")
    func lifetime() async throws {
        let requests = OpenRequests(capacity: 100, lifetime: .milliseconds(50))
        let old = requests.start { () async throws(DaemonError) -> OpenResult in
            OpenResult(callback: nil, fields: [], status: "failed", message: "old", transaction: nil)
        }
        _ = try await requests.outcome(old, wait: true)
        try await Task.sleep(for: .milliseconds(120))
        _ = requests.start { () async throws(DaemonError) -> OpenResult in
            OpenResult(callback: nil, fields: [], status: "failed", message: "new", transaction: nil)
        }
        await #expect(throws: DaemonError.self) { _ = try await requests.outcome(old, wait: false) }
        #expect(requests.count == 1)
    }
}

@Suite("callback targets")
struct CallbackTargetTests {
    @Test("hosts match as written, IPv6 with or without brackets; nothing is resolved")
    func allowList() {
        let allowed = ["127.0.0.1", "localhost", "::1"]
        #expect(CallbackTarget.parse("http://[::1]:8080/cb").map { $0.host } == "::1")
        #expect(CallbackTarget.isAllowed(host: "::1", allowed))
        #expect(CallbackTarget.isAllowed(host: "::1", ["[::1]"]))
        for host in ["127.1", "2130706433", "0x7f000001", "017700000001", "::ffff:127.0.0.1", "localhost."] {
            #expect(!CallbackTarget.isAllowed(host: host, allowed), "\(host)")
        }
        #expect(CallbackDelivery.targetKey("http://127.0.0.1:9/a", CallbackSettings()) == CallbackDelivery.targetKey("http://127.0.0.1:9/b?x", CallbackSettings()))
        #expect(CallbackDelivery.targetKey("http://127.0.0.1:9/a", CallbackSettings()) != CallbackDelivery.targetKey("http://127.0.0.1:10/a", CallbackSettings()))
    }

    @Test("a delivery slot per target: a third to one target waits, another target goes")
    func flights() {
        let flights = Flights()
        #expect(flights.admit(1, key: "a") && flights.admit(2, key: "a"))
        #expect(!flights.admit(3, key: "a"))
        #expect(!flights.admit(1, key: "b"), "a row under way is not started twice")
        #expect(flights.admit(4, key: "b"))
        flights.finish(1, key: "a")
        #expect(flights.admit(3, key: "a"))
    }

    @Test("a delivered row is not started again before its delivery is committed, whenever the outbox is read")
    func deliveredOnce() {
        let flights = Flights()
        #expect(flights.admit(1, key: "a"))
        flights.delivered(1, answer: "HTTP 200")
        // The commit takes the row before its task has finished, and after it: either way the
        // row (still pending in the outbox until the commit) is not admitted again.
        let (taken, answers) = flights.takeDelivered()
        #expect(taken == [1] && answers == [1: "HTTP 200"])
        flights.finish(1, key: "a")
        #expect(!flights.admit(1, key: "a"), "delivered, not yet committed: a second delivery would be a duplicate")
        #expect(flights.admit(2, key: "a") && flights.admit(3, key: "a"), "its target's slot is free again")
        flights.release(taken)
        flights.finish(2, key: "a")
        #expect(flights.admit(1, key: "a"), "committed and let go (the outbox no longer lists it)")
        // A failed row (its attempt committed before finish) may be started again at once.
        flights.finish(1, key: "a")
        #expect(flights.admit(1, key: "a"))
        // A resend claims only a row the loop does not have in hand.
        #expect(!flights.claim(1), "the loop has it")
        #expect(flights.claim(4))
        #expect(!flights.admit(4, key: "a"), "the resend has it")
        flights.unclaim(4)
        #expect(flights.admit(4, key: "b"))
    }
}

@Suite("the ISO 8583 link's bounded memory")
struct RecentTests {
    @Test("the oldest goes first past the capacity; a key removed or inserted again never evicts its newer value; removals leave no growth")
    func bounded() {
        var r = Recent<Int>(capacity: 3)
        for (i, k) in ["a", "b", "c", "d"].enumerated() { r.insert(i, for: k) }
        #expect(r.count == 3 && r.value(for: "a") == nil && r.value(for: "d") == 3)
        // b is removed then inserted again: its old place in the order must not evict the new value.
        #expect(r.remove("b") == 1)
        r.insert(10, for: "b")
        r.insert(11, for: "e")
        #expect(r.value(for: "b") == 10, "the re-inserted key keeps its newer value")
        #expect(r.value(for: "c") == nil && r.value(for: "d") == 3 && r.value(for: "e") == 11)
        // Insert and remove many times: what is held and what is remembered in order stay bounded.
        for i in 0..<1_000 {
            r.insert(i, for: "k\(i)")
            _ = r.remove("k\(i)")
        }
        #expect(r.count <= 3)
        #expect(r.ordered <= 2 * 3 + 1, "\(r.ordered) entries remembered")
        #expect(r.value(for: "b") == 10 && r.value(for: "e") == 11)
    }
}

@Suite("a completion the ledger refuses", .serialized)
struct UnrecordableTests {
    /// A bench with the demo card in bench1's reader, its upstream `adjust` says.
    static func bench(_ directory: URL, _ adjust: (inout DaemonConfiguration) -> Void = { _ in }) throws -> Bench {
        var configuration = DaemonConfiguration()
        configuration.stateDirectory = directory.path
        configuration.httpPort = nil
        configuration.cardProfiles = [repositoryRoot.appendingPathComponent("Scenarios/cards").path]
        configuration.demoCard = repositoryRoot.appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml").path
        adjust(&configuration)
        let bench = try Bench(configuration: configuration)
        try bench.start()
        return bench
    }

    /// Sells `amount` on bench1 through a front that puts the card number into its callback, which
    /// the ledger refuses in the outbox; returns the message of the `unrecordable` error.
    static func refusedSale(_ bench: Bench, amount: Int64, reference: String) async throws -> String? {
        let terminal = try bench.terminal("bench1")
        try terminal.acquire("test")
        defer { terminal.release() }
        let new = NewTransaction(terminal: "bench1", provider: .viva, action: .sale, amount: amount, currency: 978,
                                 clientReference: reference, createdAt: bench.clock.nowMicroseconds())
        do {
            _ = try await bench.context.cardTransaction(on: terminal, CardTransactionPlan(new: new, kind: .purchase, amountTable: .none)) { run in
                let pan = (try? run.result.get())?.pan ?? ""
                return Callback(url: "myapp://r?pan=\(pan)", target: "myapp://r", fields: [], status: "", message: "")
            }
            Issue.record("the transaction was answered as if recorded")
        } catch {
            guard case .unrecordable(let message) = error else { Issue.record("\(error)"); return nil }
            #expect(DaemonError(error).statusCode == 422)
            return message
        }
        return nil
    }

    @Test("an approval that cannot be recorded is reversed at the host and recorded as failed, never left in progress")
    func approvedButRefused() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-unrec-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bench = try Self.bench(directory)
        defer { bench.stop() }
        let balance = try #require(bench.host.account(pan: "4761739001010010")?.balance)
        let message = try await Self.refusedSale(bench, amount: 1200, reference: "unrec-1")
        #expect(message?.contains("approved, then reversed at the host") == true && message?.contains("recorded as failed") == true, "\(message ?? "")")
        #expect(bench.host.account(pan: "4761739001010010")?.balance == balance, "the approval was taken back")
        let rows = try bench.ledger.transactions(terminal: "bench1")
        let sale = try #require(rows.first { $0.action == .sale })
        #expect(sale.status == .reversed)
        #expect(sale.message?.hasPrefix("not recorded: outbox[0].payload") == true, "\(sale.message ?? "")")
        #expect(rows.contains { $0.action == .reversal && $0.originalID == sale.id })
        #expect(try bench.ledger.outbox(transactionID: sale.id).isEmpty)
    }

    @Test("an external host's approval that cannot be recorded is taken back there with a 0420")
    func upstreamApprovalRefused() async throws {
        // The external host: approves each 0200 (no ARPC, so the card decides alone) and
        // acknowledges everything else, keeping what it got.
        let received = Mutex<[ISOMessage]>([])
        let packager = Packager.pyiso8583Default
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        listener.start(framing: .binary2, onError: { _, _ in }) { _, bytes in
            guard let m = try? packager.unpack(bytes) else { return nil }
            received.withLock { $0.append(m) }
            var answer = IssuerMessages.answer(m, code: .approved)
            if m.mti == "0200" { answer[38] = "EXT001" }
            return try? packager.pack(answer)
        }
        defer { listener.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-unrec-\(UUID().uuidString.prefix(6))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let bench = try Self.bench(directory) {
            $0.upstream = ISO8583Upstream(host: "127.0.0.1", port: listener.port)
            $0.hostTimeout = .seconds(10)
        }
        defer { bench.stop() }
        let message = try await Self.refusedSale(bench, amount: 1300, reference: "unrec-2")
        #expect(message?.contains("approved, then reversed at the host") == true && message?.contains("recorded as failed") == true, "\(message ?? "")")
        let got = received.withLock { $0 }
        #expect(got.map(\.mti) == ["0200", "0420"])
        let reversal = try #require(got.last)
        #expect(reversal[38] == "EXT001" && reversal[4] == "000000001300")
        #expect(reversal[90]?.hasPrefix("0200" + (got.first?[11] ?? "-")) == true, "\(reversal.fields)")
        let sale = try #require(try bench.ledger.transactions(terminal: "bench1").first { $0.action == .sale })
        #expect(sale.status == .reversed)
    }
}

@Suite("log lines")
struct LogLineTests {
    @Test("a plain line on a terminal; the journal's priority prefix when stderr is the journal")
    func lines() {
        let terminal = LineLogHandler(label: "cardbenchd", environment: [:])
        #expect(terminal.line(.warning, "callback 3 given up") == "cardbenchd: callback 3 given up\n")
        let journal = LineLogHandler(label: "cardbenchd", environment: ["JOURNAL_STREAM": "8:12345"])
        #expect(journal.line(.warning, "callback 3 given up") == "<4>cardbenchd: callback 3 given up\n")
        #expect(journal.line(.error, "x").hasPrefix("<3>") && journal.line(.notice, "ready").hasPrefix("<5>"))
    }
}
