import CardIO
import Daemon
import EMV
import Foundation
import Testing
import VirtualCard

/// The lines of `cardbench sale` that say what the terminal concluded about the card: CVM, TVR,
/// TSI and the ODA method and result.
func terminalView(_ saleOutput: String) -> [String] {
    saleOutput.split(separator: "\n").map(String.init).filter {
        $0.hasPrefix("CVM:") || $0.hasPrefix("TVR ") || $0.hasPrefix("TSI ") || $0.hasPrefix("ODA: method")
    }
}

/// The odd card of the capture tests, personalised, in a temporary file.
func oddCardFile(pan: String = "4761739001010333") throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("cb-odd-\(UUID().uuidString.prefix(8)).yaml").path
    try oddCardYAML(pan: pan).write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("card capture options")
struct CaptureOptionsTests {
    @Test("the request's fields: today in the DOL data as BCD YYMMDD; interface, PIN, wait and name checked, each refusal naming its field")
    func options() throws {
        let (capture, profile, wait) = try CaptureBody(interface: "contactless", pin: "4321", keepPan: true, waitSeconds: 5)
            .options(ca: nil, caKeys: [], today: ODADate(year: 2026, month: 11, day: 28))
        #expect(capture.date == [0x26, 0x11, 0x28] && capture.interface == .contactless && capture.generateAC)
        #expect(profile.pin == "4321" && profile.keepPAN && wait == .seconds(5))
        for (body, field) in [(CaptureBody(interface: "chip"), "interface"), (CaptureBody(pin: "12a4"), "pin"), (CaptureBody(waitSeconds: 0), "waitSeconds"),
                              (CaptureBody(name: String(repeating: "x", count: 65)), "name")] {
            #expect { _ = try body.options(ca: nil, caKeys: [], today: ODADate(year: 2026, month: 1, day: 1)) } throws: { error in
                guard case .badRequest(let f, _) = error as? DaemonError else { return false }
                return f == field
            }
        }
    }
}

@Suite("card capture through the readers the bench has, and a daemon terminal's", .serialized)
struct CaptureEndToEndTests {
    /// `cardbench sale` with each profile: the same CVM, TVR, TSI and ODA result.
    static func sameSale(_ original: String, _ captured: String) throws {
        let ledger = FileManager.default.temporaryDirectory.appendingPathComponent("cb-cap-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: ledger) }
        let a = try cliOffline(["sale", "--card", original, "--amount", "10.00", "--ledger", ledger + "-a.sqlite", "--pin", "4321"], environment: [:])
        let b = try cliOffline(["sale", "--card", captured, "--amount", "10.00", "--ledger", ledger + "-b.sqlite", "--pin", "4321"], environment: [:])
        #expect(a.status == 0 && b.status == 0, "\(a.stderr) \(b.stderr)")
        #expect(terminalView(a.stdout).count == 4, "\(a.stdout)")
        #expect(terminalView(a.stdout) == terminalView(b.stdout), "\(a.stdout)\n---\n\(b.stdout)")
    }

    @Test("a virtual reader: card capture --reader virtual:<socket> takes any vpcd card; no card in time is exit 1 naming the reader")
    func virtualReader() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-capv-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/r.sock", out = directory + "/card.yaml"
        let capture = Process()
        capture.executableURL = productsDirectory.appendingPathComponent("cardbench")
        capture.arguments = ["card", "capture", "--reader", "virtual:\(socket)", "--out", out, "--wait", "120",
                             "--ca", repositoryRoot.appendingPathComponent("Scenarios/ca/bench-ca.yaml").path]
        capture.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        capture.standardOutput = pipe
        capture.standardError = pipe
        try capture.run()
        // A fresh process on a loaded 2-core machine has taken over 10 s to listen: up to 120 s.
        let deadline = Date(timeIntervalSinceNow: 120)
        while !FileManager.default.fileExists(atPath: socket), capture.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let card = try InsertedCard("mastercard-credit-cvn16.yaml", reader: socket)
        capture.waitUntilExit()
        card.remove()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(capture.terminationStatus == 0, "\(text)")
        let diff = try cliOffline(["card", "diff", "mastercard-credit-cvn16", out], environment: [:])
        #expect(!diff.stdout.contains("AIP") && !diff.stdout.contains("CVM") && !diff.stdout.contains("IAC") && !diff.stdout.contains("AFL"), "\(diff.stdout)")

        let none = try cliOffline(["card", "capture", "--reader", "virtual:\(directory)/empty.sock", "--wait", "1"], environment: [:])
        #expect(none.status == 1 && none.stderr.contains("no card in capture"), "\(none.stderr)")
        let bad = try cliOffline(["card", "capture", "--reader", "usb:1"], environment: [:])
        #expect(bad.status == 2 && bad.stderr.contains("--reader"), "\(bad.stderr)")
    }

    @Test("a daemon terminal: --terminal captures the card in a serial reader (T=1 over a pty) and an API card; bad fields are 400 naming them")
    func daemonTerminal() async throws {
        var t1 = CardSimulator.T1Behaviour()
        t1.ifsc = 32
        let ptyCard = try PtyCard("visa-debit-cvn18.yaml", .init(.t1(t1)))
        defer { ptyCard.remove() }
        let daemon = try await DaemonProcess([], config: """
            terminals: [bench1, serial1]
            terminal:
              bench1:
                tid: "10000001"
              serial1:
                tid: "10000002"
                reader: serial:\(ptyCard.pty.slavePath)
                serial:
                  parity: none
                  reset: none
                  presence: always
                  echo: false
            emv:
              bench_ca: \(repositoryRoot.appendingPathComponent("Scenarios/ca/bench-ca.yaml").path)
            """)
        defer { daemon.remove() }
        let out = daemon.directory.appendingPathComponent("serial.yaml").path
        let serial = try cli(["card", "capture", "--terminal", "serial1", "--out", out], socket: daemon.socket)
        #expect(serial.status == 0, "\(serial.stdout) \(serial.stderr) \(daemon.logText.suffix(1500))")
        let diff = try cliOffline(["card", "diff", "visa-debit-cvn18", out], environment: [:])
        #expect(!diff.stdout.contains("AIP") && !diff.stdout.contains("CVM") && !diff.stdout.contains("AFL"), "\(diff.stdout)")
        #expect(!daemon.logText.contains("4761739001"), "no card number in the daemon's log")

        // A live card the API put in the virtual reader: its number replaced, never in the daemon's log.
        let live = luhnNumber("498765432101234")
        let odd = try oddCardFile(pan: live)
        let inserted = try cli(["card", "insert", "--profile", odd, "--terminal", "bench1"], socket: daemon.socket)
        #expect(inserted.status == 0, "\(inserted.stderr)")
        let captured = try cli(["card", "capture", "--terminal", "bench1", "--pin", "4321"], socket: daemon.socket)
        #expect(captured.status == 0, "\(captured.stderr)")
        #expect(captured.stderr.contains("number replaced"), "\(captured.stderr)")
        #expect(captured.stdout.contains("pan: \"498765") && !captured.stdout.contains(live), "the profile on standard output has a new number")
        #expect(!daemon.logText.contains(live) && !daemon.logText.contains(String(live.prefix(12))), "no card number in the daemon's log")
        _ = try await daemon.client.send(.DELETE, "/v1/terminals/bench1/card")

        // Tapped: the PPSE and a qVSDC GPO.
        #expect(try cli(["card", "tap", "--profile", "visa-credit-qvsdc-fdda", "--terminal", "bench1"], socket: daemon.socket).status == 0)
        let tapped = try cli(["card", "capture", "--terminal", "bench1", "--interface", "contactless"], socket: daemon.socket)
        #expect(tapped.status == 0, "\(tapped.stderr)")
        #expect(tapped.stdout.contains("interfaces: [contactless]") && tapped.stdout.contains("ppseFCI:") && tapped.stdout.contains("ctq:"), "\(tapped.stdout)")

        let reply = try await daemon.client.send(.POST, "/v1/terminals/bench1/capture", json: CaptureBody(interface: "chip"))
        #expect(reply.status == 400 && reply.errorMessage.contains("interface"), "\(reply.errorMessage)")
        let pin = try await daemon.client.send(.POST, "/v1/terminals/bench1/capture", json: CaptureBody(pin: "12"))
        #expect(pin.status == 400 && pin.errorMessage.contains("pin"))
        let missing = try await daemon.client.send(.POST, "/v1/terminals/nope/capture", json: CaptureBody())
        #expect(missing.status == 404)
    }
}

/// In the PC/SC suite, which runs its tests one at a time: a private pcscd each, never three at once.
extension PCSCEndToEndTests {
    @Test("card capture: an odd card through pcscd and vpcd, captured with --reader pcsc:; only the stripe differs; a sale with each concludes the same")
    func capture() async throws {
        #expect(PrivatePCSCD.missing.isEmpty, "a private pcscd needs: \(PrivatePCSCD.missing.joined(separator: ", "))")
        var template = Array("/tmp/cbd-cap-XXXXXX".utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pcscd = try PrivatePCSCD(directory: directory)
        try pcscd.start()
        defer { pcscd.stop() }
        let odd = try oddCardFile()
        let card = try InsertedCard(odd, reader: "127.0.0.1:\(pcscd.port)")
        defer { card.remove() }
        let out = directory + "/captured.yaml"
        let run = try cliOffline(["card", "capture", "--reader", "pcsc:\(pcscd.reader(slot: 0))", "--out", out, "--pin", "4321", "--wait", "20",
                                  "--ca", repositoryRoot.appendingPathComponent("Scenarios/ca/bench-ca.yaml").path], environment: pcscd.environment)
        #expect(run.status == 0, "\(run.stdout) \(run.stderr) \(pcscd.logText.suffix(2000))")
        #expect(run.stdout.contains("made:") && run.stdout.contains("ODA certificates: re-issued under the bench CA key B1"), "\(run.stdout)")
        let diff = try cliOffline(["card", "diff", odd, out], environment: [:])
        #expect(diff.status == 1)
        #expect(diff.stdout.split(separator: "\n") == ["interfaces: contact, magstripe → contact"], "a chip read says nothing of the stripe: \(diff.stdout)")
        try CaptureEndToEndTests.sameSale(odd, out)
        card.remove()
    }
}
