import Foundation
import EMV
import LedgerModel
import Terminal

/// What the card part of a transaction came to, before the front renders it.
public struct CardRun: Sendable {
    /// The transaction as begun: its STAN, RRN and UUID.
    public let started: Started
    /// What the host was asked for, in minor units.
    public let amount: Int64
    /// What the ledger records.
    public let completion: Completion
    /// Every APDU exchanged, PAN masked.
    public let trace: [TraceEntry]
    /// The kernel's outcome (approved or declined), or why there was none.
    public let result: Result<TransactionOutcome, TransactionFailure>
    /// The conversation with the terminal's external host, when it has one.
    public var upstream: (any UpstreamSession)? = nil
}

/// One chip transaction to run: what the ledger begins, what the host is asked, by which table
/// it declines, and what the front decides once the card is read.
public struct CardTransactionPlan: Sendable {
    /// What the ledger begins.
    public var new: NewTransaction
    /// What the host is asked: a purchase or a pre-authorisation.
    public var kind: AuthorisationRequest.Kind
    /// The front's scripted declines by amount.
    public var amountTable: AmountTable
    /// The amount the table is read with, when not the request's total (Billpocket: tip excluded).
    public var tableAmount: Int?
    /// The country the transaction is made in, when not the terminal's.
    public var country: Int?
    /// Called once the card's data is read, before the cardholder verification: returns the
    /// installments agreed on (nil: none), or throws to end the transaction (a refused brand, a
    /// cancelled prompt).
    public var onCardRead: (@Sendable (CardRead) throws(KernelError) -> Int?)?

    public init(new: NewTransaction, kind: AuthorisationRequest.Kind, amountTable: AmountTable, tableAmount: Int? = nil,
                country: Int? = nil, onCardRead: (@Sendable (CardRead) throws(KernelError) -> Int?)? = nil) {
        self.new = new
        self.kind = kind
        self.amountTable = amountTable
        self.tableAmount = tableAmount
        self.country = country
        self.onCardRead = onCardRead
    }
}

extension WorkflowContext {
    /// Runs one chip transaction on `terminal` (already acquired): begins it in the ledger (the
    /// STAN is durable before the host is asked), waits for the card, runs the kernel, lets
    /// `render` make the callback, and commits the outcome with its callback's outbox rows in one
    /// write. The daemon, the scenarios' daemon cores and `cardbench sale` all sell through here.
    public func cardTransaction(on terminal: any TerminalSession, _ plan: CardTransactionPlan,
                                render: @escaping @Sendable (CardRun) -> Callback) async throws(WorkflowError) -> Answer {
        try await recordCardTransaction(on: terminal, plan, render: render).0
    }

    /// `cardTransaction`, also returning what the card part came to (the kernel's outcome with
    /// its trace), for a caller that shows more than the callback (`cardbench sale`).
    public func recordCardTransaction(on terminal: any TerminalSession, _ plan: CardTransactionPlan,
                                      render: @escaping @Sendable (CardRun) -> Callback) async throws(WorkflowError) -> (Answer, CardRun) {
        // All of it runs on the terminal's own thread: the ledger's writes block (a durable commit,
        // shared with other terminals by group commit), and blocking Swift's cooperative threads
        // would stall every other request on the daemon.
        let done: Result<(Answer, CardRun), WorkflowError> = await terminal.perform { [self] in
            let started: Started
            do { started = try store.begin(plan.new) } catch {
                return .failure(WorkflowError(ledger: error, "the ledger could not record the transaction"))
            }
            publish(.transactionStarted(stan: started.stan, action: plan.new.action, amount: plan.new.amount, currency: plan.new.currency),
                    terminal: terminal.name)
            let run = runKernel(on: terminal, plan, started: started)
            let callback = render(run)
            do {
                let stored = try store.complete(id: started.id, run.completion, trace: run.trace, outbox: callback.outbox(now: clock.nowMicroseconds(), appSchemesHandedOn: settings.appSchemeCallbacksHandedOn))
                return .success((Answer(callback: callback, transaction: stored), run))
            } catch {
                return .failure(recordUnrecordable(run, refused: error))
            }
        }
        let (answer, run) = try done.get()
        if let stored = answer.transaction {
            publish(.outcome(stan: stored.stan, status: stored.status, responseCode: stored.responseCode ?? "", message: stored.message ?? "",
                             microseconds: stored.completedAt.map { $0 - stored.createdAt }), terminal: terminal.name)
        }
        return (answer, run)
    }

    /// A completion the ledger refused (a value breaking one of its rules, a failing disk): an
    /// approval is taken back at the host, since nothing may stay authorised that is not recorded,
    /// and the transaction is recorded as failed (reversed, when it had been approved) without the
    /// refused parts, so it does not stay in progress. Returns the error the request answers with.
    func recordUnrecordable(_ run: CardRun, refused error: any Error) -> WorkflowError {
        let completion = run.completion
        let approved = completion.status == .approved
        var reversed = false
        if approved, let session = run.upstream {
            // An external host's approval: a 0420 takes it back there.
            reversed = session.takeBackApproval()
        } else if approved, let code = completion.authorisationCode {
            reversed = host.void(authorisationCode: code, amount: Int(run.amount))
        }
        var failed = completion
        failed.status = .failed
        failed.reversal = approved
        failed.message = String(("not recorded: \(error)" + (approved ? "; the host's approval was reversed" : "")).prefix(500))
        var recorded = (try? store.complete(id: run.started.id, failed, trace: run.trace, outbox: [])) != nil
        if !recorded {
            // The trace (APDUs or host messages) may be what was refused: the outcome matters more
            // than the exchange.
            failed.hostMessages = []
            recorded = (try? store.complete(id: run.started.id, failed, trace: [], outbox: [])) != nil
        }
        let what = approved ? (reversed ? "was approved, then reversed at the host" : "was approved; the host had no approval left to reverse")
            : "ended \(completion.status.rawValue)"
        return .unrecordable("the transaction (STAN \(run.started.stan)) \(what), and its outcome could not be recorded as it was: \(error)"
            + (recorded ? "; it is recorded as failed" : "; it could not be recorded at all and will be failed at the next start"))
    }

    /// Waits for the card and runs the kernel (on the terminal's thread).
    func runKernel(on terminal: any TerminalSession, _ plan: CardTransactionPlan, started: Started) -> CardRun {
        let new = plan.new
        // The transaction's currency is the front's (Billpocket sells in pesos whatever the
        // terminal's default), and so is the country it is made in.
        var configuration = kernelConfiguration(terminal)
        configuration.currencyCode = new.currency
        if let country = plan.country { configuration.countryCode = country }
        var request = TransactionRequest(amount: Int(new.amount), date: UTCDateParts(secondsSince1970: new.createdAt / 1_000_000), stan: started.stan)
        request.kind = plan.kind
        var installments: Int?
        var result: Result<TransactionOutcome, TransactionFailure>
        // A card may be presented more than once in one transaction: a tap the card or the
        // limits send to the chip, a "See Phone" or too-short tap, a chip card swiped, a chip
        // that failed and may be swiped (fallback). The transaction waits for each.
        var required: CardInterface? = nil
        var last: TransactionFailure? = nil
        var presentations = 0
        // One conversation with an external host for the whole transaction, whatever the presentations.
        let upstreamSession = upstream[terminal.name]?.session(terminal: terminal, stan: started.stan, rrn: started.rrn, date: request.date)
        while true {
            presentations += 1
            do throws(KernelError) {
                publish(.waitingForCard(stan: started.stan), terminal: terminal.name)
                let card = try waitForPresentation(on: terminal, interface: required, timeout: settings.cardTimeout)
                defer { card.powerOff() }
                let kernelHost: any AuthorisationHost = upstreamSession
                    ?? TimedHost(host, timeout: settings.hostTimeout, queue: terminal.name, amountTable: plan.amountTable,
                                 tableAmount: plan.tableAmount, clock: clock)
                var kernel = Kernel(configuration: configuration, card: card, keypad: terminal.prompts, host: kernelHost)
                if let onCardRead = plan.onCardRead {
                    kernel.onCardRead = { card throws(KernelError) in installments = try onCardRead(card) }
                }
                if let last {
                    request.earlierPresentations = last.entry?.path ?? []
                    request.chipFailed = request.chipFailed || (required == .magstripe && last.entry?.interface == .contact)
                }
                do throws(TransactionFailure) { result = .success(try kernel.run(request)) } catch { result = .failure(error) }
            } catch {
                // No card came: after an earlier presentation, the failure keeps what it learnt.
                var failure = TransactionFailure(error: error, maskedPAN: last?.maskedPAN, pan: last?.pan, aid: last?.aid, trace: last?.trace ?? [])
                if var entry = last?.entry {
                    entry.path.append("no card \(required.map { $0 == .contact ? "inserted" : $0 == .contactless ? "tapped" : "swiped" } ?? "presented") in time")
                    failure.entry = entry
                }
                failure.oda = last?.oda
                result = .failure(failure)
            }
            guard case .failure(let failure) = result, case .presentAgain(let next, _) = failure.error, failure.reversal == nil,
                  presentations < 5 else { break }
            last = failure
            required = next
        }
        let now = max(clock.nowMicroseconds(), new.createdAt)
        // The prompts the transaction showed go in its entry report, for a recording to answer
        // them as they were answered.
        let prompts = terminal.prompts.answered
        if !prompts.isEmpty {
            switch result {
            case .success(var outcome): outcome.entry.prompts = prompts; result = .success(outcome)
            case .failure(var failure) where failure.entry != nil: failure.entry!.prompts = prompts; result = .failure(failure)
            default: break
            }
        }
        switch result {
        case .success(let outcome):
            var completion = Completion(outcome, completedAt: now)
            completion.installments = installments
            completion.hostMessages = upstreamSession?.messages ?? []
            return CardRun(started: started, amount: new.amount, completion: completion,
                           trace: outcome.trace.map { TraceEntry(command: $0.command, response: $0.response) }, result: result,
                           upstream: upstreamSession)
        case .failure(let failure):
            var completion = Completion(failure, completedAt: now)
            completion.hostMessages = upstreamSession?.messages ?? []
            switch failure.error {
            case .cancelled, .aborted: if failure.reversal == nil { completion.status = .cancelled }
            default: break
            }
            return CardRun(started: started, amount: new.amount, completion: completion,
                           trace: failure.trace.map { TraceEntry(command: $0.command, response: $0.response) }, result: result,
                           upstream: upstreamSession)
        }
    }

    /// Records a transaction that acts on `original` with no card (a cancel, a capture, a refund),
    /// on the terminal's thread: begins `new`, gives back `release` minor units of the original's
    /// approval at the host, lets `render` make the callback for the begun transaction, and commits
    /// it with the original's new status and the callback's outbox rows in one write.
    /// `note` is added to the record's message (what the request sent that was ignored).
    public func recordWithoutCard(on terminal: any TerminalSession, _ new: NewTransaction, actingOn original: StoredTransaction,
                                  release: Int64, note: String? = nil,
                                  render: @escaping @Sendable (Started) throws -> Callback) async throws(WorkflowError) -> Answer {
        let done: Result<Answer, WorkflowError> = await terminal.perform { [self] in
            do {
                let started = try store.begin(new)
                var completion = Completion.approved(actingOn: original, completedAt: new.createdAt)
                if let note { completion.message = (completion.message.map { $0 + "; " } ?? "") + note }
                if let link = upstream[terminal.name] {
                    // An external host's approval: it is told (0220, 0400); the emulated issuer holds nothing.
                    completion.hostMessages = link.actOn(new.action, original: original, amount: new.amount, terminal: terminal, stan: started.stan,
                                                         date: UTCDateParts(secondsSince1970: new.createdAt / 1_000_000))
                } else if release > 0, let code = original.authorisationCode {
                    host.void(authorisationCode: code, amount: Int(release))
                }
                let callback = try render(started)
                let stored = try store.complete(id: started.id, completion,
                                                trace: [], outbox: callback.outbox(now: clock.nowMicroseconds(), appSchemesHandedOn: settings.appSchemeCallbacksHandedOn))
                return .success(Answer(callback: callback, transaction: stored))
            } catch {
                return .failure(WorkflowError(ledger: error, "the ledger could not record the \(new.action.rawValue)"))
            }
        }
        let answer = try done.get()
        if let stored = answer.transaction {
            publish(.recorded(stan: stored.stan, status: stored.status, action: new.action), terminal: terminal.name)
        }
        return answer
    }

    /// Waits for a card presented through `interface` (any when nil). A card presented another
    /// way is let go and waited past, as a reader that has asked for the chip ignores a tap.
    func waitForPresentation(on terminal: any TerminalSession, interface: CardInterface?, timeout: Duration) throws(KernelError) -> any CardSession {
        let deadline = ContinuousClock.now + timeout
        while true {
            let card = try terminal.waitForCard(timeout: max(.zero, deadline - ContinuousClock.now))
            guard let interface else { return card }
            let presented: CardInterface = card.magneticStripe != nil ? .magstripe
                : ATR.isContactless((try? card.powerOn()) ?? []) ? .contactless : .contact
            if presented == interface { return card }
            card.powerOff()
            guard ContinuousClock.now < deadline else { throw .promptTimeout(prompt: "\(interface.verb) card") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Reads a card without a transaction (to find what to cancel), on the terminal's thread.
    func readCard(on terminal: any TerminalSession) -> Result<CardRead, TransactionFailure> {
        let now = clock.nowMicroseconds()
        do throws(KernelError) {
            publish(.waitingForCard(stan: nil), terminal: terminal.name)
            let card = try terminal.waitForCard(timeout: settings.cardTimeout)
            defer { card.powerOff() }
            var kernel = Kernel(configuration: kernelConfiguration(terminal), card: card, keypad: terminal.prompts, host: host)
            do throws(TransactionFailure) {
                return .success(try kernel.readCard(TransactionRequest(amount: 0, date: UTCDateParts(secondsSince1970: now / 1_000_000), stan: .first)))
            } catch {
                return .failure(error)
            }
        } catch {
            return .failure(TransactionFailure(error: error))
        }
    }

    /// Asks the terminal's keypad, on the terminal's thread.
    func ask(_ terminal: any TerminalSession, _ kind: PromptKind, step: String) async -> Result<KeypadInput, KernelError> {
        let timeout = settings.promptTimeout
        return await terminal.perform { () -> Result<KeypadInput, KernelError> in
            do throws(KernelError) { return .success(try terminal.prompts.ask(kind, timeout: timeout, step: step)) } catch { return .failure(error) }
        }
    }
}
