import Daemon
import Foundation
import Testing

/// A daemon with the terminals the kinds of transaction need: bench1 (every interface), fb
/// (fallback allowed) and iso (authorising against the daemon's own issuer over ISO 8583).
final class RecordBench: @unchecked Sendable {
    let daemon: DaemonProcess
    let folder: String

    init() async throws {
        let port = Int.random(in: 20_000...30_000)
        daemon = try await DaemonProcess([], config: """
            terminals: [bench1, fb, iso]
            terminal:
              bench1:
                tid: "10000001"
              fb:
                tid: "10000002"
                fallback: true
              iso:
                tid: "10000003"
                host: iso8583://127.0.0.1:\(port)
            host:
              timeout_seconds: 3
              iso8583:
                listen: \(port)
            emv:
              bench_ca: \(repositoryRoot.appendingPathComponent("Scenarios/ca/bench-ca.yaml").path)
            """)
        folder = daemon.directory.appendingPathComponent("recorded").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    func cli(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try DaemonTests.cli(arguments, socket: daemon.socket)
    }

    /// Opens `url` on `terminal` and returns the ledger id of the sale it made; the card the
    /// terminal held is taken out after.
    func open(_ url: String, terminal: String = "bench1") async throws -> String {
        let opened = try cli(["open", url, "--terminal", terminal])
        #expect(!opened.stdout.isEmpty, "\(opened.stderr)")
        _ = try await daemon.client.send(.DELETE, "/v1/terminals/\(terminal)/card")
        return try latestSale(terminal: terminal)
    }

    /// The ledger id of the newest sale on `terminal` (a reversal or the issuer's own row may be newer).
    func latestSale(terminal: String? = nil, provider: String? = nil) throws -> String {
        let list = try cli(["tx", "list", "--limit", "10", "--json"] + (terminal.map { ["--terminal", $0] } ?? []))
        let rows = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        let sale = rows.first { row in
            let action = row["action"] as? String
            return (action == "sale" || action == "pre_auth") && (provider == nil || row["provider"] as? String == provider)
        }
        return String(describing: try #require(sale?["id"], "\(list.stdout)"))
    }

    /// Records transaction `id` as `<name>.yaml` and runs it in process and against the daemon.
    @discardableResult
    func recordAndRun(_ id: String, _ name: String) async throws -> String {
        let file = "\(folder)/\(name).yaml"
        let recorded = try cli(["scenario", "record", id, "--out", file])
        #expect(recorded.status == 0, "\(name): \(recorded.stderr)")
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        let inProcess = try cliOffline(["scenario", "run", file, "--in-process"], environment: [:])
        #expect(inProcess.status == 0, "\(name) in process:\n\(inProcess.stdout)\(inProcess.stderr)\n\(text)")
        let live = try cli(["scenario", "run", file])
        #expect(live.status == 0, "\(name) against the daemon:\n\(live.stdout)\(live.stderr)\n\(text)")
        // A run against the daemon leaves its last card in the reader.
        for terminal in ["bench1", "fb", "iso"] { _ = try await daemon.client.send(.DELETE, "/v1/terminals/\(terminal)/card") }
        return text
    }

    func tearDown() { daemon.remove() }
}

@Suite("scenario record: a transaction written as a scenario that replays it", .serialized)
struct RecordEndToEndTests {
    @Test("each kind of card-present transaction recorded passes in process and against the daemon: chip, tap, swipe, fallback, online PIN with a decline, card pulled, external host, Billpocket")
    func cardPresent() async throws {
        let bench = try await RecordBench()
        defer { bench.tearDown() }

        _ = try bench.cli(["card", "insert", "--profile", "visa-credit-cvn10", "--terminal", "bench1"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "1234"])
        let chip = try await bench.recordAndRun(try await bench.open(saleURL(amount: 1500, tip: 0, reference: "chip1")), "chip")
        #expect(chip.contains("keypad: {pin: \"1234\"}") && chip.contains("card: visa-credit-cvn10.yaml"), "\(chip)")

        // A cardholder who takes 1.5 s over the PIN: the recording answers 1.5 s after the prompt.
        _ = try bench.cli(["card", "insert", "--profile", "visa-credit-cvn10", "--terminal", "bench1"])
        #expect(try bench.cli(["keypad", "bench1", "--pin", "1234", "--after", "1.5"]).status == 0)
        let slow = try await bench.recordAndRun(try await bench.open(saleURL(amount: 1600, tip: 0, reference: "slow1")), "slow-pin")
        #expect(slow.contains("keypad: {pin: \"1234\", after: 1.5}"), "\(slow)")
        // The replay against the daemon (its system clock) waited as long.
        let replay = try await bench.daemon.client.send(.GET, "/v1/transactions/\(try bench.latestSale(terminal: "bench1"))")
        let entry = (try JSONSerialization.jsonObject(with: replay.body) as? [String: Any])?["entry"] as? [String: Any]
        let waited = ((entry?["prompts"] as? [[String: Any]])?.first?["waitedMilliseconds"] as? Int) ?? 0
        #expect((1400...10_000).contains(waited), "the replay's PIN came \(waited) ms after its prompt")

        _ = try bench.cli(["card", "tap", "--profile", "visa-credit-qvsdc-fdda", "--terminal", "bench1"])
        _ = try bench.cli(["host", "queue", "bench1", "--code", "05"])
        let tap = try await bench.recordAndRun(try await bench.open(saleURL(amount: 8000, tip: 0, reference: "tap1")), "tap")
        #expect(tap.contains("card: {tap: card}") && tap.contains("entryMode: contactless") && tap.contains("host: {respond: \"05\"}"),
                "a qVSDC tap has no GENERATE AC, and its host's answer is still recorded: \(tap)")

        _ = try bench.cli(["card", "swipe", "--profile", "magstripe-only-101", "--terminal", "bench1"])
        let swipe = try await bench.recordAndRun(try await bench.open(saleURL(amount: 2500, tip: 0, reference: "swipe1")), "swipe")
        #expect(swipe.contains("card: {swipe: card}"), "\(swipe)")

        _ = try bench.cli(["card", "insert", "--profile", "visa-unreadable-chip", "--terminal", "fb", "--then", "swipe"])
        let fallback = try await bench.recordAndRun(try await bench.open(saleURL(amount: 15000, tip: 0, reference: "fb1"), terminal: "fb"), "fallback")
        #expect(fallback.contains("fallback: true") && fallback.contains("then: [swipe]") && fallback.contains("entryMode: fallback"), "\(fallback)")

        _ = try bench.cli(["card", "insert", "--profile", "visa-debit-cvn18", "--terminal", "bench1"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "1234"])
        _ = try bench.cli(["host", "queue", "bench1", "--code", "51"])
        let online = try await bench.recordAndRun(try await bench.open(saleURL(amount: 3000, tip: 0, reference: "pin1")), "online-pin-51")
        #expect(online.contains("host: {respond: \"51\"}") && online.contains("Enciphered PIN verified online"), "\(online)")

        _ = try bench.cli(["card", "insert", "--profile", "visa-credit-cvn10", "--terminal", "bench1", "--remove-after", "GENERATE AC"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "1234"])
        let pulled = try await bench.recordAndRun(try await bench.open(saleURL(amount: 2000, tip: 0, reference: "pull1")), "card-pulled")
        #expect(pulled.contains("remove_after: \"GENERATE AC#1\"") && pulled.contains("status: reversed"), "\(pulled)")
        // The reversal row the removal made is not recorded: its sale is.
        let list = try bench.cli(["tx", "list", "--terminal", "bench1", "--limit", "10", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        let reversal = try #require(rows.first { $0["action"] as? String == "reversal" }?["id"])
        let refused = try bench.cli(["scenario", "record", String(describing: reversal)])
        #expect(refused.status == 1 && refused.stderr.contains("only sales and authorisations are recorded"), "\(refused.stderr)")

        _ = try bench.cli(["card", "insert", "--profile", "visa-credit-cvn10", "--terminal", "iso"])
        _ = try bench.cli(["keypad", "iso", "--pin", "1234"])
        let iso = try await bench.recordAndRun(try await bench.open(saleURL(amount: 2200, tip: 0, reference: "iso1"), terminal: "iso"), "external-host")
        #expect(iso.contains("iso8583_host:") && iso.contains("answers: [issuer]") && iso.contains("host_messages:"), "\(iso)")

        let user = try bench.cli(["billpocket", "user", "create", "--name", "Rec", "--json"])
        let token = try #require((try JSONSerialization.jsonObject(with: Data(user.stdout.utf8)) as? [String: Any])?["token"] as? String, "\(user.stderr)")
        _ = try bench.cli(["card", "insert", "--profile", "carnet-debit", "--terminal", "bench1"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "2468"])
        let venta = try await bench.recordAndRun(try await bench.open("billpocket://transaction=venta&usertoken=\(token)&amount=100.00&identifier=bp1&urlScheme=Sender"), "billpocket")
        #expect(venta.contains("billpocket: {create_user"), "\(venta)")
    }

    @Test("a card none of the daemon's profiles is made from the trace (number replaced); Worldline and Citcon payments become their API calls")
    func fromTraceAndPlatforms() async throws {
        let bench = try await RecordBench()
        defer { bench.tearDown() }
        let odd = try oddCardFile(pan: luhnNumber("476173900101077"))
        #expect(try bench.cli(["card", "insert", "--profile", odd, "--terminal", "bench1"]).status == 0)
        _ = try bench.cli(["keypad", "bench1", "--select", "2"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "4321"])
        let id = try await bench.open(saleURL(amount: 1800, tip: 0, reference: "odd1"))
        let text = try await bench.recordAndRun(id, "from-trace")
        #expect(text.contains("card: recorded-\(id)-card.yaml") && text.contains("made from the trace"), "\(text)")
        #expect(text.contains("keypad: {select: 2}"), "the application chosen: \(text)")
        let card = try String(contentsOfFile: "\(bench.folder)/cards/recorded-\(id)-card.yaml", encoding: .utf8)
        #expect(!card.contains("4761739001010778") && card.contains("pan: \"476173"), "the masked middle digits are made, not the card's")

        // Platforms: a payment each through a scenario, then recorded.
        let setup = bench.daemon.directory.appendingPathComponent("platforms.yaml").path
        try """
            name: platform payments to record
            cards:
              visa: visa-credit-cvn10.yaml
            steps:
              - worldline: {merchant: "rec-wl", webhook: "http://127.0.0.1:9/hooks"}
              - worldline: {merchant: "rec-wl", pay: {amount: 1000, currency: EUR, mode: FINAL_AUTHORIZATION, card: visa}}
                save: p
                expect: {http: 201}
              - worldline: {merchant: "rec-wl", capture: "{{p.id}}", amount: "600"}
              - citcon: {charge: {amount: 1200, card: visa, ipn: "http://127.0.0.1:9/ipn"}}
                save: c
                expect: {http: 200}
              - citcon: {capture: "{{c.id}}", amount: "1200"}
              - citcon: {refund: "{{c.id}}", amount: "200"}
            """.write(toFile: setup, atomically: true, encoding: .utf8)
        let made = try cliOffline(["scenario", "run", setup, "--socket", bench.daemon.socket], environment: [:])
        #expect(made.status == 0, "\(made.stdout)\(made.stderr)")
        let worldline = try await bench.recordAndRun(try bench.latestSale(provider: "worldline"), "worldline")
        #expect(worldline.contains("worldline: {merchant: \"recorded-{{run.id}}\", pay: {amount: 1000, currency: EUR, mode: FINAL_AUTHORIZATION, card: card}}")
                && worldline.contains("capture: \"{{p.id}}\", amount: \"600\"}") && worldline.contains("webhooks: [payment."), "\(worldline)")
        let citcon = try await bench.recordAndRun(try bench.latestSale(provider: "citcon"), "citcon")
        #expect(citcon.contains("citcon: {charge: {amount: 1200") && citcon.contains("refund: \"{{c.id}}\", amount: \"200\"}")
                && citcon.contains("ipns: [authorized"), "\(citcon)")

        // An external host's issuer script, on a terminal the scenario run made and removed.
        let script = try cliOffline(["scenario", "run", repositoryRoot.appendingPathComponent("Scenarios/iso8583/script-after-72.yaml").path,
                                     "--socket", bench.daemon.socket], environment: [:])
        #expect(script.status == 0, "\(script.stdout)\(script.stderr)")
        // The list shows the configured terminals' transactions: the removed terminal's sale is
        // the one before the issuer's own row of it.
        let issuerRow = try #require(Int(try bench.latestSale(provider: "iso8583")))
        let issuerSide = try bench.cli(["scenario", "record", String(issuerRow)])
        #expect(issuerSide.status == 1 && issuerSide.stderr.contains("iso8583 side of a transaction"), "\(issuerSide.stderr)")
        let scripted = try await bench.recordAndRun(String(issuerRow - 1), "issuer-script")
        #expect(scripted.contains("script_after: [\"84180000080102030405060708\"]") && scripted.contains("is gone"), "\(scripted)")
    }

    @Test("a recording fails when its card's CVM list or the host's answer changes, naming the expectation; an unknown transaction is refused")
    func mutations() async throws {
        let bench = try await RecordBench()
        defer { bench.tearDown() }
        _ = try bench.cli(["card", "insert", "--profile", "visa-credit-cvn10", "--terminal", "bench1"])
        _ = try bench.cli(["keypad", "bench1", "--pin", "1234"])
        _ = try bench.cli(["host", "queue", "bench1", "--code", "05"])
        let id = try await bench.open(saleURL(amount: 1500, tip: 0, reference: "mut1"))
        let text = try await bench.recordAndRun(id, "declined")
        let file = "\(bench.folder)/declined.yaml"

        try text.replacingOccurrences(of: "respond: \"05\"", with: "respond: \"51\"").write(toFile: file, atomically: true, encoding: .utf8)
        let host = try cliOffline(["scenario", "run", file], environment: [:])
        #expect(host.status == 1 && host.stdout.contains("expected") && (host.stdout.contains("ledger.responseCode") || host.stdout.contains("callback.")), "\(host.stdout)")

        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let card = "\(bench.folder)/cards/visa-credit-cvn10.yaml"
        let profile = try String(contentsOfFile: card, encoding: .utf8)
        try profile.replacingOccurrences(of: "cvmList: \"000000000000000041031E031F00\"", with: "cvmList: \"00000000000000001E031F00\"")
            .write(toFile: card, atomically: true, encoding: .utf8)
        let cvm = try cliOffline(["scenario", "run", file], environment: [:])
        #expect(cvm.status == 1 && cvm.stdout.contains("verificationMethod"), "\(cvm.stdout)")

        // A recording that exists with another profile in cards/ is not overwritten.
        let again = try bench.cli(["scenario", "record", id, "--out", file])
        #expect(again.status == 2 && again.stderr.contains("holds another profile"), "\(again.stderr)")

        let late = try bench.cli(["keypad", "bench1", "--pin", "1234", "--after", "601"])
        #expect(late.status == 2 && late.stderr.contains("afterSeconds"), "\(late.stderr)")

        let missing = try bench.cli(["scenario", "record", "999999"])
        #expect(missing.status == 1 && missing.stderr.contains("no transaction"), "\(missing.stderr)")
    }
}
