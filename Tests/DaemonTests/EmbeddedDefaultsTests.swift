import Defaults
import EMV
import Foundation
import Testing
import DaemonTestSupport
import TestSupport
import VirtualCard
@testable import Daemon

/// A program run in `directory`, its output collected (small outputs only).
private func run(_ program: URL, _ arguments: [String], in directory: URL) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = program
    process.arguments = arguments
    process.currentDirectoryURL = directory
    process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CARDBENCH_") }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

private func emptyDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-empty-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

@Suite("the embedded default")
struct EmbeddedDefaultsTests {
    static let daemon = productsDirectory.appendingPathComponent("cardbenchd")
    static let cli = productsDirectory.appendingPathComponent("cardbench")

    @Test("the embedded profiles and CA keys are the files of Scenarios/cards and Scenarios/ca/capk.yaml, byte for byte")
    func sameAsTheFiles() throws {
        let cards = repositoryRoot.appendingPathComponent("Scenarios/cards")
        let files = try FileManager.default.contentsOfDirectory(atPath: cards.path).filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(files.count >= 44)
        #expect(EmbeddedDefaults.cardProfileNames == files.map { String($0.dropLast(5)) })
        for file in files {
            let text = try String(contentsOf: cards.appendingPathComponent(file), encoding: .utf8)
            #expect(EmbeddedDefaults.cardProfile(named: file) == text, "\(file)")
        }
        #expect(EmbeddedDefaults.capk == (try String(contentsOf: repositoryRoot.appendingPathComponent("Scenarios/ca/capk.yaml"), encoding: .utf8)))
        #expect(EmbeddedDefaults.cardProfile(named: "Scenarios/cards/visa-credit-cvn10.yaml") == nil, "a path is not a name")
    }

    @Test("cardbenchd --demo serves a sale from an empty directory; cardbench sale, card list and emv capk list need no files")
    func fromAnEmptyDirectory() async throws {
        let directory = try emptyDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let daemon = Process()
        daemon.executableURL = Self.daemon
        daemon.arguments = ["--demo", "--http-port", "off"]
        daemon.currentDirectoryURL = directory
        daemon.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CARDBENCH_") && $0.key != "LISTEN_FDS" }
        let log = directory.appendingPathComponent("daemon.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        daemon.standardError = try FileHandle(forWritingTo: log)
        daemon.standardOutput = FileHandle.nullDevice
        try daemon.run()
        defer { if daemon.isRunning { daemon.terminate(); daemon.waitUntilExit() } }
        let socket = directory.appendingPathComponent(".cardbench/run/control.sock").path
        for _ in 0..<300 where !FileManager.default.fileExists(atPath: socket) { try await Task.sleep(for: .milliseconds(50)) }
        let url = "vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=a&action=sale&amount=1200&clientTransactionId=empty-1"
        var sale = (status: Int32(-1), output: "")
        for _ in 0..<50 {
            sale = try run(Self.cli, ["open", "--socket", socket, url], in: directory)
            if sale.status == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let daemonLog = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(sale.output.hasPrefix("mycallbackscheme://result?status=success&"), "\(sale.output)\n\(daemonLog)")
        #expect(daemonLog.contains("demo card visa-credit-cvn10"), "\(daemonLog)")
        daemon.terminate()
        daemon.waitUntilExit()
        #expect(daemon.terminationStatus == 0)

        let offline = try run(Self.cli, ["sale", "--amount", "5.00", "--ledger", directory.appendingPathComponent("sale.sqlite").path], in: directory)
        #expect(offline.status == 0 && offline.output.contains("APPROVED"), "\(offline.output)")
        let list = try run(Self.cli, ["card", "list"], in: directory)
        #expect(list.status == 0)
        #expect(list.output.split(separator: "\n").count == EmbeddedDefaults.cardProfileNames.count)
        #expect(list.output.contains("visa-credit-cvn10\tVISA CREDITO\tcontact,magstripe\t476173******0010"), "\(list.output)")
        let keys = try run(Self.cli, ["emv", "capk", "list", "--rid", "A000000003"], in: directory)
        #expect(keys.status == 0 && keys.output.contains("B0"), "\(keys.output)")
        let named = try run(Self.cli, ["sale", "--card", "mastercard-credit-cvn16", "--amount", "5.00", "--ledger", directory.appendingPathComponent("sale.sqlite").path], in: directory)
        #expect(named.status == 0 && named.output.contains("APPROVED"), "\(named.output)")
        let unknown = try run(Self.cli, ["sale", "--card", "no-such-card", "--amount", "5.00"], in: directory)
        #expect(unknown.status == 2 && unknown.output.contains("--card: cannot read 'no-such-card'") && unknown.output.contains("embedded profile"), "\(unknown.output)")
    }

    @Test("every configuration error exits 2 naming the key and the rule",
          arguments: [
              ("demo:\n  enabled: true\n  card: no-such-card\n", "demo.card: must name a card profile"),
              ("host:\n  cards: [/nonexistent/cards]\n", "host.cards: /nonexistent/cards: no such file or directory"),
              ("host:\n  cards: [BROKEN]\n", "host.cards: "),
              ("emv:\n  capk: [/nonexistent/capk.yaml]\n", "emv.capk: cannot read /nonexistent/capk.yaml"),
              ("callbacks:\n  command: [\"{url}\"]\n", "callbacks.command: the first word is the program to run"),
              ("callbacks:\n  command: [\"\", \"{url}\"]\n", "callbacks.command: the first word must be the program"),
              ("billpocket:\n  installments_name: plazos\n", "billpocket.installments_name: must be msi, payments or both"),
              ("billpocket:\n  statusinfo_language: fr\n", "billpocket.statusinfo_language: must be en or es"),
              ("worldline:\n  settle_seconds: 0\n", "worldline.settle_seconds: must be a number of seconds above 0"),
          ])
    func configurationErrors(yaml: String, message: String) throws {
        let directory = try emptyDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let broken = directory.appendingPathComponent("broken.yaml")
        try "name: [unclosed\n".write(to: broken, atomically: true, encoding: .utf8)
        let config = directory.appendingPathComponent("cardbenchd.yaml")
        try yaml.replacingOccurrences(of: "BROKEN", with: broken.path).write(to: config, atomically: true, encoding: .utf8)
        let result = try run(Self.daemon, ["--config", config.path, "--http-port", "off"], in: directory)
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains(message), "\(result.output)")
    }

    @Test("--demo takes demo.card from the file even when demo.enabled is not set; --demo-card wins over it")
    func demoCardFromTheFile() async throws {
        let daemon = try await DaemonProcess(["--demo"], config: "demo:\n  card: mastercard-credit-cvn16\n")
        defer { daemon.remove() }
        let reply = try #require(try await daemon.open("vivapayclient://pay/v1?callback=cb://r&merchantKey=K&appId=a&action=sale&amount=1200&clientTransactionId=d1").result)
        #expect(reply.callback?.contains("cardType=MASTERCARD") == true, "\(reply.callback ?? "")")
        let other = try await DaemonProcess(["--demo-card", "visa-credit-cvn10"], config: "demo:\n  card: mastercard-credit-cvn16\n")
        defer { other.remove() }
        let visa = try #require(try await other.open("vivapayclient://pay/v1?callback=cb://r&merchantKey=K&appId=a&action=sale&amount=1200&clientTransactionId=d2").result)
        #expect(visa.callback?.contains("cardType=VISA") == true, "\(visa.callback ?? "")")
    }

    @Test("host.cards adds profiles and a file named like an embedded profile replaces it; emv.capk's key replaces the embedded one of its RID and index")
    func overrides() async throws {
        let directory = try emptyDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cards = directory.appendingPathComponent("cards")
        try FileManager.default.createDirectory(at: cards, withIntermediateDirectories: true)
        let original = try #require(EmbeddedDefaults.cardProfile(named: "visa-credit-cvn10"))
        let replaced = original.replacingOccurrences(of: #"balance: "50000.00""#, with: #"balance: "12.34""#)
        #expect(replaced != original)
        try replaced.write(to: cards.appendingPathComponent("visa-credit-cvn10.yaml"), atomically: true, encoding: .utf8)
        try original.replacingOccurrences(of: "name: ", with: "name: Bench own ", options: [], range: original.range(of: "name: "))
            .write(to: cards.appendingPathComponent("bench-own.yaml"), atomically: true, encoding: .utf8)

        var configuration = DaemonConfiguration()
        configuration.stateDirectory = directory.appendingPathComponent("state").path
        configuration.runtimeDirectory = directory.appendingPathComponent("run").path
        configuration.httpPort = nil
        configuration.cardProfiles = [cards.path]
        let bench = try Bench(configuration: configuration, logger: .init(label: "test"))
        #expect(try bench.profile(from: .named("visa-credit-cvn10")).issuerState.balance == 1234)
        #expect(try bench.profile(from: .named("bench-own")).name.hasPrefix("Bench own"))
        #expect(try bench.profile(from: .named("amex-signature.yaml")).pan == "374245455400126")
        #expect(bench.profileLibrary.count == EmbeddedDefaults.cardProfileNames.count + 1)
        #expect(throws: DaemonError.self) { try bench.profile(from: .named("/etc/passwd")) }

        // A CAPK file with an embedded key (same RID, index, modulus) under another name and expiry.
        let embedded = try CAPKStore.embedded()
        let capk = EmbeddedDefaults.capk
        let first = try #require(capk.range(of: "  - rid:"))
        let second = try #require(capk.range(of: "  - rid:", range: first.upperBound..<capk.endIndex))
        let entry = String(capk[first.lowerBound..<second.lowerBound])
            .replacingOccurrences(of: #"expiry: "2035-12-31""#, with: #"expiry: "2030-01-31""#)
        let file = directory.appendingPathComponent("capk.yaml")
        try ("keys:\n" + entry).write(to: file, atomically: true, encoding: .utf8)
        let keys = try CAPKStore.loadWithEmbedded([file.path], key: "emv.capk")
        #expect(keys.count == embedded.count)
        let b0 = keys.filter { $0.rid == [0xA0, 0, 0, 0, 3] && $0.index == 0xB0 }
        #expect(b0.count == 1 && b0.first?.expiry == ODADate(year: 2030, month: 1, day: 31))
        // Two files giving one key are still an error naming both.
        #expect(throws: ConfigurationError.self) { try CAPKStore.loadWithEmbedded([file.path, file.path], key: "emv.capk") }
    }

    @Test("callbacks.command: a template's {url} becomes one argument, wherever it stands; a plain program gets the URL last")
    func commandTemplate() throws {
        let url = "mycallbackscheme://result?status=success&message=Transaction%20successful.&x=$(id);`id`"
        let adb = try #require(try CallbackSettings.commandTemplate(["adb", "exec-out", "am", "start", "-d", "{url}"]))
        #expect(CallbackSettings.commandArguments(adb, url: url) == ["exec-out", "am", "start", "-d", url])
        let plain = try #require(try CallbackSettings.commandTemplate(["/usr/local/bin/deliver"]))
        #expect(CallbackSettings.commandArguments(plain, url: url) == [url])
        let inside = try #require(try CallbackSettings.commandTemplate(["curl", "--data", "u={url}"]))
        #expect(CallbackSettings.commandArguments(inside, url: url) == ["--data", "u=\(url)"])
        #expect(try CallbackSettings.commandTemplate([]) == nil)
        #expect(throws: ConfigurationError.self) { try CallbackSettings.commandTemplate(["{url}"]) }
        #expect(throws: ConfigurationError.self) { try CallbackSettings.commandTemplate(["", "{url}"]) }
    }

    @Test("a delivery command template runs without a shell: the callback URL arrives as one argument, in its place")
    func commandDelivery() async throws {
        let directory = try emptyDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = directory.appendingPathComponent("record.sh")
        let received = directory.appendingPathComponent("received.txt")
        try "#!/bin/sh\nprintf '%s\\n' \"$#\" \"$@\" > '\(received.path)'\n".write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        let daemon = try await DaemonProcess(["--demo"], config: """
            callbacks:
              command: [\(script.path), start, -d, "{url}", --wait]
            """, directory: directory)
        defer { daemon.remove() }
        let reply = try #require(try await daemon.open("vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=a&action=sale&amount=1200&clientTransactionId=t;$(touch%20x)").result)
        let callback = try #require(reply.callback)
        var lines: [String] = []
        for _ in 0..<100 where lines.isEmpty {
            try await Task.sleep(for: .milliseconds(50))
            lines = ((try? String(contentsOf: received, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(lines == ["4", "start", "-d", callback, "--wait"], "\(lines)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("x").path))
    }
}
