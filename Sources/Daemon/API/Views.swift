import EMV
import Foundation
import ISO8583
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
    /// What offline data authentication did, for card transactions.
    public let oda: ODAReport?
    /// How the card was read: interface, POS entry mode, kernel, path, a tap's limits.
    public let entry: EntryReport?
    public var trace: [TraceView]?
    /// The ISO 8583 messages exchanged with an external host, or (provider `iso8583`) received
    /// from an external terminal and answered; card numbers masked, PIN blocks withheld.
    public var hostMessages: [HostMessageView]?
    public var callbacks: [OutboxView]?
    /// With `?decode=true`: the trace decoded, the bit strings explained, the cryptograms.
    public var decoded: DecodedTrace?

    public init(_ t: StoredTransaction) {
        id = t.id; transactionId = t.uuid; terminal = t.terminalName; tid = t.tid; provider = t.provider.rawValue
        action = t.action.rawValue; status = t.status.rawValue; amount = t.amount; tipAmount = t.tipAmount; currency = t.currency
        clientReference = t.clientReference; stan = t.stan.description; rrn = t.rrn; authorisationCode = t.authorisationCode
        responseCode = t.responseCode; message = t.message; maskedPAN = t.maskedPAN; brand = t.brand; aid = t.aid
        applicationLabel = t.applicationLabel; cardholderName = t.cardholderName; arqc = t.arqc; atc = t.atc; tvr = t.tvr
        cvm = t.cvm; entryMode = t.entryMode; installments = t.installments; originalId = t.originalID
        createdAt = t.createdAt; completedAt = t.completedAt
        oda = t.oda.flatMap { try? JSONDecoder().decode(ODAReport.self, from: Data($0.utf8)) }
        entry = t.cardEntry.flatMap { try? JSONDecoder().decode(EntryReport.self, from: Data($0.utf8)) }
    }
}

/// One ISO 8583 message of a transaction, field by field.
public struct HostMessageView: Codable, Sendable, Equatable {
    /// "out" (sent by cardbench) or "in".
    public let direction: String
    public let mti: String
    /// What the MTI means: "financial request".
    public let meaning: String
    public let fields: [DescribedField]

    init(_ entry: HostMessageEntry) {
        direction = entry.direction.rawValue
        mti = entry.mti
        meaning = ISOMessage.meaning(of: entry.mti)
        fields = (try? JSONDecoder().decode([DescribedField].self, from: Data(entry.fields.utf8))) ?? []
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
    /// A manual clock's waits (`virtual`, `scripted`, `real`): docs/scenarios.md, "Virtual time".
    let waits: String?

    init(_ bench: Bench) {
        mode = bench.manualClock == nil ? "system" : "manual"
        waits = bench.manualClock?.waits.rawValue
        now = bench.clock.nowMicroseconds()
        let formatter = ISO8601DateFormatter()
        iso = formatter.string(from: Date(timeIntervalSince1970: Double(now) / 1_000_000))
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
    /// The prompt's kind (`pin`, `select`, `confirm`, `photo`) and a selection's options.
    public let promptKind: String?
    public let promptOptions: [String]?
    public let queuedKeypadInputs: Int
    public let lastSTAN: String?
    public let batchNumber: Int
    public let batchOpen: Bool
    public let batchCount: Int
    public let batchAmount: Int64

    init(_ t: TerminalRuntime, _ bench: Bench) throws {
        let record = try bench.record(of: t)
        let keypad = t.keypad.snapshot
        name = t.settings.name; tid = t.settings.tid; reader = t.settings.reader.description
        cardPresent = t.reader.isCardPresent; activity = t.currentActivity; prompt = keypad.prompt?.name
        promptKind = keypad.prompt?.kind; promptOptions = keypad.prompt?.options
        queuedKeypadInputs = keypad.queued.count; lastSTAN = record?.lastSTAN?.description
        batchNumber = record?.batchNumber ?? 1; batchOpen = record?.batchOpen ?? true
        batchCount = record?.batchCount ?? 0; batchAmount = record?.batchAmount ?? 0
    }
}

/// How `GET /v1/readers` shows one.
public struct ReaderView: Codable, Sendable {
    public let name: String
    /// `virtual`, `serial` (a fixed tty), `udev` (a tty udev names) or `pcsc` (a reader behind pcscd).
    public let kind: String
    public let terminal: String
    /// A virtual reader's Unix socket.
    public let socket: String?
    public let tcpPort: UInt16?
    /// A serial reader's tty (absent while a udev reader is unplugged).
    public let path: String?
    /// A serial reader's state: `open`, `absent` or `error`; a PC/SC reader's: `ready`,
    /// `in-use` (another program holds it), `absent` (pcscd lists no reader that matches),
    /// `no-service` (pcscd cannot be reached) or `stopped`.
    public let state: String?
    /// A PC/SC reader's pattern (`pcsc:…`).
    public let pattern: String?
    /// The PC/SC reader in use: the first one pcscd lists that the pattern matches.
    public let device: String?
    /// Every PC/SC reader the pattern matches, when more than one does (the first is used).
    public let matches: [String]?
    public let cardPresent: Bool
    /// Where the present card lives: "socket" (a process on the reader's socket) or "in-process"
    /// (the demo card, a card inserted through the API); absent when there is none.
    public let card: String?
    /// The ATR of a serial or PC/SC reader's card, in hex.
    public let atr: String?
    /// T=0 or T=1, for a serial or PC/SC reader's card.
    public let transmissionProtocol: Int?
    /// Why a serial reader's tty or card failed last; why pcscd cannot be reached or refused.
    public let error: String?

    init(_ t: TerminalRuntime) {
        name = t.reader.name; terminal = t.settings.name; cardPresent = t.reader.isCardPresent
        if let pcsc = t.pcscReader {
            let status = pcsc.status
            kind = "pcsc"
            socket = nil; tcpPort = nil; card = nil; path = nil
            pattern = pcsc.pattern.description; device = status.device
            matches = status.matches.count > 1 ? status.matches : nil
            state = status.state; atr = status.atr; transmissionProtocol = status.transmissionProtocol
            error = status.error
        } else if let serial = t.serialReader {
            let status = serial.status
            kind = t.settings.reader.kind
            socket = nil; tcpPort = nil; card = nil; pattern = nil; device = nil; matches = nil
            path = status.path; state = status.state; atr = status.atr; transmissionProtocol = status.transmissionProtocol
            error = status.error
        } else {
            let virtual = t.virtualReader
            kind = "virtual"; socket = t.readerSocket; tcpPort = virtual?.tcpPortBound; pattern = nil; device = nil; matches = nil
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

extension DecodedTrace {
    /// A stored transaction's trace decoded with what the terminal recorded beside it.
    /// `profile` names the card's profile, when the daemon knows it.
    init(_ t: StoredTransaction, trace: [TraceEntry], profile: String? = nil) {
        let entry = t.cardEntry.flatMap { try? JSONDecoder().decode(EntryReport.self, from: Data($0.utf8)) }
        var terminal = TraceDecoding.TerminalData(tvr: t.tvr, tsi: entry?.tsi, cvmResults: entry?.cvmResults, aid: t.aid,
                                                  responseCode: t.responseCode)
        terminal.profile = profile
        self = TraceDecoding.decode(trace.map { TraceDecoding.Exchange(command: $0.command, response: $0.response) }, terminal)
    }
}
