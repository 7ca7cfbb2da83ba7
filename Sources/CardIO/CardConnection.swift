import EMV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// One inserted card, seen from the reader: its socket and the exchanges on it.
///
/// Any failure ejects the card: the socket is shut down at once (so a blocked exchange returns and
/// the reader's thread sees the hang-up) and every later call throws. Only the reader's thread
/// closes the socket, in `close()`, after taking `io`; so no call can run on a closed, reused
/// descriptor.
final class CardConnection: @unchecked Sendable {
    // Unchecked: `fd` and the other lets never change; the mutable state is inside `state`
    // (a lock), and `io` is held for a whole exchange so two callers' frames never interleave.
    let fd: Int32
    let readerName: String
    let timeout: Duration
    private let io = NSLock()
    private let state = Locked(State())

    private struct State {
        var ejected = false
        var closed = false
        /// Bumped by every power-on; a channel from an earlier one is superseded.
        var session: UInt64 = 0
        var powered = false
    }

    init(fd: Int32, readerName: String, timeout: Duration) {
        self.fd = fd
        self.readerName = readerName
        self.timeout = timeout
    }

    /// Not ejected and the peer has not hung up. The poll runs under `state` so the descriptor
    /// cannot be closed under it.
    var isAlive: Bool {
        state.withLock { s in
            guard !s.ejected, !s.closed else { return false }
            var p = pollfd(fd: fd, events: Socket.hangupRequest, revents: 0)
            return poll(&p, 1, 0) <= 0 || p.revents & Socket.hangupEvents == 0
        }
    }

    var isEjected: Bool { state.withLock { $0.ejected } }

    /// Marks the card gone and shuts the socket down, waking a blocked exchange and the reader's
    /// poll. Returns whether this call did it (the first one).
    @discardableResult
    func eject() -> Bool {
        state.withLock { s in
            guard !s.ejected else { return false }
            s.ejected = true
            if !s.closed { _ = shutdown(fd, Int32(SHUT_RDWR)) }
            return true
        }
    }

    /// Ejects the card and closes its socket once no exchange holds it. Only the reader's thread
    /// calls this, so the descriptor is never closed under its poll.
    func close() {
        eject()
        io.lock()
        defer { io.unlock() }
        state.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            closeDescriptor(fd)
        }
    }

    // MARK: Exchanges

    /// Powers the card on and reads its ATR; returns the new session for the channel.
    func powerOn() throws(CardIOError) -> (session: UInt64, atr: [UInt8]) {
        io.lock()
        defer { io.unlock() }
        let session = try state.withLock { (s: inout State) throws(CardIOError) -> UInt64 in
            guard !s.ejected else { throw .cardRemoved(reader: readerName) }
            s.session += 1
            s.powered = false
            return s.session
        }
        try send([VPCDControl.powerOn.rawValue], what: "the power-on control")
        let atr = try requestATR()
        state.withLock { s in if s.session == session { s.powered = true } }
        return (session, atr)
    }

    func transmit(_ command: [UInt8], session: UInt64) throws(CardIOError) -> [UInt8] {
        // A 1-byte payload would read as a control, and nothing shorter than CLA INS P1 P2 is a command.
        guard command.count >= 4 else {
            throw .io(reader: readerName, detail: "a C-APDU is at least 4 bytes (CLA INS P1 P2), got \(command.count); nothing was sent")
        }
        guard command.count <= vpcdMaxPayload else {
            throw .io(reader: readerName, detail: "a C-APDU of \(command.count) bytes cannot be framed: a vpcd frame carries at most 65,535 bytes; nothing was sent")
        }
        io.lock()
        defer { io.unlock() }
        try checkUsable(session)
        try send(command, what: "the C-APDU")
        let response = try receive(expecting: "the R-APDU")
        guard response.count >= 2 else {
            throw fail(.malformedFrame(reader: readerName, detail: "a \(response.count)-byte response has no SW1 SW2 (a response is at least 2 bytes)"))
        }
        return response
    }

    func reset(session: UInt64) throws(CardIOError) -> [UInt8] {
        io.lock()
        defer { io.unlock() }
        try checkUsable(session)
        try send([VPCDControl.reset.rawValue], what: "the reset control")
        return try requestATR()
    }

    func powerOff(session: UInt64) {
        io.lock()
        defer { io.unlock() }
        let current = state.withLock { s in
            guard s.session == session, s.powered, !s.ejected else { return false }
            s.powered = false
            return true
        }
        // A card that cannot take the control is ejected by `send`; the caller wanted it off anyway.
        if current { _ = try? send([VPCDControl.powerOff.rawValue], what: "the power-off control") }
    }

    private func checkUsable(_ session: UInt64) throws(CardIOError) {
        try state.withLock { (s: inout State) throws(CardIOError) in
            guard !s.ejected else { throw .cardRemoved(reader: readerName) }
            guard s.session == session else {
                throw .io(reader: readerName, detail: "this channel was superseded: the card was connected again; use the newest channel")
            }
            guard s.powered else {
                throw .io(reader: readerName, detail: "the card is powered off; connect again to power it on")
            }
        }
    }

    private func requestATR() throws(CardIOError) -> [UInt8] {
        try send([VPCDControl.getATR.rawValue], what: "the ATR request")
        return try receive(expecting: "the ATR")
    }

    /// Ejects the card and hands the error back for throwing.
    private func fail(_ error: CardIOError) -> CardIOError {
        eject()
        return error
    }

    private func send(_ payload: [UInt8], what: String) throws(CardIOError) {
        switch Socket.writeFrame(fd, payload) {
        case .complete:
            return
        case .timedOut:
            throw fail(.timeout(reader: readerName, seconds: timeout.seconds))
        case .failed(let code):
            if code == EPIPE || code == ECONNRESET || code == ENOTCONN || isEjected {
                throw fail(.cardRemoved(reader: readerName))
            }
            throw fail(.io(reader: readerName, detail: "sending \(what) failed: \(Socket.errorText(code)); card ejected"))
        }
    }

    /// Reads one frame. A missing answer is a removal or a timeout; a frame that starts and does
    /// not finish, or is empty, is malformed.
    private func receive(expecting what: String) throws(CardIOError) -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        let (outcome, length) = Socket.readLength(fd, deadline: deadline)
        switch outcome {
        case .complete:
            break
        case .closed(0), .failed(ECONNRESET, 0):
            throw fail(.cardRemoved(reader: readerName))
        case .timedOut(0):
            throw fail(.timeout(reader: readerName, seconds: timeout.seconds))
        case .closed, .timedOut, .failed(ECONNRESET, _):
            throw fail(.malformedFrame(reader: readerName, detail: "only 1 of the 2 length bytes of \(what) arrived"))
        case .failed(let code, _):
            throw fail(ejectedOr(.io(reader: readerName, detail: "receiving \(what) failed: \(Socket.errorText(code)); card ejected")))
        }
        guard length > 0 else {
            throw fail(.malformedFrame(reader: readerName, detail: "a zero-length frame where \(what) was expected"))
        }
        let (payload, payloadOutcome) = Socket.readPayload(fd, count: length, deadline: deadline)
        switch payloadOutcome {
        case .complete:
            return payload
        case .closed(let n), .failed(ECONNRESET, let n):
            throw fail(.malformedFrame(reader: readerName, detail: "the frame of \(what) announced \(length) bytes but the card disconnected after \(n)"))
        case .timedOut(let n):
            throw fail(.malformedFrame(reader: readerName, detail: "the frame of \(what) announced \(length) bytes but only \(n) arrived within \(CardIOError.format(timeout.seconds)) s"))
        case .failed(let code, _):
            throw fail(ejectedOr(.io(reader: readerName, detail: "receiving \(what) failed: \(Socket.errorText(code)); card ejected")))
        }
    }

    /// A failure caused by someone else ejecting the card (stop(), another error) is a removal.
    private func ejectedOr(_ error: CardIOError) -> CardIOError {
        isEjected ? .cardRemoved(reader: readerName) : error
    }
}

/// What a channel needs of the card behind a reader: exchanges checked against the power-on
/// session they belong to, so a channel from an earlier power-on or insertion throws.
protocol CardSessions: AnyObject, Sendable {
    var readerName: String { get }
    func transmit(_ command: [UInt8], session: UInt64) throws(CardIOError) -> [UInt8]
    func reset(session: UInt64) throws(CardIOError) -> [UInt8]
    func powerOff(session: UInt64)
}

extension CardConnection: CardSessions {}

/// A powered card's channel, over vpcd or in process: one card insertion, one power-on.
final class SessionChannel: CardChannel {
    let readerName: String
    private let card: any CardSessions
    private let session: UInt64
    private let currentATR: Locked<[UInt8]>
    let magneticStripe: MagneticStripe?

    init(_ card: any CardSessions, session: UInt64, atr: [UInt8], magneticStripe: MagneticStripe? = nil) {
        self.readerName = card.readerName
        self.card = card
        self.session = session
        self.currentATR = Locked(atr)
        self.magneticStripe = magneticStripe
    }

    var atr: [UInt8] { currentATR.withLock { $0 } }

    func transmit(_ command: [UInt8]) throws(CardIOError) -> [UInt8] {
        try card.transmit(command, session: session)
    }

    func reset() throws(CardIOError) -> [UInt8] {
        let atr = try card.reset(session: session)
        currentATR.withLock { $0 = atr }
        return atr
    }

    func powerOff() {
        card.powerOff(session: session)
    }
}
