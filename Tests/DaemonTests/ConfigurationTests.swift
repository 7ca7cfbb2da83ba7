import Foundation
import Testing
@testable import CardIO
import Daemon
import ISO8583

@Suite("daemon configuration")
struct ConfigurationTests {
    func file(_ yaml: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cbcfg-\(UUID().uuidString.prefix(8)).yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("a terminal's external host may speak a format of its own; the others keep host.iso8583's, and GET /v1/host shows each")
    func iso8583FormatPerTerminal() async throws {
        let c = try await DaemonConfiguration.load(file: try file("""
            terminals: [a, b, c]
            host:
              upstream: iso8583://127.0.0.1:9000
              iso8583: {packager: jpos-iso87a, framing: ascii4, retries: 1}
            terminal:
              a:
                iso8583: {packager: jpos-iso87b, framing: nac}
              b:
                host: iso8583://127.0.0.1:9001
              c:
                host: emulated
                iso8583: {packager: pyiso8583-default}
            """), environment: [:])
        let a = c.iso8583Settings(for: c.terminals[0]), b = c.iso8583Settings(for: c.terminals[1])
        #expect(a.packager.name == "jpos-iso87b" && a.framing == .nac && a.retries == 1)
        #expect(b.packager.name == "jpos-iso87a" && b.framing == .ascii4)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cbfmt-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = c
        configuration.stateDirectory = directory.appendingPathComponent("state").path
        configuration.runtimeDirectory = directory.appendingPathComponent("run").path
        let bench = try Bench(configuration: configuration)
        defer { try? bench.ledger.close() }
        let view = try bench.hostView()
        #expect(view.upstreams == ["a": "iso8583://127.0.0.1:9000", "b": "iso8583://127.0.0.1:9001", "c": "emulated"])
        // The emulated terminal has no external host, so no format either.
        #expect(view.upstreamFormats == ["a": ISO8583FormatView(packager: "jpos-iso87b", framing: "nac"),
                                         "b": ISO8583FormatView(packager: "jpos-iso87a", framing: "ascii4")])
    }

    @Test("pcsc:<pattern> readers: parsed, checked; vpcd only with a pcsc: reader; one pattern per terminal")
    func pcscReaders() async throws {
        let good = try await DaemonConfiguration.load(file: try file("""
            terminals: [a]
            terminal:
              a:
                reader: "pcsc:/OMNIKEY.*/"
                vpcd: 127.0.0.1:35963
            """), environment: [:])
        #expect(good.terminals[0].reader == .pcsc(pattern: try PCSCReaderPattern(parsing: "/OMNIKEY.*/")))
        #expect(good.terminals[0].reader.kind == "pcsc")
        #expect(good.terminals[0].vpcd == .tcp(host: "127.0.0.1", port: 35963))
        func refused(_ yaml: String) async throws -> ConfigurationError {
            do {
                _ = try await DaemonConfiguration.load(file: try file(yaml), environment: [:])
            } catch let error as ConfigurationError {
                return error
            }
            throw HarnessFailure("accepted: \(yaml)")
        }
        let empty = try await refused("terminals: [a]\nterminal:\n  a:\n    reader: \"pcsc:\"\n")
        #expect(empty.key == "terminal.a.reader" && empty.rule.hasPrefix("pcsc:<pattern> needs a reader name"), "\(empty)")
        let regex = try await refused("terminals: [a]\nterminal:\n  a:\n    reader: \"pcsc:/([/\"\n")
        #expect(regex.rule.contains("must be a regular expression"), "\(regex)")
        let vpcd = try await refused("terminals: [a]\nterminal:\n  a:\n    vpcd: 127.0.0.1:35963\n")
        #expect(vpcd.key == "terminal.a.vpcd" && vpcd.rule.hasPrefix("is for a pcsc:<pattern> reader"), "\(vpcd)")
        let path = try await refused("terminals: [a]\nterminal:\n  a:\n    reader: pcsc:X\n    vpcd: /tmp/x\n")
        #expect(path.rule.hasPrefix("must be host:port"), "\(path)")
        let twice = try await refused("terminals: [a, b]\nterminal:\n  a:\n    reader: pcsc:X\n  b:\n    reader: pcsc:X\n")
        #expect(twice.key == "terminals" && twice.rule.contains("same pcsc:<pattern>"), "\(twice)")
        let kind = try await refused("terminals: [a]\nterminal:\n  a:\n    reader: usb:X\n")
        #expect(kind.rule.contains("pcsc:<pattern>"), "\(kind)")
    }

    @Test("terminal interfaces, fallback and contactless limits, demo.interface: parsed, and refused by key and rule")
    func tapAndSwipeKeys() async throws {
        let good = try await DaemonConfiguration.load(file: try file("""
            terminals: [a]
            terminal:
              a:
                interfaces: [contactless, magstripe]
                fallback: true
                contactless: {transaction_limit: "5000.00", floor_limit: "0", cvm_limit: "100.50"}
            demo:
              interface: tap
            """), environment: [:])
        let a = good.terminals[0]
        #expect(a.interfaces == [.contactless, .magstripe] && a.fallback)
        #expect(a.contactlessTransactionLimit == 500_000 && a.contactlessFloorLimit == 0 && a.contactlessCVMLimit == 10_050)
        #expect(good.demoInterface == .contactless)
        func refused(_ yaml: String) async throws -> ConfigurationError {
            do { _ = try await DaemonConfiguration.load(file: try file(yaml), environment: [:]) } catch let error as ConfigurationError { return error }
            throw HarnessFailure("accepted: \(yaml)")
        }
        let interface = try await refused("terminals: [a]\nterminal:\n  a:\n    interfaces: [contact, nfc]\n")
        #expect(interface.key == "terminal.a.interfaces" && interface.rule.contains("nfc"), "\(interface)")
        let amount = try await refused("terminals: [a]\nterminal:\n  a:\n    contactless: {cvm_limit: \"1.5\"}\n")
        #expect(amount.key == "terminal.a.contactless.cvm_limit" && amount.rule.contains("400.00"), "\(amount)")
        let flag = try await refused("terminals: [a]\nterminal:\n  a:\n    fallback: maybe\n")
        #expect(flag.key == "terminal.a.fallback", "\(flag)")
        let demo = try await refused("demo:\n  interface: wave\n")
        #expect(demo.key == "demo.interface" && demo.rule.contains("insert, tap or swipe"), "\(demo)")
    }

    @Test("no file and no environment: the embedded default")
    func embeddedDefault() async throws {
        let c = try await DaemonConfiguration.load(file: nil, environment: [:])
        #expect(c == DaemonConfiguration())
        #expect(c.stateDirectory == ".cardbench")
        #expect(c.effectiveRuntimeDirectory == ".cardbench/run")
        #expect(c.httpPort == 8780)
        #expect(c.terminals == [TerminalSettings(name: "bench1", tid: "10000001", reader: .virtual(name: "bench1"))])
    }

    @Test("a YAML file sets terminals and values; CARDBENCH_* environment variables override it; systemd's directories apply")
    func fileAndEnvironment() async throws {
        let path = try file("""
            state_directory: /tmp/cb-state
            http:
              port: 9000
            terminals: [front, back]
            terminal:
              front:
                tid: "20000001"
                currency: 484
              back:
                tid: "20000002"
            clock:
              mode: manual
              start: 2026-11-23T22:59:58-06:00
            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let c = try await DaemonConfiguration.load(file: path, environment: ["CARDBENCH_HTTP_PORT": "0", "RUNTIME_DIRECTORY": "/run/cardbench"])
        #expect(c.httpPort == 0, "the environment wins over the file")
        #expect(c.stateDirectory == "/tmp/cb-state")
        #expect(c.runtimeDirectory == "/run/cardbench")
        #expect(c.terminals.map(\.name) == ["front", "back"])
        #expect(c.terminals.map(\.tid) == ["20000001", "20000002"])
        #expect(c.terminals[0].currencyCode == 484 && c.terminals[1].currencyCode == 978)
        #expect(c.manualClock)
        #expect(c.clockStart == 1_795_496_398_000_000, "2026-11-24T04:59:58Z")
        let systemd = try await DaemonConfiguration.load(file: nil, environment: ["STATE_DIRECTORY": "/var/lib/cardbench"])
        #expect(systemd.stateDirectory == "/var/lib/cardbench")
        let off = try await DaemonConfiguration.load(file: nil, environment: ["CARDBENCH_HTTP_PORT": "off"])
        #expect(off.httpPort == nil)
    }

    @Test("each bad value names its key and rule", arguments: [
        ("http:\n  port: 70000\n", "http.port: must be a whole number from 0 to 65535"),
        ("terminals: [a]\nterminal:\n  a:\n    tid: \"12\"\n", "terminal.a.tid: must be 8 digits"),
        ("terminals: [a, a]\n", "terminals: \"a\" is listed twice"),
        ("terminals: [\"a b\"]\n", "must be 1 to 32 letters"),
        ("terminals: [a, b]\nterminal:\n  a:\n    tid: \"10000001\"\n  b:\n    tid: \"10000001\"\n", "already another terminal's TID"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: usb:x\n", "terminal.a.reader: must be virtual:<name>, serial:<path>, udev:<name> or pcsc:<pattern>"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:ttyUSB0\n", "terminal.a.reader: serial:<path> needs an absolute path"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: udev:a/b\n", "terminal.a.reader: udev:<name> needs the reader's ENV{CARDBENCH_NAME}"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:/dev/ttyUSB0\n    serial:\n      baud: 12345\n", "terminal.a.serial.baud: must be one of 1200"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:/dev/ttyUSB0\n    serial:\n      parity: mark\n", "terminal.a.serial.parity: must be one of even, odd, none"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:/dev/ttyUSB0\n    serial:\n      reset: cts\n", "terminal.a.serial.reset: must be one of rts, dtr, none"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:/dev/ttyUSB0\n    serial:\n      presence_level: up\n", "terminal.a.serial.presence_level: must be asserted or released"),
        ("terminals: [a]\nterminal:\n  a:\n    reader: serial:/dev/ttyUSB0\n    serial:\n      stop_bits: 3\n", "terminal.a.serial.stop_bits: must be a whole number from 1 to 2"),
        ("clock:\n  mode: sometimes\n", "clock.mode: must be system or manual"),
        ("clock:\n  start: yesterday\n", "clock.start: must be an ISO 8601"),
        ("timeouts:\n  prompt_seconds: -1\n", "timeouts.prompt_seconds: must be a number of seconds above 0"),
        ("viva:\n  amount_table: magic\n", "viva.amount_table: must be none, stripe-cents, billpocket or worldline"),
        ("callbacks:\n  xdg_open: maybe\n", "callbacks.xdg_open: must be true or false"),
        ("emv:\n  revoked: [\"A000000003:B0\"]\n", "emv.revoked: must be RID:INDEX:SERIAL"),
    ])
    func badValues(yaml: String, message: String) async throws {
        let path = try file(yaml)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try await DaemonConfiguration.load(file: path, environment: [:])
            Issue.record("accepted: \(yaml)")
        } catch let error as ConfigurationError {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test("serial and udev readers with their line settings; defaults are Phoenix's")
    func serialReaders() async throws {
        let path = try file("""
            terminals: [lab, hot]
            terminal:
              lab:
                reader: serial:/dev/ttyUSB0
                serial:
                  baud: 19200
                  parity: odd
                  stop_bits: 1
                  reset: dtr
                  reset_level: released
                  reset_ms: 50
                  presence: dcd
                  presence_level: released
                  echo: false
              hot:
                reader: udev:phoenix1
            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let c = try await DaemonConfiguration.load(file: path, environment: [:])
        let lab = c.terminals[0], hot = c.terminals[1]
        #expect(lab.reader == .serial(path: "/dev/ttyUSB0") && lab.udevName == nil)
        #expect(lab.serial.baud == 19200 && lab.serial.parity == .odd && lab.serial.stopBits == 1)
        #expect(lab.serial.resetLine == .dtr && !lab.serial.resetAssertedIsReset && lab.serial.resetPulse == .milliseconds(50))
        #expect(lab.serial.presenceLine == .dcd && !lab.serial.presenceAssertedIsCard && !lab.serial.echo)
        #expect(hot.reader == .udev(name: "phoenix1") && hot.udevName == "phoenix1")
        #expect(hot.serial == SerialSettings(), "defaults: 9600 8E2, RTS reset asserted, always present, echo on")
    }

    @Test("CAPK files: shared by default, per terminal when given; revocations parsed; the daemon refuses an unreadable CAPK file naming the key")
    func capk() async throws {
        let c = try await DaemonConfiguration.load(file: try file("""
            terminals: [a, b]
            emv:
              capk: [/etc/cardbench/capk.yaml]
              revoked: ["A000000003:B0:00A1B2"]
            terminal:
              b:
                capk: [/etc/cardbench/b.yaml, /etc/cardbench/more.yaml]
            """), environment: [:])
        #expect(c.capkFiles == ["/etc/cardbench/capk.yaml"] && c.revokedCertificates == ["A000000003:B0:00A1B2"])
        #expect(c.terminals[0].capkFiles == nil && c.terminals[1].capkFiles == ["/etc/cardbench/b.yaml", "/etc/cardbench/more.yaml"])
        #expect(try await DaemonConfiguration.load(file: nil, environment: [:]).capkFiles.isEmpty, "the embedded keys only")
        var broken = try await DaemonConfiguration.load(file: nil, environment: [:])
        broken.stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cbcapk-\(UUID().uuidString.prefix(8))").path
        broken.httpPort = nil
        broken.terminals[0].capkFiles = ["/nonexistent/capk.yaml"]
        do {
            _ = try Bench(configuration: broken)
            Issue.record("a terminal with an unreadable CAPK file started")
        } catch let error as ConfigurationError {
            #expect(error.key == "terminal.bench1.capk" && error.rule.contains("/nonexistent/capk.yaml"), "\(error)")
        }
        try? FileManager.default.removeItem(atPath: broken.stateDirectory)
    }

    @Test("emv.bench_ca: read at start; an unreadable one refuses to start naming the key and the file")
    func benchCA() async throws {
        let c = try await DaemonConfiguration.load(file: try file("emv:\n  bench_ca: /etc/cardbench/bench-ca.yaml\n"), environment: [:])
        #expect(c.benchCAFile == "/etc/cardbench/bench-ca.yaml")
        var broken = try await DaemonConfiguration.load(file: nil, environment: [:])
        broken.stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("cbca-\(UUID().uuidString.prefix(8))").path
        broken.httpPort = nil
        broken.benchCAFile = "/nonexistent/bench-ca.yaml"
        do {
            _ = try Bench(configuration: broken)
            Issue.record("a daemon with an unreadable bench CA started")
        } catch let error as ConfigurationError {
            #expect(error.key == "emv.bench_ca" && error.rule.contains("/nonexistent/bench-ca.yaml"), "\(error)")
        }
        try? FileManager.default.removeItem(atPath: broken.stateDirectory)
    }

    @Test("a missing file is an error naming it")
    func missingFile() async throws {
        await #expect(throws: ConfigurationError.self) { try await DaemonConfiguration.load(file: "/nonexistent/cardbenchd.yaml", environment: [:]) }
    }
}

struct HarnessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
