import EMV
import Foundation
import Fronts
import LedgerModel
import Terminal

/// The Billpocket app sells in Mexico only: pesos, and Mexico as the terminal's country.
let mexico = 484

/// What a Billpocket transaction keeps beside the ledger's own columns (its `extra`).
struct BillpocketExtra: Codable, Sendable {
    var transactionid: String
    var identifier: String
    var user: Int64
    var reference: String?
    var email: String?
    var phone: String?
    var msi: Int?
    var photo: String?
    var comesFromQR: Bool?
    /// Parameters the request sent that its transaction does not use (N/A in the document's
    /// table), ignored.
    var ignored: [String]?

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }
}

extension BillpocketExtra {
    /// (In an extension, so the struct keeps its synthesised memberwise initialiser.)
    init?(_ stored: StoredTransaction) {
        guard let text = stored.extra, let value = try? JSONDecoder().decode(Self.self, from: Data(text.utf8)) else { return nil }
        self = value
    }
}

/// The Billpocket app: `billpocket://transaction=venta&…` — tokens, sales and refunds
/// (docs/billpocket.md), the vouchers its callbacks point at, and its users and device tokens.
public struct BillpocketFront: Front {
    /// What its workflows run against.
    public let context: WorkflowContext
    public var scheme: String { "billpocket" }
    public var appName: String { "Billpocket app" }

    /// A Billpocket front over `context`.
    public init(context: WorkflowContext) { self.context = context }

    /// Tokens first (they configure the terminal for the user), then the sale or the refund.
    public func open(_ url: String, terminal name: String?) async throws(WorkflowError) -> Answer {
        let request: BillpocketRequest
        do throws(BillpocketRequestError) { request = try BillpocketRequest.parse(url) } catch {
            guard let scheme = error.urlScheme else { throw .badRequest(field: error.field, rule: error.rule) }
            return answer(urlScheme: scheme, BillpocketResult(rejecting: error), transaction: nil)
        }
        let terminal = try context.terminals.terminal(name)
        try terminal.acquire(request.command.isSale ? "billpocket venta" : "billpocket devolucion")
        defer { terminal.release() }
        func failed(_ failure: BillpocketFailure) -> Answer {
            answer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: failure, language: style.language), transaction: nil)
        }

        let access = try context.stored {
            try context.store.configureBillpocket(terminal: terminal.name, userToken: request.userToken,
                                                  deviceToken: request.deviceToken, at: context.clock.nowMicroseconds())
        }
        let user: BillpocketUser
        switch access {
        case .granted(let u, let reconfigured):
            user = u
            if reconfigured { context.publish(.billpocketConfigured(user: u.id), terminal: terminal.name) }
        case .unknownUserToken: return failed(.userTokenUnknown)
        case .invalidatedUserToken: return failed(.userTokenInvalidated)
        case .rotatedUserToken: return failed(.userTokenRotated)
        case .unknownDeviceToken, .deviceTokenOfAnotherUser: return failed(.deviceTokenUnknown)
        case .deviceTokenOfAnotherDevice: return failed(.deviceTokenInUse)
        }
        switch request.command {
        case .venta(let sale):
            return try await self.sale(request, sale, user: user, on: terminal)
        case .devolucion(let refund):
            return try await self.refund(request, refund, user: user, on: terminal)
        }
    }

    // MARK: venta

    func sale(_ request: BillpocketRequest, _ sale: BillpocketSale, user: BillpocketUser,
              on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        func failed(_ failure: BillpocketFailure) -> Answer {
            answer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: failure, language: style.language), transaction: nil)
        }
        let plans = user.msiMinimums.map { BillpocketInstallmentPlan(months: $0.key, minimumAmount: Int($0.value)) }
        if let refusal = BillpocketMSI.check(msi: sale.msi, amount: sale.amount, tip: sale.tip, userPlans: plans) {
            return failed(.msi(refusal))
        }
        var photo: String? = nil
        if sale.photo != .none {
            let mandatory = sale.photo == .mandatory
            switch await context.ask(terminal, .photo(mandatory: mandatory), step: "photo") {
            case .success(.confirm): photo = "taken"
            case .success: if mandatory { return failed(.photoRequired) } else { photo = "skipped" }
            case .failure(let error):
                if mandatory || terminal.isAborted { return failed(BillpocketFailure(error)) }
                photo = "skipped"
            }
        }

        let now = context.clock.nowMicroseconds()
        let transactionID = Self.transactionID()
        let extra = BillpocketExtra(transactionid: transactionID, identifier: request.identifier, user: user.id, reference: sale.reference,
                                    email: sale.email, phone: sale.phone, msi: sale.msi > 0 ? sale.msi : nil, photo: photo,
                                    comesFromQR: sale.comesFromQR ? true : nil)
        let new = NewTransaction(terminal: terminal.name, provider: .billpocket, action: .sale, amount: Int64(sale.total),
                                 tipAmount: Int64(sale.tip), currency: mexico, clientReference: request.identifier,
                                 installments: sale.msi > 0 ? sale.msi : nil, extra: extra.json, createdAt: now)
        // A brand Billpocket does not take is refused once the card is read, before the host is asked.
        let acceptBrand: @Sendable (CardRead) throws(KernelError) -> Int? = { card throws(KernelError) in
            guard BillpocketFormat.cardType(brand: card.brand) != nil else { throw .noApplication }
            return sale.msi > 0 ? sale.msi : nil
        }
        let plan = CardTransactionPlan(new: new, kind: .purchase, amountTable: context.settings.billpocketAmountTable,
                                       tableAmount: sale.amount, country: mexico, onCardRead: acceptBrand)
        let cards = context.cards
        return try await context.cardTransaction(on: terminal, plan) { run in
            let result: BillpocketResult
            switch run.result {
            case .success(let outcome) where outcome.decision == .approved:
                let facts = cards.facts(pan: outcome.pan)
                result = BillpocketResult(
                    approving: sale, identifier: request.identifier, transactionId: transactionID,
                    authorization: outcome.authorisationCode ?? "", creditCard: BillpocketFormat.creditCard(pan: outcome.pan),
                    cardType: BillpocketFormat.cardType(brand: outcome.brand) ?? "", url: run.started.uuid,
                    bank: facts?.issuerName ?? "", accountType: facts.map { $0.debit ? .debit : .credit } ?? .credit,
                    // A swipe has no chip data: the three fields are left out ("when available").
                    arqc: outcome.arqc.map(Hex.encode), aid: outcome.aid.isEmpty ? nil : Hex.encode(outcome.aid),
                    appLabel: outcome.aid.isEmpty ? nil : outcome.applicationLabel)
            case .success(let outcome):
                result = BillpocketResult(failing: request, with: BillpocketFailure(outcome) ?? .declinedByCard, language: style.language)
            case .failure(let failure):
                result = BillpocketResult(failing: request, with: BillpocketFailure(failure.error), language: style.language)
            }
            return callback(urlScheme: request.urlScheme, result)
        }
    }

    // MARK: devolucion

    /// A refund needs no card: the original sale's approval is voided at the host, and the ledger
    /// records the refund and marks the sale refunded in one write.
    func refund(_ request: BillpocketRequest, _ refund: BillpocketRefund, user: BillpocketUser,
                on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        func failed(_ refusal: BillpocketRefundRefusal) -> Answer {
            answer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: .refund(refusal), language: style.language), transaction: nil)
        }
        let store = context.store
        guard let original = try context.stored({ try store.billpocketTransaction(transactionID: refund.transactionId) }),
              original.action == .sale, let saleExtra = BillpocketExtra(original), saleExtra.user == user.id else {
            return failed(.originalNotFound)
        }
        switch original.status {
        case .approved: break
        case .refunded: return failed(.alreadyRefunded)
        default: return failed(.notAnApprovedSale)
        }
        let now = context.clock.nowMicroseconds()
        let authorisedAt = Date(timeIntervalSince1970: Double(original.completedAt ?? original.createdAt) / 1_000_000)
        if let refusal = BillpocketRefundWindow.check(authorisedAt: authorisedAt, now: Date(timeIntervalSince1970: Double(now) / 1_000_000)) {
            return failed(refusal)
        }
        let transactionID = Self.transactionID()
        let new = NewTransaction(
            terminal: terminal.name, provider: .billpocket, action: .refund, amount: original.amount, tipAmount: original.tipAmount,
            currency: original.currency, clientReference: request.identifier, originalID: original.id,
            extra: BillpocketExtra(transactionid: transactionID, identifier: request.identifier, user: user.id, reference: saleExtra.reference,
                                   ignored: request.ignored.isEmpty ? nil : request.ignored).json,
            createdAt: now)
        // The vendor's own sample sends every field on every request: what a refund does not use is
        // ignored, and said so in its record.
        let note = request.ignored.isEmpty ? nil : "ignored (N/A in devolucion): " + request.ignored.joined(separator: ", ")
        return try await context.recordWithoutCard(on: terminal, new, actingOn: original, release: original.amount, note: note) { started in
            // What the sale's callback said of the card (bank, account type) is what the refund's says.
            let saleCallback = try store.outbox(transactionID: original.id).first { $0.kind == .callback }
                .map { Callback(stored: $0, status: "", message: "") }
            let result = BillpocketResult(
                result: .aprobada, amount: Int(original.amount - original.tipAmount),
                tip: original.tipAmount > 0 ? Int(original.tipAmount) : nil, reference: saleExtra.reference, transactionId: transactionID,
                authorization: original.authorisationCode ?? "", creditCard: String((original.maskedPAN ?? "").suffix(4)),
                cardType: BillpocketFormat.cardType(brand: original.cardBrand) ?? "", aid: original.aid,
                appLabel: original.applicationLabel, url: started.uuid, identifier: request.identifier,
                bank: saleCallback?.value("bank") ?? "", accountType: saleCallback?.value("accountType").flatMap(BillpocketAccountType.init(rawValue:)))
            return callback(urlScheme: request.urlScheme, result)
        }
    }

    // MARK: Vouchers

    /// The digital voucher the callback's `url` names: the transaction's UUID.
    public func voucher(_ id: String) throws(WorkflowError) -> String {
        let store = context.store
        guard let t = try context.stored({ try store.transaction(uuid: id.lowercased()) }), t.provider == .billpocket,
              t.action == .sale || t.action == .refund, let extra = BillpocketExtra(t) else {
            throw .notFound("no Billpocket voucher \"\(id)\"")
        }
        guard t.status == .approved || t.status == .refunded else {
            throw .notFound("transaction \(extra.transactionid) was \(t.status.rawValue): only approved transactions have a voucher")
        }
        let user = try context.stored { try store.billpocketUsers().first { $0.id == extra.user } }
        let voucher = BillpocketVoucher(
            kind: t.action == .refund ? .devolucion : .venta, merchantName: user?.name,
            merchantId: String(format: "%07lld", extra.user), terminalId: t.tid,
            date: Date(timeIntervalSince1970: Double(t.completedAt ?? t.createdAt) / 1_000_000),
            amount: Int(t.amount - t.tipAmount), tip: Int(t.tipAmount), msi: t.installments ?? 0,
            cardType: BillpocketFormat.cardType(brand: t.cardBrand) ?? "", creditCard: String((t.maskedPAN ?? "").suffix(4)),
            authorization: t.authorisationCode ?? "", aid: t.aid, appLabel: t.applicationLabel, arqc: t.arqc,
            reference: extra.reference, transactionId: extra.transactionid)
        return voucher.render()
    }

    // MARK: Users and device tokens (the admin API)

    /// Creates a user and returns it with its token, which is shown only this once.
    public func createUser(name: String, msiMinimums: [Int: Int64]) throws(WorkflowError) -> (BillpocketUser, String) {
        let token = BillpocketTokens.userToken(randomBytes: Self.randomBytes(BillpocketTokens.userTokenRandomByteCount))
        let user = try admin { try context.store.createBillpocketUser(name: name, token: token, msiMinimums: msiMinimums, at: context.clock.nowMicroseconds()) }
        return (user, token)
    }

    /// Gives a user a new token (shown only this once); the old one is refused as rotated.
    public func rotateUser(id: Int64) throws(WorkflowError) -> (BillpocketUser, String) {
        let token = BillpocketTokens.userToken(randomBytes: Self.randomBytes(BillpocketTokens.userTokenRandomByteCount))
        let user = try admin { try context.store.rotateBillpocketUser(id: id, newToken: token, at: context.clock.nowMicroseconds()) }
        return (user, token)
    }

    /// Invalidates a user: its token is refused as invalidated from now on.
    public func invalidateUser(id: Int64) throws(WorkflowError) -> BillpocketUser {
        try admin { try context.store.invalidateBillpocketUser(id: id, at: context.clock.nowMicroseconds()) }
    }

    /// Every user, without tokens.
    public func users() throws(WorkflowError) -> [BillpocketUser] {
        try admin { try context.store.billpocketUsers() }
    }

    /// Issues a device token (shown only this once) for a user.
    public func issueDeviceToken(userID: Int64, alias: String?) throws(WorkflowError) -> (BillpocketDeviceToken, String) {
        let token = BillpocketTokens.deviceToken(randomBytes: Self.randomBytes(BillpocketTokens.deviceTokenRandomByteCount))
        let issued = try admin {
            try context.store.issueBillpocketDeviceToken(userID: userID, alias: alias, token: token, at: context.clock.nowMicroseconds())
        }
        return (issued, token)
    }

    /// The device tokens issued (to one user, when given), without the tokens themselves.
    public func deviceTokens(userID: Int64?) throws(WorkflowError) -> [BillpocketDeviceToken] {
        try admin { try context.store.billpocketDeviceTokens(userID: userID) }
    }

    /// A ledger call of the admin API: a broken rule is the caller's (an unknown user not found),
    /// the rest the daemon's.
    func admin<T>(_ body: () throws -> T) throws(WorkflowError) -> T {
        do { return try body() } catch let error as LedgerError {
            if case .unknownBillpocketUser = error { throw .notFound(error.rule) }
            if case .invalid(let field, let rule) = error { throw .badRequest(field: field, rule: rule) }
            throw WorkflowError(ledger: error, "ledger")
        } catch {
            throw WorkflowError(ledger: error, "ledger")
        }
    }

    // MARK: Rendering

    /// How the callbacks read (`billpocket.statusinfo_language`, `billpocket.installments_name`).
    var style: BillpocketCallbackStyle { context.settings.billpocketCallbacks }

    func callback(urlScheme: BillpocketURLScheme?, _ result: BillpocketResult) -> Callback {
        let installments = style.installments
        return Callback(url: urlScheme.map { BillpocketCallback.url(urlScheme: $0, result: result, installments: installments) },
                        target: urlScheme?.description, fields: BillpocketCallback.fields(result, installments: installments),
                        status: result.result.rawValue, message: result.statusInfo)
    }

    func answer(urlScheme: BillpocketURLScheme?, _ result: BillpocketResult, transaction: StoredTransaction?) -> Answer {
        Answer(callback: callback(urlScheme: urlScheme, result), transaction: transaction)
    }

    /// Billpocket's `transactionid`: 16 random digits, the first not 0, as Billpocket's (the
    /// document's example begins `72037…`); 9·10¹⁵ values, found again through the ledger's
    /// index. Never one that looks like a card number (one in about twenty-five would), which
    /// request text is refused for holding.
    static func transactionID() -> String {
        var generator = SystemRandomNumberGenerator()
        while true {
            let id = String(Int.random(in: 1...9, using: &generator)) + (1..<16).map { _ in String(Int.random(in: 0...9, using: &generator)) }.joined()
            if !PAN.looksLikeItHoldsAPAN(id) { return id }
        }
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
}

extension BillpocketCommand {
    var isSale: Bool {
        if case .venta = self { return true }
        return false
    }
}
