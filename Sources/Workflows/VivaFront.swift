import EMV
import Fronts
import LedgerModel
import Terminal

/// The Viva Wallet Card Terminal app: `vivapayclient://pay/v1?…` — sale, pre-authorisation,
/// capture, cancel, abort, batch and transaction details (docs/viva.md).
public struct VivaFront: Front {
    /// What its workflows run against.
    public let context: WorkflowContext
    public var scheme: String { "vivapayclient" }
    public var appName: String { "Viva Card Terminal app" }

    /// A Viva front over `context`.
    public init(context: WorkflowContext) { self.context = context }

    public func open(_ url: String, terminal name: String?) async throws(WorkflowError) -> Answer {
        let request: VivaRequest
        do throws(VivaRequestError) { request = try VivaRequest.parse(url) } catch {
            // A rule broken after the callback was read is answered through the callback, as the
            // app does; before that there is no one to call back, so it is an API error.
            guard let callback = error.callback else { throw .badRequest(field: error.field, rule: error.rule) }
            var result = VivaResult(rejecting: error)
            result.tid = try? context.terminals.terminal(name).tid
            return Self.answer(callback: callback, result, transaction: nil)
        }
        let terminal = try context.terminals.terminal(name)
        switch request.command {
        case .sale(let sale):
            return try await self.sale(request, sale, preAuth: false, on: terminal)
        case .preAuth(let sale):
            return try await self.sale(request, sale, preAuth: true, on: terminal)
        case .cancel(let cancel):
            return try await self.cancel(request, cancel, on: terminal)
        case .capturePreAuth(let capture):
            return try await self.capture(request, capture, on: terminal)
        case .abort:
            var result = VivaResult(status: .success, message: VivaFormat.successMessage, action: .known(request.command.action))
            if !terminal.abort() {
                result = VivaResult(failing: request, with: .noTransactionInProgress)
            }
            result.tid = terminal.tid
            return Self.answer(callback: request.callback, result, transaction: nil)
        case .batch(let batch):
            return try await self.batch(request, batch, on: terminal)
        case .transactionDetails(let reference):
            let found = try context.stored { try context.store.transactions(provider: .viva, clientReference: reference, limit: 100) }
                .first { $0.terminalName == terminal.name && ($0.action == .sale || $0.action == .preAuth) }
            guard let found else {
                var result = VivaResult(failing: request, with: .transactionNotFound)
                result.tid = terminal.tid
                return Self.answer(callback: request.callback, result, transaction: nil)
            }
            return Self.answer(callback: request.callback, details(found, action: request.command.action), transaction: found)
        }
    }

    // MARK: sale and pre_auth

    func sale(_ request: VivaRequest, _ sale: VivaSale, preAuth: Bool, on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        let action: TransactionAction = preAuth ? .preAuth : .sale
        // The same clientTransactionId on the same terminal gets the first answer, not a second charge.
        if let reference = sale.clientTransactionId, !reference.isEmpty {
            let earlier = try context.stored { try context.store.transactions(provider: .viva, clientReference: reference, limit: 100) }
                .first { $0.terminalName == terminal.name && $0.action == action }
            if let earlier {
                if earlier.status == .inProgress {
                    throw .conflict("terminal \(terminal.name) is busy: the \(action.rawValue) with clientTransactionId \(reference) is in progress")
                }
                if let replay = try Self.replay(earlier, store: context.store) { return replay }
            }
        }
        try terminal.acquire("\(request.command.action) of \(sale.amount)")
        defer { terminal.release() }

        let tid = terminal.tid
        let now = context.clock.nowMicroseconds()
        let new = NewTransaction(terminal: terminal.name, provider: .viva, action: action, amount: Int64(sale.amount),
                                 tipAmount: Int64(sale.tipAmount), currency: terminal.terminalData.currencyCode,
                                 clientReference: sale.clientTransactionId.flatMap { $0.isEmpty ? nil : $0 }, createdAt: now)
        let offset = context.settings.utcOffsetSeconds
        let prompts = terminal.prompts
        let promptTimeout = context.settings.promptTimeout
        let cards = context.cards
        // The document's instalment rules (VivaInstallments), answered on the keypad once the card is known.
        let askInstallments: @Sendable (CardRead) throws(KernelError) -> Int? = { (card: CardRead) throws(KernelError) -> Int? in
            let maximum = cards.facts(pan: card.pan)?.installmentsMaximum
            switch VivaInstallments.decide(withInstallments: true, preferred: sale.preferredInstallments,
                                           cardSupports: maximum != nil, cardMaximum: maximum ?? 0) {
            case .none: return nil
            case .use(let n): return n
            case .prompt(let range):
                switch try prompts.ask(.select(title: "installments", options: range.map(String.init)), timeout: promptTimeout,
                                       step: "installments") {
                case .select(let n) where n >= 1 && n <= range.count: return range.lowerBound + n - 1
                default: throw .cancelled(step: "installments")
                }
            case .askContinueWithout:
                switch try prompts.ask(.confirm(question: "the card has no installments: continue without them?"),
                                       timeout: promptTimeout, step: "installments") {
                case .confirm: return nil
                default: throw .cancelled(step: "installments")
                }
            }
        }
        let plan = CardTransactionPlan(new: new, kind: preAuth ? .preAuthorisation : .purchase, amountTable: context.settings.vivaAmountTable,
                                       onCardRead: sale.withInstallments ? askInstallments : nil)
        return try await context.cardTransaction(on: terminal, plan) { run in
            var result: VivaResult
            switch run.result {
            case .success(let outcome):
                let approved = outcome.decision == .approved
                result = VivaResult(
                    status: approved ? .success : .failed,
                    message: approved ? VivaFormat.successMessage : (VivaFailure(outcome) ?? .declinedByHost(nil)).message,
                    action: .known(request.command.action), clientTransactionId: sale.clientTransactionId, amount: sale.amount,
                    tipAmount: sale.tipAmount, verificationMethod: VivaFormat.verificationMethod(cvm: outcome.cvm, entryMode: VivaEntryMode(outcome.entryMode) ?? .chip),
                    rrn: run.started.rrn, cardType: VivaFormat.cardType(brand: outcome.brand), accountNumber: outcome.maskedPAN,
                    referenceNumber: approved ? run.started.stan.description : "",
                    authorisationCode: approved ? outcome.authorisationCode ?? "" : "", tid: tid,
                    orderCode: VivaFormat.orderCode(rrn: run.started.rrn, tid: tid),
                    installments: approved ? run.completion.installments : nil,
                    transactionDate: VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: offset),
                    transactionId: run.started.uuid, aid: outcome.aid.isEmpty ? nil : Hex.encode(outcome.aid))
            case .failure(let failure):
                result = VivaResult(failing: request, with: Self.reason(failure.error, on: terminal))
                result.rrn = run.started.rrn
                result.tid = tid
                result.orderCode = VivaFormat.orderCode(rrn: run.started.rrn, tid: tid)
                result.accountNumber = failure.maskedPAN
                result.cardType = failure.pan.map { VivaFormat.cardType(brand: CardBrand.detect(pan: $0)) }
                result.referenceNumber = ""
                result.authorisationCode = ""
                result.transactionDate = VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: offset)
                result.transactionId = run.started.uuid
            }
            return Self.callback(request.callback, result)
        }
    }

    /// Why a transaction with no outcome failed, in the app's words: a cancel on the keypad of a
    /// transaction aborted through the API is the abort.
    static func reason(_ error: KernelError, on terminal: any TerminalSession) -> VivaFailure {
        if case .cancelled = error, terminal.isAborted { return .aborted }
        return VivaFailure(error)
    }

    // MARK: cancel

    func cancel(_ request: VivaRequest, _ cancel: VivaCancel, on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        try terminal.acquire("cancel")
        defer { terminal.release() }
        let tid = terminal.tid
        func failed(_ reason: VivaFailure, maskedPAN: String? = nil, brand: CardBrand? = nil) -> Answer {
            var result = VivaResult(failing: request, with: reason)
            result.tid = tid
            result.accountNumber = maskedPAN
            result.cardType = maskedPAN.map { _ in VivaFormat.cardType(brand: brand) }
            result.transactionDate = VivaFormat.transactionDate(microsecondsSince1970: context.clock.nowMicroseconds(),
                                                                utcOffsetSeconds: context.settings.utcOffsetSeconds)
            return Self.answer(callback: request.callback, result, transaction: nil)
        }

        let original: StoredTransaction
        if let reference = cancel.referenceNumber, let stan = Int(reference).flatMap(STAN.init) {
            guard let found = try context.stored({ try context.store.transaction(terminal: terminal.name, stan: stan) }),
                  found.provider == .viva, [.sale, .preAuth, .capture].contains(found.action) else {
                return failed(.transactionNotFound)
            }
            original = found
        } else {
            // No reference: the card is presented and the operator picks one of its last 3 sales.
            let context = self.context
            let read = await terminal.perform { context.readCard(on: terminal) }
            let card: CardRead
            switch read {
            case .success(let c): card = c
            case .failure(let f): return failed(Self.reason(f.error, on: terminal), maskedPAN: f.maskedPAN)
            }
            let recent = try context.stored {
                try context.store.lastTransactions(terminal: terminal.name, pan: card.pan, limit: 3, status: .approved, actions: [.sale],
                                                   provider: .viva)
            }
            guard !recent.isEmpty else { return failed(.noTransactionsForCard, maskedPAN: card.maskedPAN, brand: card.brand) }
            let options = recent.map { t in
                "\(t.stan) \(t.action.rawValue) \(Money.decimal(t.amount)) \(VivaFormat.transactionDate(microsecondsSince1970: t.createdAt, utcOffsetSeconds: context.settings.utcOffsetSeconds).prefix(16))"
            }
            switch await context.ask(terminal, .select(title: "transaction to cancel", options: options), step: "transaction selection") {
            case .success(.select(let n)) where (1...recent.count).contains(n):
                original = recent[n - 1]
            case .success:
                return failed(Self.reason(.cancelled(step: "transaction selection"), on: terminal), maskedPAN: card.maskedPAN, brand: card.brand)
            case .failure(let error):
                return failed(Self.reason(error, on: terminal), maskedPAN: card.maskedPAN, brand: card.brand)
            }
        }
        switch original.status {
        case .approved: break
        case .cancelled: return failed(.alreadyCancelled, maskedPAN: original.maskedPAN, brand: original.cardBrand)
        default: return failed(.notApproved, maskedPAN: original.maskedPAN, brand: original.cardBrand)
        }
        if let amount = cancel.amount, Int64(amount) != original.amount {
            return failed(.badRequest(field: "amount", rule: "must be the whole amount of the transaction (\(original.amount)), got \(amount)"),
                          maskedPAN: original.maskedPAN)
        }
        return try await recordVoid(request: request, action: .cancel, original: original, amount: original.amount, on: terminal)
    }

    // MARK: capture_pre_auth

    func capture(_ request: VivaRequest, _ capture: VivaCapture, on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        try terminal.acquire("capture")
        defer { terminal.release() }
        func failed(_ reason: VivaFailure) -> Answer {
            var result = VivaResult(failing: request, with: reason)
            result.tid = terminal.tid
            return Self.answer(callback: request.callback, result, transaction: nil)
        }
        guard let stan = Int(capture.referenceNumber).flatMap(STAN.init),
              let original = try context.stored({ try context.store.transaction(terminal: terminal.name, stan: stan) }),
              original.provider == .viva, original.action == .preAuth else {
            return failed(.transactionNotFound)
        }
        let captured = try context.stored { try context.store.transactions(originalID: original.id) }
            .contains { $0.action == .capture && $0.status == .approved }
        if captured { return failed(.alreadyCaptured) }
        guard original.status == .approved else { return failed(original.status == .cancelled ? .alreadyCancelled : .notApproved) }
        let amount = Int64(capture.amount ?? Int(original.amount))
        guard amount <= original.amount else { return failed(.amountTooHigh) }
        return try await recordVoid(request: request, action: .capture, original: original, amount: amount, on: terminal)
    }

    /// Records a cancel or a capture of `original` (no card, no host round trip beyond the void):
    /// the host gives back what is no longer held, the ledger commits the new row and the
    /// original's new status with the callback.
    private func recordVoid(request: VivaRequest, action: TransactionAction, original: StoredTransaction, amount: Int64,
                            on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        let tid = terminal.tid
        let now = context.clock.nowMicroseconds()
        let date = VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: context.settings.utcOffsetSeconds)
        let new = NewTransaction(terminal: terminal.name, provider: .viva, action: action, amount: amount, currency: original.currency,
                                 clientReference: original.clientReference, originalID: original.id, createdAt: now)
        // A cancel gives the whole amount back; a capture releases what it did not take.
        let release = action == .cancel ? original.amount : original.amount - amount
        return try await context.recordWithoutCard(on: terminal, new, actingOn: original, release: release) { started in
            let result: VivaResult
            if action == .cancel {
                result = VivaResult(status: .success, message: VivaFormat.successMessage, action: .known(request.command.action),
                                    amount: Int(amount), cardType: VivaFormat.cardType(brand: original.cardBrand),
                                    accountNumber: original.maskedPAN, tid: tid, transactionDate: date, transactionId: started.uuid)
            } else {
                result = VivaResult(status: .success, message: VivaFormat.successMessage, action: .known(request.command.action),
                                    clientTransactionId: original.clientReference, amount: Int(amount), tipAmount: 0,
                                    verificationMethod: VivaFormat.verificationMethod(cvm: original.cardholderVerification,
                                                                                      entryMode: original.entryMode.flatMap(VivaEntryMode.init(entryMode:)) ?? .chip), rrn: started.rrn,
                                    cardType: VivaFormat.cardType(brand: original.cardBrand),
                                    accountNumber: original.maskedPAN, referenceNumber: started.stan.description,
                                    authorisationCode: original.authorisationCode ?? "", tid: tid,
                                    orderCode: VivaFormat.orderCode(rrn: started.rrn, tid: tid), transactionDate: date,
                                    transactionId: started.uuid)
            }
            return Self.callback(request.callback, result)
        }
    }

    // MARK: batch

    func batch(_ request: VivaRequest, _ batch: VivaBatch, on terminal: any TerminalSession) async throws(WorkflowError) -> Answer {
        var result = VivaResult(status: .success, message: VivaFormat.successMessage, action: .known(request.command.action),
                                batchCommand: batch.command.rawValue, batchName: batch.batchName, batchId: batch.batchId)
        let store = context.store
        switch batch.command {
        case .open:
            guard try context.stored({ try store.terminal(name: terminal.name) })?.batchOpen == false else {
                result = VivaResult(failing: request, with: .batchAlreadyOpen)
                break
            }
            let record = try context.stored("the ledger could not open the batch") { try store.openBatch(terminal: terminal.name) }
            result.batchId = result.batchId ?? String(record.batchNumber)
        case .close:
            guard try context.stored({ try store.terminal(name: terminal.name) })?.batchOpen == true else {
                result = VivaResult(failing: request, with: .noOpenBatch)
                break
            }
            try terminal.acquire("batch close")
            defer { terminal.release() }
            let totals = try context.stored("the ledger could not close the batch") { try store.closeBatch(terminal: terminal.name) }
            result.batchId = result.batchId ?? String(totals.batchNumber)
        }
        result.tid = terminal.tid
        return Self.answer(callback: request.callback, result, transaction: nil)
    }

    // MARK: Rendering

    static func callback(_ callback: String, _ result: VivaResult) -> Callback {
        Callback(url: VivaCallback.url(callback: callback, result: result), target: callback, fields: VivaCallback.fields(result),
                 status: result.status.rawValue, message: result.message)
    }

    static func answer(callback: String, _ result: VivaResult, transaction: StoredTransaction?) -> Answer {
        Answer(callback: Self.callback(callback, result), transaction: transaction)
    }

    /// A stored transaction rendered as the app shows it (transactionDetails).
    func details(_ t: StoredTransaction, action: VivaAction) -> VivaResult {
        // A sale cancelled afterwards was approved (it has the host's code); one cancelled on the
        // keypad or aborted before the host answered has none.
        let approved = t.status == .approved || t.status == .refunded || (t.status == .cancelled && t.responseCode != nil)
        let code = t.responseCode.map { ResponseCode($0) }
        let failure: VivaFailure = t.status == .inProgress ? .transactionInProgress
            : code.map { VivaFailure.declined(responseCode: $0, reversed: t.status == .reversed) } ?? .transactionFailed
        return VivaResult(
            status: approved ? .success : .failed, message: approved ? VivaFormat.successMessage : failure.message, action: .known(action),
            clientTransactionId: t.clientReference, amount: Int(t.amount), tipAmount: Int(t.tipAmount),
            verificationMethod: VivaFormat.verificationMethod(cvm: t.cardholderVerification,
                                                             entryMode: t.entryMode.flatMap(VivaEntryMode.init(entryMode:)) ?? .chip), rrn: t.rrn,
            cardType: VivaFormat.cardType(brand: t.cardBrand),
            accountNumber: t.maskedPAN, referenceNumber: approved ? t.stan.description : "",
            authorisationCode: approved ? t.authorisationCode ?? "" : "", tid: t.tid,
            orderCode: VivaFormat.orderCode(rrn: t.rrn, tid: t.tid), installments: approved ? t.installments : nil,
            transactionDate: VivaFormat.transactionDate(microsecondsSince1970: t.createdAt, utcOffsetSeconds: context.settings.utcOffsetSeconds),
            transactionId: approved ? t.uuid : nil, aid: t.aid)
    }

    /// The stored answer to an earlier request, for idempotent replays: the callback committed
    /// with the transaction, as it was first made.
    public static func replay(_ t: StoredTransaction, store: any TransactionStore) throws(WorkflowError) -> Answer? {
        let rows: [OutboxEntry]
        do { rows = try store.outbox(transactionID: t.id) } catch { throw WorkflowError(ledger: error, "ledger") }
        guard let row = rows.first(where: { $0.kind == .callback }) else { return nil }
        var callback = Callback(stored: row, status: "", message: "")
        callback.status = callback.value("status") ?? t.status.rawValue
        callback.message = callback.value("message") ?? t.message ?? ""
        return Answer(callback: callback, transaction: t, replayed: true)
    }
}
