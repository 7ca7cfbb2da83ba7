import Daemon
import Foundation
import GRDB
import Testing

/// Collects the callbacks of approved sales as the caller receives them.
final class Received: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [OpenResult] = []
    func append(_ r: OpenResult) { lock.withLock { values.append(r) } }
    var count: Int { lock.withLock { values.count } }
    var all: [OpenResult] { lock.withLock { values } }
}

@Suite("cardbenchd lifecycle, Viva actions beyond sale, configuration", .serialized)
struct DaemonLifecycleTests {
    @Test("SIGKILL during a burst: after a restart no approved transaction or callback is lost and no STAN is reused",
          arguments: [25, 60])
    func killDuringBurst(after approvals: Int) async throws {
        let first = try await DaemonProcess(["--demo"])
        let directory = first.directory
        defer { try? FileManager.default.removeItem(at: directory) }
        let received = Received()
        let burst = Task {
            var n = 0
            while !Task.isCancelled {
                n += 1
                guard let r = try? await first.open(saleURL(amount: 100 + n, tip: 0, reference: "burst-\(n)")) else { return }
                if let result = r.result, result.status == "success" { received.append(result) }
            }
        }
        while received.count < approvals { try await Task.sleep(for: .milliseconds(2)) }
        first.kill()
        burst.cancel()
        _ = await burst.value

        let second = try await DaemonProcess(["--demo"], directory: directory)
        defer { second.stop() }
        var stans = Set<String>()
        for result in received.all {
            let fields = callbackFields(try #require(result.callback)).fields
            let uuid = try #require(value(fields, "transactionId"))
            let (status, body) = try await second.json("GET", "/v1/transactions/\(uuid)")
            #expect(status == 200, "transaction \(uuid) announced to the caller is in the ledger")
            let t = try #require(body as? [String: Any])
            #expect(t["status"] as? String == "approved")
            #expect(t["stan"] as? String == value(fields, "referenceNumber"))
            let callbacks = t["callbacks"] as? [[String: Any]] ?? []
            #expect(callbacks.contains { $0["payload"] as? String == result.callback }, "its callback is in the outbox")
        }
        let (_, listed) = try await second.json("GET", "/v1/transactions?limit=1000")
        let rows = try #require(listed as? [[String: Any]])
        for row in rows {
            let stan = try #require(row["stan"] as? String)
            #expect(stans.insert(stan).inserted, "STAN \(stan) used twice")
            #expect(row["status"] as? String != "in_progress", "interrupted transactions are failed at start")
        }
        let highest = stans.compactMap(Int.init).max() ?? 0
        let next = try #require(try await second.open(saleURL(reference: "after-restart")).result)
        #expect(Int(next.transaction?.stan ?? "") == highest + 1)
    }

    @Test("installments: in range without a prompt, the keypad when out of range, continue-without for a card without")
    func installments() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let inRange = try #require(try await daemon.open(saleURL(tip: 0, reference: "i1", extra: "&withInstallments=true&preferredInstallments=6")).result)
        #expect(value(callbackFields(inRange.callback ?? "").fields, "installments") == "6")
        // 0: the cardholder is asked (options 2…12: option 3 is 4 installments).
        _ = try cli(["keypad", "bench1", "--select", "3"], socket: daemon.socket)
        let prompted = try #require(try await daemon.open(saleURL(tip: 0, reference: "i2", extra: "&withInstallments=true&preferredInstallments=0")).result)
        #expect(value(callbackFields(prompted.callback ?? "").fields, "installments") == "4", "\(prompted.message)")
        #expect(prompted.transaction?.installments == 4)

        // A card without installments: the cardholder confirms paying at once, or cancels.
        let plain = try await DaemonProcess(["--demo-card", card("visa-debit-cvn18.yaml")])
        defer { plain.remove() }
        _ = try cli(["keypad", "bench1", "--confirm"], socket: plain.socket)
        let without = try #require(try await plain.open(saleURL(tip: 0, reference: "i3", extra: "&withInstallments=true&preferredInstallments=3")).result)
        #expect(without.status == "success", "\(without.message)")
        #expect(value(callbackFields(without.callback ?? "").fields, "installments") == nil)
        _ = try cli(["keypad", "bench1", "--cancel"], socket: plain.socket)
        let refused = try #require(try await plain.open(saleURL(tip: 0, reference: "i4", extra: "&withInstallments=true&preferredInstallments=3")).result)
        #expect(refused.message == "(-4) USER_CANCEL")
        #expect(refused.transaction?.status == "cancelled")
    }

    @Test("demo mode taps its card (--demo-interface tap): each sale a fresh tap; a card that cannot be tapped is refused with exit 2")
    func demoTap() async throws {
        let daemon = try await DaemonProcess(["--demo-card", card("visa-debit-contactless.yaml"), "--demo-interface", "tap"])
        defer { daemon.remove() }
        for reference in ["t1", "t2"] {
            let sale = try #require(try await daemon.open(saleURL(amount: 15_000, tip: 0, reference: reference)).result)
            #expect(sale.status == "success", "\(sale.message) \(daemon.logText)")
            #expect(value(callbackFields(sale.callback ?? "").fields, "verificationMethod") == "CONTACTLESS - NO CVM")
            #expect(sale.transaction?.entryMode == "contactless")
        }
        // The card API refuses a presentation the card or the reader cannot make, naming the field.
        for (body, field) in [(CardBody(profile: "visa-credit-cvn10", interface: "tap"), "interface"),
                              (CardBody(profile: "visa-debit-contactless", interface: "tap", then: ["wave"]), "then[0]"),
                              (CardBody(profile: "visa-wearable", interface: "swipe"), "interface")] {
            let reply = try await daemon.client.send(method: "POST", "/v1/terminals/bench1/card", json: body)
            let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
            #expect(reply.status == 400 && object?["field"] as? String == field, "\(reply.status) \(String(describing: object))")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-demo-tap-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let refused = try runDaemonToExit(["--demo-card", card("visa-credit-cvn10.yaml"), "--demo-interface", "tap",
                                           "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("demo.interface"), "\(refused.stderr)")
    }

    @Test("pre_auth then capture_pre_auth, batch close and open, transactionDetails")
    func preAuthCaptureBatchDetails() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let base = "vivapayclient://pay/v1?callback=cb://r&merchantKey=K&appId=a"
        let pre = try #require(try await daemon.open(base + "&action=pre_auth&amount=5000&clientTransactionId=p1").result)
        #expect(pre.status == "success", "\(pre.message)")
        #expect(pre.transaction?.action == "pre_auth")
        let capture = try #require(try await daemon.open(base + "&action=capture_pre_auth&referenceNumber=\(pre.transaction?.stan ?? "")&amount=4000").result)
        #expect(capture.status == "success", "\(capture.message)")
        #expect(capture.transaction?.action == "capture")
        #expect(capture.transaction?.amount == 4000)
        let twice = try #require(try await daemon.open(base + "&action=capture_pre_auth&referenceNumber=\(pre.transaction?.stan ?? "")").result)
        #expect(twice.message == "Pre-authorisation already captured.")

        let details = try #require(try await daemon.open(base + "&action=transactionDetails&clientTransactionId=p1").result)
        #expect(details.status == "success")
        #expect(value(callbackFields(details.callback ?? "").fields, "referenceNumber") == pre.transaction?.stan)
        let missing = try #require(try await daemon.open(base + "&action=transactionDetails&clientTransactionId=nope").result)
        #expect(missing.message == "Transaction not found.")

        let close = try #require(try await daemon.open(base + "&action=batch&command=close").result)
        #expect(close.status == "success", "\(close.message)")
        let closeAgain = try #require(try await daemon.open(base + "&action=batch&command=close").result)
        #expect(closeAgain.message == "No open batch.")
        let open = try #require(try await daemon.open(base + "&action=batch&command=open").result)
        #expect(open.status == "success")
        let terminals = try await daemon.json("GET", "/v1/terminals")
        #expect(((terminals.1 as? [[String: Any]])?.first?["batchNumber"] as? Int) == 2)
    }

    @Test("the manual clock moves only through the API; the system clock refuses to")
    func clock() async throws {
        let manual = try await DaemonProcess(config: "clock:\n  mode: manual\n  start: 2026-11-23T22:59:58-06:00\n")
        defer { manual.remove() }
        let set = try cli(["clock", "--advance", "1"], socket: manual.socket)
        #expect(set.stdout.contains("2026-11-24T04:59:59Z"), "\(set.stdout) \(set.stderr)")
        let system = try await DaemonProcess()
        defer { system.remove() }
        let refused = try cli(["clock", "--advance", "1"], socket: system.socket)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("system clock"))
    }

    @Test("a bad configuration value stops the daemon at start with its key and rule")
    func badConfiguration() async throws {
        do {
            let d = try await DaemonProcess(config: "terminals: [bench1]\nterminal:\n  bench1:\n    tid: \"123\"\n")
            d.remove()
            Issue.record("the daemon started on a 3-digit TID")
        } catch let error as HarnessError {
            #expect(error.description.contains("terminal.bench1.tid: must be 8 digits"), "\(error)")
        }
    }

    @Test("SIGTERM: the daemon ends a waiting transaction cleanly, says so, and exits 0")
    func gracefulStop() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        let (_, body) = try await daemon.json("POST", "/v1/open", OpenRequest(url: saleURL(reference: "stopping"), wait: false))
        let id = try #require((body as? [String: Any])?["id"] as? String)
        try await Task.sleep(for: .milliseconds(200))
        let waiting = Task { try await daemon.client.send(method: "GET", "/v1/requests/\(id)") }
        try await Task.sleep(for: .milliseconds(100))
        #expect(daemon.stop() == 0)
        let reply = try await waiting.value
        let result = try JSONDecoder().decode(OpenResult.self, from: reply.body)
        #expect(result.status == "failed")
        #expect(result.transaction?.status == "cancelled")
        #expect(daemon.logText.contains("stopping"))
        // The STANs reserved ahead were given back, so a reboot now would skip none.
        let counters = try await DatabaseQueue(path: daemon.state + "/ledger.sqlite").read { db in
            try Row.fetchAll(db, sql: "SELECT last_stan, stan_reserved FROM terminal").map { ($0[0] as Int, $0[1] as Int) }
        }
        #expect(!counters.isEmpty && counters.allSatisfy { $0.0 == $0.1 }, "\(counters)")
        #expect(counters.contains { $0.0 >= 1 }, "the cancelled sale had a STAN")
    }
}

@Suite("callback delivery and metrics", .serialized)
struct DeliveryTests {
    @Test("an http callback on an allowed host is requested; a command gets the URL; a disallowed host fails after its attempts")
    func delivery() async throws {
        let server = try await LoopbackHTTPServer(serving: "cb")
        defer { server.stop() }
        let port = server.port, collected = server.requests

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbd-delivery-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = directory.appendingPathComponent("record.sh")
        let received = directory.appendingPathComponent("received.txt")
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(received.path)'\n".write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        let daemon = try await DaemonProcess(["--demo"], config: """
            callbacks:
              command: \(script.path)
              max_attempts: 2
            """, directory: directory)
        defer { daemon.remove() }

        let http = try #require(try await daemon.open(saleURL(reference: "web-1", callback: "http://127.0.0.1:\(port)/cb")).result)
        #expect(http.status == "success")
        let app = try #require(try await daemon.open(saleURL(reference: "app-1")).result)
        let blocked = try #require(try await daemon.open(saleURL(reference: "web-2", callback: "http://192.0.2.1/cb")).result)
        var delivered = false, failed = false, commanded = false, requested = false
        // The webhook's server records the request after answering it: wait for that too.
        for _ in 0..<200 where !(delivered && failed && commanded && requested) {
            try await Task.sleep(for: .milliseconds(50))
            requested = collected.items.contains { $0.contains("GET /cb?status=success&message=Transaction%20successful.&action=sale") }
            let (_, a) = try await daemon.json("GET", "/v1/transactions/\(http.transaction?.id ?? 0)")
            delivered = ((a as? [String: Any])?["callbacks"] as? [[String: Any]])?.first?["status"] as? String == "delivered"
            let (_, b) = try await daemon.json("GET", "/v1/transactions/\(blocked.transaction?.id ?? 0)")
            let row = ((b as? [String: Any])?["callbacks"] as? [[String: Any]])?.first
            failed = row?["status"] as? String == "failed"
            if failed { #expect((row?["lastError"] as? String)?.contains("allowed_hosts") == true) }
            commanded = ((try? String(contentsOf: received, encoding: .utf8)) ?? "").contains(app.callback ?? "-")
        }
        #expect(delivered, "the allowed webhook was delivered")
        let blockedState = try await daemon.json("GET", "/v1/transactions/\(blocked.transaction?.id ?? 0)").1
        let httpState = try await daemon.json("GET", "/v1/transactions/\(http.transaction?.id ?? 0)").1
        #expect(failed, "the disallowed host was given up after 2 attempts: \(String(describing: blockedState))")
        #expect(delivered, "\(String(describing: httpState))")
        #expect(commanded, "the command got the app callback as its argument")
        #expect(requested, "\(collected.items)")
    }

    @Test("on a manual clock a failed callback is retried when the clock has moved by its backoff, not before")
    func retryOnTheBenchClock() async throws {
        let daemon = try await DaemonProcess(["--demo"], config: """
            clock:
              mode: manual
            callbacks:
              max_attempts: 3
            """)
        defer { daemon.remove() }
        let sale = try #require(try await daemon.open(saleURL(reference: "retry-1", callback: "http://192.0.2.1/cb")).result)
        func row() async throws -> [String: Any]? {
            let (_, t) = try await daemon.json("GET", "/v1/transactions/\(sale.transaction?.id ?? 0)")
            return ((t as? [String: Any])?["callbacks"] as? [[String: Any]])?.first
        }
        func attempts(reaching n: Int) async throws -> Int {
            var seen = 0
            for _ in 0..<100 {
                seen = try await row()?["attempts"] as? Int ?? 0
                if seen >= n { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            return seen
        }
        // The first attempt is at once; its failure is retried 0.5 s later on the bench clock.
        #expect(try await attempts(reaching: 1) == 1)
        // Real time passing does not bring the retry: the delivery loop looks every 100 ms.
        try await Task.sleep(for: .milliseconds(700))
        #expect(try await row()?["attempts"] as? Int == 1)
        _ = try await daemon.json("POST", "/v1/clock", ["advanceSeconds": 1])
        #expect(try await attempts(reaching: 2) == 2)
        _ = try await daemon.json("POST", "/v1/clock", ["advanceSeconds": 1])
        #expect(try await attempts(reaching: 3) == 3)
        for _ in 0..<100 where try await row()?["status"] as? String != "failed" { try await Task.sleep(for: .milliseconds(20)) }
        #expect(try await row()?["status"] as? String == "failed")
    }

    @Test("/metrics counts transactions by status and API requests by route")
    func metrics() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        _ = try await daemon.open(saleURL(reference: "m1"))
        _ = try await daemon.client.send(method: "POST", "/v1/terminals/bench1/host-queue", json: ["code": "05"])
        _ = try await daemon.open(saleURL(reference: "m2"))
        // A refusal is counted with the status the client got, on the route it came to.
        let refused = try await daemon.client.send(method: "POST", "/v1/open", json: OpenRequest(url: "nope://x"))
        #expect(refused.status == 400)
        let missing = try await daemon.client.send(method: "GET", "/v1/transactions/999999")
        #expect(missing.status == 404)
        let reply = try await daemon.client.send(method: "GET", "/metrics")
        let text = String(decoding: reply.body, as: UTF8.self)
        #expect(text.contains(#"cardbench_transactions_total{status="approved"} 1"#), "\(text)")
        #expect(text.contains(#"cardbench_transactions_total{status="declined"} 1"#))
        #expect(text.contains("cardbench_transaction_duration_seconds_bucket"))
        #expect(text.contains(#"cardbench_api_requests_total{route="open",status="200"} 2"#))
        #expect(text.contains(#"cardbench_api_requests_total{route="open",status="400"} 1"#))
        #expect(text.contains(#"cardbench_api_requests_total{route="transaction",status="404"} 1"#))
    }

    @Test("every metric the Grafana dashboard and the Prometheus alerts query is one the daemon exports (packaging/observability/check.py)",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs python3"))
    func observabilityKit() async throws {
        // Every series once: a sale, a decline, an API error, and a callback delivery attempt
        // (an app-scheme callback handed to a command).
        let daemon = try await DaemonProcess(["--demo"], config: "callbacks:\n  command: [/bin/true]\n")
        defer { daemon.remove() }
        _ = try await daemon.open(saleURL(reference: "o1"))
        _ = try await daemon.client.send(method: "POST", "/v1/terminals/bench1/host-queue", json: ["code": "05"])
        _ = try await daemon.open(saleURL(reference: "o2"))
        _ = try await daemon.client.send(method: "GET", "/v1/transactions/999999")
        var text = ""
        for _ in 0..<100 {
            text = String(decoding: try await daemon.client.send(method: "GET", "/metrics").body, as: UTF8.self)
            if text.contains("cardbench_callback_deliveries_total") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-metrics-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let metrics = directory.appendingPathComponent("metrics.txt")
        try text.write(to: metrics, atomically: true, encoding: .utf8)
        let kit = repositoryRoot.appendingPathComponent("packaging/observability")
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        check.arguments = [kit.appendingPathComponent("check.py").path, metrics.path,
                           kit.appendingPathComponent("cardbench-dashboard.json").path, kit.appendingPathComponent("cardbench-alerts.yaml").path]
        let output = Pipe()
        check.standardOutput = output
        check.standardError = output
        try check.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        check.waitUntilExit()
        #expect(check.terminationStatus == 0, "\(printed)\n/metrics:\n\(text)")

        // The checker can fail: a dashboard querying a metric the daemon does not export.
        let broken = directory.appendingPathComponent("dashboard.json")
        let dashboard = try String(contentsOf: kit.appendingPathComponent("cardbench-dashboard.json"), encoding: .utf8)
        try dashboard.replacingOccurrences(of: "cardbench_transactions_total", with: "cardbench_transactions_count_total")
            .write(to: broken, atomically: true, encoding: .utf8)
        let again = Process()
        again.executableURL = check.executableURL
        again.arguments = [check.arguments![0], metrics.path, broken.path, check.arguments![3]]
        again.standardOutput = FileHandle.nullDevice
        again.standardError = FileHandle.nullDevice
        try again.run()
        again.waitUntilExit()
        #expect(again.terminationStatus == 1)
    }
}
