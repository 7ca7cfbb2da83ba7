#if canImport(Glibc)
import Glibc
#endif
import CardIO
import Daemon
import Foundation
import Testing
import DaemonTestSupport
import TestSupport

/// Whether the real-pcscd suites run: root with pcscd, vpcd and systemd-socket-activate, or
/// `CARDBENCH_REQUIRE_PCSC=1` (CI), which makes a missing piece a failure instead of a skip.
let pcscReady = PrivatePCSCD.missing.isEmpty || ProcessInfo.processInfo.environment["CARDBENCH_REQUIRE_PCSC"] == "1"

/// cardbenchd with a terminal `usb` on a private pcscd's first vpcd slot (`reader: pcsc:…`).
final class PCSCBench: @unchecked Sendable {
    let pcscd: PrivatePCSCD
    let daemon: DaemonProcess
    let directory: String

    init(vpcd: Bool = false, extra: String = "") async throws {
        #expect(PrivatePCSCD.missing.isEmpty, "a private pcscd needs: \(PrivatePCSCD.missing.joined(separator: ", "))")
        var template = Array("/tmp/cbd-pcsc-XXXXXX".utf8CString)
        directory = String(cString: try #require(mkdtemp(&template)))
        pcscd = try PrivatePCSCD(directory: directory)
        try pcscd.start()
        daemon = try await DaemonProcess([], config: """
            terminals: [bench1, usb]
            terminal:
              usb:
                tid: "10000002"
                reader: "pcsc:\(pcscd.reader(slot: 0))"
            \(vpcd ? "    vpcd: 127.0.0.1:\(pcscd.port)" : "")
            timeouts:
              card_seconds: 10
            \(extra)
            """, environment: pcscd.environment)
    }

    var vpcdEndpoint: String { "127.0.0.1:\(pcscd.port)" }

    /// The `usb` reader as `GET /v1/readers` shows it.
    func reader() async throws -> ReaderView {
        let reply = try await daemon.client.send(method: "GET", "/v1/readers")
        return try #require(try JSONDecoder().decode([ReaderView].self, from: reply.body).first { $0.terminal == "usb" })
    }

    func waitFor(_ state: String, card: Bool? = nil, seconds: Double = 10) async throws -> ReaderView {
        let deadline = Date(timeIntervalSinceNow: seconds)
        var last = try await reader()
        while Date() < deadline {
            last = try await reader()
            if last.state == state, card.map({ $0 == last.cardPresent }) ?? true { return last }
            try await Task.sleep(for: .milliseconds(50))
        }
        return last
    }

    func pin(_ pin: String = "1234") throws {
        #expect(try cli(["keypad", "usb", "--pin", pin], socket: daemon.socket).status == 0)
    }

    func tearDown() {
        daemon.remove()
        pcscd.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite("PC/SC readers in cardbenchd, through a real pcscd and vpcd", .serialized,
       .enabled(if: pcscReady, "needs root, pcscd, vsmartcard-vpcd and systemd-socket-activate"))
struct PCSCEndToEndTests {
    @Test("a Viva sale and a Billpocket venta approved through pcsc:, a T=0 card needing GET RESPONSE; readers and pcsc list show it")
    func sales() async throws {
        let bench = try await PCSCBench()
        defer { bench.tearDown() }
        let card = try InsertedCard("visa-t0-get-response.yaml", reader: bench.vpcdEndpoint, extra: ["--trace"])
        let ready = try await bench.waitFor("ready", card: true)
        #expect(ready.kind == "pcsc" && ready.device == bench.pcscd.reader(slot: 0), "\(ready)")
        #expect(ready.pattern == "pcsc:\(bench.pcscd.reader(slot: 0))")

        try bench.pin()
        let viva = try #require(try await bench.daemon.open(saleURL(reference: "pcsc-viva"), terminal: "usb").result, "\(bench.daemon.logText)")
        #expect(viva.status == "success", "\(viva.message) \(bench.daemon.logText)")
        #expect(viva.callback?.contains("accountNumber=476173%2A%2A%2A%2A%2A%2A0093") == true || viva.callback?.contains("476173******0093") == true,
                "\(viva.callback ?? "")")

        let user = try createUser(bench.daemon, "Tienda PC/SC")
        try bench.pin()
        let venta = try #require(try await bench.daemon.open(ventaURL(token: user.token, amount: "150.00", identifier: "pcsc-1"), terminal: "usb").result)
        #expect(venta.status == "aprobada", "\(venta.fields) \(bench.daemon.logText)")

        // The callback can come back before the terminal has let go of the card (disconnect with
        // power-down comes after the answer): the reader shows in-use until then.
        var line = ""
        let deadline = Date().addingTimeInterval(10)
        repeat {
            let readers = try cli(["readers"], socket: bench.daemon.socket).stdout
            line = String(try #require(readers.split(separator: "\n").first { $0.hasPrefix("usb ") }))
            if line.contains(" ready") { break }
            try await Task.sleep(for: .milliseconds(100))
        } while Date() < deadline
        #expect(line.contains("usb pcsc pcsc:\(bench.pcscd.reader(slot: 0)) → \"\(bench.pcscd.reader(slot: 0))\" ready"), "\(line)")
        #expect(line.contains("ATR 3B6800008066A2060201320E T=0"), "\(line)")
        let listed = try cliOffline(["pcsc", "list"], environment: bench.pcscd.environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("\(bench.pcscd.reader(slot: 0))\n  state present, ATR 3B6800008066A2060201320E (T=0)"), "\(listed.stdout)")
        #expect(listed.stdout.contains("\(bench.pcscd.reader(slot: 1))\n  state empty"), "\(listed.stdout)")

        // The card saw T=0 TPDUs: case 4 without Le answered 61xx and fetched by GET RESPONSE,
        // READ RECORD re-issued after 6Cxx; the ledger's trace keeps the kernel's APDUs.
        let wire = card.transcript()
        #expect(wire.contains("> 00A404000E315041592E5359532E4444463031  SELECT\n< 61"), "\(wire.prefix(600))")
        #expect(wire.contains("GET RESPONSE"))
        #expect(wire.contains("< 6C"))
        let id = try #require(viva.transaction?.id)
        let shown = try cli(["tx", "show", String(id)], socket: bench.daemon.socket).stdout
        #expect(shown.contains("00A404000E315041592E5359532E444446303100  SELECT"), "\(shown)")
        #expect(!shown.contains("GET RESPONSE"))
    }

    @Test("a tap through pcscd: the PC/SC part 3 ATR makes it contactless, T=1, Kernel 3 runs, the card leaves the field after")
    func tap() async throws {
        let bench = try await PCSCBench(vpcd: true)
        defer { bench.tearDown() }
        let external = try InsertedCard("visa-debit-contactless.yaml", reader: bench.vpcdEndpoint, verb: "tap", extra: ["--trace"])
        let ready = try await bench.waitFor("ready", card: true)
        #expect(ready.kind == "pcsc", "\(ready)")
        // pcscd powers a card no one uses off after 5 s (PCSCLITE_POWER_OFF_GRACE_PERIOD): the card
        // is still in the field then, and the tap only ends when the terminal that used it lets go.
        try await Task.sleep(for: .seconds(6))
        let viva = try #require(try await bench.daemon.open(saleURL(amount: 15_000, tip: 0, reference: "pcsc-tap"), terminal: "usb").result,
                                "\(bench.daemon.logText)")
        #expect(viva.status == "success", "\(viva.message) \(bench.daemon.logText)")
        #expect(viva.callback?.contains("verificationMethod=CONTACTLESS%20-%20NO%20CVM") == true, "\(viva.callback ?? "")")
        let id = try #require(viva.transaction?.id)
        let shown = try cli(["tx", "show", String(id)], socket: bench.daemon.socket).stdout
        #expect(shown.contains("entry: tap (POS entry mode 07), kernel 3: online request"), "\(shown)")
        #expect(shown.contains("00A404000E325041592E5359532E444446303100  SELECT"), "\(shown)")
        // No T=0 layer under a contactless card: whole APDUs, no GET RESPONSE; the reader let go of it, so it left.
        let wire = external.transcript()
        #expect(!wire.contains("GET RESPONSE") && !wire.contains("< 61"), "\(wire.prefix(600))")
        #expect(wire.contains("80A80000"), "\(wire.prefix(600))")

        // The daemon's own card, tapped through vpcd (terminal.usb.vpcd): it leaves the field once
        // the reader powers it off after the sale, so the reader is empty again.
        let tapped = try cli(["card", "tap", "--terminal", "usb", "--profile", card("mastercard-paypass-cvn16.yaml")], socket: bench.daemon.socket)
        #expect(tapped.status == 0, "\(tapped.stderr)")
        _ = try await bench.waitFor("ready", card: true)
        let mc = try #require(try await bench.daemon.open(saleURL(amount: 15_000, tip: 0, reference: "pcsc-tap-2"), terminal: "usb").result)
        #expect(mc.status == "success", "\(mc.message) \(bench.daemon.logText)")
        #expect(mc.transaction?.entryMode == "contactless")
        let empty = try await bench.waitFor("ready", card: false)
        #expect(!empty.cardPresent, "\(empty)")
    }

    @Test("the scenario library's card-removal folder through pcscd: a card pulled out at every step, reversals after approval")
    func cardRemovalScenarios() async throws {
        let bench = try await PCSCBench(vpcd: true, extra: "clock:\n  mode: manual")
        defer { bench.tearDown() }
        let run = try cli(["scenario", "run", repositoryRoot.appendingPathComponent("Scenarios/card-removal").path, "--terminal", "usb"],
                          socket: bench.daemon.socket)
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)\n\(bench.daemon.logText.suffix(2000))")
        #expect(run.stdout.contains("14 passed, 0 failed"), "\(run.stdout)")
    }

    @Test("pcscd restarting, and another program holding the reader: the readers say so, the sale says why, and it works afterwards")
    func restartAndSharing() async throws {
        let bench = try await PCSCBench(vpcd: true)
        defer { bench.tearDown() }
        _ = try await bench.waitFor("ready")
        bench.pcscd.stop()
        let lost = try await bench.waitFor("no-service")
        #expect(lost.state == "no-service", "\(lost)")
        #expect(lost.error?.contains("pcscd went away") == true, "\(lost)")
        #expect(bench.daemon.logText.contains("pcscd went away"))
        try bench.pcscd.start()
        let back = try await bench.waitFor("ready")
        #expect(back.state == "ready", "\(back)")
        #expect(bench.daemon.logText.contains("pcscd is back"))

        // A card through the API reaches the reader through vpcd; a sale works after the restart.
        let (inserted, _) = try await bench.daemon.json("POST", "/v1/terminals/usb/card", CardBody(profile: "visa-credit-cvn10.yaml"))
        #expect(inserted == 201)
        _ = try await bench.waitFor("ready", card: true)
        try bench.pin()
        let sale = try #require(try await bench.daemon.open(saleURL(reference: "after-restart"), terminal: "usb").result)
        #expect(sale.status == "success", "\(sale.message) \(bench.daemon.logText)")

        // Another program connects exclusively: the reader shows "in-use", the sale fails with
        // the reader's reason, nothing is authorised.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/pcsc_hold.py").path, bench.pcscd.reader(slot: 0)]
        holder.environment = ProcessInfo.processInfo.environment.merging(bench.pcscd.environment) { $1 }
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        #expect(output.fileHandleForReading.availableLine(timeout: 10) == "held")
        let busy = try await bench.waitFor("in-use")
        #expect(busy.state == "in-use", "\(busy)")
        let refused = try #require(try await bench.daemon.open(saleURL(reference: "held"), terminal: "usb").result)
        #expect(refused.status == "failed")
        #expect(refused.message == "Card reader error.", "\(refused.message)")
        let id = try #require(refused.transaction?.id)
        let shown = try cli(["tx", "show", String(id)], socket: bench.daemon.socket).stdout
        #expect(shown.contains("is in use by another program"), "\(shown)")
        #expect(shown.contains("SCARD_E_SHARING_VIOLATION"))
        #expect(!shown.contains("approved"))
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        try bench.pin()
        let again = try #require(try await bench.daemon.open(saleURL(reference: "released"), terminal: "usb").result)
        #expect(again.status == "success", "\(again.message)")
    }
}
