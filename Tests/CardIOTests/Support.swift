#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import EMV
import Foundation
import Logging
import Testing
@testable import CardIO

/// A fresh directory under /tmp: Unix socket paths are at most 107 bytes, so no deep temp dirs.
struct TempDir {
    let path: String

    init() throws {
        var template = Array("/tmp/cardio-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CardIOError.io(reader: "test", detail: "mkdtemp failed") }
        path = String(cString: made)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

let testATR: [UInt8] = [0x3B, 0x65, 0x00, 0x00, 0x9C, 0x11, 0x01, 0x01, 0x03]

/// The test cards' applet: READ RECORD (B2) answers 6A83, SELECT of "BAD" 6A82, a command that is
/// not a short APDU 6700, anything else echoes its data with 9000.
@Sendable func echoCard(_ command: [UInt8]) -> [UInt8] {
    guard let apdu = try? CommandAPDU(bytes: command) else { return [0x67, 0x00] }
    if apdu.ins == 0xB2 { return [0x6A, 0x83] }
    if apdu.ins == 0xA4, apdu.data == Array("BAD".utf8) { return [0x6A, 0x82] }
    return apdu.data + [0x90, 0x00]
}

/// A card served by `VPCDCardLink` on its own thread, recording what the reader did to it.
final class TestCard: @unchecked Sendable {
    // Unchecked: the recorded lists are inside `Locked`; the rest is set in init.
    let link: VPCDCardLink
    private let finished = DispatchSemaphore(value: 0)
    private let record = Locked(Record())

    struct Record {
        var power: [PowerEvent] = []
        var commands: [[UInt8]] = []
        var outcome: CardIOError?? = nil   // nil: still serving; .some(nil): returned normally
    }

    init(_ endpoint: ReaderEndpoint, atr: [UInt8] = testATR,
         respond: @escaping @Sendable (TestCard, [UInt8]) -> [UInt8] = { echoCard($1) }) throws {
        link = try VPCDCardLink.connect(to: endpoint)
        let thread = Thread { [self] in
            var failure: CardIOError?
            do throws(CardIOError) {
                try link.serve(atr: atr, respond: { command in
                    record.withLock { $0.commands.append(command) }
                    return respond(self, command)
                }, onPower: { event in
                    record.withLock { $0.power.append(event) }
                })
            } catch {
                failure = error
            }
            record.withLock { $0.outcome = .some(failure) }
            finished.signal()
        }
        thread.start()
    }

    var powerEvents: [PowerEvent] { record.withLock { $0.power } }
    var commands: [[UInt8]] { record.withLock { $0.commands } }
    /// nil while serving; then the error serve threw, or .some(nil) if it returned.
    var outcome: CardIOError?? { record.withLock { $0.outcome } }

    /// Waits for `serve` to return; false if it did not within `timeout`.
    @discardableResult
    func join(timeout: Double = 5) -> Bool {
        if finished.wait(timeout: .now() + timeout) == .timedOut { return false }
        finished.signal()  // later joins return at once
        return true
    }

    /// Pulls the card out and waits for its thread.
    @discardableResult
    func remove() -> Bool {
        link.close()
        return join()
    }
}

/// Collects a reader's events and log lines.
final class Recorder: @unchecked Sendable {
    // Unchecked: both lists are inside `Locked`.
    private let events = Locked<[ReaderEvent]>([])
    private let lines = Locked<[String]>([])

    /// A logger whose messages land in `logged`.
    var logger: Logger { Logger(label: "test") { _ in RecordingLogHandler(record: { [self] line in lines.withLock { $0.append(line) } }) } }
    func observe(_ event: ReaderEvent) { events.withLock { $0.append(event) } }
    var seen: [ReaderEvent] { events.withLock { $0 } }
    var logged: [String] { lines.withLock { $0 } }
}

/// A started reader on a fresh socket, with its events recorded.
struct Bench {
    let dir: TempDir
    let reader: VirtualReader
    let recorder = Recorder()

    init(name: String = "bench1", tcpPort: UInt16? = nil, responseTimeout: Duration = .seconds(5)) throws {
        dir = try TempDir()
        reader = try VirtualReader(name: name, socketPath: dir.file("reader.sock"), tcpPort: tcpPort,
                                   responseTimeout: responseTimeout, logger: recorder.logger)
        let recorder = self.recorder
        reader.addObserver { recorder.observe($0) }
        try reader.start()
    }

    var endpoint: ReaderEndpoint { .unix(reader.socketPath) }

    func tearDown() {
        reader.stop()
        dir.remove()
    }
}

/// Polls `condition` every few milliseconds for up to `timeout` seconds.
func eventually(_ timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// `eventually` for async tests: sleeps instead of blocking a cooperative thread.
func eventually(_ timeout: Double = 5, _ condition: () -> Bool) async -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

/// The error a call threw, or nil. (Closures are not inferred as typed-throws, hence the cast.)
func thrown<T>(_ body: () throws -> T) -> CardIOError? {
    do {
        _ = try body()
        return nil
    } catch let error as CardIOError {
        return error
    } catch {
        return .io(reader: "test", detail: "not a CardIOError: \(error)")
    }
}

/// A hand-written vpcd card for frames `VPCDCardLink` would never send: plain blocking calls.
final class RawCard: @unchecked Sendable {
    // Unchecked: `fd` never changes; `sawEOF` is inside `Locked`.
    let fd: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let result = Locked<Bool?>(nil)

    /// Connects to `path` and runs `script` on its own thread; the script returns whether the
    /// reader behaved as expected.
    init(path: String, script: @escaping @Sendable (RawCard) -> Bool) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard status == 0 else { throw CardIOError.io(reader: "raw", detail: "connect failed: \(errno)") }
        var tv = timeval(tv_sec: 5, tv_usec: 0)  // no test waits longer for the reader
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let thread = Thread { [self] in
            let ok = script(self)
            result.withLock { $0 = ok }
            close(fd)
            finished.signal()
        }
        thread.start()
    }

    func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func writeFrame(_ payload: [UInt8]) {
        write([UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload)
    }

    /// Reads exactly `count` bytes, or nil on EOF, error or the 5 s timeout.
    func read(_ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n <= 0 { return nil }
            got += n
        }
        return out
    }

    func readFrame() -> [UInt8]? {
        guard let header = read(2) else { return nil }
        return read(Int(header[0]) << 8 | Int(header[1]))
    }

    /// Power on (01), ATR request (04), answered with `atr`.
    func answerPowerOn(atr: [UInt8] = testATR) -> Bool {
        guard readFrame() == [0x01], readFrame() == [0x04] else { return false }
        writeFrame(atr)
        return true
    }

    /// True once the reader closes the link: it ejected this card.
    func waitForEject() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    /// Whether the script finished and returned true, within `timeout` seconds.
    func succeeded(timeout: Double = 5) -> Bool {
        guard finished.wait(timeout: .now() + timeout) == .success else { return false }
        return result.withLock { $0 } == true
    }
}

/// Hands every message to `record`.
struct RecordingLogHandler: LogHandler {
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    let record: @Sendable (String) -> Void

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { record("\(event.message)") }
}
