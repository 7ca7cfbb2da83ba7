import EMV
import Foundation
import Hummingbird
import Ledger
import NIOCore
import Terminal
import Workflows

/// Open requests answered later (`"wait": false`): each can be fetched for an hour after it
/// started, and at most `capacity` are kept (the oldest go first). A finished request keeps only
/// its transaction's id (the ledger holds the rest) or, for an answer with no transaction, the
/// answer itself, so thousands of them cost little memory; pruning walks the oldest end of a
/// queue, so it costs nothing per request in steady state.
final class OpenRequests: @unchecked Sendable {
    /// What a request came to.
    enum Outcome: Sendable {
        /// A transaction's answer, rebuilt from the ledger when fetched: its callback is the one
        /// committed with it, and only the words the front put beside it are kept here.
        case transaction(id: Int64, status: String, message: String, replayed: Bool)
        /// An answer with no transaction behind it (a refused request's callback).
        case answer(OpenResult)
        case failure(DaemonError)
    }

    private struct Entry {
        var task: Task<Outcome, Never>?
        let started: ContinuousClock.Instant
        var outcome: Outcome?
    }

    static let defaultCapacity = 10_000
    static let defaultLifetime: Duration = .seconds(3600)

    private let lock = NSLock()
    private var entries: [String: Entry] = [:]
    /// Ids oldest first, from `head` on (the part before it is spent, dropped now and then).
    private var order: [String] = []
    private var head = 0
    let capacity: Int
    let lifetime: Duration

    init(capacity: Int = OpenRequests.defaultCapacity, lifetime: Duration = OpenRequests.defaultLifetime) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    /// How many requests are kept (pending or finished).
    var count: Int { lock.withLock { entries.count } }

    func start(_ body: @escaping @Sendable () async throws(DaemonError) -> OpenResult) -> String {
        let id = UUID().uuidString.lowercased()
        let now = ContinuousClock.now
        lock.withLock {
            prune(now: now)
            entries[id] = Entry(task: nil, started: now, outcome: nil)
            order.append(id)
        }
        // The task records its own outcome and lets go of itself, so `result(wait: false)` only
        // has to look and a finished request holds no task.
        let task = Task { () -> Outcome in
            let outcome: Outcome
            do throws(DaemonError) {
                let result = try await body()
                // A Viva answer is rebuilt from its outbox row exactly as it was first made
                // (Bench.openResult); a Billpocket one is made from the result, and kept whole.
                if let transaction = result.transaction, result.callback != nil, transaction.provider == Provider.viva.rawValue {
                    outcome = .transaction(id: transaction.id, status: result.status, message: result.message, replayed: result.replayed)
                } else {
                    outcome = .answer(result)
                }
            } catch {
                outcome = .failure(error)
            }
            self.lock.withLock {
                self.entries[id]?.outcome = outcome
                self.entries[id]?.task = nil
            }
            return outcome
        }
        lock.withLock {
            if entries[id]?.outcome == nil { entries[id]?.task = task }
        }
        return id
    }

    /// Drops the requests past their lifetime and the oldest beyond `capacity - 1`, from the old end.
    private func prune(now: ContinuousClock.Instant) {
        while head < order.count {
            let id = order[head]
            guard let entry = entries[id] else { head += 1; continue }
            guard entries.count >= capacity || now - entry.started > lifetime else { break }
            entries[id] = nil
            head += 1
        }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// The outcome of request `id`; nil while it runs and `wait` is false.
    func outcome(_ id: String, wait: Bool) async throws(DaemonError) -> Outcome? {
        guard let entry = lock.withLock({ entries[id] }) else {
            throw .notFound("no pending request \"\(id)\" (requests are kept for an hour, at most \(capacity) of them)")
        }
        if let done = entry.outcome { return done }
        guard wait else { return nil }
        if let task = entry.task { return await task.value }
        // Finished between the two looks.
        return lock.withLock { entries[id]?.outcome }
    }
}

/// Keys come in their declaration order (stable, and the identifying ones first); sorting them
