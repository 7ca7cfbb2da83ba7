import EMV
import Foundation
import Fronts
import LedgerModel
import Synchronization
import Terminal


/// How the Citcon platform behaves (`citcon.*` in the configuration).
public struct CitconSettings: Sendable {
    /// The SDK document version whose rules apply: "2.1.0" or "2.2.0" (methods offered).
    public var version = "2.2.0"
    /// Access tokens live 24 hours, as the platform's.
    public var tokenLifetime: Duration = .seconds(24 * 3600)
    /// A card number the issuer does not know, passing Luhn, is approved.
    public var approveUnknownCards = true
    /// Scripted declines of card charges by amount (Citcon documents none: off by default).
    public var amountTable: AmountTable = .none

    public init() {}
}

/// The Citcon UPI platform: access tokens, charges by card (the bench's issuer, 3-D Secure by a
/// challenge page) and by simulated wallets (a wallet page, the API, or the outcome table),
/// inquiry, captures, cancels and refunds, and signed IPNs through the outbox (docs/citcon.md).
///
/// Every authorisation, capture, cancel and refund is a ledger transaction of provider `citcon`
/// on the merchant's ledger terminal `citcon.<merchantId>`, committed with the charge's state
/// and its IPN in one write before the answer.
public final class CitconFront: Sendable {
    public let context: WorkflowContext
    let store: any CitconStore
    public let settings: CitconSettings
    /// Card data of charges waiting for their 3-D Secure challenge, by charge id: in memory only.
    private let pendingCards = Mutex<[String: (pan: String, expiry: String, cvv: String?)]>([:])

    /// The platform on a bench: its context, the store of its records, and its settings.
    public init(context: WorkflowContext, store: any CitconStore, settings: CitconSettings) {
        self.context = context
        self.store = store
        self.settings = settings
    }

    var nowMillis: Int64 { context.clock.nowMicroseconds() / 1000 / 1000 * 1000 }

    func stored<T>(_ doing: String, _ body: () throws -> T) throws(CitconError) -> T {
        do { return try body() } catch let error as LedgerError {
            if case .invalid(let field, let rule) = error { throw .badRequest(field, rule) }
            throw .internalError("\(doing): \(error)")
        } catch {
            throw .internalError("\(doing): \(error)")
        }
    }

    /// The key or token of an `Authorization` value, with or without the `Bearer` word.
    static func bearer(_ authorization: String?) -> String? {
        guard var value = authorization?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.lowercased().hasPrefix("bearer ") { value = String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces) }
        return value.isEmpty ? nil : value
    }

    // MARK: Access tokens

    /// `POST /v1/access-tokens`: a client or server token for the merchant whose key authorises the request.
    public func accessToken(authorization: String?, body: [UInt8]) throws(CitconError) -> CitconResult {
        guard let key = Self.bearer(authorization) else { throw .unauthorised("unauthorized: the Authorization header must carry the merchant key") }
        guard let merchant = try stored("find the merchant", { try store.citconMerchant(key: key) }) else {
            throw .unauthorised("unauthorized: unknown merchant key")
        }
        let type: String
        do throws(WorldlineError) {
            type = try WorldlineJSON.parse(body).requiredString("token_type", maxLength: 16)
        } catch {
            throw CitconError.badRequest(error.propertyName ?? "token_type", "must be client or server")
        }
        guard type == "client" || type == "server" else { throw .badRequest("token_type", "must be client or server") }
        let token = "UPI_" + PlatformText.hex(32)
        let now = nowMillis
        let expiry = now + settings.tokenLifetime.components.seconds * 1000
        try stored("record the token") { try store.storeCitconToken(token, merchantID: merchant.merchantID, type: type, at: now, expiresAt: expiry) }
        let permission = type == "server" ? ["charge", "inquiry", "capture", "refund", "cancel", "vault"] : ["inquiry", "charge", "vault", "installment"]
        return .accessToken(token: token, type: type, expiry: expiry, permission: permission)
    }

    /// The merchant an access token acts for; `server` only for captures, cancels and refunds.
    public func merchant(authorization: String?, needsServer: Bool = false) throws(CitconError) -> String {
        guard let token = Self.bearer(authorization) else { throw .unauthorised("unauthorized: no access token") }
        guard let found = try stored("read the token", { try store.citconToken(token) }) else { throw .unauthorised("unauthorized: unknown access token") }
        guard found.expiresAt > nowMillis else { throw .unauthorised("unauthorized: the access token has expired") }
        if needsServer, found.type != "server" { throw .unauthorised("unauthorized: a client token may only charge and inquire") }
        return found.merchantID
    }

    func terminal(_ merchantID: String) -> String { "citcon.\(merchantID)" }

    // MARK: Charges

    /// `POST /v1/charges`.
    public func createCharge(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        let request = try CitconChargeRequest.parse(body, version: settings.version)
        return .charge(try createCharge(merchantID: merchantID, request), client: request.clients.first)
    }

    func createCharge(merchantID: String, _ given: CitconChargeRequest) throws(CitconError) -> CitconCharge {
        var request = given
        var paidWithVault: String? = nil
        if let token = request.vaultToken {
            // A vaulted card pays: the consumer's own, its CVV if the app sent one.
            guard let vaulted = try stored("read the vault", { try store.citconVaultCard(token: token, merchantID: merchantID) }) else {
                throw .badRequest("payment.token", "is not a vaulted card of this merchant")
            }
            guard vaulted.consumer == request.consumerReference else {
                throw .badRequest("consumer.reference", "the vaulted card is another consumer's")
            }
            request = request.withCard((vaulted.pan, vaulted.expiry, nil))
            paidWithVault = token
        }
        var charge = CitconCharge(id: PlatformText.hex(16), chargeToken: PlatformText.hex(16), merchantID: merchantID, reference: request.reference,
                                  amount: request.amount, currency: request.currency, country: request.country, autoCapture: request.autoCapture,
                                  note: request.note, method: request.method ?? "", status: request.method == nil ? .initiated : .pending,
                                  timeCreated: nowMillis, urls: request.urls)
        if let card = request.card {
            charge.maskedPAN = PAN.masked(card.pan)
            charge.expiry = card.expiry
            charge.challengePending = request.request3DS
        }
        charge.vaultToken = paidWithVault
        if request.requestToken {
            charge.vaultRequested = true
            charge.vaultConsumer = request.consumerReference
        }
        guard let inserted = try stored("record the charge", { try store.insertCitconCharge(charge) }) else { throw .duplicate(request.reference) }
        charge = inserted
        if let card = request.card {
            if request.request3DS {
                pendingCards.withLock { $0[charge.id] = card }
            } else {
                charge = try authoriseCard(charge, card: card)
                charge = try vaultIfAsked(charge, card: card)
            }
        }
        return charge
    }

    /// After an approval the merchant asked to vault (`requestToken`): the card stored in the
    /// consumer's vault, the charge given its token, and a `vault` IPN — a second write, so a
    /// declined charge vaults nothing (the document: a token only on successful authorization).
    func vaultIfAsked(_ c: CitconCharge, card: (pan: String, expiry: String, cvv: String?)) throws(CitconError) -> CitconCharge {
        guard c.vaultRequested == true, c.vaultToken == nil, let consumer = c.vaultConsumer, c.status == .authorized || c.status == .succeeded,
              let row = c.transactionID else { return c }
        var charge = c
        let (token, _) = try stored("vault the card") {
            try store.storeCitconVaultCard(merchantID: c.merchantID, consumer: consumer, pan: card.pan, expiry: card.expiry, at: context.clock.nowMicroseconds())
        }
        charge.vaultToken = token
        let vault = CitconOperation(object: "vault", id: PlatformText.hex(16), reference: consumer, amount: c.amount, status: "success",
                                    timeCreated: nowMillis, transactionID: nil)
        let done = charge
        try stored("record the vault token") { try store.recordCitconChargeEvent(done, outbox: ipn(done, refund: vault).map { (row, $0) }) }
        return charge
    }

    /// `POST /v1/charges/{charge_token}`: the app confirms a charge. A wallet is run by the
    /// outcome table (docs/citcon.md); a method given here sets a charge created without one.
    public func confirm(merchantID: String, chargeToken: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        var method: String? = nil
        do throws(WorldlineError) {
            method = try WorldlineJSON.parse(body).object("payment")?.string("method", maxLength: 32)?.lowercased()
        } catch { throw CitconError(error) }
        return .charge(try confirm(merchantID: merchantID, chargeToken: chargeToken, method: method), client: nil)
    }

    func confirm(merchantID: String, chargeToken: String, method: String?) throws(CitconError) -> CitconCharge {
        guard let found = try stored("read the charge", { try store.citconCharge(id: nil, chargeToken: chargeToken) }), found.merchantID == merchantID else {
            throw .notFound("not found: no charge with this charge token")
        }
        return try serialised(found.id) { () throws(CitconError) -> CitconCharge in
            try confirmSerialised(merchantID: merchantID, chargeToken: chargeToken, method: method)
        }
    }

    func confirmSerialised(merchantID: String, chargeToken: String, method: String?) throws(CitconError) -> CitconCharge {
        guard var charge = try stored("read the charge", { try store.citconCharge(id: nil, chargeToken: chargeToken) }), charge.merchantID == merchantID else {
            throw .notFound("not found: no charge with this charge token")
        }
        if let method {
            guard CitconMethod.offered(version: settings.version).contains(method), method != "card" else {
                throw .badRequest("payment.method", "\(shownValue(method, 32)) is not a wallet method of the UPI SDK \(settings.version)")
            }
            if charge.method.isEmpty { charge.method = method }
        }
        guard !charge.method.isEmpty else { throw .badRequest("payment.method", "is required to confirm a charge created without one") }
        if charge.status.isOpen, charge.method != "card" {
            if let outcome = Self.walletOutcome(amount: charge.amount, reference: charge.reference), outcome != "pending" {
                charge = try settleWallet(charge, action: outcome)
            } else if charge.status == .initiated {
                charge.status = try step(charge, .confirmed).status
                try stored("record the charge") { try store.completeCitconCharge(transactionID: nil, nil, charge: charge, outbox: []) }
            }
        }
        if settings.version == "2.1.0" {
            context.publish(.citconOrderConfirmed(charge: charge.id, status: charge.status.rawValue), terminal: terminal(merchantID))
        }
        return charge
    }

    /// The wallet outcome table for unattended runs: by the reference's suffix (`-decline`,
    /// `-cancel`, `-expire`, `-pending`), else by the amount's last two digits (01 declined,
    /// 02 cancelled, 03 expired, 04 left pending), else approved.
    public static func walletOutcome(amount: Int64, reference: String) -> String? {
        for (suffix, action) in [("-decline", "decline"), ("-cancel", "cancel"), ("-expire", "expire"), ("-pending", "pending")]
        where reference.lowercased().hasSuffix(suffix) { return action }
        return [1: "decline", 2: "cancel", 3: "expire", 4: "pending"][Int(amount % 100)] ?? "approve"
    }

    /// The payer acts on a wallet page (or through the API): approve, decline, cancel, or let it expire.
    public func payerAction(chargeID: String, action: String) throws(CitconError) -> (charge: CitconCharge, redirect: String?) {
        try serialised(chargeID) { () throws(CitconError) -> (charge: CitconCharge, redirect: String?) in
            try payerActionSerialised(chargeID: chargeID, action: action)
        }
    }

    func payerActionSerialised(chargeID: String, action: String) throws(CitconError) -> (charge: CitconCharge, redirect: String?) {
        guard var charge = try stored("read the charge", { try store.citconCharge(id: chargeID, chargeToken: nil) }) else {
            throw .notFound("not found: no charge \(shownValue(chargeID, 40))")
        }
        guard charge.method != "card" else { throw .badRequest("action", "a card charge is answered on its 3-D Secure page") }
        if case .failure(let refusal) = CitconLifecycle.next(charge.status, .confirmed) {
            throw CitconError(httpStatus: 409, code: "4000", message: "bad request: the charge is \(charge.status); \(refusal.rule)")
        }
        guard ["approve", "decline", "cancel", "expire"].contains(action) else { throw .badRequest("action", "must be approve, decline, cancel or expire") }
        if charge.method.isEmpty { charge.method = "wechatpay" }
        charge = try settleWallet(charge, action: action)
        let key = switch action { case "approve": "success"; case "cancel": "cancel"; default: "fail" }
        return (charge, charge.urls[key])
    }

    /// A wallet's answer, recorded: approved is a ledger sale (or pre-authorisation when it
    /// waits for a capture); the others end the charge, with a declined row for a decline.
    func settleWallet(_ c: CitconCharge, action: String) throws(CitconError) -> CitconCharge {
        var charge = c
        let now = nowMillis
        let terminal = terminal(charge.merchantID)
        guard action == "approve" || action == "decline" else {
            charge.status = try step(charge, action == "cancel" ? .payerCancelled : .expired).status
            if action == "cancel" { charge.timeCanceled = now }
            charge.timeCompleted = now
            return try recordWithoutIssuer(charge, status: action == "cancel" ? .cancelled : .failed, message: "the payer's wallet: \(charge.status)")
        }
        let captures = charge.autoCapture || CitconMethod.capturesAtOnce.contains(charge.method)
        let approved = action == "approve"
        let transition = try step(charge, approved ? .approved(captures: captures) : .declined)
        let started = try stored("begin the wallet payment") {
            try store.begin(NewTransaction(terminal: terminal, provider: .citcon, action: captures ? .sale : .preAuth, amount: charge.amount,
                                           currency: Self.currencyNumber(charge.currency), clientReference: charge.reference,
                                           createdAt: context.clock.nowMicroseconds()))
        }
        charge.status = transition.status
        charge.transactionID = started.id
        charge.timeCompleted = now
        if approved { charge.timeAuthorized = now }
        if approved, captures {
            charge.amountCaptured = charge.amount
            charge.timeCaptured = now
        }
        let completion = Completion(status: approved ? .approved : .declined, responseCode: approved ? "00" : "05",
                                    message: approved ? "approved by the payer's wallet" : "declined by the payer's wallet",
                                    authorisationCode: approved ? Self.randomDigits(6) : nil, brand: charge.method.uppercased(), entryMode: .wallet,
                                    completedAt: context.clock.nowMicroseconds())
        try recorded("the wallet payment", started.id) {
            try store.completeCitconCharge(transactionID: started.id, completion, charge: charge, outbox: (transition.ipn ? ipn(charge) : []) + appReturn(charge))
        }
        context.publish(.recorded(stan: started.stan, status: approved ? .approved : .declined, action: captures ? .sale : .preAuth), terminal: terminal)
        return charge
    }

    /// A ledger row for a charge that ended before an authorisation (cancelled, expired), so the
    /// charge is in `cardbench tx` and its IPN has a row to be delivered with (an outbox row
    /// belongs to a transaction).
    @discardableResult
    func recordWithoutIssuer(_ charge: CitconCharge, status: TransactionStatus, message: String) throws(CitconError) -> CitconCharge {
        let started = try stored("begin the record") {
            try store.begin(NewTransaction(terminal: terminal(charge.merchantID), provider: .citcon, action: .sale, amount: charge.amount,
                                           currency: Self.currencyNumber(charge.currency), clientReference: charge.reference,
                                           createdAt: context.clock.nowMicroseconds()))
        }
        var c = charge
        c.transactionID = started.id
        try recorded("the charge", started.id) {
            try store.completeCitconCharge(transactionID: started.id, Completion(status: status, message: message, completedAt: context.clock.nowMicroseconds()),
                                           charge: c, outbox: ipn(c) + appReturn(c))
        }
        return c
    }

    /// Records a row begun for a charge with the charge's new state; a record the ledger refuses
    /// fails the row (`PlatformRecord`), never leaves it in progress.
    func recorded(_ what: String, _ transactionID: Int64, _ commit: () throws -> Void) throws(CitconError) {
        do throws(PlatformRecord.Refused) {
            try PlatformRecord.commit(store, transactionID: transactionID, completedAt: context.clock.nowMicroseconds(), commit)
        } catch {
            if let rule = error.rule {
                // Two operations racing for one reference: the loser is a duplicate, as the pre-check says.
                if rule.field == "reference" && rule.rule == LedgerRules.citconReferenceUsed { throw .duplicate("") }
                throw .badRequest(rule.field, rule.rule)
            }
            throw .internalError("\(what) could not be recorded: \(error)")
        }
    }

    /// A card charge asks the issuer (CVV, expiry, state, balance, queued answers).
    func authoriseCard(_ c: CitconCharge, card: (pan: String, expiry: String, cvv: String?), challengeFailed: Bool = false) throws(CitconError) -> CitconCharge {
        let terminal = terminal(c.merchantID)
        let createdAt = context.clock.nowMicroseconds()
        // Only a charge waiting for its card's answer is authorised: asked before the STAN.
        _ = try step(c, .declined)
        let action: TransactionAction = c.autoCapture ? .sale : .preAuth
        var auth = AuthorisationRequest(pan: card.pan, aid: [], kind: c.autoCapture ? .purchase : .preAuthorisation, amount: Int(c.amount),
                                        currency: Self.currencyNumber(c.currency), arqc: nil, cryptogramData: nil,
                                        date: UTCDateParts(secondsSince1970: createdAt / 1_000_000))
        auth.cvv = card.cvv
        let parts = card.expiry.split(separator: "/")
        if parts.count == 2, let mm = Int(parts[0]), let yy = Int(parts[1]) { auth.cardExpiry = (2000 + yy, mm) }
        let new = NewTransaction(terminal: terminal, provider: .citcon, action: action, amount: c.amount,
                                 currency: Self.currencyNumber(c.currency), clientReference: c.reference, createdAt: createdAt, pan: card.pan)
        let host = TimedHost(context.host, timeout: context.settings.hostTimeout, queue: terminal, amountTable: settings.amountTable,
                             approveUnknownCards: settings.approveUnknownCards, clock: context.clock)
        let done: (started: Started, answer: AuthoriseAndRecord.Answer, recorded: (CitconCharge, Completion))
        do throws(AuthoriseAndRecord.Failure) {
            done = try AuthoriseAndRecord.cardNotPresent(context, store, new, request: auth, host: host,
                                                         notAskedBecause: challengeFailed ? "3-D Secure authentication failed" : nil) { started, answer in
                let response = answer.response
                let now = nowMillis
                var charge = c
                let transition = try CitconLifecycle.next(charge.status, answer.approved ? .approved(captures: charge.autoCapture) : .declined).get()
                charge.status = transition.status
                charge.transactionID = started.id
                charge.challengePending = false
                charge.timeCompleted = now
                if answer.approved {
                    charge.authorisationCode = response?.authorisationCode
                    charge.timeAuthorized = now
                    if charge.autoCapture {
                        charge.amountCaptured = charge.amount
                        charge.timeCaptured = now
                    }
                } else {
                    charge.responseCode = response?.responseCode.code
                    charge.message = response?.message ?? answer.failure
                }
                let completion = Completion(status: answer.approved ? .approved : (response == nil && !challengeFailed ? .failed : .declined),
                                            responseCode: response?.responseCode.code, message: response?.message ?? answer.failure,
                                            authorisationCode: response?.authorisationCode, maskedPAN: PAN.masked(card.pan), pan: card.pan,
                                            brand: CardBrand.detect(pan: card.pan)?.displayName, entryMode: .ecommerce,
                                            completedAt: self.context.clock.nowMicroseconds())
                try store.completeCitconCharge(transactionID: started.id, completion, charge: charge, outbox: (transition.ipn ? ipn(charge) : []) + appReturn(charge))
                return (charge, completion)
            }
        } catch {
            if case .notBegun(let e as LedgerError) = error, case .invalid(let field, let rule) = e { throw .badRequest(field, rule) }
            throw .internalError("the charge could not be recorded: \(error)")
        }
        let (charge, completion) = done.recorded
        context.publish(.recorded(stan: done.started.stan, status: completion.status, action: action), terminal: terminal)
        return charge
    }

    /// The 3-D Secure challenge of a card charge, answered.
    public func answerChallenge(chargeID: String, passed: Bool) throws(CitconError) -> (charge: CitconCharge, redirect: String?) {
        try serialised(chargeID) { () throws(CitconError) -> (charge: CitconCharge, redirect: String?) in
            try answerChallengeSerialised(chargeID: chargeID, passed: passed)
        }
    }

    func answerChallengeSerialised(chargeID: String, passed: Bool) throws(CitconError) -> (charge: CitconCharge, redirect: String?) {
        guard let charge = try stored("read the charge", { try store.citconCharge(id: chargeID, chargeToken: nil) }), charge.challengePending else {
            throw .notFound("not found: no charge \(shownValue(chargeID, 40)) waiting for a 3-D Secure challenge")
        }
        guard let card = pendingCards.withLock({ $0.removeValue(forKey: chargeID) }) else {
            var c = charge
            c.status = try step(c, .challengeExpired).status
            c.challengePending = false
            c.message = "the challenge expired: the platform restarted while it waited"
            try stored("record the charge") { try store.completeCitconCharge(transactionID: nil, nil, charge: c, outbox: []) }
            return (c, c.urls["fail"])
        }
        let done = try vaultIfAsked(try authoriseCard(charge, card: card, challengeFailed: !passed), card: card)
        return (done, done.urls[done.status == .failed ? "fail" : "success"])
    }

    // MARK: Inquiry, captures, cancels, refunds

    func charge(_ merchantID: String, _ id: String) throws(CitconError) -> CitconCharge {
        guard let c = try stored("read the charge", { try store.citconCharge(id: id, chargeToken: nil) }), c.merchantID == merchantID else {
            throw .notFound("not found: no transaction \(shownValue(id, 40))")
        }
        return c
    }

    /// `GET /v1/transactions/{id}`.
    public func inquiry(merchantID: String, id: String) throws(CitconError) -> CitconResult {
        .inquiry(try charge(merchantID, id))
    }

    /// `POST /v1/captures`: all or part of an authorised charge.
    public func capture(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        let r = try CitconOperationRequest.parse(body)
        return try serialised(r.transactionID) { () throws(CitconError) -> CitconResult in try capture(merchantID: merchantID, r) }
    }

    func capture(merchantID: String, _ r: CitconOperationRequest) throws(CitconError) -> CitconResult {
        var c = try charge(merchantID, r.transactionID)
        try referenceUnused(merchantID, r)
        let transition = try step(c, .capture)
        guard let authID = c.transactionID else { throw .internalError("the charge has no authorisation in the ledger") }
        let amount = r.amount ?? c.amount
        guard amount <= c.amount else { throw .badRequest("amount", "\(amount) is more than the authorized \(c.amount)") }
        let auth = try stored("read the authorisation") { try store.transaction(id: authID) }
        let new = NewTransaction(terminal: terminal(merchantID), provider: .citcon, action: .capture, amount: amount,
                                 currency: Self.currencyNumber(c.currency), clientReference: r.reference ?? c.reference, originalID: authID,
                                 createdAt: context.clock.nowMicroseconds())
        let operation = try operate(new, acting: auth, on: &c, transition: transition) { c, started, now in
            c.amountCaptured = amount
            c.timeCaptured = now
            return CitconOperation(object: "capture", id: PlatformText.hex(16), reference: r.reference ?? "", amount: amount, status: "succeeded",
                                   timeCreated: now, transactionID: started.id)
        } release: { c in
            // The rest is released at the issuer only once the capture is recorded.
            if amount < c.amount, let code = c.authorisationCode { context.host.void(authorisationCode: code, amount: Int(c.amount - amount)) }
        }
        return .operation(operation, c)
    }

    /// `POST /v1/cancels`: releases an authorised (or still pending) charge.
    public func cancel(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        let r = try CitconOperationRequest.parse(body)
        return try serialised(r.transactionID) { () throws(CitconError) -> CitconResult in try cancel(merchantID: merchantID, r) }
    }

    func cancel(merchantID: String, _ r: CitconOperationRequest) throws(CitconError) -> CitconResult {
        var c = try charge(merchantID, r.transactionID)
        try referenceUnused(merchantID, r)
        let now = nowMillis
        let transition = try step(c, .cancel)
        if c.status.isOpen {
            _ = pendingCards.withLock { $0.removeValue(forKey: c.id) }
            c.status = transition.status
            c.challengePending = false
            c.timeCanceled = now
            // Kept with the charge like any operation, so its reference is the merchant's once too.
            let operation = CitconOperation(object: "cancel", id: PlatformText.hex(16), reference: r.reference ?? "", amount: c.amount,
                                            status: "succeeded", timeCreated: now, transactionID: nil)
            c.operations.append(operation)
            c = try recordWithoutIssuer(c, status: .cancelled, message: "cancelled by the merchant before payment")
            return .operation(operation, c)
        } else {
            guard let authID = c.transactionID, let auth = try stored("read the authorisation", { try store.transaction(id: authID) }) else {
                throw .internalError("the charge has no authorisation in the ledger")
            }
            let new = NewTransaction(terminal: terminal(merchantID), provider: .citcon, action: .cancel, amount: auth.amount,
                                     currency: auth.currency, clientReference: r.reference ?? c.reference, originalID: authID,
                                     createdAt: context.clock.nowMicroseconds())
            let operation = try operate(new, acting: auth, on: &c, transition: transition) { c, started, now in
                c.timeCanceled = now
                return CitconOperation(object: "cancel", id: PlatformText.hex(16), reference: r.reference ?? "", amount: c.amount, status: "succeeded",
                                       timeCreated: now, transactionID: started.id)
            } release: { c in
                if let code = c.authorisationCode { context.host.void(authorisationCode: code, amount: Int(c.amount)) }
            }
            return .operation(operation, c)
        }
    }

    /// `POST /v1/refunds`: all or part of what was captured and not yet refunded.
    public func refund(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        let r = try CitconOperationRequest.parse(body)
        return try serialised(r.transactionID) { () throws(CitconError) -> CitconResult in try refund(merchantID: merchantID, r) }
    }

    func refund(merchantID: String, _ r: CitconOperationRequest) throws(CitconError) -> CitconResult {
        var c = try charge(merchantID, r.transactionID)
        try referenceUnused(merchantID, r)
        let transition = try step(c, .refund)
        guard let captured = c.amountCaptured else { throw .internalError("the charge has no captured amount") }
        // What a lost chargeback took back cannot be refunded again.
        let lost = c.operations.filter { $0.object == "chargeback" && $0.status == "lost" }.reduce(0) { $0 + $1.amount }
        let left = captured - (c.amountRefunded ?? 0) - lost
        let amount = r.amount ?? left
        guard amount <= left else {
            throw CitconError(httpStatus: 400, code: "4208", message: "bad request: amount \(amount) is more than what is left to refund (\(left) of \(captured) captured\(lost > 0 ? ", \(lost) lost to a chargeback" : ""))",
                              debug: "amount")
        }
        guard let originalID = c.operations.first(where: { $0.object == "capture" })?.transactionID ?? c.transactionID,
              let original = try stored("read the original", { try store.transaction(id: originalID) }) else {
            throw .internalError("the charge has no captured transaction in the ledger")
        }
        let new = NewTransaction(terminal: terminal(merchantID), provider: .citcon, action: .refund, amount: amount, currency: original.currency,
                                 clientReference: r.reference ?? c.reference, originalID: originalID, createdAt: context.clock.nowMicroseconds())
        let operation = try operate(new, acting: original, on: &c, transition: transition) { c, started, now in
            c.amountRefunded = (c.amountRefunded ?? 0) + amount
            return CitconOperation(object: "refund", id: PlatformText.hex(16), reference: r.reference ?? "", amount: amount, status: "succeeded",
                                   timeCreated: now, transactionID: started.id)
        } release: { c in
            if let code = c.authorisationCode { context.host.void(authorisationCode: code, amount: Int(amount)) }
        }
        return .operation(operation, c)
    }

    /// An operation's `reference` is the merchant's once: one used before by a capture, cancel or
    /// refund is 4100 ("duplicate request") and nothing is done. The ledger refuses a second one
    /// too when it records it (two charges racing for one reference).
    func referenceUnused(_ merchantID: String, _ r: CitconOperationRequest) throws(CitconError) {
        guard let reference = r.reference, !reference.isEmpty else { return }
        if try stored("look up the reference", { try store.citconOperationReferenceUsed(merchantID: merchantID, reference: reference) }) {
            throw .duplicate(reference)
        }
    }

    /// An operation on charge `c` on the one path (`PlatformOperation`): `change` makes the
    /// operation (given the row and the time in milliseconds) and applies its amounts, the
    /// transition its status, its IPN goes with it; a record the ledger refuses (a total it
    /// checks) leaves the charge as it was and the row failed.
    func operate(_ new: NewTransaction, acting original: StoredTransaction?, on c: inout CitconCharge, transition: CitconLifecycle.Transition,
                 _ change: (inout CitconCharge, Started, Int64) -> CitconOperation,
                 release: (CitconCharge) -> Void) throws(CitconError) -> CitconOperation {
        let before = c
        do throws(PlatformOperation.Failure) {
            let (_, done) = try PlatformOperation.run(context, store, new, acting: original, record: { started, completion in
                var next = before
                let operation = change(&next, started, nowMillis)
                next.operations.append(operation)
                next.status = transition.status
                let notice = operation.object == "refund" ? ipn(next, refund: operation) : ipn(next)
                try store.completeCitconCharge(transactionID: started.id, completion, charge: next, outbox: transition.ipn ? notice : [])
                return (next, operation)
            })
            c = done.0
            release(c)
            return done.1
        } catch {
            switch (error, error.rule) {
            case (_, let rule?) where rule.field == "reference" && rule.rule == LedgerRules.citconReferenceUsed:
                throw .duplicate(new.clientReference ?? "")
            case (.notBegun, let rule?): throw .badRequest(rule.field, rule.rule)
            case (.notRecorded, let rule?): throw .badRequest("transaction_id", "the \(new.action.rawValue) cannot be recorded: \(rule.field): \(rule.rule)")
            default: throw .internalError("the \(new.action.rawValue) could not be recorded: \(error)")
            }
        }
    }

    /// The transition `event` makes of charge `c` (`CitconLifecycle`); a status that does not
    /// allow it is a 400 naming `transaction_id`.
    func step(_ c: CitconCharge, _ event: CitconLifecycle.Event) throws(CitconError) -> CitconLifecycle.Transition {
        switch CitconLifecycle.next(c.status, event) {
        case .success(let transition): return transition
        case .failure(let refusal): throw .badRequest("transaction_id", "the charge is \(c.status); \(refusal.rule)")
        }
    }

    /// Runs an operation on charge `id` with no other operation on it running (`PaymentSerialiser`).
    func serialised<T>(_ id: String, _ body: () throws(CitconError) -> T) throws(CitconError) -> T {
        try context.payments.run("citcon:" + id, body)
    }

    // MARK: The SDK's results

    /// What the SDK's `requestOrder` would hand the app, for a test double of the SDK: the charge
    /// (`charge_token`, or a `transaction` to create one) is run through its wallet's outcome
    /// table (or stays pending for a card with 3-D Secure), and the answer is the `CPayResult`:
    /// `{status, app, version, data{code, message, id, object, reference, amount, currency,
    /// country, amount_captured, amount_refunded, auto_capture, status, time_created,
    /// time_authorized, time_captured, charge_token: null, payment{method}}}` with the document's client codes
    /// (0 success, -1 failure, -2 a WeChat Pay cancel, 6001 an Alipay cancel).
    public func sdkRequestOrder(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        var token: String? = nil
        var method: String? = nil
        do throws(WorldlineError) {
            let json = try WorldlineJSON.parse(body)
            token = try json.string("charge_token", maxLength: 64)
            method = try json.object("payment")?.string("method", maxLength: 32)?.lowercased()
        } catch { throw CitconError(error) }
        var charge: CitconCharge
        if let token {
            charge = try confirm(merchantID: merchantID, chargeToken: token, method: method)
        } else {
            try Self.checkSDKOrder(body)
            var request = try CitconChargeRequest.parse(body, version: settings.version)
            // The app the payer returns to (CPayOrder.scheme / universalLink), kept with the charge.
            do throws(WorldlineError) {
                let json = try WorldlineJSON.parse(body)
                if let scheme = try json.string("scheme", maxLength: 100), !scheme.isEmpty {
                    guard scheme.wholeMatch(of: /[A-Za-z][A-Za-z0-9+.\-]*/) != nil else {
                        throw WorldlineError.invalid("scheme", "must be a URL scheme (a letter, then letters, digits, + . -)")
                    }
                    request.urls["app_scheme"] = scheme
                }
                if let link = try json.string("universalLink", maxLength: 500), !link.isEmpty {
                    guard let url = URL(string: link), url.scheme?.lowercased() == "https", url.host != nil else {
                        throw WorldlineError.invalid("universalLink", "must be an absolute https URL")
                    }
                    request.urls["universal_link"] = link
                }
            } catch { throw CitconError(error) }
            charge = try createCharge(merchantID: merchantID, request)
            if charge.method != "card", charge.status.isOpen {
                charge = try confirm(merchantID: merchantID, chargeToken: charge.chargeToken, method: nil)
            }
        }
        return .sdkResult(charge)
    }

    /// The SDK document's conditional requirements of a `CPayOrder` (`../shared/specs`, CPayOrder,
    /// CPayConsumer, CPayPayment, CPayBillingAddr): Alipay needs `scheme`; card, PayPal and Venmo
    /// need `consumer`; a card with 3-D Secure needs the consumer's first and last name, phone and
    /// email and a billing address with city, state and zip; a vaulted card (`requestToken`, or a
    /// `token`) needs `consumer.reference`. Each missing one is the platform's 4000 naming it.
    static func checkSDKOrder(_ body: [UInt8]) throws(CitconError) {
        let problem: (field: String, rule: String)?
        do throws(WorldlineError) { problem = try sdkOrderProblem(WorldlineJSON.parse(body)) } catch { throw CitconError(error) }
        if let problem { throw CitconError.badRequest(problem.field, problem.rule) }
    }

    static func sdkOrderProblem(_ json: WorldlineJSON) throws(WorldlineError) -> (field: String, rule: String)? {
        let payment = try json.object("payment")
        let method = try payment?.string("method", maxLength: 32)?.lowercased() ?? ""
        func present(_ object: WorldlineJSON?, _ key: String) throws(WorldlineError) -> Bool {
            guard let object, let v = try object.string(key, maxLength: 500) else { return false }
            return !v.trimmingCharacters(in: .whitespaces).isEmpty
        }
        if method == "alipay", try !present(json, "scheme") {
            return ("scheme", "is required for Alipay: the URL scheme Alipay returns the payer to (CPayOrder.scheme)")
        }
        let consumer = try json.object("consumer")
        if ["card", "paypal", "venmo"].contains(method), consumer == nil {
            return ("consumer", "is required for card, PayPal and Venmo (CPayOrder.consumer)")
        }
        if method == "card", try payment?.bool("request_3ds") == true {
            for key in ["firstName", "lastName", "phone", "email"] where try !present(consumer, key) {
                return ("consumer.\(key)", "is required for a card with 3-D Secure (CPayConsumer)")
            }
            let address = try payment?.object("billingAddress")
            for key in ["city", "state", "zip"] where try !present(address, key) {
                return ("payment.billingAddress.\(key)", "is required for a card with 3-D Secure (CPayBillingAddr)")
            }
        }
        let vaulting = try payment?.bool("requestToken") == true
        let vaulted = try present(payment, "token")
        let reference = try present(consumer, "reference")
        if vaulting || vaulted, !reference {
            return ("consumer.reference", "is required to vault a card or pay with a vaulted one (CPayConsumer.reference)")
        }
        return nil
    }

    /// What the SDK's `inquireOrder(transId)` would hand the app: the `CPayCheck`, the platform's
    /// inquiry of the transaction.
    public func sdkInquireOrder(merchantID: String, body: [UInt8]) throws(CitconError) -> CitconResult {
        let id: String
        do throws(WorldlineError) { id = try WorldlineJSON.parse(body).requiredString("transaction_id", maxLength: 64) } catch { throw CitconError(error) }
        return try inquiry(merchantID: merchantID, id: id)
    }

    // MARK: Back to the app

    /// The URL that brings the payer back to the app after a wallet or card page, when the SDK's
    /// order named the app (`scheme`, `universalLink`): what the app's `handleUrl` /
    /// `handleUniversalLink` is given. Its form is cardbench's (the document leaves it to each
    /// wallet): `{scheme}://citcon/result?…` or `{universalLink}?…` with `status` (the
    /// CPayResult's: success, fail, cancel), `transaction_id`, `reference`, `charge_status` and
    /// `code`, `result` (the CPayResult JSON), and on a finished trade `notification=NTFY_ASYNC`
    /// with `check` (the CPayCheck JSON). It goes out as a callback, through the bench's command
    /// delivery (docs/citcon.md).
    func appReturn(_ c: CitconCharge) -> [OutboxMessage] {
        guard !c.status.isOpen else { return [] }
        let base: String
        if let scheme = c.urls["app_scheme"] {
            base = scheme + "://citcon/result"
        } else if let link = c.urls["universal_link"] {
            base = link
        } else {
            return []
        }
        let status = switch c.status { case .succeeded, .authorized: "success"; case .canceled: "cancel"; default: "fail" }
        let code = switch c.status { case .succeeded, .authorized: "0"; case .canceled: c.method == "alipay" ? "6001" : c.method == "wechatpay" ? "-2" : "-1"; default: "-1" }
        // `result`: the CPayResult the SDK's callback gives the app, as JSON, for an app under test
        // whose SDK double reads it from the URL.
        var fields = [("status", status), ("code", code), ("transaction_id", c.id), ("reference", c.reference), ("charge_status", c.status.rawValue),
                      ("result", CitconRender.sdkResultText(c))]
        // TRADE_FINISHED, the document's trigger of the SDK's NTFY_ASYNC: the CPayCheck it carries.
        if status == "success" {
            fields.append(("notification", "NTFY_ASYNC"))
            fields.append(("check", CitconRender.inquiryReplyText(c)))
        }
        // Under the 2.1.0 document the SDK also posts ORDER_CONFIRMED for a confirmed order.
        if settings.version == "2.1.0" { fields.append(("order_confirmed", "true")) }
        let query = fields.map { $0.0 + "=" + QueryValue.encode($0.1) }.joined(separator: "&")
        return [OutboxMessage(kind: .callback, target: base, payload: base + (base.contains("?") ? "&" : "?") + query, nextAttemptAt: context.clock.nowMicroseconds())]
    }

    // MARK: IPN

    /// The IPN of a charge's new status (or of a refund), to `urls.ipn` when the charge has one.
    func ipn(_ c: CitconCharge, refund: CitconOperation? = nil) -> [OutboxMessage] {
        guard let url = c.urls["ipn"], let key = try? store.citconMerchantKey(c.merchantID) else { return [] }
        let created = Self.isoTime(refund?.timeCreated ?? c.timeCreated)
        let completed = Self.isoTime(refund?.timeCreated ?? c.timeCompleted ?? nowMillis)
        return [OutboxMessage(kind: .webhook, target: url, payload: CitconRender.ipnText(c, refund: refund, key: key, created: created, completed: completed))]
    }

    // MARK: Helpers

    static func randomDigits(_ n: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return String((0..<n).map { _ in Character(String(Int.random(in: 0...9, using: &g))) })
    }

    static func isoTime(_ millis: Int64) -> String { PlatformText.isoTime(micros: millis * 1000) }

    /// The ISO 4217 number the ledger stores; the charge's code was checked when it was made
    /// (0, which the ledger refuses, would say otherwise rather than record another currency).
    static func currencyNumber(_ code: String) -> Int { ISO4217.numbers[code] ?? 0 }
}
