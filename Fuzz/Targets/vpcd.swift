@testable import CardIO
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The vpcd frame readers (2-byte big-endian length, then the payload), both of them, on real
// sockets fed the fuzz input:
// - the reader's side, CardConnection: power-on reads the ATR frame, then C-APDUs read R-APDU
//   frames until the card is ejected;
// - the card's side, VPCDCardLink.serve: controls (00, 01, 02, 04) and C-APDUs until the link ends.
//
// Property: both agree with a model of the framing written here from vpcd.c: the ATR and the
// responses handed back, the power events and C-APDUs delivered, the replies framed on the wire,
// and how each reader ends (card removed at a frame boundary, a malformed frame inside one).

enum Frame: Equatable {
    case complete([UInt8])
    /// The data ended inside the length (1 byte) or the payload.
    case truncated
}

/// The input as the frames a peer sent, up to the end of the data.
func frames(_ input: [UInt8]) -> [Frame] {
    var out: [Frame] = []
    var i = 0
    while i < input.count {
        guard i + 2 <= input.count else { out.append(.truncated); break }
        let length = Int(input[i]) << 8 | Int(input[i + 1])
        i += 2
        guard i + length <= input.count else { out.append(.truncated); break }
        out.append(.complete(Array(input[i..<i + length])))
        i += length
    }
    return out
}

/// Writes all of `bytes` and half-closes, so the reader sees exactly the input and then EOF.
func feed(_ fd: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { raw in
        var sent = 0
        while sent < raw.count {
            let n = send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            require(n > 0, "cannot feed the socket: errno \(errno)")
            sent += n
        }
    }
    _ = shutdown(fd, Int32(SHUT_WR))
}

func drain(_ fd: Int32) -> [UInt8] {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, 4096, Int32(MSG_DONTWAIT)) }
        if n <= 0 { return out }
        out += buffer[0..<n]
    }
}

func framed(_ payload: [UInt8]) -> [UInt8] { [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload }

// MARK: The reader's side

func readerSide(_ input: [UInt8]) {
    var pair: [Int32] = [0, 0]
    require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0, "socketpair failed: errno \(errno)")
    defer { close(pair[1]) }
    feed(pair[1], input)
    let card = CardConnection(fd: pair[0], readerName: "fuzz", timeout: .seconds(5))
    defer { card.close() }

    var expected = frames(input)[...]
    func check(_ outcome: Result<[UInt8], CardIOError>, minimum: Int, what: String) -> Bool {
        let frame = expected.popFirst()
        switch (frame, outcome) {
        case (.complete(let payload)?, .success(let got)) where payload.count >= minimum:
            require(got == payload, "\(what): got \(hex(got)), sent \(hex(payload)) (input \(hex(input)))")
            return true
        case (nil, .failure(.cardRemoved)):
            return false
        case (.truncated?, .failure(.malformedFrame)):
            return false
        case (.complete(let payload)?, .failure(.malformedFrame)) where payload.count < minimum:
            return false
        default:
            require(false, "\(what): frame \(String(describing: frame)) read as \(outcome) (input \(hex(input)))")
            return false
        }
    }
    let session: UInt64
    do {
        let (s, atr) = try card.powerOn()
        guard check(.success(atr), minimum: 1, what: "ATR") else { return }
        session = s
    } catch {
        _ = check(.failure(error), minimum: 1, what: "ATR")
        return
    }
    while true {
        let outcome = Result { () throws(CardIOError) in try card.transmit([0x00, 0xA4, 0x04, 0x00], session: session) }
        guard check(outcome, minimum: 2, what: "R-APDU") else { break }
    }
    require(card.isEjected, "the card survived the end of its data (input \(hex(input)))")
}

// MARK: The card's side

let listenerPath = "/tmp/cardbench-fuzz-vpcd-\(getpid()).sock"
let listener: Int32 = {
    unlink(listenerPath)
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = Socket.unixAddress(listenerPath)!
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    require(fd >= 0 && bound == 0 && listen(fd, 4) == 0, "cannot listen on \(listenerPath): errno \(errno)")
    atexit { unlink(listenerPath) }
    return fd
}()

let cardATR: [UInt8] = [0x3B, 0x68, 0x00, 0x00, 0x80, 0x66, 0xA2, 0x06, 0x02, 0x01, 0x32, 0x0E]

func cardSide(_ input: [UInt8]) {
    let listener = listener  // opened on first use, before the card connects to it
    let link: VPCDCardLink
    do { link = try VPCDCardLink.connect(to: .unix(listenerPath)) } catch {
        require(false, "cannot connect to the fuzz listener: \(error)")
        return
    }
    let peer = accept(listener, nil, nil)
    require(peer >= 0, "accept failed: errno \(errno)")
    defer { close(peer) }
    feed(peer, input)

    var commands: [[UInt8]] = []
    var power: [PowerEvent] = []
    let outcome = Result { () throws(CardIOError) in
        try link.serve(atr: cardATR, respond: { commands.append($0); return [0x90, 0x00] }, onPower: { power.append($0) })
    }

    var expectedCommands: [[UInt8]] = []
    var expectedPower: [PowerEvent] = []
    var expectedReplies: [UInt8] = []
    var truncated = false
    for frame in frames(input) {
        guard case .complete(let payload) = frame else { truncated = true; break }
        switch payload.count {
        case 0: continue
        case 1:
            switch payload[0] {
            case 0x00: expectedPower.append(.powerOff)
            case 0x01: expectedPower.append(.powerOn)
            case 0x02: expectedPower.append(.reset)
            case 0x04: expectedReplies += framed(cardATR)
            default: continue
            }
        default:
            expectedCommands.append(payload)
            expectedReplies += framed([0x90, 0x00])
        }
    }
    switch outcome {
    case .success: require(!truncated, "serve ended normally on a truncated frame (input \(hex(input)))")
    case .failure(.malformedFrame): require(truncated, "serve called whole frames malformed (input \(hex(input)))")
    case .failure(let error): require(false, "serve failed: \(error) (input \(hex(input)))")
    }
    require(commands == expectedCommands, "C-APDUs delivered \(commands.map(hex)) (input \(hex(input)))")
    require(power == expectedPower, "power events \(power) (input \(hex(input)))")
    let replies = drain(peer)
    require(replies == expectedReplies, "replies \(hex(replies)), expected \(hex(expectedReplies)) (input \(hex(input)))")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    // Replies wait in the socket's buffer until the end; a cap keeps them well inside it.
    guard input.count <= 16_384 else { return -1 }
    readerSide(input)
    cardSide(input)
    return 0
}
