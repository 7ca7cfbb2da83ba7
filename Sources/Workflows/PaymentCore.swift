import Foundation
import LedgerModel
import Synchronization
import Terminal

/// Operations on one payment run one at a time, whichever surface asks.
///
/// A platform's capture, cancel and refund each read the payment, check its state and write the
/// next one; two at once on the same payment would both pass the check (20 parallel captures of
/// one pre-authorisation were three approved captures). Every surface that acts on a payment it
/// keeps — a Worldline payment, a Citcon charge — runs the operation inside `run(key)` with the
/// payment's own key, so the check and the write see one state. Different payments do not wait
/// for each other. The ledger still checks the totals when it commits (`Ledger.applyApproval`):
/// this is what makes the surface's answer a clear refusal rather than a refused commit.
public final class PaymentSerialiser: Sendable {
    /// A lock per payment in use, and how many are using or waiting for it: the entry is dropped
    /// when the last one leaves, so the table holds only payments being acted on.
    private final class Entry: @unchecked Sendable {
        // Unchecked: `users` changes only under the table's mutex; `lock` is a lock.
        let lock = NSLock()
        var users = 0
    }

    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    /// Runs `body` while no other `run` with the same `key` runs. The body may block (a ledger
    /// write, the issuer): callers are already off the event loops.
    public func run<T, E: Error>(_ key: String, _ body: () throws(E) -> T) throws(E) -> T {
        let entry = entries.withLock { table -> Entry in
            let entry = table[key] ?? Entry()
            entry.users += 1
            table[key] = entry
            return entry
        }
        entry.lock.lock()
        defer {
            entry.lock.unlock()
            entries.withLock { table in
                entry.users -= 1
                if entry.users == 0 { table[key] = nil }
            }
        }
        return try body()
    }

    /// How many payments have an operation running or waiting (for tests).
    public var busyPayments: Int { entries.withLock { $0.count } }
}

/// The one rule for a platform record the ledger refuses.
///
/// A platform commits its own state, the ledger row and the notifications in one write. When the
/// ledger refuses that write (a total it checks, a value it does not take, a failing disk),
/// nothing of it is kept; then, as a card sale does (`CardTransaction`): an approval the host gave
/// is taken back there, the row begun for it is recorded `failed` with the reason (never left
/// `in_progress`), and the surface answers with its own error. Nothing is authorised that is not
/// recorded.
public enum PlatformRecord {
    /// Why a record was refused, for the surface to answer in its own words.
    public struct Refused: Error, Sendable, CustomStringConvertible {
        /// The ledger's own rule, when it refused a value (an over-capture, an over-refund).
        public let rule: (field: String, rule: String)?
        /// What happened, for an error answer and the log.
        public let description: String
    }

    /// Runs `commit`; when it throws, takes the approval back (`takeBack`), records the
    /// transaction `transactionID` as failed, and throws `Refused`.
    public static func commit<T>(_ store: any TransactionStore, transactionID: Int64?, completedAt: Int64,
                                 takeBack: (() -> Void)? = nil, _ commit: () throws -> T) throws(Refused) -> T {
        do {
            return try commit()
        } catch {
            takeBack?()
            var recordedFailed = false
            if let transactionID {
                let failed = Completion(status: .failed,
                                        message: String(("not recorded: \(error)" + (takeBack == nil ? "" : "; the host's approval was reversed")).prefix(500)),
                                        completedAt: completedAt)
                recordedFailed = (try? store.complete(id: transactionID, failed, trace: [], outbox: [])) != nil
            }
            var rule: (String, String)? = nil
            if let ledgerError = error as? LedgerError, case .invalid(let field, let text) = ledgerError { rule = (field, text) }
            return try Self.fail(Refused(rule: rule, description: "\(error)"
                + (transactionID == nil ? "" : recordedFailed ? "; the transaction is recorded as failed" : "; it will be failed at the next start")))
        }
    }

    private static func fail<T>(_ refused: Refused) throws(Refused) -> T { throw refused }
}

/// The one authorise-and-record path of every surface that authorises without a card in a
/// reader: the Worldline and Citcon platforms and the ISO 8583 issuer listener. (A card sale runs
/// the same steps around the kernel in `CardTransaction`.)
///
/// 1. The ledger row is begun, so its STAN is durable before the issuer is asked; a row the
///    ledger refuses to begin is the surface's error, and nothing was asked.
/// 2. The issuer is asked (or not: a failed challenge).
/// 3. The outcome is recorded with the surface's own state and notifications in one write.
/// 4. A record the ledger refuses: the approval is taken back at the issuer, the row is recorded
///    failed (`PlatformRecord`), and the surface answers with its own error. Nothing stands at the
///    issuer that the ledger does not have.
public enum AuthoriseAndRecord {
    /// What the issuer said: its response, or why there is none.
    public struct Answer: Sendable {
        public let response: AuthorisationResponse?
        /// Why there is no response (the host's error, a failed challenge).
        public let failure: String?

        public init(response: AuthorisationResponse?, failure: String?) {
            self.response = response
            self.failure = failure
        }

        public var approved: Bool { response?.isApproved ?? false }
    }

    /// Why the path stopped.
    public enum Failure: Error, CustomStringConvertible {
        /// The ledger would not begin the row: nothing was asked.
        case notBegun(any Error)
        /// The ledger would not record the outcome: taken back and failed.
        case notRecorded(PlatformRecord.Refused)

        public var description: String {
            switch self {
            case .notBegun(let error): "the transaction could not begin: \(error)"
            case .notRecorded(let refused): "the outcome could not be recorded: \(refused)"
            }
        }
    }

    /// Runs the path: `ask` the issuer once the row `new` has begun (`onStarted` is told), then
    /// `record` the answer; `takeBack` undoes an approval the ledger refused.
    public static func run<T>(_ store: any TransactionStore, _ new: NewTransaction, completedAt: () -> Int64,
                              onStarted: (Started) -> Void = { _ in }, ask: () -> Answer,
                              takeBack: @escaping (AuthorisationResponse) -> Void,
                              record: (Started, Answer) throws -> T) throws(Failure) -> (started: Started, answer: Answer, recorded: T) {
        let started: Started
        do { started = try store.begin(new) } catch { throw .notBegun(error) }
        onStarted(started)
        let answer = ask()
        do throws(PlatformRecord.Refused) {
            let approval = answer.response.flatMap { $0.isApproved ? $0 : nil }
            let recorded = try PlatformRecord.commit(store, transactionID: started.id, completedAt: completedAt(),
                                                     takeBack: approval.map { a in { takeBack(a) } }) {
                try record(started, answer)
            }
            return (started, answer, recorded)
        } catch {
            throw .notRecorded(error)
        }
    }
}

/// The one path of a capture, cancel or refund on a platform payment, whichever platform: the
/// row begun against its original (the ledger checks that it may act on it), the outcome recorded
/// with the payment's new state and its notifications in one write (the ledger checks the
/// totals; a refusal fails the row, `PlatformRecord`), and only then the issuer told what is
/// released. Run it inside the payment's `PaymentSerialiser` turn, after its lifecycle allowed
/// the operation.
public enum PlatformOperation {
    /// Why the operation stopped; nothing of it stands.
    public enum Failure: Error, CustomStringConvertible {
        /// The ledger would not begin the row (the original, the amount, a value).
        case notBegun(any Error)
        /// The ledger would not record it: the row is failed.
        case notRecorded(PlatformRecord.Refused)

        public var description: String {
            switch self {
            case .notBegun(let error): "\(error)"
            case .notRecorded(let refused): "\(refused)"
            }
        }

        /// The ledger's rule, when it refused a value.
        public var rule: (field: String, rule: String)? {
            switch self {
            case .notBegun(let error):
                if let e = error as? LedgerError, case .invalid(let field, let rule) = e { return (field, rule) }
                return nil
            case .notRecorded(let refused): return refused.rule
            }
        }
    }

    /// Begins `new` acting on `original`, records it through `record` (given the row and its
    /// approved completion), publishes the outcome on `new.terminal`'s events, then `release`s.
    public static func run<T>(_ context: WorkflowContext, _ store: any TransactionStore, _ new: NewTransaction, acting original: StoredTransaction?,
                              record: (Started, Completion?) throws -> T, release: () -> Void = {}) throws(Failure) -> (started: Started, recorded: T) {
        let started: Started
        do { started = try store.begin(new) } catch { throw .notBegun(error) }
        let completedAt = context.clock.nowMicroseconds()
        let completion = original.map { Completion.approved(actingOn: $0, completedAt: completedAt) }
        let recorded: T
        do throws(PlatformRecord.Refused) {
            recorded = try PlatformRecord.commit(store, transactionID: started.id, completedAt: completedAt) { try record(started, completion) }
        } catch {
            context.publish(.recorded(stan: started.stan, status: .failed, action: new.action), terminal: new.terminal)
            throw .notRecorded(error)
        }
        context.publish(.recorded(stan: started.stan, status: .approved, action: new.action), terminal: new.terminal)
        release()
        return (started, recorded)
    }
}

extension AuthoriseAndRecord {
    /// A card-not-present authorisation on the one path (both platforms): the terminal's
    /// `transactionStarted` event once the row is begun, the issuer asked through `host` (not
    /// asked when `notAskedBecause` gives a reason: a failed 3-D Secure challenge), and an
    /// approval the ledger refuses reversed at the emulated issuer.
    public static func cardNotPresent<T>(_ context: WorkflowContext, _ store: any TransactionStore, _ new: NewTransaction,
                                         request: AuthorisationRequest, host: TimedHost, notAskedBecause: String?,
                                         platformAnswer: AuthorisationResponse? = nil,
                                         record: (Started, Answer) throws -> T) throws(Failure) -> (started: Started, answer: Answer, recorded: T) {
        try run(store, new, completedAt: { context.clock.nowMicroseconds() }, onStarted: { started in
            context.publish(.transactionStarted(stan: started.stan, action: new.action), terminal: new.terminal)
        }, ask: {
            if let reason = notAskedBecause { return Answer(response: nil, failure: reason) }
            // The platform's own answer (its declined test cards): the issuer is not asked.
            if let platformAnswer { return Answer(response: platformAnswer, failure: nil) }
            do throws(HostError) { return Answer(response: try host.authorise(request), failure: nil) } catch {
                return Answer(response: nil, failure: error.description)
            }
        }, takeBack: { approval in
            context.host.reverse(request, approval: approval)
        }, record: record)
    }
}
