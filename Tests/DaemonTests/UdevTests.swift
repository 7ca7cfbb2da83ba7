import Foundation
import Testing
import CardIO
import Daemon

/// udev on this machine: udevadm, root (rules go to /run/udev/rules.d), and a real tty to mark.
enum UdevBench {
    static let udevadm = ["/usr/bin/udevadm", "/bin/udevadm"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let udevd = ["/lib/systemd/systemd-udevd", "/usr/lib/systemd/systemd-udevd"].first { FileManager.default.isExecutableFile(atPath: $0) }
    /// A serial port every PC-class machine and VM has; the rules are tried on it.
    static let tty = ["ttyS0", "ttyS1"].first { FileManager.default.fileExists(atPath: "/sys/class/tty/\($0)") }
    static var available: Bool { udevadm != nil && getuid() == 0 && tty != nil }

    static let rulesDirectory = "/run/udev/rules.d"
    static let ours = repositoryRoot.appendingPathComponent("udev-rules/70-cardbench.rules").path

    /// Installs our rules and a test rule marking `tty` (with a name, or without one to see the
    /// fallback), runs `body`, and removes both.
    static func withRules<T>(markWithName name: String?, _ body: () async throws -> T) async throws -> T {
        try FileManager.default.createDirectory(atPath: rulesDirectory, withIntermediateDirectories: true)
        let test = rulesDirectory + "/69-cardbench-test.rules"
        let installed = rulesDirectory + "/70-cardbench.rules"
        var rule = "SUBSYSTEM==\"tty\", KERNEL==\"\(tty!)\", ENV{CARDBENCH_READER}=\"1\""
        if let name { rule += ", ENV{CARDBENCH_NAME}=\"\(name)\"" }
        try (rule + "\n").write(toFile: test, atomically: true, encoding: .utf8)
        try? FileManager.default.removeItem(atPath: installed)
        try FileManager.default.copyItem(atPath: ours, toPath: installed)
        defer {
            try? FileManager.default.removeItem(atPath: test)
            try? FileManager.default.removeItem(atPath: installed)
            _ = run([udevadm!, "control", "--reload"])
        }
        _ = run([udevadm!, "control", "--reload"])
        return try await body()
    }

    /// Starts systemd-udevd when none runs (a container, a CI machine); returns it to stop.
    static func startUdevd() throws -> Process? {
        guard run(["/usr/bin/pgrep", "-x", "systemd-udevd"]).status != 0, let udevd else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: udevd)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        usleep(500_000)
        return p
    }

    @discardableResult
    static func run(_ arguments: [String]) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        guard (try? process.run()) != nil else { return (-1, "cannot run \(arguments[0])") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

/// Polls `condition` every 20 ms for up to `seconds`.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

@Suite("udev rules and hotplug", .serialized, .enabled(if: UdevBench.available, "needs udevadm, root and a ttyS port"))
struct UdevTests {
    @Test("the rules give a marked tty its name, symlink, dialout group, mode 0660 and ModemManager's ignore flag")
    func rules() async throws {
        let tty = UdevBench.tty!
        let named = try await UdevBench.withRules(markWithName: "bench-reader") {
            UdevBench.run([UdevBench.udevadm!, "test", "--action=add", "/sys/class/tty/\(tty)"]).output
        }
        #expect(named.contains("CARDBENCH_READER=1"), "\(named)")
        #expect(named.contains("CARDBENCH_NAME=bench-reader"))
        #expect(named.contains("ID_MM_DEVICE_IGNORE=1"))
        #expect(named.contains("70-cardbench.rules") && named.contains("MODE 0660"))
        #expect(named.contains("LINK 'cardbench/bench-reader'"))
        #expect(named.contains("gid=\(Self.dialout())"), "group dialout")
        #expect(!named.contains("Invalid"), "no rule of ours is refused")

        let unnamed = try await UdevBench.withRules(markWithName: nil) {
            UdevBench.run([UdevBench.udevadm!, "test", "--action=add", "/sys/class/tty/\(tty)"]).output
        }
        #expect(unnamed.contains("CARDBENCH_NAME=\(tty)"), "without a name or a USB serial number, the kernel name: \(unnamed)")

        // An unmarked tty gets nothing from us.
        let unmarked = UdevBench.run([UdevBench.udevadm!, "test", "--action=add", "/sys/class/tty/\(tty)"]).output
        #expect(!unmarked.contains("CARDBENCH"))
        _ = UdevBench.run([UdevBench.udevadm!, "test", "--action=add", "/sys/class/tty/\(tty)"])
        try? FileManager.default.removeItem(atPath: "/dev/cardbench")
    }

    @Test("with udevd running, a marked tty is enumerated and its add and remove events arrive")
    func hotplug() async throws {
        let tty = UdevBench.tty!
        let started = try UdevBench.startUdevd()
        defer {
            started?.terminate()
            started?.waitUntilExit()
        }
        let events = EventLog()
        try await UdevBench.withRules(markWithName: "hotplug1") {
            let udev = try UdevReaders()
            defer { udev.stop() }
            try udev.follow { event in
                switch event {
                case .added(let r): events.append("added \(r.name) \(r.devnode)")
                case .removed(let r): events.append("removed \(r.name) \(r.devnode)")
                }
            }
            UdevBench.run([UdevBench.udevadm!, "trigger", "--action=add", "--settle", "--sysname-match=\(tty)"])
            #expect(eventually { events.contains("added hotplug1 /dev/\(tty)") }, "\(events.items)")
            let found = try udev.enumerate()
            #expect(found.map(\.name) == ["hotplug1"])
            #expect(found.first?.devnode == "/dev/\(tty)")
            UdevBench.run([UdevBench.udevadm!, "trigger", "--action=remove", "--settle", "--sysname-match=\(tty)"])
            #expect(eventually { events.contains("removed hotplug1 /dev/\(tty)") }, "\(events.items)")
        }
        // Put the device back as udev had it.
        UdevBench.run([UdevBench.udevadm!, "trigger", "--action=add", "--settle", "--sysname-match=\(tty)"])
        try? FileManager.default.removeItem(atPath: "/dev/cardbench")
    }

    @Test("cardbenchd opens a udev: reader it finds at start, and follows it out and back in")
    func daemonFollowsUdev() async throws {
        let tty = UdevBench.tty!
        let started = try UdevBench.startUdevd()
        defer {
            started?.terminate()
            started?.waitUntilExit()
        }
        try await UdevBench.withRules(markWithName: "lab1") {
            UdevBench.run([UdevBench.udevadm!, "trigger", "--action=add", "--settle", "--sysname-match=\(tty)"])
            let daemon = try await DaemonProcess(config: """
                terminals: [bench1, lab]
                terminal:
                  lab:
                    reader: udev:lab1
                    serial:
                      reset: none
                """)
            defer { daemon.remove() }
            func labLine() throws -> String {
                String(try cli(["readers"], socket: daemon.socket).stdout.split(separator: "\n").first { $0.hasPrefix("lab1 ") } ?? "")
            }
            #expect(try labLine().contains("lab1 udev /dev/\(tty) open terminal lab"), "found at start: \((try? labLine()) ?? "")")
            UdevBench.run([UdevBench.udevadm!, "trigger", "--action=remove", "--settle", "--sysname-match=\(tty)"])
            #expect(eventually { ((try? labLine()) ?? "").contains("lab1 udev (unplugged) absent") }, "\((try? labLine()) ?? "")")
            UdevBench.run([UdevBench.udevadm!, "trigger", "--action=add", "--settle", "--sysname-match=\(tty)"])
            #expect(eventually { ((try? labLine()) ?? "").contains("/dev/\(tty) open") }, "\((try? labLine()) ?? "")")
        }
        UdevBench.run([UdevBench.udevadm!, "trigger", "--action=add", "--settle", "--sysname-match=\(tty)"])
        try? FileManager.default.removeItem(atPath: "/dev/cardbench")
    }

    static func dialout() -> String {
        guard let group = getgrnam("dialout") else { return "?" }
        return String(group.pointee.gr_gid)
    }
}
