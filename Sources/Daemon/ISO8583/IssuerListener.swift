import CardIO
import Crypto
import EMV
import Foundation
import ISO8583
import Ledger
import Logging
import Synchronization
import Terminal
import Workflows

/// cardbench's emulated issuer on ISO 8583 (`host.iso8583.listen`): external terminals and switches
/// send 0100/0200/0400/0420/0800 and get the issuer's answers, by the same rules as cardbench's own
/// terminals (queued outcomes, card states, balances, the ARQC check, the amount table), with the
/// ARPC in field 55. Each authorisation and reversal is a host-side transaction in the ledger
/// (provider `iso8583`, terminal `iso8583.host`), its two messages in its trace.
final class ISO8583IssuerService: @unchecked Sendable {
    /// The ledger terminal host-side transactions are kept under.
    static let terminalName = "iso8583.host"
    static let terminalID = "80000000"
    /// The host queue one-shot outcomes for external terminals come from.
    static let queue = "iso8583"

    let host: EmulatedHost
    let ledger: Ledger
    let clock: any Terminal.Clock
    let packager: Packager
    let amountTable: AmountTable
    let logger: Logger
    let onRecorded: @Sendable (StoredTransaction) -> Void
    /// Approvals by the sending terminal's TID and STAN, for their reversals.
    private let approvals = Mutex(Recent<(id: Int64, code: String, amount: Int)>())
    /// Answers by TID, STAN and message class, for repeats, with what identifies their request.
    /// Kept packed: ten thousand unpacked messages (a dictionary of strings each) held 15 MB.
    private let answers = Mutex(Recent<(answer: [UInt8], request: String)>())
    /// One reversal at a time: a reversal and its repeat arriving together must not both miss
    /// the first's answer (they are rare; the authorisations do not wait on it).
    private let reversing = NSLock()

    init(host: EmulatedHost, ledger: Ledger, clock: any Terminal.Clock, packager: Packager, amountTable: AmountTable, logger: Logger,
         onRecorded: @escaping @Sendable (StoredTransaction) -> Void) throws {
        self.host = host
        self.ledger = ledger
        self.clock = clock
        self.packager = packager
        self.amountTable = amountTable
        self.logger = logger
        self.onRecorded = onRecorded
        _ = try ledger.ensureTerminal(name: Self.terminalName, tid: Self.terminalID)
    }

    /// The answer to one message from `peer`, packed; nil when there is none to give (a message
    /// that does not unpack, an answer sent to us).
    func handle(peer: String, _ bytes: [UInt8]) -> [UInt8]? {
        let message: ISOMessage
        do { message = try packager.unpack(bytes) } catch {
            logger.warning("ISO 8583 message from \(peer) does not unpack (\(packager.name)): \(error)")
            return nil
        }
        let answer: ISOMessage?
        let kind = message.kind
        switch (kind.messageClass, kind.function) {
        case (.networkManagement?, .request?):
            answer = IssuerMessages.answer(message, code: "00")
        case (.authorisation?, .request?) where !kind.isRepeat, (.financial?, .request?) where !kind.isRepeat:
            answer = authorise(message)
        case (.authorisation?, .request?), (.financial?, .request?):
            // A repeat is the same request sent again: it gets the first one's answer, and is
            // authorised only when that never arrived here.
            // A repeat must be that request: the same card, amount, processing code, currency,
            // terminal and merchant. Another request under the same terminal id and STAN is
            // refused (94, duplicate transmission) and learns nothing of the first.
            let earlier = answers.withLock { $0.value(for: key(message, stan: message[11]) + "/" + message.mti.prefix(2)) }
            if let earlier, earlier.request != Self.identity(message) {
                logger.notice("ISO 8583 \(message.mti) from terminal \(message[41] ?? "?") STAN \(message[11] ?? "?") does not match the request it repeats: refused with 94")
                answer = IssuerMessages.answer(message, code: "94")
            } else if let packed = earlier?.answer, var earlier = try? packager.unpack(packed) {
                earlier.mti = TerminalMessages.responseMTI(message.mti)
                answer = earlier
            } else {
                answer = authorise(message)
            }
        case (.reversal?, .request?), (.reversal?, .advice?):
            answer = reverse(message)
        default:
            // A request or advice of another kind: "invalid transaction". Answers are not answered.
            answer = kind.function?.wantsAnswer == true ? IssuerMessages.answer(message, code: "12") : nil
        }
        guard let answer else { return nil }
        do { return try packager.pack(answer) } catch {
            logger.error("ISO 8583 answer to \(peer) cannot be packed: \(error)")
            return nil
        }
    }

    private func key(_ m: ISOMessage, stan: String?) -> String { "\(m[41] ?? "")/\(stan ?? "")" }

    /// An authorisation on the one path (`AuthoriseAndRecord`): the host-side row is begun before
    /// the issuer is asked, and the answer stands only once it is recorded with its two messages.
    /// A row the ledger refuses to begin or to complete is answered 96 (system malfunction) with
    /// no authorisation code and no ARPC, and an approval it refused is voided at the issuer.
    private func authorise(_ message: ISOMessage) -> ISOMessage {
        let now = UTCDateParts(secondsSince1970: clock.now())
        let request: AuthorisationRequest
        do { request = try IssuerMessages.authorisationRequest(message, now: now) } catch {
            // 13 for an amount that cannot be one, 30 (format error) otherwise; the rule in the log.
            logger.notice("ISO 8583 \(message.mti) refused: \(error)")
            return IssuerMessages.answer(message, code: IssuerMessages.responseCode(refusing: error))
        }
        // A refund is recorded as a sale whose message says it is a refund: the ledger's refunds
        // need their sale, which lives on the external terminal's side.
        let action: TransactionAction = request.kind == .preAuthorisation ? .preAuth : .sale
        let created = clock.nowMicroseconds()
        let new = NewTransaction(terminal: Self.terminalName, provider: .iso8583, action: action, amount: Int64(request.amount),
                                 currency: request.currency, clientReference: key(message, stan: message[11]), createdAt: created, pan: request.pan)
        var answer = IssuerMessages.answer(message, code: "96")
        do {
            let done = try AuthoriseAndRecord.run(ledger, new, completedAt: { max(self.clock.nowMicroseconds(), created) }, ask: {
                do { return .init(response: try host.authorise(request, queue: Self.queue, amountTable: amountTable), failure: nil) } catch {
                    return .init(response: nil, failure: "issuer unavailable: \(error)")
                }
            }, takeBack: { approval in
                if let code = approval.authorisationCode { _ = self.host.void(authorisationCode: code, amount: request.amount) }
            }, record: { started, asked in
                let response = asked.response
                let code: ResponseCode = response?.responseCode ?? "91"
                answer = IssuerMessages.answer(message, code: code, response: response)
                let said = response?.message ?? "issuer unavailable"
                var completion = Completion(status: code.isApproval ? .approved : .declined, responseCode: code.code,
                                            message: request.kind == .refund ? "refund (processing code \(message[3] ?? "")): \(said)" : said,
                                            authorisationCode: response?.authorisationCode,
                                            completedAt: max(clock.nowMicroseconds(), created), reversal: false)
                completion.maskedPAN = PAN.masked(request.pan)
                completion.pan = request.pan
                completion.cardBrand = CardBrand.detect(pan: request.pan)
                completion.arqc = request.arqc.map(Hex.encode)
                completion.atc = request.cryptogramData?.tags[0x9F36].map(Hex.encode)
                completion.aid = request.aid.isEmpty ? nil : Hex.encode(request.aid)
                completion.entryMode = EntryMode(posEntryMode: request.posEntryMode)
                completion.hostMessages = [entry(message, .incoming), entry(answer, .outgoing)]
                return try ledger.complete(id: started.id, completion, trace: [], outbox: [])
            })
            onRecorded(done.recorded)
            if done.answer.approved, let auth = done.answer.response?.authorisationCode {
                approvals.withLock { $0.insert((done.recorded.id, auth, request.amount), for: key(message, stan: message[11])) }
            }
        } catch {
            // Nothing stands that is not recorded: the terminal is told the system failed.
            logger.error("ISO 8583 \(message.mti) from terminal \(message[41] ?? "?") could not be recorded: \(error)")
            answer = IssuerMessages.answer(message, code: "96")
        }
        if let packed = try? packager.pack(answer) {
            answers.withLock { $0.insert((packed, Self.identity(message)), for: key(message, stan: message[11]) + "/" + message.mti.prefix(2)) }
        }
        return answer
    }

    /// What makes a request the one a repeat repeats, hashed (the card number is not kept in
    /// memory in clear for this): the card (field 2 or 35's), processing code, amount,
    /// currency, terminal and merchant.
    static func identity(_ m: ISOMessage) -> String {
        let card = m[2] ?? m[35].map { String($0.prefix { $0 != "=" && $0 != "D" }) } ?? ""
        let text = [card, m[3] ?? "", m[4] ?? "", m[49] ?? "", m[41] ?? "", m[42] ?? ""].joined(separator: "|")
        return Data(SHA256.hash(data: Array(text.utf8))).base64EncodedString()
    }

    /// A reversal (0400, 0420, or their repeats 0401, 0421). A reversal sent again — a repeat, or
    /// the same 0400 twice — gets what the first was answered, as authorisation repeats do: the
    /// terminal's first answer may have been lost, and the approval is reversed once.
    private func reverse(_ message: ISOMessage) -> ISOMessage {
        reversing.lock()
        defer { reversing.unlock() }
        let own = key(message, stan: message[11]) + "/04"
        let identity = Self.identity(message) + "|" + (IssuerMessages.originalSTAN(message) ?? "")
        if let earlier = answers.withLock({ $0.value(for: own) }) {
            guard earlier.request == identity else {
                logger.notice("ISO 8583 \(message.mti) from terminal \(message[41] ?? "?") STAN \(message[11] ?? "?") does not match the reversal it repeats: refused with 94")
                return IssuerMessages.answer(message, code: "94")
            }
            guard var again = try? packager.unpack(earlier.answer) else { return IssuerMessages.answer(message, code: "96") }
            again.mti = TerminalMessages.responseMTI(message.mti)
            return again
        }
        let answer = reverseOnce(message)
        // Only a reversal applied is remembered: a 25 may be a reversal that came before its
        // approval was recorded, and its repeat must look again.
        if answer[39] == "00", let packed = try? packager.pack(answer) { answers.withLock { $0.insert((packed, identity), for: own) } }
        return answer
    }

    private func reverseOnce(_ message: ISOMessage) -> ISOMessage {
        let original = key(message, stan: IssuerMessages.originalSTAN(message))
        // 25: unable to locate the original (never approved here, reversed already by another
        // reversal, or an approval the issuer no longer holds).
        guard let found = approvals.withLock({ $0.remove(original) }),
              host.void(authorisationCode: found.code, amount: found.amount) else {
            return IssuerMessages.answer(message, code: "25")
        }
        let answer = IssuerMessages.answer(message, code: "00")
        do {
            let originalRow = try ledger.transaction(id: found.id)
            let created = clock.nowMicroseconds()
            let started = try ledger.begin(NewTransaction(terminal: Self.terminalName, provider: .iso8583, action: .reversal,
                                                          amount: Int64(found.amount), currency: originalRow?.currency ?? 0,
                                                          clientReference: key(message, stan: message[11]), originalID: found.id,
                                                          createdAt: created))
            var completion = Completion(status: .approved, responseCode: "00", message: "reversed by \(message.mti)",
                                        completedAt: max(clock.nowMicroseconds(), created), reversal: false)
            completion.maskedPAN = originalRow?.maskedPAN
            completion.hostMessages = [entry(message, .incoming), entry(answer, .outgoing)]
            onRecorded(try ledger.complete(id: started.id, completion))
        } catch {
            logger.error("ISO 8583 reversal from terminal \(message[41] ?? "?") could not be recorded: \(error)")
        }
        return answer
    }

    private func entry(_ m: ISOMessage, _ direction: HostMessageDirection) -> HostMessageEntry {
        HostMessageEntry(direction: direction, mti: m.mti,
                         fields: ISO8583UpstreamSession.json(m.described(direction: direction.rawValue, packager: packager).fields))
    }
}

/// The last `capacity` values by key: what the issuer remembers of external terminals' messages,
/// bounded so a terminal that never reverses cannot grow it without end. Each insertion has a
/// number: the oldest still held goes first, and a key removed or inserted again leaves no entry
/// behind that could evict its newer value. The insertion order is compacted once it is twice
/// the capacity, so removals cannot grow it either.
struct Recent<Value> {
    private var values: [String: (number: Int, value: Value)] = [:]
    private var order: [(key: String, number: Int)] = []
    private var start = 0
    private var next = 0
    let capacity: Int

    init(capacity: Int = 10_000) { self.capacity = capacity }

    var count: Int { values.count }

    func value(for key: String) -> Value? { values[key]?.value }

    mutating func insert(_ value: Value, for key: String) {
        next += 1
        values[key] = (next, value)
        order.append((key, next))
        while values.count > capacity, start < order.count {
            let (oldest, number) = order[start]
            if values[oldest]?.number == number { values[oldest] = nil }
            start += 1
        }
        if order.count - start > 2 * capacity || start > capacity {
            order = order[start...].filter { values[$0.key]?.number == $0.number }
            start = 0
        }
    }

    mutating func remove(_ key: String) -> Value? { values.removeValue(forKey: key)?.value }

    /// How many insertions are remembered in order (held or not yet compacted away): for tests.
    var ordered: Int { order.count - start }
}
