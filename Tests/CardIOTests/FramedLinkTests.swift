import CardIO
import Foundation
import ISO8583
import Synchronization
import Testing

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
        listener.start(framing: .binary2, maximumConnections: 2, onError: { _, _ in }) { _, m in m }
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
        #expect(throws: HostLinkError.closed) { try third.receive(until: .now + .seconds(30)) }
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
