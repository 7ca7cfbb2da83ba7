import CryptoExtras
import EMV
import Foundation
import Fronts
import LedgerModel
import Synchronization
import Terminal


/// How the platform behaves where a bench may want it otherwise (`worldline.*` in the configuration).
public struct WorldlineSettings: Sendable {
    /// How long a client session lives.
    public var sessionLifetime: Duration = .seconds(3 * 3600)
    /// A number the issuer does not know, but that passes the Luhn check, is approved (the sandbox does so).
    public var approveUnknownCards = true
    /// Scripted declines for `SALE` payments.
    public var amountTable: AmountTable = .worldline
    /// How long a requested capture or refund waits (CAPTURE_REQUESTED, REFUND_REQUESTED) before
    /// it settles (CAPTURED, REFUNDED), on the bench clock.
    public var settleAfter: Duration = .seconds(2)

    public init() {}
}

/// The Worldline Online Payments platform: sessions, payments and their lifecycle (capture,
/// cancel, refund), 3-D Secure challenges and webhooks, against the bench's issuer and ledger.
///
/// Every payment's authorisation is a ledger transaction of provider `worldline` on the
/// merchant's ledger terminal (`worldline.<merchantId>`), committed with the payment's platform
/// state and its webhooks in one write before the answer. Card data lives in memory only, for
/// the authorisation (and, while a 3-D Secure challenge waits, until it is answered).
public final class WorldlineFront: Sendable {
    public let context: WorkflowContext
    let store: any WorldlineStore
    public let settings: WorldlineSettings
    /// The Client API's private keys by key id (the daemon keeps them).
    let privateKey: @Sendable (String) -> _RSA.Encryption.PrivateKey?
    /// Card data of payments waiting for their 3-D Secure challenge, by payment id.
    private let pending = Mutex<[String: PendingChallenge]>([:])
    /// The CVV typed into a hosted tokenization form, by session id, kept in memory for the one
    /// payment that uses the session (a CVV is stored nowhere), until the session expires.
    let tokenizationCVVs = Mutex<[String: (cvv: String, expiresAt: Int64)]>([:])

    struct PendingChallenge: Sendable {
        let card: WorldlineCard
        let request: WorldlineCreatePayment
    }

    /// The platform on a bench: its context, the store of its records, its settings, and the
    /// Client API's private keys by key id.
    public init(context: WorkflowContext, store: any WorldlineStore, settings: WorldlineSettings,
                privateKey: @escaping @Sendable (String) -> _RSA.Encryption.PrivateKey?) {
        self.context = context
        self.store = store
        self.settings = settings
        self.privateKey = privateKey
    }

    var now: Int64 { context.clock.nowMicroseconds() }

    func stored<T>(_ doing: String, _ body: () throws -> T) throws(WorldlineError) -> T {
        do { return try body() } catch let error as LedgerError {
            if case .invalid(let field, let rule) = error { throw .invalid(field, rule) }
            throw .internalError("\(doing): \(error)")
        } catch {
            throw .internalError("\(doing): \(error)")
        }
    }

    // MARK: Sessions

    /// `POST /v2/{merchantId}/sessions`.
    /// `tokens` (at most 10) are the card-on-file tokens the session may show; those the platform
    /// does not know come back in `invalidTokens`.
    public func createSession(merchantID: String, body: [UInt8] = [], clientAPIURL: String, assetURL: String) throws(WorldlineError) -> WorldlineResult {
        let tokens = try WorldlineJSON.parse(body).strings("tokens", maxLength: 40) ?? []
        guard tokens.count <= 10 else { throw .invalid("tokens", "at most 10 tokens, got \(tokens.count)") }
        // The merchant's live tokens are the session's accounts on file; the others come back.
        var known: [String] = [], invalidTokens: [String] = []
        for token in tokens {
            let found = try stored("read a token") { try store.worldlineToken(token, merchantID: merchantID) }
            if let found, found.token.deletedAt == nil, !known.contains(token) { known.append(token) } else if found == nil || found?.token.deletedAt != nil {
                invalidTokens.append(token)
            }
        }
        let sessionID = PlatformText.hex(16)
        let customerID = PlatformText.hex(4) + "-" + PlatformText.hex(12)
        let now = self.now
        let lifetime = settings.sessionLifetime.components.seconds * 1_000_000
        try stored("create a session") {
            _ = try store.ensureWorldlineMerchant(merchantID, at: now)
            try store.createWorldlineSession(sessionID: sessionID, merchantID: merchantID, customerID: customerID, at: now, expiresAt: now + lifetime)
            if !known.isEmpty { try store.setWorldlineSessionTokens(sessionID: sessionID, tokens: known) }
        }
        return .sessionCreated(sessionID: sessionID, customerID: customerID, clientAPIURL: clientAPIURL, assetURL: assetURL,
                               invalidTokens: invalidTokens)
    }

    /// The session a Client API request's `GCS v1Client:{id}` names, for `customerID`'s path.
    public func clientSession(_ sessionID: String, customerID: String) throws(WorldlineError) -> WorldlineSession {
        guard let session = try stored("read a session", { try store.worldlineSession(sessionID: sessionID) }) else {
            throw .unauthorised("unknown client session")
        }
        guard session.expiresAt > now else { throw .unauthorised("the client session has expired") }
        guard session.customerID == customerID else { throw .forbidden("the client session is not this customer's") }
        return session
    }

    // MARK: Payments

    /// `POST /v2/{merchantId}/payments`. `challengeURL(paymentID)` is the page a 3-D Secure
    /// challenge is answered on.
    public func createPayment(merchantID: String, body: [UInt8], challengeURL: (String) -> String,
                              redirectURL: ((String) -> String)? = nil) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineCreatePayment.parse(WorldlineJSON.parse(body))
        if let redirect = request.redirect {
            guard let redirectURL else { throw .invalid("redirectPaymentMethodSpecificInput", "is not taken here (a hosted checkout's page pays with cards)") }
            return try createRedirectPayment(merchantID: merchantID, request: request, redirect: redirect, pageURL: redirectURL)
        }
        let source = try self.source(of: request, merchantID: merchantID)
        let card = source.card
        if let product = request.paymentProductID, product != WorldlineStatus.productID(card.brand) {
            throw .invalid("cardPaymentMethodSpecificInput.paymentProductId",
                           "\(product) is not the product of this card number (\(WorldlineStatus.productID(card.brand)))")
        }
        _ = try stored("find the merchant") { try store.ensureWorldlineMerchant(merchantID, at: now) }
        var payment = WorldlinePayment(merchantID: merchantID, status: .created, amount: request.amount, currency: request.currency,
                                       authorizationMode: request.authorizationMode.rawValue, merchantReference: request.merchantReference,
                                       paymentProductID: request.mobile?.productID ?? WorldlineStatus.productID(card.brand), maskedCardNumber: card.masked,
                                       bin: card.bin, expiryDate: card.expiryDate, createdAt: now)
        if request.mobile != nil {
            payment.paymentMethod = "mobile"
            payment.network = card.brand?.displayName.uppercased()
            // A wallet's payment is authenticated on the device: no 3-D Secure, no token of its card.
            return .paymentCreated(try authorise(payment, card: card, request: request, networkToken: source.networkToken), redirectURL: nil)
        }
        payment.cardOnFile = request.cardOnFile
        payment.initialSchemeTransactionID = source.initialSchemeTransactionID
        if let token = source.token {
            payment.token = token.token
        } else if source.tokenize {
            // Stored before the issuer is asked, so the payment's record and webhooks carry it;
            // a decline takes a token it made back.
            let (token, status) = try stored("store the token") {
                try store.storeWorldlineToken(merchantID: merchantID, card: WorldlineVaultedCard(pan: card.pan, expiryDate: card.expiryDate,
                                                                                                 cardholderName: card.cardholderName),
                                              paymentProductID: WorldlineStatus.productID(card.brand), at: now)
            }
            payment.token = token.token
            payment.isNewToken = status == .created
        }
        let testCard = WorldlineTestCards.table[card.pan]
        // A merchant-initiated payment has no cardholder to authenticate: it is exempt.
        if let t = request.threeDSecure, !t.skipAuthentication, !request.isMerchantInitiated, let returnURL = t.returnURL {
            // The platform's test cards decide as the platform does; another card is challenged
            // unless the merchant asks for no challenge.
            let threeDS = testCard?.threeDS ?? (t.challengeIndicator == "no-challenge-requested" ? .frictionless : .challenge)
            if threeDS == .authenticationFails {
                payment.threeDSecure = "frictionless-failed"
                return .paymentCreated(try authorise(payment, card: card, request: request, failedChallenge: true), redirectURL: nil)
            } else if threeDS == .frictionless {
                payment.threeDSecure = "frictionless"
            } else {
                payment.status = try step(payment, .challengeRequired).status
                payment.returnURL = returnURL
                payment.returnMAC = PlatformText.hex(16)
                let page = PageToken.make()
                payment.challengeTokenHash = page.hash
                payment = try stored("record the payment") { try store.insertWorldlinePayment(payment) }
                pending.withLock { $0[payment.id] = PendingChallenge(card: card, request: request) }
                return .paymentCreated(payment, redirectURL: challengeURL(payment.id + "/" + page.token))
            }
        }
        let authorised = try authorise(payment, card: card, request: request)
        return .paymentCreated(authorised, redirectURL: nil)
    }

    /// The platform's own decline of one of its test cards, as an issuer's answer.
    static func testCardDecline(_ pan: String) -> AuthorisationResponse? {
        guard let decline = WorldlineTestCards.table[pan]?.decline else { return nil }
        return AuthorisationResponse(responseCode: ResponseCode(decline.code), authorisationCode: nil, issuerAuthenticationData: nil,
                                     rule: "platform test card", message: decline.message, delayMilliseconds: 0)
    }

    /// The encrypted input of a request opened and checked (the key, the session, the nonce).
    func customerInput(_ jwe: String, merchantID: String) throws(WorldlineError) -> WorldlineCustomerInput {
        let opened: WorldlineJWE.Opened
        do throws(WorldlineJWE.Failure) { opened = try WorldlineJWE.decrypt(jwe, privateKey: privateKey) } catch {
            throw .invalid("encryptedCustomerInput", error.reason)
        }
        let input = try WorldlineCustomerInput.parse(opened.plaintext)
        guard let session = try stored("read a session", { try store.worldlineSession(sessionID: input.clientSessionID) }),
              session.merchantID == merchantID else {
            throw .invalid("encryptedCustomerInput", "it was made for a client session this merchant does not have")
        }
        guard session.expiresAt > now else { throw .invalid("encryptedCustomerInput", "its client session has expired") }
        guard try stored("record the nonce", { try store.useWorldlineNonce(sessionID: input.clientSessionID, nonce: input.nonce, at: now) }) else {
            throw .invalid("encryptedCustomerInput", "its nonce was used before: encrypted input is good for one payment")
        }
        return input
    }

    /// Asks the issuer and records the outcome with the payment (inserted, or moved on from
    /// REDIRECTED) and its webhook, in one commit: the one path (`AuthoriseAndRecord`). A
    /// redirect method's payment has no card: `method` answers in the issuer's place.
    func authorise(_ payment: WorldlinePayment, card: WorldlineCard?, request: WorldlineCreatePayment?,
                   failedChallenge: Bool = false, networkToken: (cryptogram: [UInt8], eci: String)? = nil,
                   method: (answer: AuthorisationResponse, name: String)? = nil) throws(WorldlineError) -> WorldlinePayment {
        let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(payment.merchantID, at: now) }
        let sale = payment.authorizationMode == WorldlineCreatePayment.AuthorizationMode.sale.rawValue
        let currency = ISO4217.numbers[payment.currency] ?? 0
        // Whatever the issuer says must be a move this payment may make: asked before the STAN.
        _ = try step(payment, .declined)
        let createdAt = now
        var auth = AuthorisationRequest(pan: card?.pan ?? "", aid: [], kind: sale ? .purchase : .preAuthorisation, amount: Int(payment.amount),
                                        currency: currency, arqc: nil, cryptogramData: nil,
                                        date: UTCDateParts(secondsSince1970: createdAt / 1_000_000))
        auth.cvv = card?.cvv
        auth.cardExpiry = card?.expiry
        auth.networkTokenCryptogram = networkToken
        var extra = ["payment": payment.id.isEmpty ? "new" : payment.id, "mode": payment.authorizationMode]
        if let method { extra["method"] = method.name }
        let new = NewTransaction(terminal: merchant.terminalName, provider: .worldline, action: sale ? .sale : .preAuth,
                                 amount: payment.amount, currency: currency, clientReference: payment.merchantReference,
                                 extra: WorldlineRender.text(extra), createdAt: createdAt, pan: card?.pan)
        let host = TimedHost(context.host, timeout: context.settings.hostTimeout, queue: merchant.terminalName,
                             amountTable: sale ? settings.amountTable : AmountTable.none, approveUnknownCards: settings.approveUnknownCards, clock: context.clock)
        let schemeTransactionID = card == nil ? nil : PlatformText.digits(15)
        let done: (started: Started, answer: AuthoriseAndRecord.Answer, recorded: (WorldlinePayment, StoredTransaction))
        do throws(AuthoriseAndRecord.Failure) {
            done = try AuthoriseAndRecord.cardNotPresent(context, store, new, request: auth, host: host,
                                                         notAskedBecause: failedChallenge ? "3-D Secure authentication failed: the challenge was not passed" : nil,
                                                         platformAnswer: method?.answer ?? card.flatMap { Self.testCardDecline($0.pan) }) { started, answer in
                let response = answer.response
                var p = payment
                p.updatedAt = now
                let transition = try WorldlineLifecycle.next(p.status, answer.approved ? .approved(sale: sale) : .declined).get()
                p.status = transition.status
                if answer.approved {
                    p.authorisationCode = response?.authorisationCode
                    p.schemeTransactionID = schemeTransactionID
                    if sale { p.capturedAmount = p.amount }
                } else {
                    // A declined payment stores no card: a token it made is taken back below.
                    if p.isNewToken != nil {
                        p.token = nil
                        p.isNewToken = nil
                    }
                    p.responseCode = failedChallenge ? "3DS" : (response?.responseCode.code ?? "91")
                    p.message = response?.message ?? answer.failure
                }
                let completion = Completion(status: answer.approved ? .approved : (response == nil && !failedChallenge ? .failed : .declined),
                                            responseCode: response?.responseCode.code, message: response?.message ?? answer.failure,
                                            authorisationCode: response?.authorisationCode, maskedPAN: card.map { PAN.masked($0.pan) }, pan: card?.pan,
                                            brand: method?.name ?? card?.brand?.displayName,
                                            entryMode: networkToken == nil && method == nil ? .ecommerce : .wallet, completedAt: now)
                return try store.completeWorldlineAuthorisation(transactionID: started.id, completion, payment: p) { p in
                    self.webhooks(merchant, transition, payment: p)
                }
            }
        } catch {
            if case .notBegun(let e as LedgerError) = error, case .invalid(let field, let rule) = e { throw .invalid(field, rule) }
            throw .internalError("the payment could not be recorded: \(error)")
        }
        let (started, answer, result) = done
        if let request { tokenAfterwards(payment, result.0, request: request) }
        context.publish(.outcome(stan: started.stan, status: result.1.status, responseCode: answer.response?.responseCode.code ?? "",
                                 message: answer.response?.message ?? answer.failure ?? "", microseconds: now - createdAt), terminal: merchant.terminalName)
        context.publish(.recorded(stan: started.stan, status: result.1.status, action: result.1.action), terminal: merchant.terminalName)
        return result.0
    }

    /// The transition `event` makes of payment `p` (`WorldlineLifecycle`); a status that does not
    /// allow it is `ACTION_NOT_ALLOWED_ON_TRANSACTION`.
    func step(_ p: WorldlinePayment, _ event: WorldlineLifecycle.Event) throws(WorldlineError) -> WorldlineLifecycle.Transition {
        switch WorldlineLifecycle.next(p.status, event) {
        case .success(let transition): return transition
        case .failure(let refusal): throw .wrongStatus("payment \(p.id) is \(p.status); \(refusal.rule)")
        }
    }

    /// The webhooks a transition sends: a refund's carry the refund, the others the payment.
    func webhooks(_ merchant: WorldlineMerchant, _ transition: WorldlineLifecycle.Transition, payment p: WorldlinePayment,
                  refund: WorldlineOperation? = nil) -> [OutboxMessage] {
        transition.webhooks.flatMap { type in
            type.hasPrefix("refund.") ? webhooks(merchant, type: type, refund: refund.map { ($0, p) }) : webhooks(merchant, type: type, payment: p)
        }
    }

    /// The webhooks of an event, to the merchant's endpoint if it has one.
    func webhooks(_ merchant: WorldlineMerchant, type: String, payment: WorldlinePayment? = nil,
                  refund: (WorldlineOperation, WorldlinePayment)? = nil) -> [OutboxMessage] {
        guard let url = merchant.webhookURL else { return [] }
        let body = WorldlineRender.webhookText(type: type, id: Self.randomUUID(), created: Self.isoTime(now), merchantID: merchant.merchantID,
                                               payment: payment, refund: refund)
        return [OutboxMessage(kind: .webhook, target: url, payload: body)]
    }

    func payment(_ merchantID: String, _ id: String) throws(WorldlineError) -> WorldlinePayment {
        guard let p = try stored("read the payment", { try store.worldlinePayment(id: id, merchantID: merchantID) }) else {
            throw .notFound("UNKNOWN_PAYMENT_ID", "no payment \(shownValue(id, 40)) for this merchant")
        }
        return p
    }

    /// Payment `id` as it is now: what is due settled first.
    func current(_ merchantID: String, _ id: String) throws(WorldlineError) -> WorldlinePayment {
        let p = try payment(merchantID, id)
        guard let due = p.dueAt, due <= now else { return p }
        return try serialised(id) { () throws(WorldlineError) -> WorldlinePayment in try settled(try payment(merchantID, id)) }
    }

    /// `GET …/payments/{id}`.
    public func getPayment(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        .payment(try current(merchantID, id))
    }

    /// `GET …/payments/{id}/details`: the payment and its operations.
    public func details(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        .details(try current(merchantID, id))
    }

    /// `GET …/payments/{id}/captures`.
    public func captures(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        .captures(try current(merchantID, id))
    }

    /// `GET …/payments/{id}/refunds`.
    public func refunds(merchantID: String, id: String) throws(WorldlineError) -> WorldlineResult {
        .refunds(try current(merchantID, id))
    }

    /// `POST …/payments/{id}/capture`: all or part of what is left to capture. Not final (the
    /// default), the rest stays capturable; final, or all that is left, the rest is released at
    /// the issuer. The capture is requested (CAPTURE_REQUESTED) and settles later (`settle`).
    public func capture(merchantID: String, id: String, body: [UInt8]) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineCapture.parse(WorldlineJSON.parse(body))
        return try serialised(id) { () throws(WorldlineError) -> WorldlineResult in try capture(merchantID: merchantID, id: id, request) }
    }

    func capture(merchantID: String, id: String, _ request: WorldlineCapture) throws(WorldlineError) -> WorldlineResult {
        var p = try settled(try payment(merchantID, id))
        let open = p.capturable
        let transition = try step(p, .capture(open: open > 0))
        guard let authID = p.transactionID else { throw .internalError("payment \(id) has no authorisation in the ledger") }
        let amount = request.amount ?? open
        guard amount <= open else { throw .invalid("amount", "\(amount) is more than what is left to capture (\(open))") }
        let final = request.amount == nil || request.isFinal || amount == open
        let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(merchantID, at: now) }
        let auth = try stored("read the authorisation") { try store.transaction(id: authID) }
        let new = NewTransaction(terminal: merchant.terminalName, provider: .worldline, action: .capture, amount: amount,
                                 currency: auth?.currency ?? 978, clientReference: request.merchantReference ?? p.merchantReference,
                                 originalID: authID, createdAt: now)
        let operation = try operate(new, acting: auth, on: &p, transition: transition, merchant: merchant) { p, started in
            p.capturedAmount += amount
            if final { p.captureClosed = true }
            return WorldlineOperation(id: p.nextOperationID, kind: .capture, amount: amount, status: .captureRequested,
                                      transactionID: started.id, merchantReference: request.merchantReference, createdAt: now,
                                      settleAt: settleAt)
        } release: { p in
            // What a final capture leaves is released at the issuer only once the capture is recorded.
            if final, amount < open, let code = p.authorisationCode { context.host.void(authorisationCode: code, amount: Int(open - amount)) }
        }
        return .captured(operation, p)
    }

    /// `POST …/payments/{id}/cancel`: releases all (or, with `amountOfMoney`, part) of what is
    /// left to capture; what is not released stays capturable.
    public func cancel(merchantID: String, id: String, body: [UInt8] = []) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineCancel.parse(WorldlineJSON.parse(body))
        return try serialised(id) { () throws(WorldlineError) -> WorldlineResult in try cancelSerialised(merchantID: merchantID, id: id, request) }
    }

    func cancelSerialised(merchantID: String, id: String, _ request: WorldlineCancel) throws(WorldlineError) -> WorldlineResult {
        var p = try settled(try payment(merchantID, id))
        let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(merchantID, at: now) }
        let open = p.capturable
        let transition = try step(p, .cancel(open: open > 0))
        if let currency = request.currency, currency != p.currency {
            throw .invalid("amountOfMoney.currencyCode", "\(currency) is not the payment's currency \(p.currency)")
        }
        if p.status == .redirected {
            _ = pending.withLock { $0.removeValue(forKey: p.id) }
            p = try cancelBeforeAuthorisation(p, transition, merchant)
        } else {
            let amount = request.amount ?? open
            guard amount <= open else { throw .invalid("amountOfMoney.amount", "\(amount) is more than what is left to cancel (\(open))") }
            guard let authID = p.transactionID, let auth = try stored("read the authorisation", { try store.transaction(id: authID) }) else {
                throw .internalError("payment \(id) has no authorisation in the ledger")
            }
            let new = NewTransaction(terminal: merchant.terminalName, provider: .worldline, action: .cancel, amount: amount,
                                     currency: auth.currency, clientReference: p.merchantReference, originalID: authID, createdAt: now)
            _ = try operate(new, acting: auth, on: &p, transition: transition, merchant: merchant) { p, started in
                p.cancelledAmount = (p.cancelledAmount ?? 0) + amount
                return WorldlineOperation(id: p.nextOperationID, kind: .cancel, amount: amount, status: .cancelled, transactionID: started.id, createdAt: now)
            } release: { p in
                if let code = p.authorisationCode { context.host.void(authorisationCode: code, amount: Int(amount)) }
            }
        }
        return .cancelled(p)
    }

    /// A payment cancelled while it waited (a challenge, a redirect method's page) with no
    /// authorisation: a cancelled ledger row of its own carries its `payment.cancelled` webhook
    /// (an outbox row belongs to a transaction), while the payment keeps no authorisation row, so
    /// it stays status 1, cancelled by the customer.
    func cancelBeforeAuthorisation(_ payment: WorldlinePayment, _ transition: WorldlineLifecycle.Transition,
                                   _ merchant: WorldlineMerchant) throws(WorldlineError) -> WorldlinePayment {
        var p = payment
        p.status = transition.status
        p.captureClosed = true
        p.updatedAt = now
        let before = p
        let sale = p.authorizationMode == WorldlineCreatePayment.AuthorizationMode.sale.rawValue
        return try stored("record the cancel") {
            let started = try store.begin(NewTransaction(terminal: merchant.terminalName, provider: .worldline, action: sale ? .sale : .preAuth,
                                                         amount: before.amount, currency: ISO4217.numbers[before.currency] ?? 0, clientReference: before.merchantReference,
                                                         extra: WorldlineRender.text(["payment": before.id, "mode": before.authorizationMode]), createdAt: now))
            var cancelled = before
            // The row is listed with the payment as its cancellation (details' Operations).
            cancelled.operations.append(WorldlineOperation(id: cancelled.nextOperationID, kind: .cancel, amount: cancelled.amount, status: .cancelled,
                                                           transactionID: started.id, createdAt: now))
            try store.completeWorldlineOperation(transactionID: started.id,
                                                 Completion(status: .cancelled, message: "cancelled by the customer before any authorisation", completedAt: now),
                                                 payment: cancelled, outbox: webhooks(merchant, transition, payment: cancelled))
            return cancelled
        }
    }

    /// `POST …/payments/{id}/refund`: all or part of what was captured and not yet refunded,
    /// requested (REFUND_REQUESTED) and settled later. More than that is
    /// `ACTION_NOT_ALLOWED_ON_TRANSACTION`, as the platform answers.
    public func refund(merchantID: String, id: String, body: [UInt8]) throws(WorldlineError) -> WorldlineResult {
        let request = try WorldlineRefundRequest.parse(WorldlineJSON.parse(body))
        return try serialised(id) { () throws(WorldlineError) -> WorldlineResult in try refund(merchantID: merchantID, id: id, request) }
    }

    func refund(merchantID: String, id: String, _ request: WorldlineRefundRequest) throws(WorldlineError) -> WorldlineResult {
        var p = try settled(try payment(merchantID, id))
        if let currency = request.currency, currency != p.currency {
            throw .invalid("amountOfMoney.currencyCode", "\(currency) is not the payment's currency \(p.currency)")
        }
        let left = p.capturedAmount - p.refundedAmount
        let amount = request.amount ?? left
        guard amount <= left else {
            throw .wrongStatus("\(amount) is more than what is left to refund (\(left) of \(p.capturedAmount) captured)")
        }
        let transition = try step(p, .refund(refundable: left > 0))
        // The ledger row refunded: the sale itself, or a capture of a pre-authorisation that
        // still has that much unrefunded (a refund is taken from one capture).
        var capture: WorldlineOperation? = nil
        if p.authorizationMode != "SALE" {
            let captures = p.operations.filter { $0.kind == .capture }
            capture = captures.first { c in c.amount - p.operations.filter { $0.kind == .refund && $0.captureID == c.id }.reduce(0) { $0 + $1.amount } >= amount }
            guard capture != nil else {
                throw .wrongStatus("a refund is taken from one capture, and no capture has \(amount) left to refund; refund less at once")
            }
        }
        guard let originalID = capture?.transactionID ?? p.transactionID,
              let original = try stored("read the original", { try store.transaction(id: originalID) }) else {
            throw .internalError("payment \(id) has no captured transaction in the ledger")
        }
        let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(merchantID, at: now) }
        let new = NewTransaction(terminal: merchant.terminalName, provider: .worldline, action: .refund, amount: amount,
                                 currency: original.currency, clientReference: request.merchantReference ?? p.merchantReference,
                                 originalID: originalID, createdAt: now)
        let operation = try operate(new, acting: original, on: &p, transition: transition, merchant: merchant) { p, started in
            p.refundedAmount += amount
            return WorldlineOperation(id: p.nextOperationID, kind: .refund, amount: amount, status: .refundRequested, transactionID: started.id,
                                      merchantReference: request.merchantReference, createdAt: now, settleAt: settleAt, captureID: capture?.id)
        } release: { p in
            if let code = p.authorisationCode { context.host.void(authorisationCode: code, amount: Int(amount)) }
        }
        return .refunded(operation, p)
    }

    // MARK: Settlement

    /// When an operation requested now settles.
    var settleAt: Int64 { now + settings.settleAfter.components.seconds * 1_000_000 + settings.settleAfter.components.attoseconds / 1_000_000_000_000 }

    /// Settles the payments whose requested captures and refunds are due on the bench clock;
    /// the daemon calls it on a timer and whenever its clock is moved. Returns how many settled.
    @discardableResult
    public func settleDue() -> Int {
        var count = 0
        while true {
            guard let due = try? store.worldlinePaymentsDue(at: now, limit: 200), !due.isEmpty else { return count }
            var settledNow = 0
            for (merchantID, id) in due {
                let done = try? serialised(id) { () throws(WorldlineError) -> WorldlinePayment in try settled(try payment(merchantID, id)) }
                if done != nil { settledNow += 1 }
            }
            count += settledNow
            // A payment that cannot be settled now is tried again at the next call, not in a loop here.
            if due.count < 200 || settledNow == 0 { return count }
        }
    }

    /// Payment `p` with its requested operations settled when they are due: all of them
    /// together, as one batch, with the webhooks each sends (CAPTURED, REFUNDED). Run on a
    /// payment its caller holds (`serialised`); a read settles what is due before it answers.
    func settled(_ payment: WorldlinePayment) throws(WorldlineError) -> WorldlinePayment {
        guard let due = payment.dueAt, due <= now else { return payment }
        var p = payment
        let merchant = try stored("find the merchant") { try store.ensureWorldlineMerchant(p.merchantID, at: now) }
        var outbox: [(Int64, OutboxMessage)] = []
        let captures = p.operations.indices.filter { p.operations[$0].kind == .capture && p.operations[$0].isRequested }
        if let last = captures.last {
            let transition = try step(p, .captureSettled)
            for i in captures { p.operations[i].status = .captured }
            p.status = transition.status
            if let row = p.operations[last].transactionID { outbox += webhooks(merchant, transition, payment: p).map { (row, $0) } }
        }
        let refunds = p.operations.indices.filter { p.operations[$0].kind == .refund && p.operations[$0].isRequested }
        if !refunds.isEmpty {
            let transition = try step(p, .refundSettled(whole: p.refundedAmount == p.capturedAmount && p.capturable == 0))
            for i in refunds { p.operations[i].status = .refunded }
            p.status = transition.status
            for i in refunds {
                guard let row = p.operations[i].transactionID else { continue }
                let types = transition.webhooks.filter { $0.hasPrefix("refund.") || i == refunds.last }
                outbox += types.flatMap { type in
                    type.hasPrefix("refund.") ? webhooks(merchant, type: type, refund: (p.operations[i], p)) : webhooks(merchant, type: type, payment: p)
                }.map { (row, $0) }
            }
        }
        p.updatedAt = now
        let settledPayment = p
        let messages = outbox
        try stored("settle the payment") { try store.settleWorldlinePayment(settledPayment, outbox: messages, at: now) }
        return p
    }

    /// An operation on payment `p` on the one path (`PlatformOperation`): `change` makes the
    /// operation (given the row) and applies its amounts, the transition its status, the
    /// webhooks go with it; a record the ledger refuses (a total it checks) leaves the payment as
    /// it was and the row failed.
    func operate(_ new: NewTransaction, acting original: StoredTransaction?, on p: inout WorldlinePayment,
                 transition: WorldlineLifecycle.Transition, merchant: WorldlineMerchant,
                 _ change: (inout WorldlinePayment, Started) -> WorldlineOperation,
                 release: (WorldlinePayment) -> Void) throws(WorldlineError) -> WorldlineOperation {
        let before = p
        do throws(PlatformOperation.Failure) {
            let (_, done) = try PlatformOperation.run(context, store, new, acting: original, record: { started, completion in
                var next = before
                let operation = change(&next, started)
                next.operations.append(operation)
                next.status = transition.status
                next.updatedAt = now
                try store.completeWorldlineOperation(transactionID: started.id, completion, payment: next,
                                                     outbox: webhooks(merchant, transition, payment: next, refund: operation))
                return (next, operation)
            }, release: {})
            p = done.0
            release(p)
            return done.1
        } catch {
            switch (error, error.rule) {
            case (.notBegun, let rule?): throw .invalid(rule.field, rule.rule)
            case (.notRecorded, let rule?): throw .wrongStatus("the \(new.action.rawValue) cannot be recorded: \(rule.field): \(rule.rule)")
            default: throw .internalError("the \(new.action.rawValue) could not be recorded: \(error)")
            }
        }
    }

    /// Runs an operation on payment `id` with no other operation on it running (`PaymentSerialiser`).
    func serialised<T>(_ id: String, _ body: () throws(WorldlineError) -> T) throws(WorldlineError) -> T {
        try context.payments.run("worldline:" + id, body)
    }

    // MARK: 3-D Secure

    /// The payment whose challenge page `token` opens; an unknown payment and a wrong token are
    /// the same 404, so the page tells nothing of payments it was not given.
    public func challengePayment(paymentID: String, token: String) throws(WorldlineError) -> WorldlinePayment {
        guard let p = try stored("read the payment", { try store.worldlinePayment(id: paymentID) }), PageToken.matches(token, p.challengeTokenHash) else {
            throw .notFound("UNKNOWN_RESOURCE", "no such challenge")
        }
        return p
    }

    /// The challenge of a REDIRECTED payment, answered: passed, the payment is authorised;
    /// failed, it is rejected. Returns the payment and the URL to send the customer back to.
    public func answerChallenge(paymentID: String, passed: Bool) throws(WorldlineError) -> (payment: WorldlinePayment, returnURL: String) {
        try serialised(paymentID) { () throws(WorldlineError) -> (payment: WorldlinePayment, returnURL: String) in
            try answerChallengeSerialised(paymentID: paymentID, passed: passed)
        }
    }

    func answerChallengeSerialised(paymentID: String, passed: Bool) throws(WorldlineError) -> (payment: WorldlinePayment, returnURL: String) {
        guard let merchantID = paymentID.isEmpty ? nil : try stored("read the payment", { try store.worldlinePayment(id: paymentID)?.merchantID }) else {
            throw .notFound("UNKNOWN_PAYMENT_ID", "no payment \(shownValue(paymentID, 40))")
        }
        var p = try payment(merchantID, paymentID)
        let expired = try step(p, .challengeExpired)
        let waiting = pending.withLock { $0.removeValue(forKey: paymentID) }
        let returnURL = p.returnURL ?? ""
        if let waiting {
            p.threeDSecure = passed ? "challenge-passed" : "challenge-failed"
            p = try authorise(p, card: waiting.card, request: waiting.request, failedChallenge: !passed)
        } else {
            // The card data was in memory only: after a restart the challenge cannot go on.
            p.status = expired.status
            p.responseCode = "3DS"
            p.message = "the challenge expired: the platform restarted while it waited"
            p.updatedAt = now
            try stored("record the challenge") {
                try store.completeWorldlineOperation(transactionID: nil, nil, payment: p, outbox: [])
            }
        }
        let separator = returnURL.contains("?") ? "&" : "?"
        let back = returnURL + separator + "RETURNMAC=" + QueryValue.encode(p.returnMAC ?? "") + "&paymentId=" + QueryValue.encode(p.id)
        return (p, back)
    }

    // MARK: Helpers

    static func randomUUID() -> String { UUID().uuidString.lowercased() }

    static func isoTime(_ micros: Int64) -> String { PlatformText.isoTime(micros: micros) }
}
