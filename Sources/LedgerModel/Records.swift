import EMV
import Terminal

/// The app a transaction was requested through. Stored as its raw value.
public enum Provider: String, Sendable, CaseIterable, Codable {
    case viva
    case billpocket
    case cli
    /// The Worldline Online Payments platform (card not present).
    case worldline
    /// The Citcon UPI platform.
    case citcon
    /// cardbench's emulated issuer answering an external terminal over ISO 8583 (host side).
    case iso8583
}

/// What a transaction does. Stored as its raw value.
public enum TransactionAction: String, Sendable, CaseIterable, Codable {
    case sale
    case preAuth = "pre_auth"
    case capture
    case cancel
    case refund
    case reversal

    /// Whether the action undoes an earlier transaction and so needs `originalID`.
    public var needsOriginal: Bool {
        switch self {
        case .sale, .preAuth: false
        case .capture, .cancel, .refund, .reversal: true
        }
    }
}

/// Where a transaction stands. Stored as its raw value.
public enum TransactionStatus: String, Sendable, CaseIterable, Codable {
    /// Begun (its STAN is allocated) and not yet completed.
    case inProgress = "in_progress"
    case approved
    case declined
    case failed
    /// An approved transaction a later approved cancel undid.
    case cancelled
    /// An approved transaction a later approved refund undid.
    case refunded
    /// Approved by the host, then undone by a reversal (card removed or declined afterwards).
    case reversed
}

/// One emulated device as the ledger keeps it: its STAN counter and its open batch.
public struct TerminalRecord: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, name: String, tid: String, lastSTAN: STAN?, batchNumber: Int, batchOpen: Bool, batchCount: Int, batchAmount: Int64, createdAt: Int64) {
        self.id = id
        self.name = name
        self.tid = tid
        self.lastSTAN = lastSTAN
        self.batchNumber = batchNumber
        self.batchOpen = batchOpen
        self.batchCount = batchCount
        self.batchAmount = batchAmount
        self.createdAt = createdAt
    }

    public let id: Int64
    public let name: String
    /// The Viva terminal ID: 8 digits.
    public let tid: String
    /// The last STAN handed out; nil before the first transaction.
    public let lastSTAN: STAN?
    public let batchNumber: Int
    public let batchOpen: Bool
    /// Approved sales, captures, cancels and refunds in the open batch.
    public let batchCount: Int
    /// Approved sales and captures minus approved cancels and refunds, in minor units.
    public let batchAmount: Int64
    /// Microseconds since 1970.
    public let createdAt: Int64
}

/// What the ledger needs to start a transaction. The STAN and RRN are allocated by `begin`.
public struct NewTransaction: Sendable {
    /// The terminal's name (see `Ledger.ensureTerminal`).
    public var terminal: String
    public var provider: Provider
    public var action: TransactionAction
    /// Minor units, tip included.
    public var amount: Int64
    /// The part of `amount` that is tip, in minor units.
    public var tipAmount: Int64
    /// Numeric ISO 4217 code (978 for EUR, 484 for MXN).
    public var currency: Int
    /// The caller's own reference (Viva's clientTransactionId, Billpocket's reference).
    public var clientReference: String?
    public var installments: Int?
    /// The transaction a capture, cancel, refund or reversal acts on.
    public var originalID: Int64?
    /// Front-specific fields as a JSON object.
    public var extra: String?
    /// Microseconds since 1970; the RRN's date and hour come from it.
    public var createdAt: Int64
    /// The full PAN, when it is already known; only its keyed hash is stored.
    public var pan: String?

    public init(terminal: String, provider: Provider, action: TransactionAction, amount: Int64, tipAmount: Int64 = 0,
                currency: Int, clientReference: String? = nil, installments: Int? = nil, originalID: Int64? = nil,
                extra: String? = nil, createdAt: Int64, pan: String? = nil) {
        self.terminal = terminal
        self.provider = provider
        self.action = action
        self.amount = amount
        self.tipAmount = tipAmount
        self.currency = currency
        self.clientReference = clientReference
        self.installments = installments
        self.originalID = originalID
        self.extra = extra
        self.createdAt = createdAt
        self.pan = pan
    }
}

/// What `begin` allocated: the row and its durable STAN and RRN.
public struct Started: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, uuid: String, stan: STAN, rrn: String) {
        self.id = id
        self.uuid = uuid
        self.stan = stan
        self.rrn = rrn
    }

    public let id: Int64
    /// A random UUID, lower case: Viva's `transactionId`.
    public let uuid: String
    public let stan: STAN
    public let rrn: String
}

/// A transaction's outcome as `complete` records it.
public struct Completion: Sendable {
    /// approved, declined, failed or cancelled (aborted before the host answered).
    public var status: TransactionStatus
    public var responseCode: String?
    public var message: String?
    public var authorisationCode: String?
    /// The PAN as shown to people: at most the first 8 and last 4 digits in clear.
    public var maskedPAN: String?
    /// The full PAN, only to compute its keyed hash; never stored.
    public var pan: String?
    public var brand: String?
    /// Hex.
    public var aid: String?
    public var applicationLabel: String?
    public var cardholderName: String?
    /// Hex, 8 bytes.
    public var arqc: String?
    /// Hex, 2 bytes.
    public var atc: String?
    /// Hex, 5 bytes.
    public var tvr: String?
    /// The kernel's offline data authentication report, a JSON object.
    public var oda: String?
    /// How the card was read (the kernel's entry report), a JSON object.
    public var cardEntry: String? = nil
    /// The ISO 8583 messages exchanged with an external host, masked (in order).
    public var hostMessages: [HostMessageEntry] = []
    public var cvm: String?
    public var entryMode: EntryMode?
    /// Installments agreed once the card was read; nil keeps what `begin` recorded.
    public var installments: Int?
    /// Microseconds since 1970.
    public var completedAt: Int64
    /// The host approved but the card was removed or declined afterwards: the transaction
    /// becomes `reversed` and an approved `reversal` row with its own STAN is recorded.
    public var reversal: Bool

    /// The approval of a message that acts on `original` without the card (a cancel, capture or
    /// refund the host approved): response code 00, and the original's card fields.
    public static func approved(actingOn original: StoredTransaction, completedAt: Int64) -> Completion {
        Completion(status: .approved, responseCode: "00", message: ResponseCode.approved.meaning,
                   authorisationCode: original.authorisationCode, maskedPAN: original.maskedPAN, brand: original.brand,
                   aid: original.aid, applicationLabel: original.applicationLabel, completedAt: completedAt)
    }

    public init(status: TransactionStatus, responseCode: String? = nil, message: String? = nil,
                authorisationCode: String? = nil, maskedPAN: String? = nil, pan: String? = nil, brand: String? = nil,
                aid: String? = nil, applicationLabel: String? = nil, cardholderName: String? = nil, arqc: String? = nil,
                atc: String? = nil, tvr: String? = nil, cvm: String? = nil, entryMode: EntryMode? = nil,
                completedAt: Int64, reversal: Bool = false, oda: String? = nil) {
        self.oda = oda
        self.status = status
        self.responseCode = responseCode
        self.message = message
        self.authorisationCode = authorisationCode
        self.maskedPAN = maskedPAN
        self.pan = pan
        self.brand = brand
        self.aid = aid
        self.applicationLabel = applicationLabel
        self.cardholderName = cardholderName
        self.arqc = arqc
        self.atc = atc
        self.tvr = tvr
        self.cvm = cvm
        self.entryMode = entryMode
        self.completedAt = completedAt
        self.reversal = reversal
    }
}

/// One command/response pair of a transaction's trace, as hex already masked by the kernel.
public struct TraceEntry: Sendable, Equatable {
    public var command: String
    public var response: String

    public init(command: String, response: String) {
        self.command = command
        self.response = response
    }
}

/// One ISO 8583 message of a transaction, as the trace keeps it: its fields described and masked
/// (a JSON array of `{field, name, value[, tlv]}`), never its bytes.
/// Which way a host message went, as the ledger stores it.
public enum HostMessageDirection: String, Sendable, CaseIterable, Codable {
    /// Received by cardbench ("in").
    case incoming = "in"
    /// Sent by cardbench ("out").
    case outgoing = "out"
}

public struct HostMessageEntry: Sendable, Equatable {
    public var direction: HostMessageDirection
    public var mti: String
    /// The described fields, a JSON array.
    public var fields: String

    public init(direction: HostMessageDirection, mti: String, fields: String) {
        self.direction = direction
        self.mti = mti
        self.fields = fields
    }
}

/// Where an outbox message goes.
public enum OutboxKind: String, Sendable, CaseIterable, Codable {
    /// The callback URL the real app would open.
    case callback
    /// An HTTP(S) webhook.
    case webhook
}

/// Delivery state of an outbox message.
public enum OutboxStatus: String, Sendable, CaseIterable, Codable {
    case pending
    case delivered
    /// Gave up after the ledger's maximum number of attempts.
    case failed
}

/// A message to deliver, committed together with the transaction's outcome.
public struct OutboxMessage: Sendable, Equatable {
    public var kind: OutboxKind
    public var target: String
    public var payload: String
    /// Microseconds since 1970; nil means at once (the completion time).
    public var nextAttemptAt: Int64?
    /// Set when the message has nowhere to go but the reply that carries it: it is recorded
    /// delivered at this time (microseconds since 1970), in the same commit, with one attempt.
    public var deliveredAt: Int64?

    public init(kind: OutboxKind, target: String, payload: String, nextAttemptAt: Int64? = nil, deliveredAt: Int64? = nil) {
        self.kind = kind
        self.target = target
        self.payload = payload
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
    }
}

/// One attempt to deliver an outbox message.
public struct OutboxAttempt: Sendable, Equatable {
    public enum Outcome: String, Sendable, Codable { case delivered, failed }

    /// Every stored property, for the ledger that reads them back.
    package init(outboxID: Int64, seq: Int, at: Int64, outcome: Outcome, answer: String, resend: Bool) {
        self.outboxID = outboxID
        self.seq = seq
        self.at = at
        self.outcome = outcome
        self.answer = answer
        self.resend = resend
    }

    public let outboxID: Int64
    /// 1, 2, … in the order they were made.
    public let seq: Int
    /// Microseconds since 1970, on the bench clock.
    public let at: Int64
    public let outcome: Outcome
    /// What the endpoint answered (`HTTP 200`), or why the attempt failed.
    public let answer: String
    /// Asked for (`notifications resend`), not made by the delivery loop.
    public let resend: Bool
}

/// An outbox row.
public struct OutboxEntry: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, transactionID: Int64, kind: OutboxKind, target: String, payload: String, status: OutboxStatus, attempts: Int, nextAttemptAt: Int64, lastError: String?, createdAt: Int64, deliveredAt: Int64?) {
        self.id = id
        self.transactionID = transactionID
        self.kind = kind
        self.target = target
        self.payload = payload
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.createdAt = createdAt
        self.deliveredAt = deliveredAt
    }

    public let id: Int64
    public let transactionID: Int64
    public let kind: OutboxKind
    public let target: String
    public let payload: String
    public let status: OutboxStatus
    public let attempts: Int
    public let nextAttemptAt: Int64
    public let lastError: String?
    public let createdAt: Int64
    public let deliveredAt: Int64?
}

/// A transaction row, with its terminal's name and TID.
public struct StoredTransaction: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, uuid: String, terminalID: Int64, terminalName: String, tid: String, provider: Provider, action: TransactionAction, status: TransactionStatus, amount: Int64, tipAmount: Int64, currency: Int, clientReference: String?, stan: STAN, rrn: String, authorisationCode: String?, responseCode: String?, message: String?, maskedPAN: String?, panHash: String?, brand: String?, aid: String?, applicationLabel: String?, cardholderName: String?, arqc: String?, atc: String?, tvr: String?, cvm: String?, entryMode: String?, installments: Int?, originalID: Int64?, extra: String?, createdAt: Int64, completedAt: Int64?, oda: String? = nil, cardEntry: String? = nil) {
        self.id = id
        self.uuid = uuid
        self.terminalID = terminalID
        self.terminalName = terminalName
        self.tid = tid
        self.provider = provider
        self.action = action
        self.status = status
        self.amount = amount
        self.tipAmount = tipAmount
        self.currency = currency
        self.clientReference = clientReference
        self.stan = stan
        self.rrn = rrn
        self.authorisationCode = authorisationCode
        self.responseCode = responseCode
        self.message = message
        self.maskedPAN = maskedPAN
        self.panHash = panHash
        self.brand = brand
        self.aid = aid
        self.applicationLabel = applicationLabel
        self.cardholderName = cardholderName
        self.arqc = arqc
        self.atc = atc
        self.tvr = tvr
        self.cvm = cvm
        self.entryMode = entryMode
        self.installments = installments
        self.originalID = originalID
        self.extra = extra
        self.createdAt = createdAt
        self.completedAt = completedAt
        self.oda = oda
        self.cardEntry = cardEntry
    }

    public let id: Int64
    public let uuid: String
    public let terminalID: Int64
    public let terminalName: String
    public let tid: String
    public let provider: Provider
    public let action: TransactionAction
    public let status: TransactionStatus
    public let amount: Int64
    public let tipAmount: Int64
    public let currency: Int
    public let clientReference: String?
    public let stan: STAN
    public let rrn: String
    public let authorisationCode: String?
    public let responseCode: String?
    public let message: String?
    public let maskedPAN: String?
    /// Hex HMAC-SHA256 of the full PAN under the ledger's PAN key.
    public let panHash: String?
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
    public let originalID: Int64?
    public let extra: String?
    public let createdAt: Int64
    public let completedAt: Int64?
    /// What offline data authentication did (a JSON object), for card transactions since v6.
    public var oda: String? = nil
    /// How the card was read (a JSON object), for card transactions since v7.
    public var cardEntry: String? = nil
}

/// A closed batch's totals.
public struct BatchTotals: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(terminal: String, batchNumber: Int, count: Int, amount: Int64) {
        self.terminal = terminal
        self.batchNumber = batchNumber
        self.count = count
        self.amount = amount
    }

    public let terminal: String
    public let batchNumber: Int
    public let count: Int
    public let amount: Int64
}

extension StoredTransaction {
    /// The card brand recorded (the column holds its display name).
    public var cardBrand: CardBrand? { CardBrand(displayName: brand) }

    /// The cardholder verification performed (the column holds the method's description, as
    /// `Completion` writes it); nil when none was, or for text that names no method.
    public var cardholderVerification: CVMethod? { Self.cvMethod(described: cvm) }

    /// The method whose description is `text`.
    public static func cvMethod(described text: String?) -> CVMethod? { text.flatMap { cvmByDescription[$0] } }

    /// Every named method by its description; built from `CVMethod` so it follows any rewording.
    private static let cvmByDescription: [String: CVMethod] = Dictionary(
        uniqueKeysWithValues: [CVMethod.failCVM, .plaintextPINByICC, .encipheredPINOnline, .plaintextPINByICCAndSignature,
                               .encipheredPINByICC, .encipheredPINByICCAndSignature, .signature, .noCVMRequired, .notAvailable, .consumerDevice]
            .map { ($0.description, $0) })
}

extension CardBrand {
    /// The scheme a stored brand names: the ledger keeps a card's brand by its display name
    /// (`VISA`), a wallet's by its method (`WECHATPAY`), which names none.
    public init?(displayName: String?) {
        guard let displayName, let brand = CardBrand.allCases.first(where: { $0.displayName == displayName }) else { return nil }
        self = brand
    }
}

extension Completion {
    /// The card's scheme, written as the ledger keeps it (its display name, `VISA`): what every
    /// writer of a card's brand sets.
    public var cardBrand: CardBrand? {
        get { CardBrand(displayName: brand) }
        set { brand = newValue?.displayName }
    }
}
