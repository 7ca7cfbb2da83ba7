import EMV
import Foundation
import Fronts
import Ledger
import Terminal
import VirtualCard

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

/// Carries the result a front renders inside the ledger's write out to the reply.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    var value: T?
}

extension Bench {
    /// A `billpocket://` request: tokens first (they configure the terminal for the user), then
    /// the sale or the refund.
    func billpocket(_ url: String, terminal name: String?) async throws(DaemonError) -> OpenResult {
        let request: BillpocketRequest
        do throws(BillpocketRequestError) { request = try BillpocketRequest.parse(url) } catch {
            guard let scheme = error.urlScheme else { throw .badRequest(field: error.field, rule: error.rule) }
            return billpocketAnswer(urlScheme: scheme, BillpocketResult(rejecting: error), transaction: nil)
        }
        let terminal = try self.terminal(name)
        try terminal.acquire(request.command.isSale ? "billpocket venta" : "billpocket devolucion")
        defer { terminal.release() }
        func failed(_ failure: BillpocketFailure) -> OpenResult {
            billpocketAnswer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: failure), transaction: nil)
        }

        let access = try ledgerCall {
            try self.ledger.configureBillpocket(terminal: terminal.settings.name, userToken: request.userToken,
                                                deviceToken: request.deviceToken, at: self.clock.nowMicroseconds())
        }
        let user: BillpocketUser
        switch access {
        case .granted(let u, let reconfigured):
            user = u
            if reconfigured { publish("billpocket-configured", terminal: terminal.settings.name, ["user": String(u.id)]) }
        case .unknownUserToken: return failed(.userTokenUnknown)
        case .invalidatedUserToken: return failed(.userTokenInvalidated)
        case .rotatedUserToken: return failed(.userTokenRotated)
        case .unknownDeviceToken, .deviceTokenOfAnotherUser: return failed(.deviceTokenUnknown)
        case .deviceTokenOfAnotherDevice: return failed(.deviceTokenInUse)
        }
        switch request.command {
        case .venta(let sale):
            return try await billpocketSale(request, sale, user: user, on: terminal)
        case .devolucion(let refund):
            return try billpocketRefund(request, refund, user: user, on: terminal)
        }
    }

    // MARK: venta

    func billpocketSale(_ request: BillpocketRequest, _ sale: BillpocketSale, user: BillpocketUser,
                        on terminal: TerminalRuntime) async throws(DaemonError) -> OpenResult {
        func failed(_ failure: BillpocketFailure) -> OpenResult {
            billpocketAnswer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: failure), transaction: nil)
        }
        let plans = user.msiMinimums.map { BillpocketInstallmentPlan(months: $0.key, minimumAmount: Int($0.value)) }
        if let refusal = BillpocketMSI.check(msi: sale.msi, amount: sale.amount, tip: sale.tip, userPlans: plans) {
            return failed(.msi(refusal))
        }
        var photo: String? = nil
        if sale.photo != .none {
            let mandatory = sale.photo == .mandatory
            let answer = await terminal.perform { [configuration] () -> Result<KeypadInput, KernelError> in
                do throws(KernelError) {
                    return .success(try terminal.keypad.ask(.photo(mandatory: mandatory), timeout: configuration.promptTimeout, step: "photo"))
                } catch { return .failure(error) }
            }
            switch answer {
            case .success(.confirm): photo = "taken"
            case .success: if mandatory { return failed(.photoRequired) } else { photo = "skipped" }
            case .failure(let error):
                if mandatory || terminal.isAborted { return failed(BillpocketFailure(error)) }
                photo = "skipped"
            }
        }

        let settings = terminal.settings
        let now = clock.nowMicroseconds()
        let transactionID = Self.billpocketTransactionID()
        let extra = BillpocketExtra(transactionid: transactionID, identifier: request.identifier, user: user.id, reference: sale.reference,
                                    email: sale.email, phone: sale.phone, msi: sale.msi > 0 ? sale.msi : nil, photo: photo,
                                    comesFromQR: sale.comesFromQR ? true : nil)
        let new = NewTransaction(terminal: settings.name, provider: .billpocket, action: .sale, amount: Int64(sale.total),
                                 tipAmount: Int64(sale.tip), currency: mexico, clientReference: request.identifier,
                                 installments: sale.msi > 0 ? sale.msi : nil, extra: extra.json, createdAt: now)
        // A brand Billpocket does not take is refused once the card is read, before the host is asked.
        let acceptBrand: @Sendable (CardRead) throws(KernelError) -> Int? = { card throws(KernelError) in
            guard BillpocketFormat.cardType(brand: card.brand) != nil else { throw .noApplication }
            return sale.msi > 0 ? sale.msi : nil
        }
        let rendered = ResultBox<BillpocketResult>()
        let (stored, _): (StoredTransaction, [OutboxMessage])
        do {
            (stored, _) = try await cardTransaction(
                on: terminal, new, kind: .purchase, amountTable: configuration.billpocketAmountTable, tableAmount: sale.amount,
                country: mexico, onCardRead: acceptBrand
            ) { [self] card in
                var result: BillpocketResult
                if let outcome = card.outcome, outcome.decision == .approved {
                    let profile = profile(pan: outcome.pan)
                    result = BillpocketResult(
                        approving: sale, identifier: request.identifier, transactionId: transactionID,
                        authorization: outcome.authorisationCode ?? "", creditCard: BillpocketFormat.creditCard(pan: outcome.pan),
                        cardType: BillpocketFormat.cardType(brand: outcome.brand) ?? "", url: card.started.uuid,
                        bank: profile?.issuerName ?? "", accountType: profile.map { Self.accountType($0.accountType) } ?? .credit,
                        arqc: outcome.arqc.map(Hex.encode), aid: Hex.encode(outcome.aid), appLabel: outcome.applicationLabel)
                } else if let outcome = card.outcome {
                    result = BillpocketResult(failing: request, with: BillpocketFailure(outcome) ?? .declinedByCard)
                } else {
                    let error = card.failure!.error
                    result = BillpocketResult(failing: request, with: BillpocketFailure(error))
                }
                rendered.value = result
                return billpocketMessages(urlScheme: request.urlScheme, result: result)
            }
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(ledger: error, "the ledger could not record the transaction")
        }
        return billpocketAnswer(urlScheme: request.urlScheme, rendered.value!, transaction: stored)
    }

    // MARK: devolucion

    /// A refund needs no card: the original sale's approval is voided at the host, and the ledger
    /// records the refund and marks the sale refunded in one write.
    func billpocketRefund(_ request: BillpocketRequest, _ refund: BillpocketRefund, user: BillpocketUser,
                          on terminal: TerminalRuntime) throws(DaemonError) -> OpenResult {
        func failed(_ refusal: BillpocketRefundRefusal) -> OpenResult {
            billpocketAnswer(urlScheme: request.urlScheme, BillpocketResult(failing: request, with: .refund(refusal)), transaction: nil)
        }
        guard let original = try ledgerCall({ try self.ledger.billpocketTransaction(transactionID: refund.transactionId) }),
              original.action == .sale, let saleExtra = BillpocketExtra(original), saleExtra.user == user.id else {
            return failed(.originalNotFound)
        }
        switch original.status {
        case .approved: break
        case .refunded: return failed(.alreadyRefunded)
        default: return failed(.notAnApprovedSale)
        }
        let now = clock.nowMicroseconds()
        let authorisedAt = Date(timeIntervalSince1970: Double(original.completedAt ?? original.createdAt) / 1_000_000)
        if let refusal = BillpocketRefundWindow.check(authorisedAt: authorisedAt, now: Date(timeIntervalSince1970: Double(now) / 1_000_000)) {
            return failed(refusal)
        }
        let settings = terminal.settings
        let transactionID = Self.billpocketTransactionID()
        do {
            let started = try ledger.begin(NewTransaction(
                terminal: settings.name, provider: .billpocket, action: .refund, amount: original.amount, tipAmount: original.tipAmount,
                currency: original.currency, clientReference: request.identifier, originalID: original.id,
                extra: BillpocketExtra(transactionid: transactionID, identifier: request.identifier, user: user.id,
                                       reference: saleExtra.reference).json,
                createdAt: now))
            if let code = original.authorisationCode { host.void(authorisationCode: code, amount: Int(original.amount)) }
            // What the sale's callback said of the card (bank, account type) is what the refund's says.
            let saleFields = try ledger.outbox(transactionID: original.id).first { $0.kind == .callback }
                .map { row in
                    Dictionary(RenderedCallback.fields(of: row.payload, renderedAfter: row.target).map { ($0.name, $0.value) },
                               uniquingKeysWith: { first, _ in first })
                } ?? [:]
            let result = BillpocketResult(
                result: .aprobada, amount: Int(original.amount - original.tipAmount),
                tip: original.tipAmount > 0 ? Int(original.tipAmount) : nil, reference: saleExtra.reference, transactionId: transactionID,
                authorization: original.authorisationCode ?? "", creditCard: String((original.maskedPAN ?? "").suffix(4)),
                cardType: BillpocketFormat.cardType(brand: Self.brand(original)) ?? "", aid: original.aid,
                appLabel: original.applicationLabel, url: started.uuid, identifier: request.identifier,
                bank: saleFields["bank"] ?? "", accountType: saleFields["accountType"].flatMap(BillpocketAccountType.init(rawValue:)))
            let outbox = billpocketMessages(urlScheme: request.urlScheme, result: result)
            let stored = try ledger.complete(id: started.id, Completion.approved(actingOn: original, completedAt: now), outbox: outbox)
            publish("outcome", terminal: settings.name, ["stan": stored.stan.description, "status": stored.status.rawValue,
                                                         "action": TransactionAction.refund.rawValue])
            return billpocketAnswer(urlScheme: request.urlScheme, result, transaction: stored)
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(ledger: error, "the ledger could not record the refund")
        }
    }

    // MARK: Vouchers

    /// The digital voucher the callback's `url` names: the transaction's UUID.
    public func billpocketVoucher(_ id: String) throws(DaemonError) -> String {
        guard let t = try ledgerCall({ try self.ledger.transaction(uuid: id.lowercased()) }), t.provider == .billpocket,
              t.action == .sale || t.action == .refund, let extra = BillpocketExtra(t) else {
            throw .notFound("no Billpocket voucher \"\(id)\"")
        }
        guard t.status == .approved || t.status == .refunded else {
            throw .notFound("transaction \(extra.transactionid) was \(t.status.rawValue): only approved transactions have a voucher")
        }
        let user = try ledgerCall { try self.ledger.billpocketUsers().first { $0.id == extra.user } }
        let voucher = BillpocketVoucher(
            kind: t.action == .refund ? .devolucion : .venta, merchantName: user?.name,
            merchantId: String(format: "%07lld", extra.user), terminalId: t.tid,
            date: Date(timeIntervalSince1970: Double(t.completedAt ?? t.createdAt) / 1_000_000),
            amount: Int(t.amount - t.tipAmount), tip: Int(t.tipAmount), msi: t.installments ?? 0,
            cardType: BillpocketFormat.cardType(brand: Self.brand(t)) ?? "", creditCard: String((t.maskedPAN ?? "").suffix(4)),
            authorization: t.authorisationCode ?? "", aid: t.aid, appLabel: t.applicationLabel, arqc: t.arqc,
            reference: extra.reference, transactionId: extra.transactionid)
        return voucher.render()
    }

    // MARK: Users and device tokens (the admin API)

    /// Creates a user and returns it with its token, which is shown only this once.
    public func createBillpocketUser(name: String, msiMinimums: [Int: Int64]) throws(DaemonError) -> (BillpocketUser, String) {
        let token = BillpocketTokens.userToken(randomBytes: Self.randomBytes(BillpocketTokens.userTokenRandomByteCount))
        let user = try adminCall { try self.ledger.createBillpocketUser(name: name, token: token, msiMinimums: msiMinimums, at: self.clock.nowMicroseconds()) }
        return (user, token)
    }

    /// Gives a user a new token (shown only this once); the old one is refused as rotated.
    public func rotateBillpocketUser(id: Int64) throws(DaemonError) -> (BillpocketUser, String) {
        let token = BillpocketTokens.userToken(randomBytes: Self.randomBytes(BillpocketTokens.userTokenRandomByteCount))
        let user = try adminCall { try self.ledger.rotateBillpocketUser(id: id, newToken: token, at: self.clock.nowMicroseconds()) }
        return (user, token)
    }

    public func invalidateBillpocketUser(id: Int64) throws(DaemonError) -> BillpocketUser {
        try adminCall { try self.ledger.invalidateBillpocketUser(id: id, at: self.clock.nowMicroseconds()) }
    }

    /// Issues a device token (shown only this once) for a user.
    public func issueBillpocketDeviceToken(userID: Int64, alias: String?) throws(DaemonError) -> (BillpocketDeviceToken, String) {
        let token = BillpocketTokens.deviceToken(randomBytes: Self.randomBytes(BillpocketTokens.deviceTokenRandomByteCount))
        let issued = try adminCall {
            try self.ledger.issueBillpocketDeviceToken(userID: userID, alias: alias, token: token, at: self.clock.nowMicroseconds())
        }
        return (issued, token)
    }

    /// A ledger call of the admin API: a broken rule is the caller's 400, the rest a 500.
    func adminCall<T>(_ body: () throws -> T) throws(DaemonError) -> T {
        do { return try body() } catch let error as LedgerError {
            if case .invalid(let field, let rule) = error {
                if rule.hasPrefix("no Billpocket user") { throw .notFound(rule) }
                throw .badRequest(field: field, rule: rule)
            }
            throw DaemonError(ledger: error, "ledger")
        } catch {
            throw DaemonError(ledger: error, "ledger")
        }
    }

    // MARK: Rendering

    func billpocketMessages(urlScheme: BillpocketURLScheme?, result: BillpocketResult) -> [OutboxMessage] {
        guard let urlScheme else { return [] }
        let url = BillpocketCallback.url(urlScheme: urlScheme, result: result)
        return [OutboxMessage(kind: .callback, target: urlScheme.description, payload: url, nextAttemptAt: CallbackDelivery.wallNow())]
    }

    func billpocketAnswer(urlScheme: BillpocketURLScheme?, _ result: BillpocketResult, transaction: StoredTransaction?) -> OpenResult {
        OpenResult(callback: urlScheme.map { BillpocketCallback.url(urlScheme: $0, result: result) },
                   fields: BillpocketCallback.fields(result).map { OpenResult.Field(name: $0.name, value: $0.value) },
                   status: result.result.rawValue, message: result.statusInfo, transaction: transaction.map(TransactionView.init))
    }

    static func accountType(_ type: AccountType) -> BillpocketAccountType {
        switch type {
        case .credit: .credit
        case .debit: .debit
        }
    }

    /// Billpocket's `transactionid`: 16 random digits, the first not 0 (the document's example
    /// begins `72037…`); 9·10¹⁵ values, found again through the ledger's index.
    /// 16 random digits, the first not 0, as Billpocket's; never one that looks like a card
    /// number (one in about twenty-five would), which request text is refused for holding.
    static func billpocketTransactionID() -> String {
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
