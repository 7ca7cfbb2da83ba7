import Foundation
import Ledger
import Terminal
import Workflows

// What the API's routes ask of the bench beyond the fronts: the ledger's records and the host's
// queues, so no route reaches into either.

extension Bench {
    /// The newest transactions of one terminal (or of all), `limit` at a time, older than `before`.
    public func transactions(terminal name: String?, limit: Int, before: Int64?,
                             filter: TransactionFilter = TransactionFilter()) throws(DaemonError) -> [StoredTransaction] {
        // The platforms' merchants have ledger terminals of their own (`worldline.<merchantId>`),
        // and so has the issuer's ISO 8583 listener (`iso8583.host`) once it has answered.
        var platform: [String]
        do {
            platform = try ledger.worldlineMerchants().map(\.terminalName) + ledger.citconMerchants().map(\.terminalName)
            if try ledger.terminal(name: ISO8583IssuerService.terminalName) != nil { platform.append(ISO8583IssuerService.terminalName) }
        } catch { throw DaemonError(ledger: error, "ledger") }
        var names = terminals.map(\.settings.name) + platform
        if let name { names = platform.contains(name) ? [name] : [try terminal(name).settings.name] }
        var rows: [StoredTransaction] = []
        do {
            for name in names { rows += try ledger.transactions(terminal: name, limit: limit, beforeID: before, filter: filter) }
        } catch { throw DaemonError(ledger: error, "ledger") }
        rows.sort { $0.id > $1.id }
        return Array(rows.prefix(limit))
    }

    /// A transaction by its id or its UUID, with its trace and its callbacks.
    public func transaction(_ key: String) throws(DaemonError) -> (StoredTransaction, [TraceEntry], [OutboxEntry])? {
        do {
            guard let t = try Int64(key).flatMap({ try ledger.transaction(id: $0) }) ?? ledger.transaction(uuid: key.lowercased()) else { return nil }
            return (t, try ledger.trace(transactionID: t.id), try ledger.outbox(transactionID: t.id))
        } catch { throw DaemonError(ledger: error, "ledger") }
    }

    /// The ISO 8583 messages of a transaction, in order.
    public func hostMessages(transactionID: Int64) throws(DaemonError) -> [HostMessageEntry] {
        do { return try ledger.hostMessages(transactionID: transactionID) } catch { throw DaemonError(ledger: error, "ledger") }
    }

    /// The answer committed with a transaction, as first made (a request answered later).
    func storedAnswer(transactionID: Int64) throws(DaemonError) -> OpenResult? {
        let stored: StoredTransaction?
        do { stored = try ledger.transaction(id: transactionID) } catch { throw DaemonError(ledger: error, "ledger") }
        guard let stored else { return nil }
        do throws(WorkflowError) { return try VivaFront.replay(stored, store: ledger).map(OpenResult.init) } catch { throw DaemonError(error) }
    }

    /// What the ledger keeps of a terminal: its last STAN and its batch.
    public func record(of terminal: TerminalRuntime) throws(DaemonError) -> TerminalRecord? {
        do { return try ledger.terminal(name: terminal.settings.name) } catch { throw DaemonError(ledger: error, "ledger") }
    }

    /// The outcomes queued at the host for a terminal's next transactions.
    public func hostQueue(terminal name: String?) throws(DaemonError) -> [QueuedOutcome] {
        host.queuedOutcomes(queue: try terminal(name).settings.name)
    }

    /// Queues an outcome for a terminal's next transaction; refused past `HostOutcomeBody.maximumQueued`.
    public func enqueueHostOutcome(_ outcome: QueuedOutcome, terminal name: String?) throws(DaemonError) -> [QueuedOutcome] {
        try enqueueHostOutcome(outcome, queue: try terminal(name).settings.name)
    }

    /// Queues a one-shot outcome on the host queue `queue` (a terminal's name, or a platform
    /// merchant's ledger terminal, `worldline.<m>`, `citcon.<m>`); answers the queue.
    public func enqueueHostOutcome(_ outcome: QueuedOutcome, queue: String) throws(DaemonError) -> [QueuedOutcome] {
        guard host.queuedOutcomes(queue: queue).count < HostOutcomeBody.maximumQueued else {
            throw .conflict("the host queue of \(queue) holds \(HostOutcomeBody.maximumQueued) outcomes already; let transactions use them or clear it (DELETE)")
        }
        host.enqueue(outcome, queue: queue)
        return host.queuedOutcomes(queue: queue)
    }

    /// Empties a terminal's host queue; returns what it held.
    public func clearHostQueue(terminal name: String?) throws(DaemonError) -> [QueuedOutcome] {
        host.clearQueue(try terminal(name).settings.name)
    }
}
