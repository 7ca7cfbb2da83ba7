import Foundation
import Testing
@testable import CardIO

/// A software card answering like `echoCard`, recording what the reader asked of it.
final class LocalTestCard: InProcessCard, @unchecked Sendable {
    private let lock = NSLock()
    private var log: [String] = []

    var calls: [String] { lock.withLock { log } }

    func powerOn(warm: Bool) -> [UInt8] {
        lock.withLock { log.append(warm ? "reset" : "power on") }
        return testATR
    }

    func powerOff() { lock.withLock { log.append("power off") } }

    func respond(to command: [UInt8]) -> [UInt8] {
        lock.withLock { log.append("apdu") }
        return echoCard(command)
    }
}

@Suite("Virtual reader with an in-process card")
struct InProcessCardTests {
    @Test("an in-process card inserts, powers on, answers on the caller's thread, and its removal is an event")
    func insertTransmitRemove() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = LocalTestCard()
        try bench.reader.insert(card)
        #expect(bench.reader.isCardPresent)
        #expect(bench.reader.hasInProcessCard)

        let channel = try bench.reader.connect(timeout: .seconds(1))
        #expect(channel.atr == testATR)
        #expect(channel.readerName == "bench1")
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(try channel.reset() == testATR)
        #expect(card.calls == ["power on", "apdu", "reset"])

        #expect(bench.reader.removeInProcessCard())
        #expect(!bench.reader.removeInProcessCard(), "nothing left to remove")
        #expect(!bench.reader.isCardPresent)
        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .cardRemoved(reader: "bench1"))
        #expect(thrown { try channel.reset() } == .cardRemoved(reader: "bench1"))
        #expect(card.calls.last == "power off")
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1")])
        #expect(thrown { try bench.reader.connect(timeout: .milliseconds(50)) } == .noCard(reader: "bench1"))
    }

    @Test("a waiting connect takes a card inserted after it started waiting")
    func connectWaits() async throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let reader = bench.reader
        // The wait blocks a thread of its own: on a loaded 2-core machine a blocked cooperative
        // thread could keep this test's own insertion from running before the wait gives up.
        let waiting = Task.detached {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<[UInt8], any Error>) in
                Thread.detachNewThread { c.resume(with: Result { try reader.connect(timeout: .seconds(30)).atr }) }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        try bench.reader.insert(LocalTestCard())
        #expect(try await waiting.value == testATR)
    }

    @Test("power off and a later connect make the earlier channel stale")
    func staleChannels() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = LocalTestCard()
        try bench.reader.insert(card)
        let first = try bench.reader.connect(timeout: .seconds(1))
        first.powerOff()
        #expect(card.calls == ["power on", "power off"])
        guard case .io(_, let detail) = thrown({ try first.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }) else {
            Issue.record("a powered-off channel must throw io")
            return
        }
        #expect(detail.contains("stale"))
        let second = try bench.reader.connect(timeout: .seconds(1))
        #expect(try second.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        first.powerOff()
        #expect(try second.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83], "the stale channel's power-off must not touch the new session")
    }

    @Test("one card at a time: an in-process card refuses a socket card, and the other way round")
    func oneCardAtATime() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        try bench.reader.insert(LocalTestCard())
        let socketCard = try TestCard(bench.endpoint)
        #expect(socketCard.join(), "the reader closed the socket card")
        #expect(socketCard.powerEvents.isEmpty)
        #expect(bench.recorder.logged.first?.contains("an in-process card is inserted") == true)
        guard case .io(_, let detail) = thrown({ try bench.reader.insert(LocalTestCard()) }) else {
            Issue.record("a second in-process card must be refused")
            return
        }
        #expect(detail.contains("one card at a time"))

        #expect(bench.reader.removeInProcessCard())
        let present = try TestCard(bench.endpoint)
        defer { present.remove() }
        #expect(eventually { bench.reader.isCardPresent })
        #expect(!bench.reader.hasInProcessCard)
        #expect(thrown { try bench.reader.insert(LocalTestCard()) } != nil)
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
    }

    @Test("stop removes the in-process card")
    func stopRemoves() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        try bench.reader.insert(LocalTestCard())
        bench.reader.stop()
        #expect(!bench.reader.isCardPresent)
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1")])
    }
}
