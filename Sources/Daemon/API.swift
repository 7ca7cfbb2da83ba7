import EMV
import Foundation
import Hummingbird
import Ledger
import NIOCore
import Terminal
import Workflows

/// The JSON a transaction is shown as. Never the PAN hash: it is a search key, not data.
public struct TransactionView: Codable, Sendable, Equatable {
    public let id: Int64
    public let transactionId: String
    public let terminal: String
    public let tid: String
    public let provider: String
    public let action: String
    public let status: String
    public let amount: Int64
    public let tipAmount: Int64
    public let currency: Int
    public let clientReference: String?
    public let stan: String
    public let rrn: String
    public let authorisationCode: String?
    public let responseCode: String?
    public let message: String?
    public let maskedPAN: String?
    public let brand: String?
    public let aid: String?
    public let applicationLabel: String?
    public let cardholderName: String?
    public let arqc: String?
    public let atc: String?
    public let tvr: String?
    public let cvm: String?
    public let entryMode: String?
    public let installments: Int?
    public let originalId: Int64?
    public let createdAt: Int64
    public let completedAt: Int64?
    public var trace: [TraceView]?
    public var callbacks: [OutboxView]?

    public init(_ t: StoredTransaction) {
        id = t.id; transactionId = t.uuid; terminal = t.terminalName; tid = t.tid; provider = t.provider.rawValue
        action = t.action.rawValue; status = t.status.rawValue; amount = t.amount; tipAmount = t.tipAmount; currency = t.currency
        clientReference = t.clientReference; stan = t.stan.description; rrn = t.rrn; authorisationCode = t.authorisationCode
        responseCode = t.responseCode; message = t.message; maskedPAN = t.maskedPAN; brand = t.brand; aid = t.aid
        applicationLabel = t.applicationLabel; cardholderName = t.cardholderName; arqc = t.arqc; atc = t.atc; tvr = t.tvr
        cvm = t.cvm; entryMode = t.entryMode; installments = t.installments; originalId = t.originalID
        createdAt = t.createdAt; completedAt = t.completedAt
    }
}

public struct TraceView: Codable, Sendable, Equatable {
    public let command: String
    public let response: String
    /// The command's name (SELECT, GENERATE AC, …).
    public let name: String
}

public struct OutboxView: Codable, Sendable, Equatable {
    public let id: Int64
    public let kind: String
    public let target: String
    public let payload: String
    public let status: String
    public let attempts: Int
    public let lastError: String?

    init(_ e: OutboxEntry) {
        id = e.id; kind = e.kind.rawValue; target = e.target; payload = e.payload; status = e.status.rawValue
        attempts = e.attempts; lastError = e.lastError
    }
}

/// `POST /v1/open`'s body.
public struct OpenRequest: Codable, Sendable {
    public var url: String
    public var terminal: String?
    /// false: answer 202 with an id at once; `GET /v1/requests/{id}` waits for the result.
    public var wait: Bool?

    public init(url: String, terminal: String? = nil, wait: Bool? = nil) {
        self.url = url
        self.terminal = terminal
        self.wait = wait
    }
}

/// What opening a URL produced: the callback the app would send, when there is one.
public struct OpenResult: Codable, Sendable, Equatable {
    public var callback: String?
    /// The callback's fields in order, unencoded.
    public var fields: [Field]
    public var status: String
    public var message: String
    public var transaction: TransactionView?
    /// True when this is the stored answer to an earlier identical request (idempotency).
    public var replayed: Bool

    public struct Field: Codable, Sendable, Equatable {
        public let name: String
        public let value: String
    }

    public init(callback: String?, fields: [Field], status: String, message: String, transaction: TransactionView?, replayed: Bool = false) {
        self.callback = callback
        self.fields = fields
        self.status = status
        self.message = message
        self.transaction = transaction
        self.replayed = replayed
    }

    /// A workflow's answer as the API shows it.
    public init(_ answer: Answer) {
        let c = answer.callback
        self.init(callback: c.url, fields: c.fields.map { Field(name: $0.name, value: $0.value) }, status: c.status, message: c.message,
                  transaction: answer.transaction.map(TransactionView.init), replayed: answer.replayed)
    }
}

/// An error body: `{"error": "...", "field": "...", "rule": "..."}`.
struct ErrorBody: Codable {
    let error: String
    let field: String?
    let rule: String?
}

/// The HTTP API, the same on the Unix socket and on loopback (see docs/openapi.yaml).
public struct API: Sendable {
    let bench: Bench
    let requests: OpenRequests

    public init(bench: Bench) {
        self.bench = bench
        requests = OpenRequests()
    }

    /// The routes, behind `policy`'s access check (`.socket` for the control socket).
    public func router(policy: ListenerPolicy = .socket) -> Router<APIContext> {
        let router = Router(context: APIContext.self)
        router.add(middleware: AccessMiddleware(policy: policy, bench: bench))
        let bench = self.bench
        let requests = self.requests

        billpocketRoutes(router)
        router.get("/v1/health") { _, _ in
            json(HealthView(status: "ok", terminals: bench.terminals.count, clock: bench.manualClock == nil ? "system" : "manual",
                            now: bench.clock.nowMicroseconds(), recovered: bench.recovered.count))
        }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                     body: .init(byteBuffer: ByteBuffer(string: bench.metrics.text())))
        }
        router.post("/v1/open") { request, context in
            try await handle("open", bench) {
                let body = try await decode(OpenRequest.self, request, context)
                if body.wait == false {
                    let id = requests.start { () async throws(DaemonError) -> OpenResult in try await bench.open(body.url, terminal: body.terminal) }
                    return json(["id": id, "status": "pending"], status: .accepted)
                }
                return json(try await bench.open(body.url, terminal: body.terminal))
            }
        }
        router.get("/v1/requests/:id") { request, context in
            try await handle("requests", bench) {
                let id = context.parameters.get("id") ?? ""
                let wait = request.uri.queryParameters.get("wait").map { $0 != "false" && $0 != "0" } ?? true
                switch try await requests.outcome(id, wait: wait) {
                case nil: return json(["id": id, "status": "pending"], status: .accepted)
                case .answer(let result)?: return json(result)
                case .failure(let error)?: throw error
                case .transaction(let transactionID, let status, let message, let replayed)?:
                    guard let stored = try bench.ledger.transaction(id: transactionID),
                          let replay = try VivaFront.replay(stored, store: bench.ledger) else {
                        throw DaemonError.failure("transaction \(transactionID) of request \(id) has no stored callback")
                    }
                    var result = OpenResult(replay)
                    result.status = status
                    result.message = message
                    result.replayed = replayed
                    return json(result)
                }
            }
        }
        router.get("/v1/transactions") { request, _ in
            try await handle("transactions", bench) {
                let q = request.uri.queryParameters
                let limit = try q.get("limit").map { try intParameter(String($0), "limit", 1...1000) } ?? 50
                let before = try q.get("before").map { Int64(try intParameter(String($0), "before", 1...Int.max)) }
                let names = try q.get("terminal").map { [try bench.terminal(String($0)).settings.name] }
                    ?? bench.terminals.map(\.settings.name)
                var rows: [StoredTransaction] = []
                for name in names { rows += try bench.ledger.transactions(terminal: name, limit: limit, beforeID: before) }
                rows.sort { $0.id > $1.id }
                return json(rows.prefix(limit).map(TransactionView.init))
            }
        }
        router.get("/v1/transactions/:id") { _, context in
            try await handle("transaction", bench) {
                let key = context.parameters.get("id") ?? ""
                let found = try Int64(key).flatMap { try bench.ledger.transaction(id: $0) } ?? bench.ledger.transaction(uuid: key.lowercased())
                guard let t = found else { throw DaemonError.notFound("no transaction with id or transactionId \"\(key)\"") }
                var view = TransactionView(t)
                view.trace = try bench.ledger.trace(transactionID: t.id).map(TraceView.init)
                view.callbacks = try bench.ledger.outbox(transactionID: t.id).map(OutboxView.init)
                return json(view)
            }
        }
        router.get("/v1/terminals") { _, _ in
            try await handle("terminals", bench) { json(try bench.terminals.map { try TerminalView($0, bench) }) }
        }
        router.get("/v1/terminals/:name") { _, context in
            try await handle("terminal", bench) { json(try TerminalView(try bench.terminal(context.parameters.get("name")), bench)) }
        }
        router.get("/v1/readers") { _, _ in
            json(bench.terminals.map(ReaderView.init))
        }
        router.post("/v1/terminals/:name/card") { request, context in
            try await handle("card", bench) {
                let body = try await decode(CardBody.self, request, context)
                let name = context.parameters.get("name")
                try bench.insertCard(terminal: name, profile: try ProfileSource(name: body.profile, yaml: body.profileYAML),
                                     removeAfter: body.removeAfter, pinTries: body.pinTries,
                                     corruptCryptogram: body.corruptCryptogram ?? false)
                return json(["result": "inserted"], status: .created)
            }
        }
        router.delete("/v1/terminals/:name/card") { _, context in
            try await handle("card", bench) {
                json(["result": try bench.removeCard(terminal: context.parameters.get("name")) ? "removed" : "none"])
            }
        }
        router.post("/v1/terminals/:name/reset") { _, context in
            try await handle("reset", bench) {
                try bench.resetTerminal(context.parameters.get("name"))
                return json(["result": "reset"])
            }
        }
        router.post("/v1/host/accounts") { request, context in
            try await handle("accounts", bench) {
                let body = try await decode(AccountBody.self, request, context)
                return json(["result": "registered", "account": try bench.registerAccount(profile: try ProfileSource(name: body.profile, yaml: body.profileYAML))], status: .created)
            }
        }
        router.post("/v1/terminals/:name/keypad") { request, context in
            try await handle("keypad", bench) {
                let terminal = try bench.terminal(context.parameters.get("name"))
                let input = try await decode(KeypadBody.self, request, context).input()
                let delivered = try terminal.keypad.enter(input)
                bench.publish(delivered ? .promptAnswered(input) : .keypadQueued(input), terminal: terminal.settings.name)
                return json(["result": delivered ? "answered" : "queued"])
            }
        }
        router.post("/v1/terminals/:name/abort") { _, context in
            try await handle("abort", bench) {
                let terminal = try bench.terminal(context.parameters.get("name"))
                return json(["result": terminal.abort() ? "aborting" : "idle"])
            }
        }
        router.get("/v1/terminals/:name/host-queue") { _, context in
            try await handle("host-queue", bench) {
                let terminal = try bench.terminal(context.parameters.get("name"))
                return json(bench.host.queuedOutcomes(queue: terminal.settings.name).map(HostOutcomeBody.init))
            }
        }
        router.post("/v1/terminals/:name/host-queue") { request, context in
            try await handle("host-queue", bench) {
                let terminal = try bench.terminal(context.parameters.get("name"))
                let outcome = try await decode(HostOutcomeBody.self, request, context).outcome()
                guard bench.host.queuedOutcomes(queue: terminal.settings.name).count < HostOutcomeBody.maximumQueued else {
                    throw DaemonError.conflict("the host queue of terminal \(terminal.settings.name) holds \(HostOutcomeBody.maximumQueued) outcomes already; let transactions use them or clear it (DELETE)")
                }
                bench.host.enqueue(outcome, queue: terminal.settings.name)
                return json(bench.host.queuedOutcomes(queue: terminal.settings.name).map(HostOutcomeBody.init), status: .created)
            }
        }
        router.delete("/v1/terminals/:name/host-queue") { _, context in
            try await handle("host-queue", bench) {
                let terminal = try bench.terminal(context.parameters.get("name"))
                return json(bench.host.clearQueue(terminal.settings.name).map(HostOutcomeBody.init))
            }
        }
        router.get("/v1/clock") { _, _ in
            json(ClockView(bench))
        }
        router.post("/v1/clock") { request, context in
            try await handle("clock", bench) {
                guard let manual = bench.manualClock else {
                    throw DaemonError.conflict("the clock is the system clock; start the daemon with clock.mode: manual to set it")
                }
                let body = try await decode(ClockBody.self, request, context)
                switch (body.set, body.advanceSeconds) {
                case (let set?, nil):
                    guard let micros = ISO8601.microseconds(set), micros >= 0, micros < 253_402_300_800_000_000 else {
                        throw DaemonError.badRequest(field: "set", rule: "must be an ISO 8601 date and time with a zone from 1970 to 9999, e.g. 2026-11-23T10:00:00Z")
                    }
                    manual.set(secondsSince1970: micros / 1_000_000)
                case (nil, let seconds?):
                    guard seconds >= 0, seconds <= 10 * 366 * 86_400 else {
                        throw DaemonError.badRequest(field: "advanceSeconds", rule: "must be 0 to 316224000 (the clock does not go back by advancing)")
                    }
                    manual.advance(seconds: seconds)
                default:
                    throw DaemonError.badRequest(field: "set", rule: "give exactly one of set (ISO 8601) and advanceSeconds")
                }
                bench.publish(.clock(now: bench.clock.nowMicroseconds()), terminal: nil)
                return json(ClockView(bench))
            }
        }
        router.get("/v1/events") { request, _ in
            let only = request.uri.queryParameters.get("terminal").map { String($0) }
            let stream = bench.events.subscribe()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-cache"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // A comment line first, so a client knows it is subscribed before any event.
                try await writer.write(ByteBuffer(string: ": subscribed\n\n"))
                for await event in stream where only == nil || event.terminal == only {
                    let data = (try? encoder.encode(event)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                    try await writer.write(ByteBuffer(string: "event: \(event.type)\ndata: \(data)\n\n"))
                }
                try await writer.finish(nil)
            })
        }
        return router
    }
}

// MARK: Bodies and views

struct HealthView: Codable {
    let status: String
    let terminals: Int
    let clock: String
    let now: Int64
    let recovered: Int
}

struct ClockView: Codable {
    let mode: String
    let now: Int64
    let iso: String

    init(_ bench: Bench) {
        mode = bench.manualClock == nil ? "system" : "manual"
        now = bench.clock.nowMicroseconds()
        let formatter = ISO8601DateFormatter()
        iso = formatter.string(from: Date(timeIntervalSince1970: Double(now) / 1_000_000))
    }
}

/// `POST /v1/clock`'s body: exactly one of `set` (ISO 8601) and `advanceSeconds`.
public struct ClockBody: Codable, Sendable {
    public let set: String?
    public let advanceSeconds: Int64?

    public init(set: String? = nil, advanceSeconds: Int64? = nil) {
        self.set = set
        self.advanceSeconds = advanceSeconds
    }
}

/// `POST /v1/terminals/{name}/card`: a card profile, by name (`profile`, one of the configured
/// card directories') or inline (`profileYAML`), and optionally the command after which the card
/// leaves (`GENERATE AC`, `GENERATE AC#2`) and its PIN try counter.
public struct CardBody: Codable, Sendable {
    public let profile: String?
    public let profileYAML: String?
    public let removeAfter: String?
    public let pinTries: Int?
    /// The card's first cryptogram comes out with a bit flipped: an ARQC the issuer rejects.
    public let corruptCryptogram: Bool?

    public init(profile: String? = nil, profileYAML: String? = nil, removeAfter: String? = nil, pinTries: Int? = nil,
                corruptCryptogram: Bool? = nil) {
        self.profile = profile
        self.profileYAML = profileYAML
        self.removeAfter = removeAfter
        self.pinTries = pinTries
        self.corruptCryptogram = corruptCryptogram
    }
}

/// `POST /v1/host/accounts`: a card profile whose account the issuer takes afresh, by name
/// (`profile`) or inline (`profileYAML`).
public struct AccountBody: Codable, Sendable {
    public let profile: String?
    public let profileYAML: String?

    public init(profile: String? = nil, profileYAML: String? = nil) {
        self.profile = profile
        self.profileYAML = profileYAML
    }
}

/// `{"pin": "1234"}`, `{"select": 2}`, `{"confirm": true}` or `{"cancel": true}`.
public struct KeypadBody: Codable, Sendable {
    public let pin: String?
    public let select: Int?
    public let confirm: Bool?
    public let cancel: Bool?

    public init(pin: String? = nil, select: Int? = nil, confirm: Bool? = nil, cancel: Bool? = nil) {
        self.pin = pin
        self.select = select
        self.confirm = confirm
        self.cancel = cancel
    }

    func input() throws -> KeypadInput {
        let given = [pin != nil, select != nil, confirm == true, cancel == true].filter { $0 }.count
        guard given == 1 else { throw DaemonError.badRequest(field: "keypad", rule: "give exactly one of pin, select, confirm and cancel") }
        if let pin {
            guard (4...12).contains(pin.count), pin.allSatisfy(\.isASCIIDigit) else {
                throw DaemonError.badRequest(field: "pin", rule: "must be 4 to 12 digits")
            }
            return .pin(pin)
        }
        if let select {
            guard select >= 1 else { throw DaemonError.badRequest(field: "select", rule: "must be 1 or more (options are numbered from 1)") }
            return .select(select)
        }
        return confirm == true ? .confirm : .cancel
    }
}

/// `{"code": "51"}`, `{"unavailable": true}` or `{"delayMs": 1500}`.
public struct HostOutcomeBody: Codable, Sendable {
    public let code: String?
    public let unavailable: Bool?
    public let delayMs: Int?

    public init(code: String? = nil, unavailable: Bool? = nil, delayMs: Int? = nil) {
        self.code = code
        self.unavailable = unavailable
        self.delayMs = delayMs
    }

    /// The most outcomes one terminal's queue holds: a scenario queues a few; more is a mistake.
    public static let maximumQueued = 100

    /// How the CLI shows a queued outcome.
    public var text: String { code.map { "respond \($0)" } ?? (unavailable == true ? "unavailable" : "delay \(delayMs ?? 0) ms") }

    init(_ outcome: QueuedOutcome) {
        switch outcome {
        case .respond(let c): code = c.code; unavailable = nil; delayMs = nil
        case .unavailable: code = nil; unavailable = true; delayMs = nil
        case .delay(let ms): code = nil; unavailable = nil; delayMs = ms
        }
    }

    func outcome() throws -> QueuedOutcome {
        let given = [code != nil, unavailable == true, delayMs != nil].filter { $0 }.count
        guard given == 1 else { throw DaemonError.badRequest(field: "outcome", rule: "give exactly one of code, unavailable and delayMs") }
        if let code {
            guard code.count == 2, code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw DaemonError.badRequest(field: "code", rule: "must be a 2-character ISO 8583 response code such as 00, 05 or 51")
            }
            return .respond(ResponseCode(code.uppercased()))
        }
        if let delayMs {
            guard (1...600_000).contains(delayMs) else { throw DaemonError.badRequest(field: "delayMs", rule: "must be 1 to 600000") }
            return .delay(milliseconds: delayMs)
        }
        return .unavailable
    }
}

/// How `GET /v1/terminals` shows one.
public struct TerminalView: Codable, Sendable {
    public let name: String
    public let tid: String
    public let reader: String
    public let cardPresent: Bool
    public let activity: String?
    public let prompt: String?
    public let queuedKeypadInputs: Int
    public let lastSTAN: String?
    public let batchNumber: Int
    public let batchOpen: Bool
    public let batchCount: Int
    public let batchAmount: Int64

    init(_ t: TerminalRuntime, _ bench: Bench) throws {
        let record = try bench.ledger.terminal(name: t.settings.name)
        let keypad = t.keypad.snapshot
        name = t.settings.name; tid = t.settings.tid; reader = t.settings.reader.description
        cardPresent = t.reader.isCardPresent; activity = t.currentActivity; prompt = keypad.prompt?.name
        queuedKeypadInputs = keypad.queued.count; lastSTAN = record?.lastSTAN?.description
        batchNumber = record?.batchNumber ?? 1; batchOpen = record?.batchOpen ?? true
        batchCount = record?.batchCount ?? 0; batchAmount = record?.batchAmount ?? 0
    }
}

/// How `GET /v1/readers` shows one.
public struct ReaderView: Codable, Sendable {
    public let name: String
    /// `virtual`, `serial` (a fixed tty) or `udev` (a tty udev names).
    public let kind: String
    public let terminal: String
    /// A virtual reader's Unix socket.
    public let socket: String?
    public let tcpPort: UInt16?
    /// A serial reader's tty (absent while a udev reader is unplugged).
    public let path: String?
    /// A serial reader's state: `open`, `absent` or `error`.
    public let state: String?
    public let cardPresent: Bool
    /// Where the present card lives: "socket" (a process on the reader's socket) or "in-process"
    /// (the demo card, a card inserted through the API); absent when there is none.
    public let card: String?
    /// The ATR of a serial reader's card at its latest reset, in hex.
    public let atr: String?
    /// T=0 or T=1, for a serial reader's card.
    public let transmissionProtocol: Int?
    /// Why a serial reader's tty or card failed last.
    public let error: String?

    init(_ t: TerminalRuntime) {
        name = t.reader.name; terminal = t.settings.name; cardPresent = t.reader.isCardPresent
        if let serial = t.serialReader {
            let status = serial.status
            kind = t.settings.reader.kind
            socket = nil; tcpPort = nil; card = nil
            path = status.path; state = status.state; atr = status.atr; transmissionProtocol = status.transmissionProtocol
            error = status.error
        } else {
            let virtual = t.virtualReader
            kind = "virtual"; socket = t.readerSocket; tcpPort = virtual?.tcpPortBound
            card = virtual?.hasInProcessCard == true ? "in-process" : cardPresent ? "socket" : nil
            path = nil; state = nil; atr = nil; transmissionProtocol = nil; error = nil
        }
    }
}

extension TraceView {
    init(_ e: TraceEntry) {
        command = e.command
        response = e.response
        name = (try? CommandAPDU(bytes: Hex.decode(e.command.replacingOccurrences(of: "*", with: "0"))).instructionName) ?? ""
    }
}

// MARK: Helpers

/// Open requests answered later (`"wait": false`): each can be fetched for an hour after it
/// started, and at most `capacity` are kept (the oldest go first). A finished request keeps only
/// its transaction's id (the ledger holds the rest) or, for an answer with no transaction, the
/// answer itself, so thousands of them cost little memory; pruning walks the oldest end of a
/// queue, so it costs nothing per request in steady state.
final class OpenRequests: @unchecked Sendable {
    /// What a request came to.
    enum Outcome: Sendable {
        /// A transaction's answer, rebuilt from the ledger when fetched: its callback is the one
        /// committed with it, and only the words the front put beside it are kept here.
        case transaction(id: Int64, status: String, message: String, replayed: Bool)
        /// An answer with no transaction behind it (a refused request's callback).
        case answer(OpenResult)
        case failure(DaemonError)
    }

    private struct Entry {
        var task: Task<Outcome, Never>?
        let started: ContinuousClock.Instant
        var outcome: Outcome?
    }

    static let defaultCapacity = 10_000
    static let defaultLifetime: Duration = .seconds(3600)

    private let lock = NSLock()
    private var entries: [String: Entry] = [:]
    /// Ids oldest first, from `head` on (the part before it is spent, dropped now and then).
    private var order: [String] = []
    private var head = 0
    let capacity: Int
    let lifetime: Duration

    init(capacity: Int = OpenRequests.defaultCapacity, lifetime: Duration = OpenRequests.defaultLifetime) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    /// How many requests are kept (pending or finished).
    var count: Int { lock.withLock { entries.count } }

    func start(_ body: @escaping @Sendable () async throws(DaemonError) -> OpenResult) -> String {
        let id = UUID().uuidString.lowercased()
        let now = ContinuousClock.now
        lock.withLock {
            prune(now: now)
            entries[id] = Entry(task: nil, started: now, outcome: nil)
            order.append(id)
        }
        // The task records its own outcome and lets go of itself, so `result(wait: false)` only
        // has to look and a finished request holds no task.
        let task = Task { () -> Outcome in
            let outcome: Outcome
            do throws(DaemonError) {
                let result = try await body()
                // A Viva answer is rebuilt from its outbox row exactly as it was first made
                // (Bench.openResult); a Billpocket one is made from the result, and kept whole.
                if let transaction = result.transaction, result.callback != nil, transaction.provider == "viva" {
                    outcome = .transaction(id: transaction.id, status: result.status, message: result.message, replayed: result.replayed)
                } else {
                    outcome = .answer(result)
                }
            } catch {
                outcome = .failure(error)
            }
            self.lock.withLock {
                self.entries[id]?.outcome = outcome
                self.entries[id]?.task = nil
            }
            return outcome
        }
        lock.withLock {
            if entries[id]?.outcome == nil { entries[id]?.task = task }
        }
        return id
    }

    /// Drops the requests past their lifetime and the oldest beyond `capacity - 1`, from the old end.
    private func prune(now: ContinuousClock.Instant) {
        while head < order.count {
            let id = order[head]
            guard let entry = entries[id] else { head += 1; continue }
            guard entries.count >= capacity || now - entry.started > lifetime else { break }
            entries[id] = nil
            head += 1
        }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// The outcome of request `id`; nil while it runs and `wait` is false.
    func outcome(_ id: String, wait: Bool) async throws(DaemonError) -> Outcome? {
        guard let entry = lock.withLock({ entries[id] }) else {
            throw .notFound("no pending request \"\(id)\" (requests are kept for an hour, at most \(capacity) of them)")
        }
        if let done = entry.outcome { return done }
        guard wait else { return nil }
        if let task = entry.task { return await task.value }
        // Finished between the two looks.
        return lock.withLock { entries[id]?.outcome }
    }
}

/// Keys come in their declaration order (stable, and the identifying ones first); sorting them
/// cost a tenth of the JSON encoding of every reply.
func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.withoutEscapingSlashes]
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}

func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: APIContext) async throws -> T {
    let buffer: ByteBuffer
    do { buffer = try await request.body.collect(upTo: 1 << 20) } catch {
        throw DaemonError.payloadTooLarge("the request body is over 1 MiB")
    }
    do {
        return try JSONBody.decode(T.self, from: Array(buffer.readableBytesView))
    } catch let problem as JSONBody.Problem {
        throw DaemonError.badRequest(field: problem.path, rule: problem.rule)
    } catch let DecodingError.keyNotFound(key, _) {
        throw DaemonError.badRequest(field: key.stringValue, rule: "is required")
    } catch let DecodingError.typeMismatch(_, c), let DecodingError.valueNotFound(_, c) {
        throw DaemonError.badRequest(field: c.codingPath.map(\.stringValue).joined(separator: ".").nonEmpty ?? "body",
                                     rule: "has the wrong type: \(c.debugDescription)")
    } catch {
        throw DaemonError.badRequest(field: "body", rule: "must be a JSON object: \(error.localizedDescription)")
    }
}

func intParameter(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
    guard let n = Int(text), range.contains(n) else {
        throw DaemonError.badRequest(field: name, rule: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
    }
    return n
}

/// Runs a handler; a `DaemonError` becomes its HTTP status with a JSON body, anything else a 500
/// with the error's text (the daemon stays up either way).
func handle(_ route: String, _ bench: Bench, _ body: () async throws -> Response) async throws -> Response {
    let response: Response
    do {
        do { response = try await body() } catch let error as LedgerError {
            throw DaemonError(ledger: error, "ledger")
        } catch let error as WorkflowError {
            throw DaemonError(error)
        }
    } catch let error as DaemonError {
        var field: String? = nil, rule: String? = nil
        if case .badRequest(let f, let r) = error { field = f; rule = r }
        response = json(ErrorBody(error: error.description, field: field, rule: rule),
                        status: HTTPResponse.Status(code: error.status))
    } catch {
        response = json(ErrorBody(error: "\(error)", field: nil, rule: nil), status: .internalServerError)
    }
    bench.metrics.recordRequest(route: route, status: Int(response.status.code))
    return response
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}
