#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The card side of the vpcd link (what vsmartcard's vicc does): connects to a reader and
/// answers its frames. Connecting is inserting the card; `close()` is removing it.
public final class VPCDCardLink: @unchecked Sendable {
    // Unchecked: `fd` and `endpoint` never change; `state` is a lock. `serve` runs on one thread
    // and `close()` may come from any other: it only shuts the socket down, and whoever ends last
    // (serve, or close when serve is not running) closes the descriptor, once.
    /// The reader this card connected to.
    public let endpoint: ReaderEndpoint
    private let fd: Int32
    private let state = Locked(LinkState())

    private struct LinkState {
        var serving = false
        var closeRequested = false
        var closed = false
        var leaveAfterReply = false
    }

    private init(fd: Int32, endpoint: ReaderEndpoint) {
        self.fd = fd
        self.endpoint = endpoint
    }

    deinit {
        state.withLock { s in
            if !s.closed { closeDescriptor(fd) }
        }
    }

    /// Connects to a reader: a Unix socket path, or host:port over TCP.
    public static func connect(to endpoint: ReaderEndpoint) throws(CardIOError) -> VPCDCardLink {
        let name = endpoint.description
        switch endpoint {
        case .unix(let path):
            guard let address = Socket.unixAddress(path) else {
                throw .invalidEndpoint("reader endpoint \"\(path)\": a Unix socket path is 1 to \(Socket.maxUnixPathBytes) bytes with no NUL")
            }
            let fd = Socket.makeStream(family: AF_UNIX)
            guard fd >= 0 else { throw .io(reader: name, detail: "cannot make a Unix socket: \(Socket.errorText(errno))") }
            guard Socket.connectUnix(fd, address) == 0 else {
                let code = errno
                closeDescriptor(fd)
                throw .io(reader: name, detail: "cannot connect to the reader: \(Socket.errorText(code))")
            }
            return VPCDCardLink(fd: fd, endpoint: endpoint)
        case .tcp(let host, let port):
            return VPCDCardLink(fd: try connectTCP(host: host, port: port, name: name), endpoint: endpoint)
        }
    }

    private static func connectTCP(host: String, port: UInt16, name: String) throws(CardIOError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Socket.streamType
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw .io(reader: name, detail: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = ECONNREFUSED
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = Socket.makeStream(family: info.pointee.ai_family)
            guard fd >= 0 else {
                lastError = errno
                continue
            }
            if connectDescriptor(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                Socket.setNoDelay(fd)
                return fd
            }
            lastError = errno
            closeDescriptor(fd)
        }
        throw .io(reader: name, detail: "cannot connect to the reader: \(Socket.errorText(lastError))")
    }

    /// Serves until the reader closes the connection, or `close()` is called (that is a card
    /// removal); both return normally. Control bytes: 00 power off, 01 power on, 02 reset (no
    /// reply; unknown ones are ignored, as vicc does); 04 get ATR (reply: `atr`, at any time,
    /// since vpcd checks presence with it). Longer payloads are C-APDUs answered by `respond`.
    /// `onPower` tells the card about power events (a virtual card resets its volatile state on
    /// power on and reset). Throws on a broken frame from the reader, a response over 65,535
    /// bytes (which no frame can carry) and other I/O failures; the link is closed either way.
    public func serve(atr: [UInt8],
                      respond: (_ command: [UInt8]) -> [UInt8],
                      onPower: (_ event: PowerEvent) -> Void = { _ in }) throws(CardIOError) {
        let name = endpoint.description
        let start = state.withLock { s in
            guard !s.closed, !s.closeRequested, !s.serving else { return false }
            s.serving = true
            return true
        }
        guard start else { return }
        defer {
            state.withLock { s in
                s.serving = false
                if !s.closed {
                    s.closed = true
                    closeDescriptor(fd)
                }
            }
        }
        guard atr.count <= vpcdMaxPayload else {
            throw .io(reader: name, detail: "an ATR of \(atr.count) bytes cannot be framed (at most 65,535)")
        }

        let isTCP = if case .tcp = endpoint { true } else { false }
        while true {
            if isTCP { Socket.quickAck(fd) }
            let (lengthOutcome, length) = Socket.readLength(fd)
            switch lengthOutcome {
            case .complete: break
            case .closed(0), .failed(ECONNRESET, _): return
            case .closed, .timedOut:
                throw .malformedFrame(reader: name, detail: "the reader closed the link inside a frame's length")
            case .failed(let code, _):
                if closing { return }
                throw .io(reader: name, detail: "receiving from the reader failed: \(Socket.errorText(code))")
            }
            // vicc.py logs and skips an empty message; so do we.
            if length == 0 { continue }
            let (payload, outcome) = Socket.readPayload(fd, count: length)
            switch outcome {
            case .complete: break
            case .failed(ECONNRESET, _): return
            case .closed(let n), .timedOut(let n):
                if closing { return }
                throw .malformedFrame(reader: name, detail: "a frame announced \(length) bytes but the reader closed the link after \(n)")
            case .failed(let code, _):
                if closing { return }
                throw .io(reader: name, detail: "receiving from the reader failed: \(Socket.errorText(code))")
            }

            let reply: [UInt8]
            if length == 1 {
                switch VPCDControl(rawValue: payload[0]) {
                case .powerOff: onPower(.powerOff); continue
                case .powerOn: onPower(.powerOn); continue
                case .reset: onPower(.reset); continue
                case .getATR: reply = atr
                case nil: continue
                }
            } else {
                reply = respond(payload)
                guard reply.count <= vpcdMaxPayload else {
                    throw .io(reader: name, detail: "a response of \(reply.count) bytes cannot be framed: a vpcd frame carries at most 65,535 bytes")
                }
            }
            switch Socket.writeFrame(fd, reply) {
            case .complete:
                if state.withLock({ $0.leaveAfterReply }) { return }
                continue
            case .failed(let code) where code == EPIPE || code == ECONNRESET || closing:
                return
            case .failed(let code):
                throw .io(reader: name, detail: "sending to the reader failed: \(Socket.errorText(code))")
            case .timedOut:
                throw .io(reader: name, detail: "sending to the reader timed out")
            }
        }
    }

    /// Serves an in-process card over the link: power events go to it, and once it has left by
    /// itself (`hasLeft`, after answering a given command, or powered off after a tap) the link
    /// closes after that answer.
    public func serve(_ card: any InProcessCard) throws(CardIOError) {
        var atr = card.powerOn(warm: false)
        // Whether a terminal has talked to the card since it was powered: pcscd powers a new
        // card on to read its ATR and off again when no one uses it, which is no tap ending.
        var used = false
        try serve(atr: atr, respond: { command in
            used = true
            let answer = card.respond(to: command)
            if card.hasLeft { leaveAfterReply() }
            return answer
        }, onPower: { event in
            switch event {
            case .powerOn:
                atr = card.powerOn(warm: false)
                used = false
            case .reset: atr = card.powerOn(warm: true)
            case .powerOff:
                guard used else { return }
                card.powerOff()
                // A tap is over when the terminal that used it powers it off: it leaves.
                if card.hasLeft { close() }
            }
        })
    }

    /// Removes the card: wakes `serve` (which then returns) or, when it is not running, closes
    /// the link at once. Idempotent.
    public func close() {
        state.withLock { s in
            guard !s.closed, !s.closeRequested else { return }
            s.closeRequested = true
            if s.serving {
                _ = shutdown(fd, Int32(SHUT_RDWR))
            } else {
                s.closed = true
                closeDescriptor(fd)
            }
        }
    }

    /// Removes the card once the reply being prepared has been sent: for `respond` to pull the
    /// card out right after answering a given command.
    public func leaveAfterReply() { state.withLock { $0.leaveAfterReply = true } }

    private var closing: Bool { state.withLock { $0.closeRequested } }
}
