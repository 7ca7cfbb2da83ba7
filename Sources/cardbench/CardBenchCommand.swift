import ArgumentParser
import CardIO
import Defaults
import EMV
import Foundation
import VirtualCard
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct CardBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "card",
        abstract: "APDU round trips per second over the vpcd link, beside a bare Unix-socket ping-pong",
        discussion: """
        For each size, the real path runs a VirtualReader on a temporary Unix socket and a card \
        (VPCDCardLink) on another thread; the timed loop is CardChannel.transmit. The floor, measured \
        in the same run, is two threads doing blocking writes and reads of the same frames (2-byte \
        length and payload) over a Unix socket pair, with no CardIO code. Sizes are C-APDU data \
        bytes; the card answers with as many data bytes and 9000. The ratio is cardbench's time per \
        round trip over the floor's; the goal is at most 1.3x.
        """
    )

    @Option(help: "Seconds to run each side, per size.")
    var seconds: Double = 2

    @Option(help: "Comma-separated C-APDU data sizes, each 0–255.")
    var sizes: String = "0,32,128,250"

    @Option(help: "Card profile for the virtual-card row: a selected VirtualCard answers READ RECORD with its real record.")
    var profile: String = EmbeddedDefaults.demoCard

    @Flag(help: "Print the figures as JSON.")
    var json = false

    /// The ratio the vpcd link must stay within.
    static let goal = 1.3

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be more than 0 and at most 600", code: 2) }
        _ = try Self.parseSizes(sizes)
    }

    func run() throws {
        var figures = try Self.run(responder: Self.echo, sizes: try Self.parseSizes(sizes), seconds: seconds)
        figures.append(try Self.virtualCardFigures(profilePath: profile, seconds: seconds))
        if json {
            try printJSON(Report(operation: "vpcd-apdu-round-trip", seconds: seconds, goal: Self.goal,
                                 withinGoal: figures.allSatisfy { $0.ratio <= Self.goal }, sizes: figures))
            return
        }
        print("cardbench bench card: APDU round trips, VirtualReader ⇄ VPCDCardLink over a Unix socket, beside a bare Unix-socket ping-pong of the same frames")
        print("\(CLIFormat.seconds(seconds)) s per side per size; size = C-APDU data bytes, answered with as many data bytes and 9000")
        for f in figures {
            print("\(f.label): cardbench \(CLIFormat.grouped(f.cardbenchRoundTripsPerSecond))/s, floor \(CLIFormat.grouped(f.floorRoundTripsPerSecond))/s, "
                  + String(format: "ratio %.2fx (goal ≤ %.1fx)", f.ratio, Self.goal))
        }
    }

    struct Report: Encodable {
        let operation: String
        let seconds: Double
        let goal: Double
        let withinGoal: Bool
        let sizes: [SizeFigures]
    }

    /// One size's figures; `ratio` is cardbench's time per round trip over the floor's.
    struct SizeFigures: Encodable {
        let label: String
        let size: Int
        let commandBytes: Int
        let responseBytes: Int
        let cardbenchRoundTripsPerSecond: Double
        let floorRoundTripsPerSecond: Double
        let cardbenchMicrosecondsPerRoundTrip: Double
        let floorMicrosecondsPerRoundTrip: Double
        let ratio: Double
    }

    static func parseSizes(_ text: String) throws -> [Int] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let sizes = parts.compactMap { Int($0) }
        guard !parts.isEmpty, sizes.count == parts.count, sizes.allSatisfy({ (0...255).contains($0) }) else {
            throw CLIError(message: "--sizes: must be comma-separated whole numbers from 0 to 255 (short C-APDU data sizes), got \"\(text)\"", code: 2)
        }
        return sizes
    }

    /// A GET DATA-shaped C-APDU carrying `size` data bytes (case 4; case 2 when empty).
    static func command(size: Int) -> [UInt8] {
        guard size > 0 else { return [0x80, 0xCA, 0x9F, 0x36, 0x00] }
        return [0x80, 0xCA, 0x00, 0x00, UInt8(size)] + (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 37) } + [0x00]
    }

    /// The default card: answers with the command's data (as many bytes as it carried) and 9000.
    static let echo: @Sendable ([UInt8]) -> [UInt8] = { command in
        guard command.count > 5 else { return [0x90, 0x00] }
        let end = min(command.count, 5 + Int(command[4]))
        return Array(command[5..<end]) + [0x90, 0x00]
    }

    static let atr: [UInt8] = [0x3B, 0x65, 0x00, 0x00, 0x9C, 0x11, 0x01, 0x01, 0x03]

    /// How many alternating slices each side's time is cut into: thread placement on a small
    /// machine drifts between runs, and alternating lets both sides see the same conditions.
    static let rounds = 5

    /// Measures each size with `responder` as the card; the floor answers with the bytes
    /// `responder` gave for the same command, computed once. Both paths are set up side by side
    /// and timed in alternating slices; each side's figure is its median slice.
    static func run(responder: @escaping @Sendable ([UInt8]) -> [UInt8], sizes: [Int], seconds: Double) throws -> [SizeFigures] {
        try sizes.map { size in
            try measure(label: "size \(size)", command: command(size: size), responder: responder, seconds: seconds)
        }
    }

    /// The real card: a VirtualCard from `profilePath` with its first application selected,
    /// answering READ RECORD SFI 2 record 1 (the record with the PAN) on every round trip.
    static func virtualCardFigures(profilePath: String, seconds: Double) throws -> SizeFigures {
        let profile = try loadCardProfile(profilePath)
        guard !profile.applications.isEmpty else { throw CLIError(message: "\(profilePath): a stripe-only card has no chip application", code: 2) }
        var card = try VirtualCard(profile: profile)
        _ = card.respond(to: CommandAPDU.select(name: profile.applications[0].aid).bytes)
        let box = BenchBox(card)
        let responder: @Sendable ([UInt8]) -> [UInt8] = { command in box.update { $0.respond(to: command) } }
        return try measure(label: "virtual card, READ RECORD", command: CommandAPDU.readRecord(sfi: 2, record: 1).bytes,
                           responder: responder, seconds: seconds)
    }

    static func measure(label: String, command: [UInt8], responder: @escaping @Sendable ([UInt8]) -> [UInt8], seconds: Double) throws -> SizeFigures {
        let size = command.count > 5 ? Int(command[4]) : 0
        let response = responder(command)
        guard response.count >= 2, response.count <= 0xFFFF else {
            throw CLIError(message: "the responder answered a \(command.count)-byte command with \(response.count) bytes; a response is 2 to 65,535 bytes")
        }
        let floor = try FloorPingPong(command: command, response: response)
        defer { floor.close() }
        let link = try LinkPingPong(command: command, responder: responder)
        defer { link.close() }
        let first = try link.roundTrip()
        guard first == response else {
            throw CLIError(message: "the card answered \(first.count) bytes over the link, \(response.count) when called directly; refusing to time different work")
        }

        var floorRates: [Double] = []
        var linkRates: [Double] = []
        let slice = seconds / Double(rounds)
        for _ in 0..<rounds {
            floorRates.append(try timed(seconds: slice) { try floor.roundTrip() })
            linkRates.append(try timed(seconds: slice) { _ = try link.roundTrip() })
        }
        if let error = link.cardFailure { throw CLIError(message: "bench card: the card failed: \(error)") }
        let realRate = median(linkRates)
        let floorRate = median(floorRates)
        return SizeFigures(label: label, size: size, commandBytes: command.count, responseBytes: response.count,
                           cardbenchRoundTripsPerSecond: realRate.rounded(), floorRoundTripsPerSecond: floorRate.rounded(),
                           cardbenchMicrosecondsPerRoundTrip: (1e7 / realRate).rounded() / 10,
                           floorMicrosecondsPerRoundTrip: (1e7 / floorRate).rounded() / 10,
                           ratio: (floorRate / realRate * 100).rounded() / 100)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// Runs `body` in batches until `seconds` have passed, after a short warm-up; returns round
    /// trips per second.
    static func timed(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
        for _ in 0..<200 { try body() }
        let clock = ContinuousClock()
        let limit = Duration.milliseconds(Int64(seconds * 1000))
        let start = clock.now
        var trips = 0
        repeat {
            for _ in 0..<64 { try body() }
            trips += 64
        } while clock.now - start < limit
        let elapsed = clock.now - start
        return Double(trips) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// The real path: a VirtualReader on a temporary Unix socket, a VPCDCardLink card serving on
    /// its own thread, and the channel the timed loop transmits on.
    final class LinkPingPong {
        private let dir: String
        private let reader: VirtualReader
        private let link: VPCDCardLink
        private let channel: any CardChannel
        private let served = DispatchSemaphore(value: 0)
        private let failure = BenchBox<CardIOError?>(nil)
        private let command: [UInt8]

        init(command: [UInt8], responder: @escaping @Sendable ([UInt8]) -> [UInt8]) throws {
            self.command = command
            dir = try temporaryDirectory()
            let socketPath = dir + "/reader.sock"
            do throws(CardIOError) {
                reader = try VirtualReader(name: "bench", socketPath: socketPath)
                try reader.start()
                link = try VPCDCardLink.connect(to: .unix(socketPath))
            } catch {
                try? FileManager.default.removeItem(atPath: dir)
                throw CLIError(message: "bench card: \(error)")
            }
            let (link, served, failure) = (link, served, failure)
            Thread {
                do throws(CardIOError) {
                    try link.serve(atr: CardBench.atr, respond: responder)
                } catch {
                    failure.set(error)
                }
                served.signal()
            }.start()
            do throws(CardIOError) {
                channel = try reader.connect(timeout: .seconds(5))
            } catch {
                link.close()
                served.wait()
                reader.stop()
                try? FileManager.default.removeItem(atPath: dir)
                throw CLIError(message: "bench card: \(error)")
            }
        }

        func roundTrip() throws -> [UInt8] {
            do throws(CardIOError) {
                return try channel.transmit(command)
            } catch {
                throw CLIError(message: "bench card: \(error)")
            }
        }

        var cardFailure: CardIOError? { failure.get() }

        func close() {
            link.close()
            served.wait()
            reader.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// The floor: two threads over a Unix socket pair doing what the link does at the socket
    /// level and no more: one send per frame, a 2-byte read and a payload read per frame, blocking.
    private final class FloorPingPong {
        private let client: Int32
        private let commandFrame: [UInt8]
        private let responseLength: Int
        private var buffer = [UInt8](repeating: 0, count: 0xFFFF)
        private let served = DispatchSemaphore(value: 0)

        init(command: [UInt8], response: [UInt8]) throws {
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, CardBench.streamType, 0, &pair) == 0 else {
                throw CLIError(message: "bench card: socketpair failed: \(String(cString: strerror(errno)))")
            }
            client = pair[0]
            commandFrame = CardBench.frame(command)
            responseLength = response.count
            let (server, responseFrame, served) = (pair[1], CardBench.frame(response), served)
            Thread {
                var buffer = [UInt8](repeating: 0, count: 0xFFFF)
                while let length = CardBench.readLength(server), CardBench.readExactly(server, &buffer, length),
                      CardBench.writeAll(server, responseFrame) {}
                closeFD(server)
                served.signal()
            }.start()
        }

        func roundTrip() throws {
            guard CardBench.writeAll(client, commandFrame), let length = CardBench.readLength(client),
                  length == responseLength, CardBench.readExactly(client, &buffer, length) else {
                throw CLIError(message: "bench card: the floor's socket pair failed: \(String(cString: strerror(errno)))")
            }
        }

        /// Closing the client end ends the server thread (it reads end of file).
        func close() {
            closeFD(client)
            served.wait()
        }
    }

    fileprivate static let streamType: Int32 = {
        #if canImport(Darwin)
        SOCK_STREAM
        #else
        Int32(SOCK_STREAM.rawValue)
        #endif
    }()

    private static let sendFlags: Int32 = {
        #if canImport(Darwin)
        0
        #else
        Int32(MSG_NOSIGNAL)
        #endif
    }()

    fileprivate static func frame(_ payload: [UInt8]) -> [UInt8] {
        [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    fileprivate static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = send(fd, raw.baseAddress! + sent, raw.count - sent, sendFlags)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                sent += n
            }
            return true
        }
    }

    fileprivate static func readExactly(_ fd: Int32, _ buffer: inout [UInt8], _ count: Int) -> Bool {
        buffer.withUnsafeMutableBytes { raw in
            var got = 0
            while got < count {
                let n = recv(fd, raw.baseAddress! + got, count - got, Int32(MSG_WAITALL))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                got += n
            }
            return true
        }
    }

    fileprivate static func readLength(_ fd: Int32) -> Int? {
        var header: [UInt8] = [0, 0]
        guard readExactly(fd, &header, 2) else { return nil }
        return Int(header[0]) << 8 | Int(header[1])
    }

    fileprivate static func temporaryDirectory() throws -> String {
        // Under /tmp rather than $TMPDIR: a Unix socket path must stay within 107 bytes.
        var template = Array("/tmp/cardbench-bench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw CLIError(message: "bench card: cannot make a temporary directory under /tmp: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }
}

/// A value shared with the card thread.
private final class BenchBox<Value: Sendable>: @unchecked Sendable {
    // Unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func get() -> Value {
        lock.lock()
        defer { lock.unlock() }
        return value
    }

    func set(_ newValue: Value) {
        lock.lock()
        value = newValue
        lock.unlock()
    }

    func update<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Number formatting for the report, independent of the locale.
enum CLIFormat {
    static func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// close(2), for the ping-pong classes whose own `close()` hides it.
private func closeFD(_ fd: Int32) {
    _ = close(fd)
}
