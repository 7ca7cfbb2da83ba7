#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Testing
@testable import CardIO

@Suite("Virtual reader over the vpcd link")
struct VirtualReaderTests {
    @Test("a card inserts, powers on with its ATR, answers APDUs, and its removal is an event")
    func insertConnectTransmit() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        #expect(!bench.reader.isCardPresent)

        let card = try TestCard(bench.endpoint)
        defer { card.remove() }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(channel.atr == testATR)
        #expect(channel.readerName == "bench1")
        #expect(bench.reader.isCardPresent)
        #expect(card.powerEvents == [.powerOn])

        let select: [UInt8] = [0x00, 0xA4, 0x04, 0x00, 0x03, 0xA0, 0x00, 0x01, 0x00]
        #expect(try channel.transmit(select) == [0xA0, 0x00, 0x01, 0x90, 0x00])
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(try channel.transmit([0x00, 0xA4, 0x04, 0x00, 0x03] + Array("BAD".utf8)) == [0x6A, 0x82])
        let big = (0..<255).map { UInt8($0) }
        #expect(try channel.transmit([0x80, 0xCA, 0x00, 0x00, 0xFF] + big + [0x00]) == big + [0x90, 0x00])
        #expect(card.commands.count == 4)
        #expect(card.commands.first == select)

        #expect(card.remove())
        #expect(eventually { bench.recorder.seen.count == 2 })
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1")])
        #expect(!bench.reader.isCardPresent)
    }

    @Test("after a removal the old channel throws cardRemoved and a new card connects and works")
    func removalThenNewCard() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let first = try TestCard(bench.endpoint)
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(first.remove())

        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .cardRemoved(reader: "bench1"))
        #expect(thrown { try channel.reset() } == .cardRemoved(reader: "bench1"))

        // Connected right after the first card left: it must not be refused as a second card.
        let second = try TestCard(bench.endpoint)
        defer { second.remove() }
        let next = try bench.reader.connect(timeout: .seconds(5))
        #expect(try next.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(eventually { bench.recorder.seen.count == 3 })
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1"), .cardInserted(reader: "bench1")])
        #expect(bench.recorder.logged.isEmpty)
    }

    @Test("a card that disconnects mid-APDU gives cardRemoved, and the listener takes the next card")
    func disconnectMidAPDU() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = try TestCard(bench.endpoint) { card, command in
            card.link.close()   // pulled out while the command is in flight
            return [0x90, 0x00]
        }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(thrown { try channel.transmit([0x00, 0xA4, 0x04, 0x00, 0x01, 0xA0]) } == .cardRemoved(reader: "bench1"))
        #expect(card.join())
        #expect(card.outcome == .some(nil))
        #expect(eventually { !bench.reader.isCardPresent })

        let next = try TestCard(bench.endpoint)
        defer { next.remove() }
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
    }

    @Test("a silent card times out, is ejected, and the next card works")
    func silentCardTimesOut() throws {
        let bench = try Bench(responseTimeout: .milliseconds(200))
        defer { bench.tearDown() }
        let release = DispatchSemaphore(value: 0)
        let card = try TestCard(bench.endpoint) { _, _ in
            _ = release.wait(timeout: .now() + 5)
            return [0x90, 0x00]
        }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .timeout(reader: "bench1", seconds: 0.2))
        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .cardRemoved(reader: "bench1"))
        release.signal()
        #expect(card.join())
        #expect(eventually { bench.recorder.seen.count == 2 })

        let next = try TestCard(bench.endpoint)
        defer { next.remove() }
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
    }

    enum Malformation: String, CaseIterable, Sendable {
        case zeroLengthResponse, oneByteResponse, truncatedThenClosed, truncatedThenSilent, zeroLengthATR, oneLengthByteThenClosed
    }

    @Test("malformed frames from a raw client give malformedFrame and the listener takes the next card",
          arguments: Malformation.allCases)
    func malformedFrames(_ malformation: Malformation) throws {
        let bench = try Bench(responseTimeout: .milliseconds(200))
        defer { bench.tearDown() }
        let raw = try RawCard(path: bench.reader.socketPath) { raw in
            if malformation == .zeroLengthATR {
                guard raw.readFrame() == [0x01], raw.readFrame() == [0x04] else { return false }
                raw.writeFrame([])
                return raw.waitForEject()
            }
            guard raw.answerPowerOn(), raw.readFrame() != nil else { return false }
            switch malformation {
            case .zeroLengthResponse:
                raw.write([0x00, 0x00])
            case .oneByteResponse:
                raw.write([0x00, 0x01, 0x90])
            case .truncatedThenClosed:
                raw.write([0x00, 0x0A, 0x01, 0x02, 0x03])
                return true   // RawCard closes the socket when the script ends
            case .oneLengthByteThenClosed:
                raw.write([0x00])
                return true
            case .truncatedThenSilent:
                raw.write([0x00, 0x0A, 0x01, 0x02, 0x03])
            case .zeroLengthATR:
                return false
            }
            return raw.waitForEject()
        }

        let error: CardIOError?
        if malformation == .zeroLengthATR {
            error = thrown { try bench.reader.connect(timeout: .seconds(5)) }
        } else {
            let channel = try bench.reader.connect(timeout: .seconds(5))
            error = thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }
        }
        guard case .malformedFrame(let reader, let detail)? = error else {
            Issue.record("expected malformedFrame, got \(String(describing: error))")
            return
        }
        #expect(reader == "bench1")
        #expect(!detail.isEmpty)
        #expect(raw.succeeded(), "the raw card saw the frames it expected and was ejected")

        let next = try TestCard(bench.endpoint)
        defer { next.remove() }
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(eventually { bench.recorder.seen.count == 3 })
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1"), .cardInserted(reader: "bench1")])
    }

    @Test("a second card while one is present is refused with a logged reason")
    func secondCardRefused() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let first = try TestCard(bench.endpoint)
        defer { first.remove() }
        #expect(eventually { bench.reader.isCardPresent })

        let second = try TestCard(bench.endpoint)
        #expect(second.join(), "the reader closed the second card")
        #expect(second.outcome == .some(nil))
        #expect(second.powerEvents.isEmpty)
        #expect(bench.recorder.logged.count == 1)
        #expect(bench.recorder.logged.first?.contains("refused a second card") == true)
        #expect(bench.recorder.logged.first?.contains("one card at a time") == true)

        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(first.powerEvents == [.powerOn])
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1")])
    }

    @Test("the socket file is a socket with mode 0660, and a stale one is replaced")
    func socketFileMode() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.file("stale.sock")
        // A socket file left behind by a reader that died without unlinking it.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let address = try #require(Socket.unixAddress(path))
        #expect(Socket.bindUnix(stale, address) == 0)
        close(stale)
        #expect(FileManager.default.fileExists(atPath: path))

        let reader = try VirtualReader(name: "r", socketPath: path)
        try reader.start()
        defer { reader.stop() }
        var info = stat()
        #expect(lstat(path, &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK)
        #expect(info.st_mode & 0o7777 == 0o660)

        let card = try TestCard(.unix(path))
        defer { card.remove() }
        #expect(try reader.connect(timeout: .seconds(5)).atr == testATR)
    }

    @Test("a file at the socket path that is not a socket is left alone and start fails")
    func refusesToReplaceAFile() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.file("notes.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path))
        let reader = try VirtualReader(name: "r", socketPath: path)
        guard case .io(let name, let detail)? = thrown({ try reader.start() }) else {
            Issue.record("start should fail")
            reader.stop()
            return
        }
        #expect(name == "r")
        #expect(detail.contains("not a socket"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
        reader.stop()
    }

    @Test("stop closes the listener and the card, is idempotent, and start works again")
    func stopThenStart() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let first = try TestCard(bench.endpoint)
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])

        bench.reader.stop()
        #expect(first.join(), "stopping the reader ejects the card")
        #expect(!FileManager.default.fileExists(atPath: bench.reader.socketPath))
        #expect(!bench.reader.isCardPresent)
        #expect(bench.recorder.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1")])
        bench.reader.stop()
        #expect(throws: CardIOError.self) { try VPCDCardLink.connect(to: bench.endpoint) }

        try bench.reader.start()
        try bench.reader.start()   // already started: no-op
        let second = try TestCard(bench.endpoint)
        defer { second.remove() }
        #expect(try bench.reader.connect(timeout: .seconds(5)).transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
    }

    @Test("power off, then transmit throws; reset and reconnect send the right controls")
    func powerOffAndReset() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = try TestCard(bench.endpoint)
        defer { card.remove() }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(try channel.reset() == testATR)
        #expect(channel.atr == testATR)
        #expect(card.powerEvents == [.powerOn, .reset])

        channel.powerOff()
        #expect(eventually { card.powerEvents == [.powerOn, .reset, .powerOff] })
        guard case .io(_, let detail)? = thrown({ try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }) else {
            Issue.record("transmit after power off should throw io")
            return
        }
        #expect(detail.contains("powered off"))
        #expect(thrown { try channel.reset() } != nil)
        channel.powerOff()   // twice: nothing more is sent
        #expect(bench.reader.isCardPresent)

        let again = try bench.reader.connect(timeout: .seconds(5))
        #expect(try again.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(card.powerEvents == [.powerOn, .reset, .powerOff, .powerOn])
    }

    @Test("connecting again supersedes the earlier channel")
    func supersededChannel() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = try TestCard(bench.endpoint)
        defer { card.remove() }
        let old = try bench.reader.connect(timeout: .seconds(5))
        let new = try bench.reader.connect(timeout: .seconds(5))
        guard case .io(_, let detail)? = thrown({ try old.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) }) else {
            Issue.record("the old channel should throw")
            return
        }
        #expect(detail.contains("superseded"))
        #expect(try new.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
    }

    @Test("with no card, connect throws noCard after its timeout")
    func noCard() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        #expect(thrown { try bench.reader.connect(timeout: .milliseconds(100)) } == .noCard(reader: "bench1"))
    }

    @Test("a card on the loopback TCP port (ephemeral) works and its removal is seen")
    func tcpLoopback() throws {
        let bench = try Bench(tcpPort: 0)
        defer { bench.tearDown() }
        let port = try #require(bench.reader.tcpPortBound)
        #expect(port != 0)
        let card = try TestCard(.tcp(host: "127.0.0.1", port: port))
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(channel.atr == testATR)
        #expect(try channel.transmit([0x00, 0xA4, 0x04, 0x00, 0x02, 0xA0, 0x00]) == [0xA0, 0x00, 0x90, 0x00])
        #expect(card.remove())
        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .cardRemoved(reader: "bench1"))
        #expect(eventually { bench.recorder.seen.count == 2 })

        bench.reader.stop()
        #expect(bench.reader.tcpPortBound == nil)
    }

    @Test("C-APDUs that cannot be framed are refused without ejecting the card; 65,535 bytes pass")
    func commandSizeLimits() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = try TestCard(bench.endpoint)
        defer { card.remove() }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        guard case .io(_, let tooBig)? = thrown({ try channel.transmit([UInt8](repeating: 0, count: 65_536)) }) else {
            Issue.record("65,536 bytes should be refused")
            return
        }
        #expect(tooBig.contains("65,535"))
        #expect(thrown { try channel.transmit([0x00]) } != nil)
        #expect(card.commands.isEmpty)
        // The largest frame goes through; the test card answers 6700 as it is not a short APDU.
        #expect(try channel.transmit([UInt8](repeating: 0x11, count: 65_535)) == [0x67, 0x00])
        #expect(try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) == [0x6A, 0x83])
        #expect(bench.reader.isCardPresent)
    }

    @Test("a card whose response cannot be framed fails on its side and the reader sees a removal")
    func oversizeResponse() throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let card = try TestCard(bench.endpoint) { _, _ in [UInt8](repeating: 0, count: 65_536) }
        let channel = try bench.reader.connect(timeout: .seconds(5))
        #expect(thrown { try channel.transmit([0x00, 0xB2, 0x01, 0x0C, 0x00]) } == .cardRemoved(reader: "bench1"))
        #expect(card.join())
        guard case .some(.some(.io(_, let detail))) = card.outcome else {
            Issue.record("serve should throw io, got \(String(describing: card.outcome))")
            return
        }
        #expect(detail.contains("cannot be framed"))
    }

    @Test("the events stream delivers insertions and removals, and cancelling it removes its observer")
    func eventStream() async throws {
        let bench = try Bench()
        defer { bench.tearDown() }
        let collected = Recorder()
        let stream = bench.reader.events()
        let consumer = Task { for await event in stream { collected.observe(event) } }
        defer { consumer.cancel() }
        let card = try TestCard(bench.endpoint)
        // 30 s: under the full suite, tests that block cooperative threads can keep the consumer
        // task from running for several seconds (a clean-clone CI run once missed 5 s).
        #expect(await eventually(30) { collected.seen == [.cardInserted(reader: "bench1")] })
        card.remove()
        #expect(await eventually(30) { collected.seen == [.cardInserted(reader: "bench1"), .cardRemoved(reader: "bench1")] })

        consumer.cancel()
        _ = await consumer.value
        let again = try TestCard(bench.endpoint)
        defer { again.remove() }
        #expect(await eventually(30) { bench.recorder.seen.count == 3 })
        #expect(collected.seen.count == 2, "a cancelled stream hears nothing more")
    }

    @Test("readers refuse a bad configuration")
    func badConfiguration() throws {
        #expect(throws: CardIOError.self) { try VirtualReader(name: "", socketPath: "/tmp/x.sock") }
        #expect(throws: CardIOError.self) { try VirtualReader(name: "r", socketPath: "/tmp/" + String(repeating: "a", count: 120)) }
        #expect(throws: CardIOError.self) { try VirtualReader(name: "r", socketPath: "/tmp/x.sock", responseTimeout: .zero) }
    }
}

@Suite("Reader endpoints")
struct ReaderEndpointTests {
    @Test("valid endpoints", arguments: [
        ("/run/cardbench/bench1.sock", ReaderEndpoint.unix("/run/cardbench/bench1.sock")),
        ("./bench.sock", .unix("./bench.sock")),
        ("127.0.0.1:35963", .tcp(host: "127.0.0.1", port: 35963)),
        ("localhost:1", .tcp(host: "localhost", port: 1)),
        ("[::1]:65535", .tcp(host: "::1", port: 65535)),
    ])
    func valid(_ text: String, _ expected: ReaderEndpoint) throws {
        let endpoint = try ReaderEndpoint(parsing: text)
        #expect(endpoint == expected)
        #expect(endpoint.description == text)
    }

    @Test("invalid endpoints name the rule", arguments: [
        ("", "empty"),
        ("localhost", "no '/' and no ':port'"),
        ("localhost:", "port must be a number from 1 to 65535"),
        ("localhost:0", "port must be a number from 1 to 65535"),
        ("localhost:65536", "port must be a number from 1 to 65535"),
        ("localhost:http", "port must be a number from 1 to 65535"),
        ("localhost:+80", "port must be a number from 1 to 65535"),
        (":35963", "host before ':' is empty"),
        ("::1:35963", "[address]:port"),
        ("[::1]35963", "[address]:port"),
        ("/tmp/" + String(repeating: "s", count: 110), "at most 107 bytes"),
    ])
    func invalid(_ text: String, _ rule: String) {
        guard case .invalidEndpoint(let message)? = thrown({ try ReaderEndpoint(parsing: text) }) else {
            Issue.record("\"\(text)\" should be refused")
            return
        }
        #expect(message.contains(rule), "\(message)")
    }

    @Test("error descriptions are one line naming the reader")
    func descriptions() {
        let errors: [CardIOError] = [
            .noCard(reader: "bench1"), .cardRemoved(reader: "bench1"), .timeout(reader: "bench1", seconds: 10),
            .malformedFrame(reader: "bench1", detail: "x"), .io(reader: "bench1", detail: "y"),
        ]
        for error in errors {
            #expect(error.description.hasPrefix("reader bench1: "))
            #expect(!error.description.contains("\n"))
        }
        #expect(CardIOError.timeout(reader: "r", seconds: 10).description.contains("more than 10 s"))
        #expect(CardIOError.timeout(reader: "r", seconds: 0.2).description.contains("more than 0.2 s"))
        #expect(CardIOError.cardRemoved(reader: "r").description.contains("card removed"))
    }
}
