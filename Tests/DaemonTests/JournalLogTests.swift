import Foundation
import Logging
import Testing
@testable import Daemon

/// Reads a native-protocol entry back: `NAME=value` lines and `NAME\n<u64 LE length><value>\n`.
private func journalFields(_ data: [UInt8]) -> [String: String]? {
    var fields: [String: String] = [:]
    var i = 0
    while i < data.count {
        guard let end = data[i...].firstIndex(where: { $0 == 0x0A || $0 == UInt8(ascii: "=") }) else { return nil }
        let name = String(decoding: data[i..<end], as: UTF8.self)
        if data[end] == UInt8(ascii: "=") {
            guard let nl = data[(end + 1)...].firstIndex(of: 0x0A) else { return nil }
            fields[name] = String(decoding: data[(end + 1)..<nl], as: UTF8.self)
            i = nl + 1
        } else {
            guard end + 9 <= data.count else { return nil }
            let length = data[(end + 1)..<(end + 9)].reversed().reduce(0) { $0 << 8 | Int($1) }
            let start = end + 9
            guard start + length < data.count, data[start + length] == 0x0A else { return nil }
            fields[name] = String(decoding: data[start..<(start + length)], as: UTF8.self)
            i = start + length + 1
        }
    }
    return fields
}

/// A Unix datagram socket standing in for journald's.
private final class FakeJournal {
    let path: String
    let fd: Int32

    init(directory: URL) throws {
        path = directory.appendingPathComponent("journal.socket").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { b in for (i, c) in path.utf8.enumerated() { b[i] = c } }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        #expect(bound == 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func receive() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? Array(buffer[..<n]) : nil
    }
}

@Suite("journald")
struct JournalLogTests {
    @Test("a message reaches journald's socket as fields: MESSAGE (a multi-line one in the binary form), PRIORITY, SYSLOG_IDENTIFIER, the code location, metadata as CARDBENCH_*")
    func nativeFields() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-journal-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let journal = try FakeJournal(directory: directory)
        let handler = LineLogHandler(label: "cardbenchd", environment: [:], journalSocket: journal.path)
        let logger = Logger(label: "test") { _ in handler }
        logger.warning("callback 3 given up\nafter 10 attempts", metadata: ["transaction": "42", "terminal-name": "bench1"])
        let fields = try #require(journal.receive().flatMap(journalFields))
        #expect(fields["MESSAGE"] == "callback 3 given up\nafter 10 attempts")
        #expect(fields["PRIORITY"] == "4")
        #expect(fields["SYSLOG_IDENTIFIER"] == "cardbenchd")
        #expect(fields["CARDBENCH_TRANSACTION"] == "42")
        #expect(fields["CARDBENCH_TERMINAL_NAME"] == "bench1")
        #expect(fields["CODE_FILE"]?.hasSuffix("JournalLogTests.swift") == true)
        #expect(fields["CODE_FUNC"]?.hasPrefix("nativeFields") == true)
        #expect(fields["CODE_LINE"].flatMap(Int.init) != nil)

        logger.notice("ready")
        let ready = try #require(journal.receive().flatMap(journalFields))
        #expect(ready["MESSAGE"] == "ready" && ready["PRIORITY"] == "5" && ready.keys.filter { $0.hasPrefix("CARDBENCH_") }.isEmpty)
    }

    @Test("metadata keys become valid journal field names, or are left out")
    func fieldNames() {
        #expect(JournalSocket.fieldName("terminal") == "CARDBENCH_TERMINAL")
        #expect(JournalSocket.fieldName("hb.request.id") == "CARDBENCH_HB_REQUEST_ID")
        #expect(JournalSocket.fieldName("pin-tries") == "CARDBENCH_PIN_TRIES")
        #expect(JournalSocket.fieldName("") == nil)
        #expect(JournalSocket.fieldName(String(repeating: "a", count: 60)) == nil)
    }

    @Test("the journal only when JOURNAL_STREAM is this process's stderr; no journald: the send fails and the line is written")
    func streamCheck() throws {
        #expect(!LineLogHandler.isStandardError("1:2"))
        #expect(!LineLogHandler.isStandardError("garbage"))
        var st = stat()
        #expect(fstat(2, &st) == 0)
        #expect(LineLogHandler.isStandardError("\(st.st_dev):\(st.st_ino)"))
        let handler = LineLogHandler(label: "cardbenchd", environment: ["JOURNAL_STREAM": "1:2"])
        #expect(handler.native == nil)
        let absent = try #require(JournalSocket(path: "/nonexistent/journal.socket"))
        #expect(!absent.send(JournalSocket.datagram([("MESSAGE", "x")])))
        #expect(handler.line(.warning, "given up", metadata: ["transaction": "42"]) == "<4>cardbenchd: given up transaction=42\n")
    }
}
