import ArgumentParser
import Daemon
import EMV
import Foundation
import Terminal
import NIOHTTP1

/// Where the daemon is: `--socket` on every daemon command.
struct DaemonOptions: ParsableArguments {
    @Option(help: "The daemon's control socket, or an http(s)://HOST:PORT base URL (default: $CARDBENCH_SOCKET, ./.cardbench/run/control.sock, /run/cardbench/control.sock). Over http(s) the API token comes from $CARDBENCH_TOKEN, the file $CARDBENCH_TOKEN_FILE names, or the daemon's api.token.")
    var socket: String?

    var client: DaemonClient { DaemonClient(endpoint: socket ?? DaemonClient.defaultEndpoint()) }

    /// Sends a request; a daemon error becomes a CLIError with its message (exit 1, or 2 for a 400).
    func call(_ method: HTTPMethod, _ path: String, json body: (any Encodable)? = nil) async throws -> Data {
        let reply: DaemonClient.Reply
        do {
            try client.checkReachable()
            reply = try await client.send(method, path, json: body)
        } catch let error as DaemonClient.Unreachable {
            throw CLIError(message: error.description)
        }
        guard (200..<300).contains(reply.status) else {
            throw CLIError(message: reply.errorMessage, code: reply.status == 400 ? 2 : 1)
        }
        return reply.body
    }
}

func decodeReply<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
    do { return try JSONDecoder().decode(T.self, from: data) } catch {
        throw CLIError(message: "the daemon's answer is not what this cardbench expects: \(error)")
    }
}

func printRaw(_ data: Data) {
    // Pretty-print the daemon's JSON as is.
    if let object = try? JSONSerialization.jsonObject(with: data),
       let pretty = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]) {
        print(String(decoding: pretty, as: UTF8.self))
    } else {
        print(String(decoding: data, as: UTF8.self))
    }
}

func pathComponent(_ s: String) -> String {
    s.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? s
}

struct OpenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Open a request URL on a terminal, as the phone would hand it to the app, and print the callback URL.",
        discussion: """
        The daemon runs the transaction (a card must be presented: `cardbench card insert`, or the \
        daemon's --demo) and answers with the callback URL the real app would open. Exit status 0 \
        whenever a callback was produced, approved or declined; 1 when none could be (no callback \
        in the URL, a busy or unknown terminal, the daemon unreachable); 2 for a request the \
        daemon refused as malformed without a callback.
        """
    )

    @Argument(help: "The request URL, e.g. 'vivapayclient://pay/v1?callback=mycallbackscheme://result&action=sale&amount=1200&…'.")
    var url: String

    @Option(help: "The terminal (default: the first configured).")
    var terminal: String?

    @Flag(help: "Print the whole answer as JSON (callback, its fields, the stored transaction).")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.POST, "/v1/open", json: OpenRequest(url: url, terminal: terminal))
        if json {
            printRaw(data)
            return
        }
        let result = try decodeReply(OpenResult.self, data)
        guard let callback = result.callback else { throw CLIError(message: result.message) }
        print(callback)
    }
}

struct TxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tx",
        abstract: "Transactions in the daemon's ledger.",
        subcommands: [TxList.self, TxShow.self]
    )
}

struct TxList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The latest transactions, newest first.")

    @Option(help: "Only this terminal's.")
    var terminal: String?

    @Option(help: "How many (1–1000).")
    var limit: Int = 20

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        var path = "/v1/transactions?limit=\(limit)"
        if let terminal { path += "&terminal=\(pathComponent(terminal))" }
        let data = try await daemon.call(.GET, path)
        if json { return printRaw(data) }
        let rows = try decodeReply([TransactionView].self, data)
        if rows.isEmpty { print("no transactions") }
        for t in rows {
            let card = t.maskedPAN.map { " \($0)" } ?? ""
            let code = t.responseCode.map { " \($0)" } ?? ""
            print("#\(t.id) \(t.terminal) STAN \(t.stan) \(t.provider) \(t.action) \(Money.decimal(t.amount)) \(t.status)\(code)\(card) \(t.transactionId)")
        }
    }
}

struct TxShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "One transaction with its trace, its ISO 8583 messages and its callbacks.")

    @Argument(help: "The ledger id or the transactionId (UUID).")
    var id: String

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.GET, "/v1/transactions/\(pathComponent(id))")
        if json { return printRaw(data) }
        let t = try decodeReply(TransactionView.self, data)
        print("#\(t.id) \(t.provider) \(t.action) on \(t.terminal) (TID \(t.tid)): \(t.status) \(t.responseCode ?? "") \(t.message ?? "")")
        print("amount \(Money.decimal(t.amount)) (tip \(Money.decimal(t.tipAmount))) currency \(t.currency)  STAN \(t.stan)  RRN \(t.rrn)  auth \(t.authorisationCode ?? "-")")
        if let pan = t.maskedPAN { print("card: \(t.brand ?? "") \(pan) \(t.cardholderName ?? "")  AID \(t.aid ?? "-") \(t.applicationLabel ?? "")") }
        if let arqc = t.arqc { print("ARQC \(arqc)  ATC \(t.atc ?? "-")  TVR \(t.tvr ?? "-")  CVM \(t.cvm ?? "-")") }
        if let tvr = t.tvr, let bits = try? TVR(hex: tvr), !bits.setBitNames.isEmpty {
            print("TVR bits: \(bits.setBitNames.joined(separator: "; "))")
        }
        for (i, line) in (t.entry?.lines ?? []).enumerated() { print(i == 0 ? "entry: \(line)" : "       \(line)") }
        for (i, line) in (t.oda?.lines ?? []).enumerated() { print(i == 0 ? "ODA: \(line)" : "     \(line)") }
        if let reference = t.clientReference { print("client reference: \(reference)") }
        print("transactionId \(t.transactionId)")
        for c in t.callbacks ?? [] { print("callback (\(c.status), \(c.attempts) attempt(s)): \(c.payload)") }
        for (i, e) in (t.trace ?? []).enumerated() {
            print(String(format: "%3d ", i + 1) + "> \(e.command)  \(e.name)")
            print("    < \(e.response)")
        }
        printHostMessages(t.hostMessages ?? [])
    }
}

/// ISO 8583 messages as the trace keeps them, field by field (`tx show`, `iso8583 echo`).
func printHostMessages(_ messages: [HostMessageView]) {
    for m in messages {
        print("ISO 8583 \(m.direction == "out" ? ">" : "<") \(m.mti) (\(m.meaning))")
        for f in m.fields {
            print("    \(f.field) \(f.name): \(f.value)")
            for tag in f.tlv ?? [] { print("        \(tag.tag) \(tag.name): \(tag.value)") }
        }
    }
}

struct TerminalsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "terminals", abstract: "The daemon's terminals: TID, reader, card, activity, prompt, STAN, batch.")

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.GET, "/v1/terminals")
        if json { return printRaw(data) }
        for t in try decodeReply([TerminalView].self, data) {
            print("\(t.name) TID \(t.tid) reader \(t.reader) card \(t.cardPresent ? "present" : "absent") \(t.activity.map { "busy: \($0)" } ?? "idle")"
                  + "\(t.prompt.map { ", asking for \($0)" } ?? "") last STAN \(t.lastSTAN ?? "-") batch \(t.batchNumber) \(t.batchOpen ? "open" : "closed") "
                  + "(\(t.batchCount) for \(Money.decimal(t.batchAmount)))")
        }
    }
}

struct KeypadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keypad",
        abstract: "Answer a terminal's prompt (or queue the answer for its next prompt).",
        discussion: "Exactly one of --pin, --select, --confirm, --cancel. Options of a selection are numbered from 1."
    )

    @Argument(help: "The terminal.")
    var terminal: String

    @Option(help: "A PIN, 4 to 12 digits.")
    var pin: String?

    @Option(help: "Pick option N (from 1).")
    var select: Int?

    @Flag(help: "Answer yes.")
    var confirm = false

    @Option(help: "Give the answer this many seconds after its prompt shows, as a slow cardholder (queued until then).")
    var after: Double?

    @Flag(help: "Cancel (answers any prompt).")
    var cancel = false

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        let given = [pin != nil, select != nil, confirm, cancel].filter { $0 }.count
        guard given == 1 else { throw CLIError(message: "give exactly one of --pin, --select, --confirm and --cancel", code: 2) }
    }

    func run() async throws {
        let data = try await daemon.call(.POST, "/v1/terminals/\(pathComponent(terminal))/keypad",
                                         json: KeypadBody(pin: pin, select: select, confirm: confirm ? true : nil, cancel: cancel ? true : nil,
                                                          afterSeconds: after))
        let answer = try decodeReply([String: String].self, data)
        print(answer["result"] == "answered" ? "answered the prompt on \(terminal)" : "queued for the next prompt on \(terminal)")
    }
}

struct AbortCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "abort", abstract: "Stop the transaction in progress on a terminal.")

    @Argument(help: "The terminal.")
    var terminal: String

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.POST, "/v1/terminals/\(pathComponent(terminal))/abort")
        let answer = try decodeReply([String: String].self, data)
        print(answer["result"] == "aborting" ? "aborting the transaction on \(terminal)" : "\(terminal) is idle: nothing to abort")
    }
}

struct HostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "host", abstract: "The emulated host.", subcommands: [HostQueue.self])
}

struct HostQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Queue a one-shot host outcome for a terminal's next authorisation, list or clear its queue.",
        discussion: "With --code, --unavailable or --delay-ms: queue it. With none: list. --clear empties the queue."
    )

    @Argument(help: "The terminal.")
    var terminal: String

    @Option(help: "Answer with this response code (e.g. 51, 05, 91).")
    var code: String?

    @Flag(help: "The issuer cannot be reached (the terminal decides Y3/Z3).")
    var unavailable = false

    @Option(name: .customLong("delay-ms"), help: "Answer this many milliseconds late.")
    var delayMs: Int?

    @Flag(help: "Empty the queue.")
    var clear = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let path = "/v1/terminals/\(pathComponent(terminal))/host-queue"
        let data: Data
        if clear {
            data = try await daemon.call(.DELETE, path)
            print("cleared \(try decodeReply([HostOutcomeBody].self, data).count) queued outcome(s) on \(terminal)")
            return
        }
        if code != nil || unavailable || delayMs != nil {
            data = try await daemon.call(.POST, path, json: HostOutcomeBody(code: code, unavailable: unavailable ? true : nil, delayMs: delayMs))
        } else {
            data = try await daemon.call(.GET, path)
        }
        let rows = try decodeReply([HostOutcomeBody].self, data)
        print(rows.isEmpty ? "\(terminal): nothing queued" : "\(terminal) queue, next first: " + rows.map(\.text).joined(separator: ", "))
    }
}

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "events", abstract: "Follow the daemon's events: cards, prompts, outcomes.")

    @Option(help: "Only this terminal's.")
    var terminal: String?

    @Option(help: "Stop after this many events.")
    var count: Int?

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        var path = "/v1/events"
        if let terminal { path += "?terminal=\(pathComponent(terminal))" }
        var seen = 0
        var type = ""
        do {
            try daemon.client.checkReachable()
            try await daemon.client.stream(path) { line in
                if line.hasPrefix("event: ") { type = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") {
                    print("\(type) \(line.dropFirst(6))")
                    fflush(nil)
                    seen += 1
                    if let count, seen >= count { return false }
                }
                return true
            }
        } catch let error as DaemonClient.Unreachable {
            throw CLIError(message: error.description)
        }
    }
}

struct ClockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "clock", abstract: "Show the daemon's clock, or set or advance it (manual clock only).")

    @Option(help: "Set it to this ISO 8601 time, e.g. 2026-11-23T22:59:58-06:00.")
    var set: String?

    @Option(help: "Move it forward this many seconds.")
    var advance: Int64?

    @OptionGroup var daemon: DaemonOptions

    struct View: Decodable {
        let mode: String
        let iso: String
    }

    func run() async throws {
        let data = set == nil && advance == nil
            ? try await daemon.call(.GET, "/v1/clock")
            : try await daemon.call(.POST, "/v1/clock", json: ClockBody(set: set, advanceSeconds: advance))
        let view = try decodeReply(View.self, data)
        print("\(view.iso) (\(view.mode) clock)")
    }
}

struct ReadersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "readers", abstract: "The daemon's readers: kind, path or PC/SC reader, state, card present, ATR.")

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.GET, "/v1/readers")
        if json { return printRaw(data) }
        for r in try decodeReply([ReaderView].self, data) {
            let place = r.pattern.map { "\($0) → \(r.device.map { "\"\($0)\"" } ?? "(no such reader)")" } ?? r.socket ?? r.path ?? "(unplugged)"
            var line = "\(r.name) \(r.kind) \(place)\(r.tcpPort.map { " 127.0.0.1:\($0)" } ?? "")\(r.state.map { " \($0)" } ?? "") terminal \(r.terminal)"
            line += " card \(r.cardPresent ? "present" + (r.card.map { " (\($0))" } ?? "") : "absent")"
            if let atr = r.atr { line += " ATR \(atr)\(r.transmissionProtocol.map { " T=\($0)" } ?? "")" }
            if let error = r.error { line += " error: \(error)" }
            if let matches = r.matches { line += " (the pattern also matches: \(matches.dropFirst().joined(separator: ", ")))" }
            print(line)
        }
    }
}
