import CardIO
import EMV
import Foundation
import ISO8583
import Synchronization
import Terminal

/// The external ISO 8583 host a scenario's terminal authorises against (`iso8583_host:`): a real
/// framed TCP listener on the loopback, in the scenario's packager and framing. Each
/// authorisation gets the scenario's next scripted answer; approvals come from the daemon core's
/// own emulated issuer, reached over its ISO 8583 listener, so ARQCs are checked and ARPCs are
/// real. It records every message it receives for the steps' `iso8583:` expectations.
final class ScriptedISO8583Host: Sendable {
    /// Where the emulated issuer listens, and the format it speaks (`GET /v1/host`).
    struct Issuer: Sendable, Equatable {
        let host: String
        let port: UInt16
        let packager: Packager
        let framing: Framing
    }

    /// A message as received: described as the trace shows it, or why it could not be read.
    struct Received: Sendable {
        let mti: String
        let described: DescribedMessage?
        let unreadable: String?
    }

    private struct State {
        var answers: [ISO8583HostScript.Answer] = []
        var answerReversals = ISO8583HostScript.ReversalAnswers.always
        /// Reversals answered so far (`first_lost` drops the first answer).
        var reversalsSeen = 0
        var issuer: Issuer?
        var received: [Received] = []
        /// What went wrong on the host's side that a step cannot see (the issuer did not answer).
        var problems: [String] = []
        /// Tells the bench's clock that the message just received will not be answered, so the
        /// terminal's timeout comes at once in virtual time (`ManualClock.peersSilent`).
        var silent: (@Sendable () -> Void)?
    }

    let packager: Packager
    let framing: Framing
    private let listener: FramedListener
    private let state = Mutex(State())

    var port: UInt16 { listener.port }

    init(packager: Packager, framing: Framing, port: UInt16 = 0) throws(HostLinkError) {
        self.packager = packager
        self.framing = framing
        listener = try FramedListener(address: "127.0.0.1", port: port)
        listener.start(framing: framing, idleTimeout: .seconds(60), onError: { _, _ in }, handle: { [weak self] _, bytes in
            self?.handle(bytes)
        })
    }

    /// Starts a scenario: its answers, the issuer to ask, nothing received yet.
    func prepare(_ script: ISO8583HostScript, issuer: Issuer?, silent: (@Sendable () -> Void)? = nil) {
        state.withLock { s in
            s = State()
            s.silent = silent
            s.answers = script.answers
            s.answerReversals = script.answerReversals
            s.issuer = issuer
        }
    }

    /// How many messages have been received so far.
    var receivedCount: Int { state.withLock { $0.received.count } }

    /// The messages received since the `from`th, and the host's problems meanwhile.
    func received(from start: Int) -> (messages: [Received], problems: [String]) {
        state.withLock { s in
            let problems = s.problems
            s.problems = []
            return (Array(s.received.dropFirst(start)), problems)
        }
    }

    func stop() { listener.stop() }

    // MARK: Answering

    func handle(_ bytes: [UInt8]) -> [UInt8]? {
        let reply = answer(bytes)
        if reply == nil { state.withLock { $0.silent }?() }
        return reply
    }

    private func answer(_ bytes: [UInt8]) -> [UInt8]? {
        let request: ISOMessage
        do throws(ISO8583Error) { request = try packager.unpack(bytes) } catch {
            state.withLock { $0.received.append(Received(mti: "????", described: nil, unreadable: error.description)) }
            return nil
        }
        let (answer, reversals, firstReversal, issuer) = state.withLock { s in
            s.received.append(Received(mti: request.mti, described: request.described(direction: "in", packager: packager), unreadable: nil))
            let isAuthorisation = [.authorisation, .financial].contains(request.kind.messageClass) && request.kind.function == .request
            let next: ISO8583HostScript.Answer? = isAuthorisation ? (s.answers.isEmpty ? .issuer(scriptBefore: [], scriptAfter: []) : s.answers.removeFirst()) : nil
            var first = false
            if request.kind.messageClass == .reversal {
                first = s.reversalsSeen == 0
                s.reversalsSeen += 1
            }
            return (next, s.answerReversals, first, s.issuer)
        }
        let reply: ISOMessage?
        let kind = request.kind
        switch (kind.messageClass, kind.function) {
        case (.networkManagement?, .request?):
            reply = IssuerMessages.answer(request, code: .approved)
        case (.authorisation?, .request?), (.financial?, .request?):
            switch answer! {
            case .timeout:
                reply = nil
            case .malformed:
                return Array("this is not an ISO 8583 message".utf8)
            case .code(let code, let auth):
                var m = IssuerMessages.answer(request, code: ResponseCode(code))
                if let auth { m[38] = auth }
                reply = m
            case .issuer(let before, let after, let corrupt):
                guard var m = forward(request, to: issuer) else { return nil }
                if !before.isEmpty || !after.isEmpty || corrupt {
                    var icc = (m.bytes(55)).flatMap { try? TLV.parse($0) } ?? []
                    if corrupt {
                        guard let i = icc.firstIndex(where: { $0.tag == 0x91 }), !icc[i].value.isEmpty else {
                            note("corrupt_arpc: the issuer's answer has no tag 91 to corrupt")
                            return nil
                        }
                        var arpc = icc[i].value
                        arpc[0] ^= 0x01
                        icc[i] = TLV(0x91, arpc)
                    }
                    if !before.isEmpty { icc.append(Self.script(0x71, id: 1, commands: before)) }
                    if !after.isEmpty { icc.append(Self.script(0x72, id: 2, commands: after)) }
                    m.fields[55] = .bytes(icc.flatMap { $0.encoded() })
                }
                reply = m
            }
        case (.reversal?, .request?), (.reversal?, .advice?):
            guard reversals != .never else { return nil }
            // The issuer voids the approval the reversal names (or answers 25: it has none).
            let answered = forward(request, to: issuer) ?? IssuerMessages.answer(request, code: .approved)
            // first_lost: the issuer applied the reversal, but its answer never reaches the terminal.
            reply = reversals == .firstLost && firstReversal ? nil : answered
        case (.financial?, .advice?):
            reply = IssuerMessages.answer(request, code: .approved)
        default:
            reply = IssuerMessages.answer(request, code: "12")
        }
        guard let reply else { return nil }
        do throws(ISO8583Error) { return try packager.pack(reply) } catch {
            note("the scripted host could not pack its \(reply.mti): \(error)")
            return nil
        }
    }

    /// `request` asked of the emulated issuer in its own format; nil (and a problem noted) when
    /// it does not answer.
    private func forward(_ request: ISOMessage, to issuer: Issuer?) -> ISOMessage? {
        guard let issuer else {
            note("the daemon's issuer does not listen for ISO 8583 (host.iso8583.listen), so the scripted host cannot ask it")
            return nil
        }
        do {
            let bytes = try issuer.packager.pack(request)
            let connection = try FramedConnection.connect(host: issuer.host, port: issuer.port, framing: issuer.framing, timeout: .seconds(5))
            defer { connection.close() }
            try connection.send(bytes)
            let answer = try connection.receive(until: .now + .seconds(20))
            return try issuer.packager.unpack(answer.message)
        } catch {
            note("the emulated issuer at \(issuer.host):\(issuer.port) did not answer the \(request.mti): \(error)")
            return nil
        }
    }

    private func note(_ problem: String) { state.withLock { $0.problems.append(problem) } }

    /// An issuer script template (71 or 72): its identifier (9F18) and its commands (86).
    static func script(_ tag: EMVTag, id: UInt32, commands: [String]) -> TLV {
        let identifier = TLV(0x9F18, [UInt8(id >> 24 & 0xFF), UInt8(id >> 16 & 0xFF), UInt8(id >> 8 & 0xFF), UInt8(id & 0xFF)])
        return TLV(tag, children: [identifier] + commands.map { TLV(0x86, (try? Hex.decode($0)) ?? []) })
    }
}

/// The scripted hosts a runner started for a running daemon's terminals, by port: one per port,
/// kept from scenario to scenario.
final class ScriptedHosts: @unchecked Sendable {
    // Unchecked: `hosts` is under `lock`.
    private let lock = NSLock()
    private var hosts: [UInt16: ScriptedISO8583Host] = [:]

    func host(port: UInt16, packager: Packager, framing: Framing) throws -> ScriptedISO8583Host {
        try lock.withLock {
            if let h = hosts[port], h.packager == packager, h.framing == framing { return h }
            hosts.removeValue(forKey: port)?.stop()
            let h = try ScriptedISO8583Host(packager: packager, framing: framing, port: port)
            hosts[port] = h
            return h
        }
    }

    func drain() -> [ScriptedISO8583Host] {
        lock.withLock {
            defer { hosts = [:] }
            return Array(hosts.values)
        }
    }
}
