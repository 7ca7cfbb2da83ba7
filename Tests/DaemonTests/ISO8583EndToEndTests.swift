import CardIO
import Daemon
import Foundation
import ISO8583
import Terminal
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// The ISO 8583 link both ways against an independent peer, pyiso8583 (PyPI): Tests/Interop/
/// iso8583_host.py is the external host cardbench's terminals authorise against (it checks their
/// ARQCs with pyemv and answers by amount: 51.00 declines 51, .77 sends an issuer script, .88 never
/// answers, .99 answers garbage), and iso8583_terminal.py the external terminal sending 0800, 0200,
/// 0100, a tampered ARQC and a 0400 to cardbench's issuer, checking each ARPC with pyemv.
@Suite("ISO 8583, end to end with pyiso8583", .serialized)
struct ISO8583EndToEndTests {
    /// The Python host, its port and its log of every message it received and sent.
    final class PeerHost {
        let process = Process()
        let directory: URL
        var log: URL { directory.appendingPathComponent("host.jsonl") }
        let port: Int

        init(spec: String, framing: String) async throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("iso-host-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let portFile = directory.appendingPathComponent("port")
            process.executableURL = URL(fileURLWithPath: try WorldlineEndToEndTests.python())
            process.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/iso8583_host.py").path, "--port-file", portFile.path,
                                 "--spec", spec, "--framing", framing, "--log", directory.appendingPathComponent("host.jsonl").path,
                                 "--cards", repositoryRoot.appendingPathComponent("Scenarios/cards").path]
            let output = FileHandle(forWritingAtPath: "/dev/null")
            process.standardOutput = output
            process.standardError = output
            try process.run()
            // A loaded machine (the whole suite in parallel) has taken over 30 s to start it.
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline {
                if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                    self.port = port
                    return
                }
                guard process.isRunning else { throw HarnessError("iso8583_host.py exited \(process.terminationStatus)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            throw HarnessError("iso8583_host.py wrote no port in 120 s")
        }

        /// Every logged message, in order.
        func messages() throws -> [[String: Any]] {
            try String(contentsOf: log, encoding: .utf8).split(separator: "\n").compactMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        func stop() {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static func config(upstreamPort: Int, packager: String, framing: String) -> String {
        """
        host:
          upstream: iso8583://127.0.0.1:\(upstreamPort)
          timeout_seconds: 2
          iso8583:
            packager: \(packager)
            framing: \(framing)
            retries: 1
        """
    }

    /// Sells `amount` (minor units) on bench1 through the Viva front; returns the callback's fields.
    static func sell(_ amount: Int, _ daemon: DaemonProcess) throws -> [(String, String)] {
        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let opened = try cli(["open", saleURL(amount: amount, tip: 0, reference: "iso\(amount)")], socket: daemon.socket)
        #expect(opened.status == 0, "\(opened.stderr)")
        return callbackFields(opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).fields
    }

    static func transaction(_ uuid: String, _ daemon: DaemonProcess) throws -> [String: Any] {
        let shown = try cli(["tx", "show", uuid, "--json"], socket: daemon.socket)
        #expect(!shown.stdout.contains("4761739001010010"), "no full PAN in the transaction's view")
        return try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
    }

    /// The newest transaction (a failed Viva callback carries no transactionId).
    static func latest(_ daemon: DaemonProcess) throws -> [String: Any] {
        let listed = try cli(["tx", "list", "--json", "--limit", "1"], socket: daemon.socket)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        return try transaction(try #require(rows.first?["transactionId"] as? String), daemon)
    }

    static func mtis(_ t: [String: Any]) -> [String] {
        ((t["hostMessages"] as? [[String: Any]]) ?? []).map { "\($0["direction"] as? String ?? "") \($0["mti"] as? String ?? "")" }
    }

    @Test("a terminal authorises against pyiso8583: approval with a verified ARPC, 51, an issuer script, a timeout and garbage reversed")
    func terminalAgainstExternalHost() async throws {
        let host = try await PeerHost(spec: "default", framing: "binary2")
        defer { host.stop() }
        // Mexico City: UTC-6 all year (no daylight saving time since 2022).
        let daemon = try await DaemonProcess(["--demo"], config: Self.config(upstreamPort: host.port, packager: "pyiso8583-default", framing: "binary2"),
                                             environment: ["TZ": "America/Mexico_City"])
        defer { daemon.remove() }
        let inserted = try InsertedCard("visa-credit-cvn10.yaml", reader: daemon.readerSocket())
        defer { inserted.remove() }

        // Approved: the host checked the ARQC, the card accepted its ARPC (EXTERNAL AUTHENTICATE 9000).
        var fields = try Self.sell(1000, daemon)
        #expect(value(fields, "status") == "success")
        var t = try Self.transaction(try #require(value(fields, "transactionId")), daemon)
        #expect(t["responseCode"] as? String == "00")
        #expect(Self.mtis(t) == ["out 0200", "in 0210"])
        let trace = (t["trace"] as? [[String: String]]) ?? []
        #expect(trace.contains { $0["name"] == "EXTERNAL AUTHENTICATE" && $0["response"] == "9000" })
        let sent = try #require((t["hostMessages"] as? [[String: Any]])?.first?["fields"] as? [[String: Any]])
        #expect(sent.first { $0["field"] as? Int == 2 }?["value"] as? String == "476173******0010")
        #expect(sent.first { $0["field"] as? Int == 35 }?["value"] as? String == "476173******0010=(withheld)")
        let icc = try #require(sent.first { $0["field"] as? Int == 55 }?["tlv"] as? [[String: String]])
        #expect(Set(icc.compactMap { $0["tag"] }) == ["82", "84", "95", "9A", "9C", "5F2A", "9F02", "9F03", "9F09", "9F10", "9F1A", "9F1E",
                                                      "9F26", "9F27", "9F33", "9F34", "9F35", "9F36", "9F37", "9F41"])
        var log = try host.messages()
        #expect(log.first { $0["mti"] as? String == "0200" }?["arqc_ok"] as? Bool == true)
        // Field 7 is UTC; 12 and 13 the terminal's local time, the daemon's time zone.
        let first = try #require(log.first { $0["mti"] as? String == "0200" }?["fields"] as? [String: String])
        let utc = try #require(first["7"]), localTime = try #require(first["12"]), localDate = try #require(first["13"])
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let year = calendar.component(.year, from: Date())
        func int(_ s: String, _ from: Int, _ count: Int) -> Int { Int(s.dropFirst(from).prefix(count))! }
        let sentAt = try #require(calendar.date(from: DateComponents(year: year, month: int(utc, 0, 2), day: int(utc, 2, 2), hour: int(utc, 4, 2),
                                                                     minute: int(utc, 6, 2), second: int(utc, 8, 2))))
        let local = calendar.dateComponents([.month, .day, .hour, .minute, .second], from: sentAt.addingTimeInterval(-6 * 3600))
        #expect(localTime == String(format: "%02d%02d%02d", local.hour!, local.minute!, local.second!), "7 \(utc), 12 \(localTime)")
        #expect(localDate == String(format: "%02d%02d", local.month!, local.day!), "7 \(utc), 13 \(localDate)")

        // Declined 51 by the host.
        fields = try Self.sell(5100, daemon)
        #expect(value(fields, "status") == "failed")
        t = try Self.latest(daemon)
        #expect(t["responseCode"] as? String == "51")

        // An issuer script (72) runs on the card after the second GENERATE AC.
        fields = try Self.sell(1077, daemon)
        #expect(value(fields, "status") == "success")
        t = try Self.transaction(try #require(value(fields, "transactionId")), daemon)
        let names = ((t["trace"] as? [[String: String]]) ?? []).compactMap { $0["name"] }
        let secondGenerateAC = try #require(names.lastIndex(of: "GENERATE AC"))
        #expect(names.firstIndex(of: "APPLICATION UNBLOCK").map { $0 > secondGenerateAC } == true, "\(names)")
        // The virtual card refuses the command (6D00): the TVR says a script failed after the final GENERATE AC.
        #expect((t["tvr"] as? String)?.hasSuffix("10") == true, "\(t["tvr"] ?? "")")

        // No answer in time: unable to go online (Z3 with the kernel's default TAC), and a 0400 for it.
        fields = try Self.sell(1088, daemon)
        #expect(value(fields, "status") == "failed")
        t = try Self.latest(daemon)
        #expect(t["responseCode"] as? String == "Z3")
        #expect(Self.mtis(t) == ["out 0200", "out 0400", "in 0410"])
        // Garbage for an answer: the same.
        fields = try Self.sell(1099, daemon)
        #expect(value(fields, "status") == "failed")
        t = try Self.latest(daemon)
        #expect(t["responseCode"] as? String == "Z3")
        #expect(Self.mtis(t) == ["out 0200", "in 0000", "out 0400", "in 0410"])
        log = try host.messages()
        let reversals = log.filter { $0["mti"] as? String == "0400" && $0["direction"] as? String == "in" }
        #expect(reversals.count == 2)
        let stan = (t["stan"] as? String) ?? ""
        #expect((reversals.last?["fields"] as? [String: String])?["90"]?.hasPrefix("0200" + stan) == true)
    }

    @Test("a capture of the host's pre-authorisation is a 0220 completion, a cancel of its sale a 0400")
    func captureAndCancel() async throws {
        let host = try await PeerHost(spec: "default", framing: "binary2")
        defer { host.stop() }
        let daemon = try await DaemonProcess(["--demo"], config: Self.config(upstreamPort: host.port, packager: "pyiso8583-default", framing: "binary2"))
        defer { daemon.remove() }
        let base = "vivapayclient://pay/v1?callback=cb://r&merchantKey=K&appId=a"
        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let pre = try #require(try await daemon.open(base + "&action=pre_auth&amount=5000&clientTransactionId=p1").result)
        #expect(pre.status == "success", "\(pre.message)")
        let preSTAN = try #require(pre.transaction?.stan)
        let capture = try #require(try await daemon.open(base + "&action=capture_pre_auth&referenceNumber=\(preSTAN)&amount=4000").result)
        #expect(capture.status == "success", "\(capture.message)")
        let captured = try Self.transaction(try #require(capture.transaction?.transactionId), daemon)
        #expect(Self.mtis(captured) == ["out 0220", "in 0230"])
        var log = try host.messages()
        let approval = try #require(log.last { $0["mti"] as? String == "0110" }?["fields"] as? [String: String])
        let advice = try #require(log.last { $0["mti"] as? String == "0220" }?["fields"] as? [String: String])
        #expect(advice["4"] == "000000004000" && advice["38"] == approval["38"] && advice["2"] == "4761739001010010")
        #expect(advice["90"]?.hasPrefix("0100" + preSTAN) == true, "\(advice)")
        #expect(advice["11"] == capture.transaction?.stan)

        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let sale = try #require(try await daemon.open(saleURL(amount: 1000, tip: 0, reference: "c1")).result)
        #expect(sale.status == "success")
        let saleSTAN = try #require(sale.transaction?.stan)
        let cancel = try #require(try await daemon.open(base + "&action=cancel&referenceNumber=\(saleSTAN)").result)
        #expect(cancel.status == "success", "\(cancel.message)")
        log = try host.messages()
        let reversal = try #require(log.last { $0["mti"] as? String == "0400" }?["fields"] as? [String: String])
        #expect(reversal["39"] == "17" && reversal["90"]?.hasPrefix("0200" + saleSTAN) == true, "\(reversal)")
    }

    @Test("on a manual clock the echo interval is the clock's: no echo test as real time passes, one when the clock is moved")
    func echoOnTheBenchClock() async throws {
        let host = try await PeerHost(spec: "default", framing: "binary2")
        defer { host.stop() }
        let config = Self.config(upstreamPort: host.port, packager: "pyiso8583-default", framing: "binary2")
            + "\n    sign_on: true\n    echo_interval_seconds: 1\nclock:\n  mode: manual\n"
        let daemon = try await DaemonProcess(["--demo"], config: config)
        defer { daemon.remove() }
        func received() throws -> [String] {
            try host.messages().filter { $0["mti"] as? String == "0800" && $0["direction"] as? String == "in" }
                .compactMap { ($0["fields"] as? [String: String])?["70"] }
        }
        let deadline = Date().addingTimeInterval(20)
        while try received().isEmpty, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try received() == ["001"])
        try await Task.sleep(for: .milliseconds(1500))
        #expect(try received() == ["001"], "an echo test came in real time on a manual clock")
        _ = try await daemon.json("POST", "/v1/clock", ["advanceSeconds": 1])
        let moved = Date().addingTimeInterval(20)
        while try received().count < 2, Date() < moved { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try received() == ["001", "301"])
    }

    @Test("0800s to the external host: a sign-on at start, echo tests every second, `cardbench iso8583 echo` on demand; a host gone is said")
    func echoAndSignOn() async throws {
        let host = try await PeerHost(spec: "default", framing: "binary2")
        var hostStopped = false
        defer { if !hostStopped { host.stop() } }
        let config = Self.config(upstreamPort: host.port, packager: "pyiso8583-default", framing: "binary2")
            + "\n    sign_on: true\n    echo_interval_seconds: 1\nterminals: [bench1, local]\nterminal:\n  local:\n    host: emulated\n"
        let daemon = try await DaemonProcess(["--demo"], config: config)
        defer { daemon.remove() }
        func received() throws -> [[String: String]] {
            try host.messages().filter { $0["mti"] as? String == "0800" && $0["direction"] as? String == "in" }.compactMap { $0["fields"] as? [String: String] }
        }
        // The sign-on first, then echo tests, each with a STAN of bench1's own.
        let deadline = Date().addingTimeInterval(20)
        while try received().count < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        let heard = try received()
        #expect(heard.first?["70"] == "001", "\(heard)")
        #expect(heard.dropFirst().prefix(2).map { $0["70"] } == ["301", "301"], "\(heard)")
        #expect(heard.allSatisfy { $0["41"] == "10000001" })
        #expect(Set(heard.compactMap { $0["11"] }).count == heard.count, "each 0800 has a STAN of its own: \(heard)")
        #expect(daemon.logText.contains("ISO 8583 sign-on of terminal bench1"), "\(daemon.logText)")

        // On demand: the 0800 and the host's 0810, with the STAN the terminal's next transaction
        // will not reuse.
        let echoed = try cli(["iso8583", "echo", "bench1", "--json"], socket: daemon.socket)
        #expect(echoed.status == 0, "\(echoed.stderr)")
        let view = try JSONDecoder().decode(ISO8583EchoView.self, from: Data(echoed.stdout.utf8))
        #expect(view.answered && view.responseCode == "00" && view.function == "echo test" && view.host == "iso8583://127.0.0.1:\(host.port)")
        #expect(view.messages.map { "\($0.direction) \($0.mti)" } == ["out 0800", "in 0810"])
        #expect(view.messages.first?.fields.first { $0.field == 11 }?.value == view.stan)
        // The periodic echo tests go on meanwhile: one may have come after it.
        #expect(try received().contains { $0["11"] == view.stan })
        let signOn = try cli(["iso8583", "echo", "--sign-on"], socket: daemon.socket)
        #expect(signOn.status == 0 && signOn.stdout.contains("sign-on of bench1 (STAN ") && signOn.stdout.contains("answered 00"), "\(signOn.stdout)")
        #expect(signOn.stdout.contains("> 0800 (network management request)") && signOn.stdout.contains("70 "), "\(signOn.stdout)")
        let local = try cli(["iso8583", "echo", "local"], socket: daemon.socket)
        #expect(local.status == 2 && local.stderr.contains("terminal local asks the emulated issuer"), "\(local.stderr)")
        let unknown = try cli(["iso8583", "echo", "nowhere"], socket: daemon.socket)
        #expect(unknown.status != 0 && unknown.stderr.contains("nowhere"), "\(unknown.stderr)")

        // The host gone: the echo says why, exits 1, and the daemon logs that it stopped answering.
        host.stop()
        hostStopped = true
        let gone = try cli(["iso8583", "echo", "bench1"], socket: daemon.socket)
        #expect(gone.status == 1 && gone.stdout.contains("no answer: host "), "\(gone.stdout) \(gone.stderr)")
        func stoppedAnswering() -> Bool {
            daemon.logText.split(separator: "\n").contains { $0.contains("echo test of terminal bench1") && $0.contains("no answer") }
        }
        let logged = Date().addingTimeInterval(20)
        while !stoppedAnswering(), Date() < logged { try await Task.sleep(for: .milliseconds(100)) }
        #expect(stoppedAnswering(), "\(daemon.logText)")
    }

    @Test("the other framings and packagers: NAC with pyiso8583's default_ascii, ASCII lengths with default", arguments: [
        ("default_ascii", "pyiso8583-default-ascii", "nac"), ("default", "pyiso8583-default", "ascii4"),
    ])
    func otherFormats(spec: String, packager: String, framing: String) async throws {
        let host = try await PeerHost(spec: spec, framing: framing)
        defer { host.stop() }
        let daemon = try await DaemonProcess(["--demo"], config: Self.config(upstreamPort: host.port, packager: packager, framing: framing))
        defer { daemon.remove() }
        let inserted = try InsertedCard("visa-credit-cvn10.yaml", reader: daemon.readerSocket())
        defer { inserted.remove() }
        var fields = try Self.sell(1000, daemon)
        #expect(value(fields, "status") == "success")
        fields = try Self.sell(5100, daemon)
        #expect(value(fields, "status") == "failed")
        let t = try Self.latest(daemon)
        #expect(t["responseCode"] as? String == "51")
        let log = try host.messages()
        #expect(log.filter { $0["mti"] as? String == "0200" }.compactMap { $0["arqc_ok"] as? Bool } == [true, true])
    }

    @Test("pyiso8583 as an external terminal: cardbench's issuer answers 0800, 0200, 0100, a tampered ARQC and a 0400, with ARPCs pyemv verifies")
    func externalTerminalAgainstIssuer() async throws {
        let daemon = try await DaemonProcess(config: """
            host:
              iso8583:
                listen: 0
            """)
        defer { daemon.remove() }
        let (status, body) = try await daemon.json("GET", "/v1/host")
        #expect(status == 200)
        let listen = try #require(((body as? [String: Any])?["iso8583"] as? [String: Any])?["listen"] as? String)
        #expect(listen.hasPrefix("127.0.0.1:"))
        let run = Process()
        run.executableURL = URL(fileURLWithPath: try WorldlineEndToEndTests.python())
        run.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/iso8583_terminal.py").path, "--connect", listen]
            + ["visa-credit-cvn10", "mastercard-debit-cvn20", "visa-debit-cvn18", "visa-lost"].flatMap { ["--profile", card("\($0).yaml")] }
        let out = Pipe()
        run.standardOutput = out
        run.standardError = out
        try run.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        #expect(run.terminationStatus == 0, "\(text)\n\(daemon.logText)")
        #expect(text.contains("passed, 0 failed"), "\(text)")

        // Each authorisation and reversal is a host-side transaction with its two messages.
        let listed = try cli(["tx", "list", "--json", "--limit", "100"], socket: daemon.socket)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        let host = rows.filter { $0["provider"] as? String == "iso8583" }
        #expect(host.count >= 12, "\(rows.count) rows")
        #expect(host.contains { $0["status"] as? String == "reversed" })
        #expect(host.contains { $0["action"] as? String == "reversal" })
        #expect(host.contains { $0["responseCode"] as? String == "41" })
        let one = try Self.transaction(try #require(host.first?["transactionId"] as? String), daemon)
        #expect(one["terminal"] as? String == "iso8583.host")
        #expect(Self.mtis(one).count == 2)
        #expect(!listed.stdout.contains("5204730000000005") && !listed.stdout.contains("4761739001010069"))
    }

    @Test("the issuer's listener: a repeat gets the first answer and is not authorised twice; a zero amount is 13; garbage gets no answer")
    func listenerRules() async throws {
        let daemon = try await DaemonProcess(config: "host:\n  iso8583:\n    listen: 0\n")
        defer { daemon.remove() }
        let (_, body) = try await daemon.json("GET", "/v1/host")
        let listen = try #require(((body as? [String: Any])?["iso8583"] as? [String: Any])?["listen"] as? String)
        let port = try #require(UInt16(listen.split(separator: ":").last ?? ""))
        let c = try FramedConnection.connect(host: "127.0.0.1", port: port, framing: .binary2, timeout: .seconds(30))
        defer { c.close() }
        let p = Packager.pyiso8583Default
        func ask(_ m: ISOMessage) throws -> ISOMessage {
            try c.send(try p.pack(m))
            return try p.unpack(try c.receive(until: .now + .seconds(30)).message)
        }
        let context = MessageContext(terminalID: "EXTTERM1", merchantID: "M1", stan: STAN(7)!, rrn: "000000000007",
                                     date: UTCDateParts(year: 2026, month: 1, day: 1))
        var sale = AuthorisationRequest(pan: "4761739001010010", aid: [], amount: 1500, currency: 978, arqc: nil, cryptogramData: nil,
                                        date: context.date)
        sale.posEntryMode = "01"
        let request = TerminalMessages.authorisation(sale, context)
        let first = try ask(request)
        #expect(first.mti == "0210" && first[39] == "00")
        var repeated = request
        repeated.mti = "0201"
        let again = try ask(repeated)
        #expect(again.mti == "0210" && again[39] == "00" && again[38] == first[38])
        // Another peer's 0201 under the same terminal id and STAN, with another card and amount,
        // is not the request it claims to repeat: 94, and nothing of the first comes back.
        var forged = repeated
        forged[2] = "4012888888881881"
        forged[4] = "000000000001"
        let refused = try ask(forged)
        #expect(refused[39] == "94" && refused[38] == nil && refused[2] == "4012888888881881", "\(refused.fields)")
        // A pre-authorisation's repeat (0101) gets the first answer too, and is not authorised again.
        var preAuth = TerminalMessages.authorisation(sale, context)
        preAuth.mti = "0100"
        preAuth[11] = "000011"
        let held = try ask(preAuth)
        #expect(held.mti == "0110" && held[39] == "00")
        var heldAgain = preAuth
        heldAgain.mti = "0101"
        let repeatedHold = try ask(heldAgain)
        #expect(repeatedHold.mti == "0110" && repeatedHold[39] == "00" && repeatedHold[38] == held[38], "\(repeatedHold.fields)")
        // A card number a peer put in a private field is masked in the trace like field 2.
        var private48 = request
        private48[11] = "000009"
        private48[48] = "acct 4012888888881881"
        #expect(try ask(private48)[39] == "00")
        // A currency that is no ISO 4217 code: 30 (format error), nothing authorised, no row.
        var noCurrency = request
        noCurrency[11] = "000010"
        noCurrency[49] = "000"
        let format = try ask(noCurrency)
        #expect(format[39] == "30" && format[38] == nil && format.fields[55] == nil, "\(format.fields)")
        // Garbage: nothing comes back, and the connection still serves.
        try c.send([0x30, 0x32])
        #expect(throws: HostLinkError.timedOut) { try c.receive(until: .now + .milliseconds(500)) }
        var zero = request
        zero[4] = "000000000000"
        zero[11] = "000008"
        #expect(try ask(zero)[39] == "13")
        let listed = try cli(["tx", "list", "--json", "--limit", "100"], socket: daemon.socket)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        let host = rows.filter { $0["provider"] as? String == "iso8583" }
        #expect(host.count == 3, "one row per authorisation, none for the repeats or the forgery: \(rows.count)")
        #expect(host.allSatisfy { $0["brand"] as? String == "VISA" }, "the brand as every other writer stores it: \(host.map { $0["brand"] ?? "nil" })")
        let shown = try host.map { try cli(["tx", "show", try #require($0["transactionId"] as? String), "--json"], socket: daemon.socket).stdout }.joined()
        #expect(shown.contains("acct 401288******1881") && !shown.contains("4012888888881881"), "\(shown)")
    }

    @Test("configuration errors name the key and the rule")
    func configurationErrors() async throws {
        let cases: [(String, String)] = [
            ("host:\n  upstream: http://127.0.0.1:5000\n", "host.upstream: must be iso8583://HOST:PORT"),
            ("host:\n  upstream: iso8583://127.0.0.1:0\n", "host.upstream: must be iso8583://HOST:PORT"),
            ("host:\n  iso8583:\n    packager: iso93\n", "host.iso8583.packager: must be pyiso8583-default"),
            ("host:\n  iso8583:\n    framing: hdlc\n", "host.iso8583.framing: must be binary2, nac or ascii4"),
            ("host:\n  iso8583:\n    listen: 70000\n", "host.iso8583.listen: must be a whole number from 0 to 65535"),
            ("host:\n  iso8583:\n    merchant_id: \"1234567890123456\"\n", "host.iso8583.merchant_id: must be 1 to 15"),
            ("terminals: [a]\nterminal:\n  a:\n    host: iso8583://[::1\n", "terminal.a.host: must be iso8583://HOST:PORT"),
            ("terminals: [a]\nterminal:\n  a:\n    host: iso8583://::1:5000\n", "terminal.a.host: must be iso8583://HOST:PORT"),
            ("terminals: [a]\nterminal:\n  a:\n    iso8583: {packager: jpos-iso93}\n", "terminal.a.iso8583.packager: must be pyiso8583-default"),
            ("terminals: [a]\nterminal:\n  a:\n    iso8583: {framing: hdlc}\n", "terminal.a.iso8583.framing: must be binary2, nac or ascii4"),
        ]
        for (yaml, expected) in cases {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("iso-conf-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("c.yaml")
            try yaml.write(to: file, atomically: true, encoding: .utf8)
            let p = Process()
            p.executableURL = productsDirectory.appendingPathComponent("cardbenchd")
            p.arguments = ["--config", file.path, "--state-directory", directory.path + "/s", "--runtime-directory", directory.path + "/r"]
            let err = Pipe()
            p.standardError = err
            p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            try p.run()
            // A configuration the daemon took would leave it running: stop it, and fail below.
            let watchdog = Task { try await Task.sleep(for: .seconds(20)); p.terminate() }
            defer { watchdog.cancel() }
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(p.terminationStatus == 2, "\(yaml): \(text)")
            #expect(text.contains(expected), "\(yaml): \(text)")
        }
    }
}
