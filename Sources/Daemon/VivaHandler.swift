import EMV
import Foundation
import Fronts
import Ledger
import Terminal

extension Bench {
    /// Opens a request URL as the app it is addressed to would, and returns its callback.
    /// Throws only when no callback can be produced (a URL with no usable callback, an unknown
    /// terminal, a busy terminal).
    public func open(_ url: String, terminal name: String?) async throws(DaemonError) -> OpenResult {
        // The text before the first ':' (none: the whole URL is no scheme), lower-cased in ASCII only.
        let scheme = url.firstIndex(of: ":").map { String(url[..<$0]) }.map(ASCII.lowercased) ?? ""
        switch scheme {
        case "vivapayclient":
            return try await viva(url, terminal: name)
        case "billpocket":
            return try await billpocket(url, terminal: name)
        default:
            let shown = scheme.count > 40 ? String(scheme.prefix(40)).debugDescription + "…" : scheme.debugDescription
            throw .badRequest(field: "url", rule: "the scheme must be vivapayclient (Viva Card Terminal app) or billpocket (Billpocket app), got \(shown)")
        }
    }

    func viva(_ url: String, terminal name: String?) async throws(DaemonError) -> OpenResult {
        let request: VivaRequest
        do throws(VivaRequestError) { request = try VivaRequest.parse(url) } catch {
            // A rule broken after the callback was read is answered through the callback, as the
            // app does; before that there is no one to call back, so it is an API error.
            guard let callback = error.callback else { throw .badRequest(field: error.field, rule: error.rule) }
            var result = VivaResult(rejecting: error)
            result.tid = try? self.terminal(name).settings.tid
            return vivaResult(callback: callback, result, transaction: nil)
        }
        let terminal = try self.terminal(name)
        switch request.command {
        case .sale(let sale):
            return try await vivaSale(request, sale, preAuth: false, on: terminal)
        case .preAuth(let sale):
            return try await vivaSale(request, sale, preAuth: true, on: terminal)
        case .cancel(let cancel):
            return try await vivaCancel(request, cancel, on: terminal)
        case .capturePreAuth(let capture):
            return try await vivaCapture(request, capture, on: terminal)
        case .abort:
            var result = VivaResult(status: .success, message: VivaFormat.successMessage, action: request.command.action)
            if !terminal.abort() {
                result = VivaResult(failing: request, with: .noTransactionInProgress)
            }
            result.tid = terminal.settings.tid
            return vivaResult(callback: request.callback, result, transaction: nil)
        case .batch(let batch):
            return try vivaBatch(request, batch, on: terminal)
        case .transactionDetails(let reference):
            let found = try ledgerCall { try self.ledger.transactions(provider: .viva, clientReference: reference) }
                .first { $0.terminalName == terminal.settings.name && ($0.action == .sale || $0.action == .preAuth) }
            guard let found else {
                var result = VivaResult(failing: request, with: .transactionNotFound)
                result.tid = terminal.settings.tid
                return vivaResult(callback: request.callback, result, transaction: nil)
            }
            return vivaResult(callback: request.callback, vivaResult(stored: found, action: request.command.action), transaction: found)
        }
    }

    // MARK: sale and pre_auth

    func vivaSale(_ request: VivaRequest, _ sale: VivaSale, preAuth: Bool, on terminal: TerminalRuntime) async throws(DaemonError) -> OpenResult {
        let action: TransactionAction = preAuth ? .preAuth : .sale
        // The same clientTransactionId on the same terminal gets the first answer, not a second charge.
        if let reference = sale.clientTransactionId, !reference.isEmpty {
            let earlier = try ledgerCall { try self.ledger.transactions(provider: .viva, clientReference: reference) }
                .first { $0.terminalName == terminal.settings.name && $0.action == action }
            if let earlier {
                if earlier.status == .inProgress {
                    throw .conflict("terminal \(terminal.settings.name) is busy: the \(action.rawValue) with clientTransactionId \(reference) is in progress")
                }
                if let replay = try storedCallback(earlier) { return replay }
            }
        }
        try terminal.acquire("\(request.command.action) of \(sale.amount)")
        defer { terminal.release() }

        let settings = terminal.settings
        let now = clock.nowMicroseconds()
        let new = NewTransaction(terminal: settings.name, provider: .viva, action: action, amount: Int64(sale.amount),
                                 tipAmount: Int64(sale.tipAmount), currency: settings.currencyCode,
                                 clientReference: sale.clientTransactionId.flatMap { $0.isEmpty ? nil : $0 }, createdAt: now)
        let offset = configuration.utcOffsetSeconds
        let keypad = terminal.keypad
        let promptTimeout = configuration.promptTimeout
        let askInstallments: @Sendable (CardRead) throws(KernelError) -> Int? = { [self] (card: CardRead) throws(KernelError) -> Int? in
            let maximum = profile(pan: card.pan)?.installmentsMaximum
            switch VivaInstallments.decide(withInstallments: true, preferred: sale.preferredInstallments,
                                           cardSupports: maximum != nil, cardMaximum: maximum ?? 0) {
            case .none: return nil
            case .use(let n): return n
            case .prompt(let range):
                switch try keypad.ask(.select(title: "installments", options: range.map(String.init)), timeout: promptTimeout,
                                      step: "installments") {
                case .select(let n) where n >= 1 && n <= range.count: return range.lowerBound + n - 1
                default: throw .cancelled(step: "installments")
                }
            case .askContinueWithout:
                switch try keypad.ask(.confirm(question: "the card has no installments: continue without them?"),
                                      timeout: promptTimeout, step: "installments") {
                case .confirm: return nil
                default: throw .cancelled(step: "installments")
                }
            }
        }
        let onCardRead = sale.withInstallments ? askInstallments : nil
        let callback = request.callback
        let (stored, outbox): (StoredTransaction, [OutboxMessage])
        do {
            (stored, outbox) = try await cardTransaction(
                on: terminal, new, kind: preAuth ? .preAuthorisation : .purchase, amountTable: configuration.vivaAmountTable,
                onCardRead: onCardRead
            ) { [self] card in
                var result: VivaResult
                if let outcome = card.outcome {
                    let approved = outcome.decision == .approved
                    result = VivaResult(
                        status: approved ? .success : .failed,
                        message: approved ? VivaFormat.successMessage : (VivaFailure(outcome) ?? .declinedByHost(nil)).message,
                        action: request.command.action, clientTransactionId: sale.clientTransactionId, amount: sale.amount,
                        tipAmount: sale.tipAmount, verificationMethod: VivaFormat.verificationMethod(cvm: outcome.cvm),
                        rrn: card.started.rrn, cardType: VivaFormat.cardType(brand: outcome.brand), accountNumber: outcome.maskedPAN,
                        referenceNumber: approved ? card.started.stan.description : "",
                        authorisationCode: approved ? outcome.authorisationCode ?? "" : "", tid: settings.tid,
                        orderCode: VivaFormat.orderCode(rrn: card.started.rrn, tid: settings.tid),
                        installments: approved ? card.completion.installments : nil,
                        transactionDate: VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: offset),
                        transactionId: card.started.uuid, aid: Hex.encode(outcome.aid))
                } else {
                    let failure = card.failure!
                    var reason = VivaFailure(failure.error)
                    if case .cancelled = failure.error, terminal.isAborted { reason = .aborted }
                    result = VivaResult(failing: request, with: reason)
                    result.rrn = card.started.rrn
                    result.tid = settings.tid
                    result.orderCode = VivaFormat.orderCode(rrn: card.started.rrn, tid: settings.tid)
                    result.accountNumber = failure.maskedPAN
                    result.cardType = failure.pan.map { VivaFormat.cardType(brand: CardBrand.detect(pan: $0)) }
                    result.referenceNumber = ""
                    result.authorisationCode = ""
                    result.transactionDate = VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: offset)
                    result.transactionId = card.started.uuid
                }
                return callbackMessages(callback: callback, result: result)
            }
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(ledger: error, "the ledger could not record the transaction")
        }
        return openResult(stored: stored, outbox: outbox, replayed: false)
    }

    // MARK: cancel

    func vivaCancel(_ request: VivaRequest, _ cancel: VivaCancel, on terminal: TerminalRuntime) async throws(DaemonError) -> OpenResult {
        try terminal.acquire("cancel")
        defer { terminal.release() }
        let settings = terminal.settings
        func failed(_ reason: VivaFailure, maskedPAN: String? = nil, brand: CardBrand? = nil) -> OpenResult {
            var result = VivaResult(failing: request, with: reason)
            result.tid = settings.tid
            result.accountNumber = maskedPAN
            result.cardType = maskedPAN.map { _ in VivaFormat.cardType(brand: brand) }
            result.transactionDate = VivaFormat.transactionDate(microsecondsSince1970: clock.nowMicroseconds(),
                                                                utcOffsetSeconds: configuration.utcOffsetSeconds)
            return vivaResult(callback: request.callback, result, transaction: nil)
        }

        let original: StoredTransaction
        if let reference = cancel.referenceNumber, let stan = Int(reference).flatMap(STAN.init) {
            guard let found = try ledgerCall({ try self.ledger.transaction(terminal: settings.name, stan: stan) }),
                  found.provider == .viva, [.sale, .preAuth, .capture].contains(found.action) else {
                return failed(.transactionNotFound)
            }
            original = found
        } else {
            // No reference: the card is presented and the operator picks one of its last 3.
            let read = await readCard(on: terminal)
            let card: CardRead
            switch read {
            case .success(let c): card = c
            case .failure(let f):
                var reason = VivaFailure(f.error)
                if case .cancelled = f.error, terminal.isAborted { reason = .aborted }
                return failed(reason, maskedPAN: f.maskedPAN)
            }
            let recent = try ledgerCall {
                try self.ledger.lastTransactions(terminal: settings.name, pan: card.pan, limit: 3, provider: .viva)
            }
            guard !recent.isEmpty else { return failed(.noTransactionsForCard, maskedPAN: card.maskedPAN, brand: card.brand) }
            let options = recent.map { t in
                "\(t.stan) \(t.action.rawValue) \(CLIMoney.format(t.amount)) \(VivaFormat.transactionDate(microsecondsSince1970: t.createdAt, utcOffsetSeconds: configuration.utcOffsetSeconds).prefix(16))"
            }
            let choice: Int
            do throws(KernelError) {
                let input = try await terminal.perform { [configuration] () -> Result<KeypadInput, KernelError> in
                    do throws(KernelError) {
                        return .success(try terminal.keypad.ask(.select(title: "transaction to cancel", options: options),
                                                                timeout: configuration.promptTimeout, step: "transaction selection"))
                    } catch { return .failure(error) }
                }.get()
                guard case .select(let n) = input, (1...recent.count).contains(n) else { throw KernelError.cancelled(step: "transaction selection") }
                choice = n - 1
            } catch {
                var reason = VivaFailure(error)
                if case .cancelled = error, terminal.isAborted { reason = .aborted }
                return failed(reason, maskedPAN: card.maskedPAN, brand: card.brand)
            }
            original = recent[choice]
        }
        switch original.status {
        case .approved: break
        case .cancelled: return failed(.alreadyCancelled, maskedPAN: original.maskedPAN, brand: Self.brand(original))
        default: return failed(.notApproved, maskedPAN: original.maskedPAN, brand: Self.brand(original))
        }
        if let amount = cancel.amount, Int64(amount) != original.amount {
            return failed(.badRequest(field: "amount", rule: "must be the whole amount of the transaction (\(original.amount)), got \(amount)"),
                          maskedPAN: original.maskedPAN)
        }
        return try recordVoid(request: request, action: .cancel, original: original, amount: original.amount, on: terminal)
    }

    // MARK: capture_pre_auth

    func vivaCapture(_ request: VivaRequest, _ capture: VivaCapture, on terminal: TerminalRuntime) async throws(DaemonError) -> OpenResult {
        try terminal.acquire("capture")
        defer { terminal.release() }
        let settings = terminal.settings
        func failed(_ reason: VivaFailure) -> OpenResult {
            var result = VivaResult(failing: request, with: reason)
            result.tid = settings.tid
            return vivaResult(callback: request.callback, result, transaction: nil)
        }
        guard let stan = Int(capture.referenceNumber).flatMap(STAN.init),
              let original = try ledgerCall({ try self.ledger.transaction(terminal: settings.name, stan: stan) }),
              original.provider == .viva, original.action == .preAuth else {
            return failed(.transactionNotFound)
        }
        let captured = try ledgerCall { try self.ledger.transactions(originalID: original.id) }
            .contains { $0.action == .capture && $0.status == .approved }
        if captured { return failed(.alreadyCaptured) }
        guard original.status == .approved else { return failed(original.status == .cancelled ? .alreadyCancelled : .notApproved) }
        let amount = Int64(capture.amount ?? Int(original.amount))
        guard amount <= original.amount else { return failed(.amountTooHigh) }
        return try recordVoid(request: request, action: .capture, original: original, amount: amount, on: terminal)
    }

    /// Records a cancel or a capture of `original` (no card, no host round trip beyond the void):
    /// the host gives back what is no longer held, the ledger commits the new row and the original's
    /// new status with the callback.
    private func recordVoid(request: VivaRequest, action: TransactionAction, original: StoredTransaction, amount: Int64,
                            on terminal: TerminalRuntime) throws(DaemonError) -> OpenResult {
        let settings = terminal.settings
        let now = clock.nowMicroseconds()
        do {
            let started = try ledger.begin(NewTransaction(terminal: settings.name, provider: .viva, action: action, amount: amount,
                                                          currency: original.currency, clientReference: original.clientReference,
                                                          originalID: original.id, createdAt: now))
            // A cancel gives the whole amount back; a capture releases what it did not take.
            let release = action == .cancel ? original.amount : original.amount - amount
            if release > 0, let code = original.authorisationCode {
                host.void(authorisationCode: code, amount: Int(release))
            }
            let date = VivaFormat.transactionDate(microsecondsSince1970: now, utcOffsetSeconds: configuration.utcOffsetSeconds)
            var result: VivaResult
            if action == .cancel {
                result = VivaResult(status: .success, message: VivaFormat.successMessage, action: request.command.action,
                                    amount: Int(amount), cardType: VivaFormat.cardType(brand: Self.brand(original)),
                                    accountNumber: original.maskedPAN, tid: settings.tid, transactionDate: date, transactionId: started.uuid)
            } else {
                result = VivaResult(status: .success, message: VivaFormat.successMessage, action: request.command.action,
                                    clientTransactionId: original.clientReference, amount: Int(amount), tipAmount: 0,
                                    verificationMethod: VivaFormat.verificationMethod(ledgerCVM: original.cvm), rrn: started.rrn,
                                    cardType: VivaFormat.cardType(brand: Self.brand(original)),
                                    accountNumber: original.maskedPAN, referenceNumber: started.stan.description,
                                    authorisationCode: original.authorisationCode ?? "", tid: settings.tid,
                                    orderCode: VivaFormat.orderCode(rrn: started.rrn, tid: settings.tid), transactionDate: date,
                                    transactionId: started.uuid)
            }
            let outbox = callbackMessages(callback: request.callback, result: result)
            let stored = try ledger.complete(id: started.id, Completion.approved(actingOn: original, completedAt: now), outbox: outbox)
            publish("outcome", terminal: settings.name, ["stan": stored.stan.description, "status": stored.status.rawValue,
                                                         "action": action.rawValue])
            return openResult(stored: stored, outbox: outbox, replayed: false)
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(ledger: error, "the ledger could not record the \(action.rawValue)")
        }
    }

    // MARK: batch

    func vivaBatch(_ request: VivaRequest, _ batch: VivaBatch, on terminal: TerminalRuntime) throws(DaemonError) -> OpenResult {
        var result = VivaResult(status: .success, message: VivaFormat.successMessage, action: request.command.action,
                                batchCommand: batch.command.rawValue, batchName: batch.batchName, batchId: batch.batchId)
        do {
            switch batch.command {
            case .open:
                guard try ledger.terminal(name: terminal.settings.name)?.batchOpen == false else {
                    result = VivaResult(failing: request, with: .batchAlreadyOpen)
                    break
                }
                let record = try ledger.openBatch(terminal: terminal.settings.name)
                result.batchId = result.batchId ?? String(record.batchNumber)
            case .close:
                guard try ledger.terminal(name: terminal.settings.name)?.batchOpen == true else {
                    result = VivaResult(failing: request, with: .noOpenBatch)
                    break
                }
                try terminal.acquire("batch close")
                defer { terminal.release() }
                let totals = try ledger.closeBatch(terminal: terminal.settings.name)
                result.batchId = result.batchId ?? String(totals.batchNumber)
            }
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError(ledger: error, "the ledger could not \(batch.command.rawValue) the batch")
        }
        result.tid = terminal.settings.tid
        return vivaResult(callback: request.callback, result, transaction: nil)
    }

    // MARK: Rendering

    /// The callback rows committed with a transaction: the URL itself (what the reply carries and
    /// what a configured command or xdg-open is given), and a webhook when the callback is http(s).
    func callbackMessages(callback: String, result: VivaResult) -> [OutboxMessage] {
        let url = VivaCallback.url(callback: callback, result: result)
        // Delivery runs on wall time, whatever the transaction clock says.
        return [OutboxMessage(kind: .callback, target: callback, payload: url, nextAttemptAt: CallbackDelivery.wallNow())]
    }

    /// A stored transaction rendered as the app shows it (transactionDetails).
    func vivaResult(stored t: StoredTransaction, action: String) -> VivaResult {
        // A sale cancelled afterwards was approved (it has the host's code); one cancelled on the
        // keypad or aborted before the host answered has none.
        let approved = t.status == .approved || t.status == .refunded || (t.status == .cancelled && t.responseCode != nil)
        let code = t.responseCode.map { ResponseCode($0) }
        let failure: VivaFailure = t.status == .inProgress ? .transactionInProgress
            : code.map { VivaFailure.declined(responseCode: $0, reversed: t.status == .reversed) } ?? .transactionFailed
        return VivaResult(
            status: approved ? .success : .failed, message: approved ? VivaFormat.successMessage : failure.message, action: action,
            clientTransactionId: t.clientReference, amount: Int(t.amount), tipAmount: Int(t.tipAmount),
            verificationMethod: VivaFormat.verificationMethod(ledgerCVM: t.cvm), rrn: t.rrn,
            cardType: VivaFormat.cardType(brand: Self.brand(t)),
            accountNumber: t.maskedPAN, referenceNumber: approved ? t.stan.description : "",
            authorisationCode: approved ? t.authorisationCode ?? "" : "", tid: t.tid,
            orderCode: VivaFormat.orderCode(rrn: t.rrn, tid: t.tid), installments: approved ? t.installments : nil,
            transactionDate: VivaFormat.transactionDate(microsecondsSince1970: t.createdAt, utcOffsetSeconds: configuration.utcOffsetSeconds),
            transactionId: approved ? t.uuid : nil, aid: t.aid)
    }

    func vivaResult(callback: String, _ result: VivaResult, transaction: StoredTransaction?) -> OpenResult {
        OpenResult(callback: VivaCallback.url(callback: callback, result: result),
                   fields: VivaCallback.fields(result).map { OpenResult.Field(name: $0.name, value: $0.value) },
                   status: result.status.rawValue, message: result.message, transaction: transaction.map(TransactionView.init))
    }

    /// The reply for a transaction whose callback was committed with it.
    func openResult(stored: StoredTransaction, outbox: [OutboxMessage], replayed: Bool) -> OpenResult {
        let row = outbox.first { $0.kind == .callback }
        let url = row?.payload
        let fields = row.map { RenderedCallback.fields(of: $0.payload, renderedAfter: $0.target).map { OpenResult.Field(name: $0.name, value: $0.value) } } ?? []
        let status = fields.first { $0.name == "status" }?.value ?? stored.status.rawValue
        let message = fields.first { $0.name == "message" }?.value ?? stored.message ?? ""
        return OpenResult(callback: url, fields: fields, status: status, message: message, transaction: TransactionView(stored),
                          replayed: replayed)
    }

    /// The stored answer to an earlier request, for idempotent replays.
    func storedCallback(_ t: StoredTransaction) throws(DaemonError) -> OpenResult? {
        let rows = try ledgerCall { try self.ledger.outbox(transactionID: t.id) }
        guard let row = rows.first(where: { $0.kind == .callback }) else { return nil }
        return openResult(stored: t, outbox: [OutboxMessage(kind: row.kind, target: row.target, payload: row.payload)], replayed: true)
    }

    /// The brand the ledger recorded (by its display name).
    static func brand(_ t: StoredTransaction) -> CardBrand? {
        CardBrand.allCases.first { $0.displayName == t.brand }
    }

    func ledgerCall<T>(_ body: () throws -> T) throws(DaemonError) -> T {
        do { return try body() } catch { throw DaemonError(ledger: error, "ledger") }
    }
}

/// Minor units as "12.00" for keypad prompts.
enum CLIMoney {
    static func format(_ minor: Int64) -> String {
        let sign = minor < 0 ? "-" : ""
        let m = abs(minor)
        let cents = m % 100
        return "\(sign)\(m / 100).\(cents < 10 ? "0" : "")\(cents)"
    }
}
