import EMV
import Synchronization

/// What the issuer knows about one card's account.
public struct IssuerAccount: Sendable {
    /// Available balance in minor units.
    public var balance: Int
    /// ISO 4217 numeric currency of the balance.
    public var currency: Int
    public var blocked: Bool
    public var lost: Bool
    public var stolen: Bool
    /// Last month the card is valid in (year, month).
    public var expiry: (year: Int, month: Int)
    /// The PIN for online verification, if the card has one.
    public var pin: String?
    public var pinTryLimit: Int
    public var onlinePINTriesRemaining: Int
    /// The card verification value printed on the card, checked on card-not-present payments.
    public var cvv: String?
    /// Fallback transactions (POS entry mode 80) are declined.
    public var declinesFallback = false

    /// Where `keys` holds an application's contactless keys when its contactless CVN differs.
    public static func contactlessKey(aid: [UInt8]) -> String { Hex.encode(aid) + "/contactless" }

    /// The keys the cryptogram of `request` was made with: the contactless ones for a tap, when the
    /// card has them.
    func keys(for request: AuthorisationRequest) -> CryptogramKeys? {
        if request.posEntryMode == "07", let k = keys[Self.contactlessKey(aid: request.aid)] { return k }
        return keys[Hex.encode(request.aid)]
    }
    /// The card's cryptogram keys by AID (hex), derived from the issuer master keys; with them
    /// the host checks ARQCs and makes ARPCs.
    public var keys: [String: CryptogramKeys]

    public init(balance: Int, currency: Int, blocked: Bool = false, lost: Bool = false, stolen: Bool = false,
                expiry: (year: Int, month: Int), pin: String? = nil, pinTryLimit: Int = 3, keys: [String: CryptogramKeys] = [:],
                cvv: String? = nil) {
        self.balance = balance
        self.currency = currency
        self.blocked = blocked
        self.lost = lost
        self.stolen = stolen
        self.expiry = expiry
        self.pin = pin
        self.pinTryLimit = pinTryLimit
        self.onlinePINTriesRemaining = pinTryLimit
        self.keys = keys
        self.cvv = cvv
    }
}

/// The declines by amount that sandboxes use, so a scenario can ask for a code with no setup.
public enum AmountTable: String, Sendable, CaseIterable {
    case none
    /// Billpocket's development environment: 10XX.00 answers response code XX.
    case billpocket
    /// Stripe Terminal's simulated reader, by the cents: .01 refer to issuer, .05 do not honour,
    /// .55 incorrect PIN, .65 frequency limit, .75 PIN tries exceeded. (.02 and .03, which ask for
    /// a PIN, are the kernel's business, not the host's.)
    case stripeCents
    /// The Worldline Online Payments sandbox's documented test case: 13.02 is declined (do not
    /// honour, status 2). The front applies it to `SALE` payments only, as the test case says.
    case worldline

    /// The code the table gives `amount` (minor units, 2-decimal currency), if any.
    public func code(for amount: Int) -> ResponseCode? {
        switch self {
        case .none:
            return nil
        case .billpocket:
            guard amount % 100 == 0, (100_000...109_999).contains(amount) else { return nil }
            let xx = amount / 100 - 1000
            return xx == 0 ? nil : ResponseCode(xx < 10 ? "0\(xx)" : "\(xx)")
        case .stripeCents:
            return [1: "01", 5: "05", 55: "55", 65: "65", 75: "75"][amount % 100].map { ResponseCode($0) }
        case .worldline:
            return amount == 1302 ? "05" : nil
        }
    }
}

/// One authorisation request as the terminal sends it (a field 55 worth of EMV data).
public struct AuthorisationRequest: Sendable {
    public enum Kind: String, Sendable { case purchase, preAuthorisation, refund }

    public let pan: String
    public let aid: [UInt8]
    public let kind: Kind
    /// Minor units.
    public let amount: Int
    public let currency: Int
    /// The ARQC and the data it was computed over, when the card produced one.
    public let arqc: [UInt8]?
    public let cryptogramData: CryptogramData?
    /// An online PIN: ISO 9564 format 0 enciphered under the host's PIN key.
    public let pinBlock: [UInt8]?
    /// When the terminal sent it, for the expiry check.
    public let date: UTCDateParts
    /// Card not present: what the cardholder typed — the CVV and the expiry date (year, month).
    public var cvv: String? = nil
    public var cardExpiry: (year: Int, month: Int)? = nil
    /// ISO 8583 field 22 positions 1–2 (05 chip, 07 contactless, 80 fallback, 90 stripe); nil: chip.
    public var posEntryMode: String? = nil
    /// A swiped card's track 2 (`PAN=YYMM…`, no sentinels), for an ISO 8583 host's field 35. Held
    /// for the request only, never stored.
    public var track2: String? = nil
    /// A mobile wallet's network token cryptogram and ECI (`NetworkTokenCryptogram`): the PAN is
    /// then the device PAN, and the issuer checks the cryptogram with the card's keys.
    public var networkTokenCryptogram: (cryptogram: [UInt8], eci: String)? = nil

    public init(pan: String, aid: [UInt8], kind: Kind = .purchase, amount: Int, currency: Int, arqc: [UInt8]?,
                cryptogramData: CryptogramData?, pinBlock: [UInt8]? = nil, date: UTCDateParts) {
        self.pan = pan
        self.aid = aid
        self.kind = kind
        self.amount = amount
        self.currency = currency
        self.arqc = arqc
        self.cryptogramData = cryptogramData
        self.pinBlock = pinBlock
        self.date = date
    }
}

/// The host's answer.
public struct AuthorisationResponse: Sendable, Equatable {
    public let responseCode: ResponseCode
    /// Six characters when approved (ISO 8583 field 38), nil otherwise.
    public let authorisationCode: String?
    /// Tag 91 for the card: ARPC‖ARC (method 1) or ARPC‖CSU (method 2), when the host has the keys.
    public let issuerAuthenticationData: [UInt8]?
    /// Which rule decided: "queue", "issuer", "cryptogram", "amount table" or "approve".
    public let rule: String
    /// A human message: the code's meaning, or why the rule fired.
    public let message: String
    /// How long the I/O layer should hold the answer back (a simulated slow issuer), in ms.
    public let delayMilliseconds: Int
    /// Issuer scripts for the card (each a whole 71 or 72 template), as an ISO 8583 host sends
    /// them in field 55: 71 runs before the second GENERATE AC, 72 after (Book 3 §10.10).
    public var issuerScripts: [[UInt8]] = []

    public init(responseCode: ResponseCode, authorisationCode: String?, issuerAuthenticationData: [UInt8]?,
                issuerScripts: [[UInt8]] = [], rule: String, message: String, delayMilliseconds: Int) {
        self.responseCode = responseCode
        self.authorisationCode = authorisationCode
        self.issuerAuthenticationData = issuerAuthenticationData
        self.issuerScripts = issuerScripts
        self.rule = rule
        self.message = message
        self.delayMilliseconds = delayMilliseconds
    }

    public var isApproved: Bool { responseCode.isApproval }
}

/// The host could not answer: the terminal goes on as "unable to go online" (Y3/Z3).
public enum HostError: Error, Equatable, Sendable, CustomStringConvertible {
    case unavailable(reason: String)

    public var description: String {
        switch self {
        case .unavailable(let reason): "issuer unavailable: \(reason)"
        }
    }
}

/// A one-shot outcome a scenario or the API queues for the next authorisation.
public enum QueuedOutcome: Sendable, Equatable {
    case respond(ResponseCode)
    case unavailable
    /// Answer by the other rules, but late.
    case delay(milliseconds: Int)
}

/// An issuer and acquirer emulator that decides by rules, first match wins: queued one-shot
/// outcomes; the card's issuer state (blocked, lost, stolen, expired, online PIN, balance); the
/// ARQC check when it has the card's keys; the amount table; otherwise approve.
///
/// Approvals debit the balance; `credit` gives it back for cancels, refunds and reversals.
/// Thread-safe: one host serves every terminal.
public final class EmulatedHost: Sendable {
    struct State {
        var accounts: [String: IssuerAccount] = [:]
        /// One-shot outcomes per queue name (a terminal's name; "" for a host used alone).
        var queues: [String: [QueuedOutcome]] = [:]
        var unavailable = false
        var authorisationCodes: SplitMix64
        /// Approvals still standing, by authorisation code: what a cancel or capture by reference
        /// (no card presented) acts on. At most `approvalsHeld`: the oldest is released first,
        /// as an issuer releases a hold after some days, so a bench that sells for days keeps
        /// a bounded memory.
        var approvals: [String: (pan: String, amount: Int, kind: AuthorisationRequest.Kind, serial: Int)] = [:]
        /// The codes in the order they were approved, with their serials (a code can come back).
        var approvalOrder: [(code: String, serial: Int)] = []
        var approvalOrderStart = 0
        var approvalSerial = 0

        mutating func holdApproval(_ code: String, pan: String, amount: Int, kind: AuthorisationRequest.Kind) {
            approvalSerial += 1
            approvals[code] = (pan, amount, kind, approvalSerial)
            approvalOrder.append((code, approvalSerial))
            while approvalOrder.count - approvalOrderStart > EmulatedHost.approvalsHeld {
                let oldest = approvalOrder[approvalOrderStart]
                approvalOrderStart += 1
                if approvals[oldest.code]?.serial == oldest.serial { approvals[oldest.code] = nil }
            }
            // Drop the released part of the order once it is most of it.
            if approvalOrderStart > EmulatedHost.approvalsHeld {
                approvalOrder.removeFirst(approvalOrderStart)
                approvalOrderStart = 0
            }
        }
    }

    /// How many approvals the host holds for cancels and captures by reference.
    public static let approvalsHeld = 10_000

    /// How many approvals it holds now (for tests).
    var heldApprovals: Int { state.withLock { $0.approvals.count } }

    private let state: Mutex<State>
    /// The PIN encryption key online PIN blocks arrive under.
    public let pinKey: TDESKey
    public let amountTable: AmountTable

    /// - Parameter seed: seeds the authorisation codes, so a scenario run is reproducible.
    public init(pinKey: TDESKey, amountTable: AmountTable, seed: UInt64 = 0x5EED_CA4D) {
        self.pinKey = pinKey
        self.amountTable = amountTable
        state = Mutex(State(authorisationCodes: SplitMix64(state: seed)))
    }

    /// Registers (or replaces) a card's account. The PAN is held in memory only.
    public func setAccount(pan: String, _ account: IssuerAccount) { state.withLock { $0.accounts[pan] = account } }

    /// Forgets a card: its next authorisation is declined as unknown (14).
    public func removeAccount(pan: String) { state.withLock { _ = $0.accounts.removeValue(forKey: pan) } }

    public func account(pan: String) -> IssuerAccount? { state.withLock { $0.accounts[pan] } }

    /// Queues a one-shot outcome for the next authorisation asked through `queue` (a terminal's
    /// name, so a scenario's queued decline hits its own terminal and no other).
    public func enqueue(_ outcome: QueuedOutcome, queue: String = "") {
        state.withLock { $0.queues[queue, default: []].append(outcome) }
    }

    /// The outcomes still queued for `queue`, next first.
    public func queuedOutcomes(queue: String = "") -> [QueuedOutcome] { state.withLock { $0.queues[queue] ?? [] } }

    public var queuedOutcomes: [QueuedOutcome] { queuedOutcomes() }

    /// Empties `queue`; returns what it held.
    @discardableResult
    public func clearQueue(_ queue: String = "") -> [QueuedOutcome] {
        state.withLock { $0.queues.removeValue(forKey: queue) ?? [] }
    }

    /// Simulates the issuer being down until set back.
    public func setUnavailable(_ down: Bool) { state.withLock { $0.unavailable = down } }

    /// Voids `amount` of the standing approval `authorisationCode` (a cancel, or the part of a
    /// pre-authorisation a capture did not take): the card's balance gets it back. False when the
    /// host has no such approval (issued before a restart, voided in full already, or one of more
    /// than `approvalsHeld` ago).
    @discardableResult
    public func void(authorisationCode: String, amount: Int) -> Bool {
        state.withLock { s in
            guard let approval = s.approvals[authorisationCode], amount > 0, amount <= approval.amount else { return false }
            s.accounts[approval.pan]?.balance += approval.kind == .refund ? -amount : amount
            if amount == approval.amount {
                s.approvals[authorisationCode] = nil
            } else {
                s.approvals[authorisationCode] = (approval.pan, approval.amount - amount, approval.kind, approval.serial)
            }
            return true
        }
    }

    /// Gives an amount back to the card's balance (cancel, refund, reversal).
    public func credit(pan: String, amount: Int) {
        state.withLock { s in s.accounts[pan]?.balance += amount }
    }

    /// Undoes an approval the terminal could not complete (the card was removed, or declined it at
    /// the second GENERATE AC): the balance moves back as if the authorisation had never happened.
    public func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) {
        guard approval.isApproved else { return }
        state.withLock { s in
            if let code = approval.authorisationCode { s.approvals[code] = nil }
            if request.kind == .refund { s.accounts[request.pan]?.balance -= request.amount } else { s.accounts[request.pan]?.balance += request.amount }
        }
    }

    /// Decides an authorisation with the host's own amount table and the default queue.
    public func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        try authorise(request, queue: "", amountTable: amountTable)
    }

    /// Decides an authorisation taking one-shot outcomes from `queue` and scripted declines from
    /// `amountTable` (each front has its own: Billpocket's 10XX.00, Viva's cents), looked up by
    /// `tableAmount` when given (Billpocket's table keys on the amount without the tip, which the
    /// request's total includes) and by the request's amount otherwise.
    /// - Parameter approveUnknownCards: a card the issuer has no account for is approved (after
    ///   the amount table) instead of declined 14, as card-not-present sandboxes do for any
    ///   number that passes the Luhn check.
    public func authorise(_ request: AuthorisationRequest, queue: String, amountTable: AmountTable, tableAmount: Int? = nil,
                          approveUnknownCards: Bool = false) throws(HostError)
        -> AuthorisationResponse {
        let result: Result<AuthorisationResponse, HostError> = state.withLock { s in
            var delay = 0
            while let first = s.queues[queue]?.first, case .delay(let ms) = first {
                s.queues[queue]!.removeFirst()
                delay += ms
            }
            if s.unavailable { return .failure(.unavailable(reason: "the issuer is set unavailable")) }
            if let queued = s.queues[queue]?.first {
                s.queues[queue]!.removeFirst()
                switch queued {
                case .unavailable: return .failure(.unavailable(reason: "a queued outcome"))
                case .respond(let code):
                    return .success(finish(&s, request, code, rule: "queue", message: code.meaning, delay: delay))
                case .delay: break
                }
            }
            return .success(decide(&s, request, amountTable: amountTable, tableAmount: tableAmount, delay: delay,
                                   approveUnknownCards: approveUnknownCards))
        }
        return try result.get()
    }

    private func decide(_ s: inout State, _ r: AuthorisationRequest, amountTable: AmountTable, tableAmount: Int? = nil, delay: Int,
                        approveUnknownCards: Bool = false) -> AuthorisationResponse {
        func decline(_ code: ResponseCode, _ rule: String, _ message: String? = nil) -> AuthorisationResponse {
            finish(&s, r, code, rule: rule, message: message ?? code.meaning, delay: delay)
        }
        guard var account = s.accounts[r.pan] else {
            guard approveUnknownCards, r.networkTokenCryptogram == nil else {
                return decline("14", "issuer", r.networkTokenCryptogram == nil ? "no such card at this issuer" : "no such token at this issuer: its cryptogram cannot be checked")
            }
            if let expiry = r.cardExpiry, (r.date.year, r.date.month) > expiry { return decline("54", "issuer") }
            if let code = amountTable.code(for: tableAmount ?? r.amount) { return decline(code, "amount table") }
            return finish(&s, r, .approved, rule: "approve", message: "approved: a card this issuer does not know, as the sandbox approves any valid number",
                          delay: delay)
        }
        if account.lost { return decline("41", "issuer") }
        if account.stolen { return decline("43", "issuer") }
        if account.blocked { return decline("62", "issuer") }
        if r.posEntryMode == "80", account.declinesFallback {
            return decline("05", "issuer", "the issuer declines fallback transactions (POS entry mode 80)")
        }
        if (r.date.year, r.date.month) > account.expiry { return decline("54", "issuer") }
        if let typed = r.cardExpiry, typed != account.expiry {
            return decline("54", "issuer", "the expiry date given is not the card's")
        }
        if let typed = r.cvv, let cvv = account.cvv, typed != cvv {
            return decline("N7", "issuer", "CVV2 verification failed")
        }
        if let block = r.pinBlock {
            guard let pin = account.pin else { return decline("55", "issuer", "online PIN sent for a card without one") }
            guard account.onlinePINTriesRemaining > 0 else { return decline("75", "issuer") }
            let offered = try? PINBlock.decodeFormat0(block, pan: r.pan, key: pinKey)
            if offered != pin {
                account.onlinePINTriesRemaining -= 1
                s.accounts[r.pan] = account
                return decline(account.onlinePINTriesRemaining == 0 ? "75" : "55", "issuer")
            }
            account.onlinePINTriesRemaining = account.pinTryLimit
            s.accounts[r.pan] = account
        }
        if r.kind != .refund, account.balance < r.amount { return decline("51", "issuer") }
        if let (cryptogram, eci) = r.networkTokenCryptogram {
            // The card's contact keys (its first application's): the wallet's cryptogram is the card's, not a tap's.
            guard let keys = account.keys.filter({ !$0.key.hasSuffix("/contactless") }).sorted(by: { $0.key < $1.key }).first?.value else {
                return decline("05", "cryptogram", "the issuer holds no keys for this token, so its cryptogram cannot be checked")
            }
            guard NetworkTokenCryptogram.verify(cryptogram, keys: keys, pan: r.pan, expiry: account.expiry, amount: r.amount, currency: r.currency, eci: eci) else {
                return decline("82", "cryptogram", "network token cryptogram verification failed")
            }
        }
        if let arqc = r.arqc, let data = r.cryptogramData, let keys = account.keys(for: r) {
            let valid = (try? keys.verify(arqc, data)) ?? false
            if !valid { return decline("82", "cryptogram", "ARQC verification failed") }
        }
        if let code = amountTable.code(for: tableAmount ?? r.amount) { return decline(code, "amount table") }
        return finish(&s, r, .approved, rule: "approve", message: ResponseCode.approved.meaning, delay: delay)
    }

    /// Applies an outcome: debits the balance and issues an authorisation code on approval, and
    /// computes the issuer authentication data whenever the host holds the card's keys.
    private func finish(_ s: inout State, _ r: AuthorisationRequest, _ code: ResponseCode, rule: String, message: String,
                        delay: Int) -> AuthorisationResponse {
        var authCode: String? = nil
        if code.isApproval {
            if r.kind == .refund { s.accounts[r.pan]?.balance += r.amount } else { s.accounts[r.pan]?.balance -= r.amount }
            let n = s.authorisationCodes.next() % 1_000_000
            authCode = String(repeating: "0", count: 6 - String(n).count) + String(n)
            s.holdApproval(authCode!, pan: r.pan, amount: r.amount, kind: r.kind)
        }
        var issuerData: [UInt8]? = nil
        if let arqc = r.arqc, let keys = s.accounts[r.pan]?.keys(for: r) {
            let atc = r.cryptogramData?.tags[0x9F36]
            // Method 2's card status update: byte 2 bit 8 tells the card the issuer approved.
            let input: ARPCInput = keys.cvn.arpcMethod == 1
                ? .responseCode(code.bytes)
                : .cardStatusUpdate([0x00, code.isApproval ? 0x80 : 0x00, 0x00, 0x00])
            issuerData = try? keys.issuerAuthenticationData(arqc: arqc, input, atc: atc)
        }
        return AuthorisationResponse(responseCode: code, authorisationCode: authCode, issuerAuthenticationData: issuerData,
                                     rule: rule, message: message, delayMilliseconds: delay)
    }
}
