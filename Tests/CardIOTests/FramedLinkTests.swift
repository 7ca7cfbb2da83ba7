import CardIO
import Foundation
import ISO8583
import Synchronization
import Testing
import TestSupport

/// The framed TCP link of ISO 8583 over real loopback sockets: each framing both ways, NAC's TPDU
/// swapped in answers, unanswered messages, a broken frame, the connection limit, a connect that
/// finds nobody.
@Suite struct FramedLinkTests {
    @Test(arguments: Framing.allCases)
    func roundTrip(framing: Framing) throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        defer { listener.stop() }
        listener.start(framing: framing, onError: { _, _ in }) { _, message in
            message == Array("quiet".utf8) ? nil : Array("echo:".utf8) + message
        }
        let c = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: framing, timeout: .seconds(30))
        defer { c.close() }
        try c.send(Array("hello".utf8), tpdu: [0x60, 0x00, 0x01, 0x00, 0x02])
        let answer = try c.receive(until: .now + .seconds(30))
        #expect(answer.message == Array("echo:hello".utf8))
        #expect(answer.tpdu == (framing == .nac ? [0x60, 0x00, 0x02, 0x00, 0x01] : nil))
        // No answer to give: none comes, and the connection still serves the next message.
        try c.send(Array("quiet".utf8))
        #expect(throws: HostLinkError.timedOut) { try c.receive(until: .now + .milliseconds(300)) }
        try c.send(Array("again".utf8))
        #expect(try c.receive(until: .now + .seconds(30)).message == Array("echo:again".utf8))
    }

    @Test func aBrokenFrameEndsTheConnection() throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        defer { listener.stop() }
        let errors = Mutex<[HostLinkError]>([])
        listener.start(framing: .ascii4, onError: { _, e in errors.withLock { $0.append(e) } }) { _, m in m }
        let raw = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .binary2, timeout: .seconds(30))
        defer { raw.close() }
        // A binary2 frame is not an ascii4 header: the listener drops the connection.
        try raw.send(Array("0800".utf8))
        #expect(throws: HostLinkError.closed) { try raw.receive(until: .now + .seconds(30)) }
        let deadline = Date().addingTimeInterval(5)
        while errors.withLock({ $0.isEmpty }), Date() < deadline { usleep(10_000) }
        #expect(errors.withLock { $0.first.map { "\($0)".contains("digits") } } == true)
    }

    @Test func connectionsAreLimited() throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        defer { listener.stop() }
        let errors = Mutex<[HostLinkError]>([])
        listener.start(framing: .binary2, maximumConnections: 2, onError: { _, e in errors.withLock { $0.append(e) } }) { _, m in m }
        var open: [FramedConnection] = []
        defer { open.forEach { $0.close() } }
        for _ in 0..<2 {
            let c = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .binary2, timeout: .seconds(30))
            try c.send([1])
            #expect(try c.receive(until: .now + .seconds(30)).message == [1])
            open.append(c)
        }
        let third = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .binary2, timeout: .seconds(30))
        defer { third.close() }
        try? third.send([1])
        // Closed as it came: the peer sees the end of the stream (or a reset, when its message
        // arrived before the close).
        do {
            _ = try third.receive(until: .now + .seconds(30))
            Issue.record("the third connection was served")
        } catch {
            #expect(error == .closed || "\(error)".contains("reset"), "\(error)")
        }
        #expect(errors.withLock { $0.contains(.refused(limit: 2)) }, "the refusal is reported with the limit")
        // A served connection that leaves makes room.
        open.removeFirst().close()
        let deadline = Date().addingTimeInterval(5)
        var served = false
        while !served, Date() < deadline {
            let c = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .binary2, timeout: .seconds(30))
            try? c.send([2])
            served = (try? c.receive(until: .now + .seconds(1)))?.message == [2]
            c.close()
        }
        #expect(served)
    }

    @Test("a thousand connections open at once, each served, with no thread of its own")
    func manyConnections() async throws {
        // A thousand blocking connects and reads: on a thread of their own, not one of the few
        // cooperative threads every other test of the run shares.
        try await onOwnThread { try Self.holdAThousand() }
    }

    static func holdAThousand() throws {
        // Both ends' descriptors are this process's: a soft limit of 1024 would stop it first.
        #expect(FileLimit.raise(to: 4096) >= 2100)
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        defer { listener.stop() }
        listener.start(framing: .binary2, maximumConnections: 1000, threads: 4, onError: { _, _ in }) { _, m in m }
        var open: [FramedConnection] = []
        defer { open.forEach { $0.close() } }
        for i in 0..<1000 {
            let c = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .binary2, timeout: .seconds(30))
            open.append(c)
            try c.send([UInt8(i & 0xFF), UInt8(i >> 8)])
        }
        for (i, c) in open.enumerated() {
            #expect(try c.receive(until: .now + .seconds(30)).message == [UInt8(i & 0xFF), UInt8(i >> 8)])
        }
        #expect(listener.openConnections == 1000)
        // No thread per connection: the whole process (every test running beside this one) holds
        // far fewer threads than the listener holds connections.
        #expect(Self.threadCount() < 500, "the listener holds no thread per connection: \(Self.threadCount()) threads")
    }

    @Test("pipelined messages on one connection are handled one at a time and answered in order")
    func pipelining() async throws {
        try await onOwnThread { try Self.pipelineSixHundred() }
    }

    static func pipelineSixHundred() throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        defer { listener.stop() }
        let running = Mutex((now: 0, most: 0))
        listener.start(framing: .nac, threads: 8, onError: { _, _ in }) { _, m in
            running.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            usleep(UInt32(m[0] % 3) * 1000)
            running.withLock { $0.now -= 1 }
            return m
        }
        let c = try FramedConnection.connect(host: "127.0.0.1", port: listener.port, framing: .nac, timeout: .seconds(30))
        defer { c.close() }
        for i in 0..<600 { try c.send([UInt8(i % 251), UInt8(i / 251)], tpdu: [0x60, 0x00, 0x01, 0x00, 0x02]) }
        for i in 0..<600 {
            let answer = try c.receive(until: .now + .seconds(30))
            #expect(answer.message == [UInt8(i % 251), UInt8(i / 251)])
            #expect(answer.tpdu == [0x60, 0x00, 0x02, 0x00, 0x01])
        }
        #expect(running.withLock { $0.most } == 1, "one message of a connection at a time")
    }

    static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    }

    @Test("stop returns at once, while a message is still being handled, and closes the port")
    func stopDoesNotWait() async throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        let handling = Mutex(false)
        listener.start(framing: .binary2, onError: { _, _ in }) { _, m in
            handling.withLock { $0 = true }
            sleep(3)
            return m
        }
        let port = listener.port
        let c = try FramedConnection.connect(host: "127.0.0.1", port: port, framing: .binary2, timeout: .seconds(30))
        defer { c.close() }
        try c.send([1])
        let deadline = ContinuousClock.now + .seconds(30)
        while !handling.withLock({ $0 }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let begun = ContinuousClock.now
        listener.stop()
        #expect(ContinuousClock.now - begun < .seconds(2), "stop waited for the handler")
        #expect(throws: HostLinkError.self) { try FramedConnection.connect(host: "127.0.0.1", port: port, framing: .binary2, timeout: .seconds(2)) }
    }

    @Test func nobodyListening() throws {
        let listener = try FramedListener(address: "127.0.0.1", port: 0)
        let port = listener.port
        listener.stop()
        #expect(throws: HostLinkError.self) {
            try FramedConnection.connect(host: "127.0.0.1", port: port, framing: .binary2, timeout: .seconds(2))
        }
        #expect(throws: HostLinkError.self) { try FramedListener(address: "not-an-address", port: 0) }
    }
}
