import Fronts
import CardIO
import EMV
import Foundation
import ISO8583
import Ledger
import Logging
import Synchronization
import Terminal
import Workflows

/// A terminal's link to an external ISO 8583 host: each transaction gets a session.
final class ISO8583UpstreamLink: UpstreamLink {
    let upstream: ISO8583Upstream
    let settings: ISO8583Settings
    /// How long the terminal waits for an answer (`host.timeout_seconds`).
    let timeout: Duration
    let logger: Logger
    /// Where answers are waited for: on a manual clock a host's timeout is virtual
    /// (`WaitKind.peer`), so a scripted host that will not answer costs no real time.
    let clock: any Clock

    init(upstream: ISO8583Upstream, settings: ISO8583Settings, timeout: Duration, logger: Logger, clock: any Clock = SystemClock()) {
        self.clock = clock
        self.upstream = upstream
        self.settings = settings
        self.timeout = timeout
        self.logger = logger
    }

    func session(terminal: any TerminalSession, stan: STAN, rrn: String, date: UTCDateParts) -> any UpstreamSession {
        ISO8583UpstreamSession(link: self, context: MessageContext(terminalID: terminal.tid, merchantID: settings.merchantID,
                                                                   stan: stan, rrn: rrn, date: date, localOffsetSeconds: Self.localOffset(date)))
    }

    /// The daemon's time zone (`TZ`, else /etc/localtime) at `date`: the terminals' local time,
    /// which fields 12 and 13 carry.
    static func localOffset(_ date: UTCDateParts) -> Int {
        TimeZone.current.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(date.secondsSince1970)))
    }

    /// The host's approvals, by TID and STAN, with the request that got them: what a capture's
    /// 0220 and a cancel's 0400 repeat (the card number among it, so in memory only, the last
    /// 10,000).
    private let approvals = Mutex(Recent<(request: ISOMessage, answer: ISOMessage)>())

    func remember(_ request: ISOMessage, answer: ISOMessage, _ context: MessageContext) {
        approvals.withLock { $0.insert((request, answer), for: "\(context.terminalID)/\(context.stan)") }
    }

    func forget(_ context: MessageContext) {
        _ = approvals.withLock { $0.remove("\(context.terminalID)/\(context.stan)") }
    }

    /// Sends an 0800 (an echo test, or a sign-on) and reads its 0810: whether the host is there,
    /// and how long it took.
    func networkManagement(terminal: String, terminalID: String, stan: STAN, date: UTCDateParts, signOn: Bool) -> ISO8583EchoView {
        let context = MessageContext(terminalID: terminalID, merchantID: settings.merchantID, stan: stan, rrn: "", date: date,
                                     localOffsetSeconds: Self.localOffset(date))
        let session = ISO8583UpstreamSession(link: self, context: context)
        let request = TerminalMessages.echo(context, signOn: signOn)
        let start = ContinuousClock.now
        var code: String?, problem: String?
        do {
            let answer = try session.exchange(request)
            if answer.mti != "0810" || answer[11] != request[11] {
                problem = "the answer is a \(answer.mti) for STAN \(answer[11] ?? "(none)"), not the 0810 for STAN \(stan)"
            } else if let c = answer[39] {
                code = c
            } else {
                problem = "the 0810 has no response code (field 39)"
            }
        } catch {
            problem = error.description
        }
        let elapsed = ContinuousClock.now - start
        return ISO8583EchoView(terminal: terminal, host: upstream.url,
                               function: signOn ? "sign-on" : "echo test", stan: stan.description, answered: code != nil, responseCode: code,
                               milliseconds: Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15,
                               error: problem, messages: session.messages.map(HostMessageView.init))
    }

    func actOn(_ action: TransactionAction, original: StoredTransaction, amount: Int64, terminal: any TerminalSession, stan: STAN,
               date: UTCDateParts) -> [HostMessageEntry] {
        let key = "\(original.tid)/\(original.stan)"
        guard let (request, answer) = approvals.withLock({ $0.value(for: key) }) else {
            logger.warning("ISO 8583: no \(action.rawValue) sent for STAN \(original.stan): its approval is not held (approved before a restart?)",
                           metadata: ["host": "\(upstream.host):\(upstream.port)"])
            return []
        }
        let context = MessageContext(terminalID: terminal.tid, merchantID: settings.merchantID, stan: stan, rrn: original.rrn, date: date,
                                     localOffsetSeconds: Self.localOffset(date))
        let session = ISO8583UpstreamSession(link: self, context: context)
        switch action {
        case .capture:
            session.advise(TerminalMessages.completion(of: request, answer: answer, amount: Int(amount), context), repeatMTI: "0221")
        default:
            _ = approvals.withLock { $0.remove(key) }
            var reversal = TerminalMessages.reversal(of: request, advice: false, answer: answer, context)
            reversal[39] = "17"  // customer cancellation
            session.advise(reversal, repeatMTI: "0401")
        }
        return session.messages
    }
}

/// One transaction's messages with the external host. Each message goes over a connection of its
/// own (connect, send, read the answer, close), as a dial-up terminal does: nothing is left half-read
/// for the next transaction, and a host that restarts between two messages loses nothing.
final class ISO8583UpstreamSession: UpstreamSession, @unchecked Sendable {
    let link: ISO8583UpstreamLink
    let context: MessageContext
    private(set) var messages: [HostMessageEntry] = []
    /// The authorisation sent and its answer: what a reversal names.
    private var request: ISOMessage?
    private var answer: ISOMessage?
    private var reversed = false

    init(link: ISO8583UpstreamLink, context: MessageContext) {
        self.link = link
        self.context = context
    }

    var packager: Packager { link.settings.packager }

    func authorise(_ authorisation: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        let message = TerminalMessages.authorisation(authorisation, context)
        request = message
        let got: ISOMessage
        var sent = false
        do { got = try exchange(message, connectAttempts: 1 + link.settings.retries, sent: &sent) } catch {
            // No usable answer: a host that got the request may still have approved, so the
            // approval is taken back (a late answer, a timeout), and the terminal decides as
            // "unable to go online". A request that never left needs no reversal.
            if sent { reverse(advice: false, why: error.description) }
            throw .unavailable(reason: "\(error)")
        }
        answer = got
        do throws(ISO8583Error) {
            let response = try TerminalMessages.response(got, to: message)
            if response.isApproved { link.remember(message, answer: got, context) }
            return response
        } catch {
            reverse(advice: false, why: "unusable answer")
            throw .unavailable(reason: "the host's answer cannot be used: \(error)")
        }
    }

    /// Sends an advice or a reversal the host must acknowledge, repeated as `repeatMTI` until it
    /// does or the retries run out (one connection attempt each).
    @discardableResult
    func advise(_ message: ISOMessage, repeatMTI: String) -> Bool {
        var message = message
        for attempt in 0...link.settings.retries {
            if attempt > 0 { message.mti = repeatMTI }
            do {
                var sent = false
                let got = try exchange(message, connectAttempts: 1, sent: &sent)
                if got.mti == TerminalMessages.responseMTI(message.mti) { return true }
            } catch {
                link.logger.warning("ISO 8583 \(message.mti) for STAN \(context.stan) not answered: \(error)",
                                    metadata: ["host": "\(link.upstream.host):\(link.upstream.port)"])
            }
        }
        return false
    }

    func takeBackApproval() -> Bool {
        guard let code = answer?[39], code.utf8.count == 2, ResponseCode(code).isApproval else { return false }
        return reverse(advice: true, why: "the ledger could not record the approval")
    }

    /// The kernel takes back an approval it could not complete (the card removed after it, an AAC
    /// at the second GENERATE AC): a 0420 reversal advice.
    func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) {
        reverse(advice: true, why: "the terminal did not complete the approved transaction")
    }

    /// Sends a 0400 (or 0420) for the authorisation, repeated (0401, 0421) until the host answers it
    /// or the retries run out.
    @discardableResult
    private func reverse(advice: Bool, why: String) -> Bool {
        guard let request, !reversed else { return false }
        reversed = true
        // The approval is not one to capture or cancel any more.
        link.forget(context)
        link.logger.notice("ISO 8583 reversal of STAN \(context.stan): \(why)", metadata: ["host": "\(link.upstream.host):\(link.upstream.port)"])
        return advise(TerminalMessages.reversal(of: request, advice: advice, answer: answer, context), repeatMTI: advice ? "0421" : "0401")
    }

    /// A message outside any transaction (an 0800): sent once, its answer read before the host timeout.
    func exchange(_ message: ISOMessage) throws(ExchangeError) -> ISOMessage {
        var sent = false
        return try exchange(message, connectAttempts: 1, sent: &sent)
    }

    enum ExchangeError: Error, CustomStringConvertible {
        case link(HostLinkError)
        case message(ISO8583Error)

        var description: String {
            switch self {
            case .link(let e): "host \(e)"
            case .message(let e): "the host's message: \(e)"
            }
        }
    }

    /// Sends `message` and reads one answer within the host timeout on the bench clock, keeping
    /// both (described) in the trace.
    private func exchange(_ message: ISOMessage, connectAttempts: Int, sent: inout Bool) throws(ExchangeError) -> ISOMessage {
        let bytes: [UInt8]
        do { bytes = try packager.pack(message) } catch { throw .message(error) }
        let connection = try connect(attempts: connectAttempts)
        defer { connection.close() }
        // The wait starts before the message leaves: a scripted host that decides at once not to
        // answer finds it on the clock (`ManualClock.peersSilent`).
        let wait = link.clock.waitFor(.peer, timeout: link.timeout)
        defer { wait.end() }
        // Once a byte may have left, the host may act on it.
        sent = true
        do { try connection.send(bytes) } catch { throw .link(error) }
        record(message, direction: .outgoing)
        while !connection.waitReadable(within: wait.slice) {
            if wait.isOver { throw .link(.timedOut) }
        }
        let frame: (tpdu: [UInt8]?, message: [UInt8])
        // The answer has begun to come: the rest of its frame gets the timeout in real time.
        do { frame = try connection.receive(until: .now + link.timeout) } catch { throw .link(error) }
        do {
            let got = try packager.unpack(frame.message)
            record(got, direction: .incoming)
            return got
        } catch {
            recordUnreadable(frame.message, error)
            throw .message(error)
        }
    }

    private func connect(attempts: Int) throws(ExchangeError) -> FramedConnection {
        var last = HostLinkError.connect("no attempt")
        for _ in 0..<max(1, attempts) {
            do {
                return try FramedConnection.connect(host: link.upstream.host, port: link.upstream.port, framing: link.settings.framing,
                                                    timeout: link.settings.connectTimeout)
            } catch {
                last = error
            }
        }
        throw .link(last)
    }

    private func record(_ message: ISOMessage, direction: HostMessageDirection) {
        let described = message.described(direction: direction.rawValue, packager: packager)
        messages.append(HostMessageEntry(direction: direction, mti: message.mti, fields: Self.json(described.fields)))
    }

    /// An answer that does not unpack: its first four characters when they are an MTI, and why.
    private func recordUnreadable(_ bytes: [UInt8], _ error: ISO8583Error) {
        let head = bytes.prefix(4)
        let mti = head.count == 4 && head.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) ? String(decoding: head, as: UTF8.self) : "0000"
        let field = DescribedField(field: 0, name: "unreadable message (\(bytes.count) bytes)", value: error.description, tlv: nil)
        messages.append(HostMessageEntry(direction: .incoming, mti: mti, fields: Self.json([field])))
    }

    /// The fields as the trace keeps them: what `JSONEncoder` with sorted keys writes, written
    /// directly (every ISO 8583 authorisation writes two messages, and the encoder's boxes and
    /// containers cost more than the rest of the issuer's answer).
    static func json(_ fields: [DescribedField]) -> String {
        var out = JSONText(capacity: 2048)
        out.array(fields) { o, f in
            o.field("field", f.field)
            o.field("name", f.name)
            o.field("tlv", array: f.tlv) { t, tag in
                t.field("name", tag.name)
                t.field("tag", tag.tag)
                t.field("value", tag.value)
            }
            o.field("value", f.value)
        }
        return String(decoding: out.bytes, as: UTF8.self)
    }
}
