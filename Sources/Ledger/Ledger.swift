import Crypto
// The records and the store protocols are the ledger's vocabulary: whoever imports the ledger
// speaks it (`import Ledger` is enough outside the workflows).
@_exported import LedgerModel
import Foundation
import GRDB
import Terminal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The durable record of cardbench: terminals and their STAN counters, transactions, their
/// traces, and the outbox of callbacks — one SQLite file in WAL mode.
///
/// Every operation is one write transaction (or one read), so a crash leaves each of them
/// either wholly done or not at all. Writes are serialised by GRDB's single writer connection
/// in this process and by SQLite's lock (with a busy timeout) between processes.
public final class Ledger: Sendable {
    /// The database file.
    public let path: String
    /// After this many failed attempts an outbox message is `failed` and no longer retried.
    public let outboxMaxAttempts: Int

    let pool: DatabasePool
    /// Merges the writes of concurrent callers into one SQLite transaction (group commit).
    let group: GroupCommit
    let walFile: WALFile
    /// Per terminal, the reservation this process knows to be on disk (see `allocateSTAN`).
    let syncedReservations = SyncedReservations()
    let panKey: SymmetricKey

    /// Opens the ledger at `path`, creating the file (mode 0600) and its schema if needed.
    ///
    /// - Parameters:
    ///   - panKey: 32 bytes (see `loadOrCreatePANKey`); a ledger refuses a key other than the
    ///     one it was created with, since every stored PAN hash would stop matching.
    ///   - busyTimeout: how long a write waits for another process's write to finish.
    ///   - outboxMaxAttempts: delivery attempts before an outbox message is `failed`.
    public init(path: String, panKey: [UInt8], busyTimeout: TimeInterval = 5, outboxMaxAttempts: Int = 10) throws {
        guard panKey.count == Self.panKeyLength else {
            throw LedgerError.invalid(field: "panKey", rule: "must be \(Self.panKeyLength) bytes, got \(panKey.count)")
        }
        guard outboxMaxAttempts >= 1 else {
            throw LedgerError.invalid(field: "outboxMaxAttempts", rule: "must be at least 1, got \(outboxMaxAttempts)")
        }
        self.path = path
        self.outboxMaxAttempts = outboxMaxAttempts
        self.panKey = SymmetricKey(data: panKey)
        let wal = WALFile(path: path + "-wal")
        walFile = wal
        group = GroupCommit(syncWAL: { try wal.sync() })

        // The file holds masked PANs and hashes: private from the start.
        KeyFile.createPrivateFile(path)

        var configuration = Configuration()
        configuration.label = "ledger"
        configuration.busyMode = .timeout(busyTimeout)
        // Each connection (the writer and every reader) would grow its page cache to SQLite's
        // default 2 MB as the file grows, 12 MB in all, which `bench sale` showed as the daemon's
        // memory growing over 100,000 sales. A sale appends; the hot pages of its tables and
        // indexes fit in far less, and the rest is in the operating system's file cache.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA cache_size = -\(Self.pageCacheKiB)")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // synchronous=NORMAL does not sync the WAL at a commit, which would lose the last
            // commits to a power cut, and with them STANs the host has already seen: the group
            // commit syncs the WAL itself before a durable write returns (see `GroupCommit`).
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // The writer alone gets a larger cache: every write walks the indexes on random
                // keys (card hash, client reference), and at 512 KiB their pages were read from
                // the OS again and again (`bench iso8583`, 100,000 authorisations: 4,100/s and
                // 355 µs of daemon CPU each; with 4 MiB 4,700/s and 296 µs). Readers keep 512 KiB.
                try db.execute(sql: "PRAGMA cache_size = -\(Self.writerPageCacheKiB)")
            }
            try Schema.migrator.migrate(pool)
        } catch {
            throw LedgerError.database(operation: "open \(path)", message: Self.describe(error))
        }
        try checkPANKey()
        try skipSTANsReservedBeforeReboot()
    }

    /// Each connection's page cache, in KiB.
    static let pageCacheKiB = 512
    /// The writer connection's page cache, in KiB.
    static let writerPageCacheKiB = 4096

    /// Closes the database connections; later calls fail.
    public func close() throws {
        defer { walFile.close() }
        do { try pool.close() } catch {
            throw LedgerError.database(operation: "close \(path)", message: Self.describe(error))
        }
    }

    /// A check value of the key (an HMAC of a fixed label, which reveals nothing of the key) is
    /// stored on first open, so that opening with another key fails loudly instead of every
    /// "last 3 with this card" silently finding nothing.
    private func checkPANKey() throws {
        let check = String(Self.hexHMAC(key: panKey, "cardbench ledger pan key check").prefix(16))
        let stored = try write("check the PAN key") { db -> String? in
            if let stored = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'pan_key_check'") {
                return stored
            }
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('pan_key_check', ?)", arguments: [check])
            return nil
        }
        if let stored, stored != check {
            throw LedgerError.invalid(field: "panKey", rule: "is not the key this ledger was created with (check value \(check), ledger has \(stored))")
        }
    }

    // MARK: - Terminals

    /// Returns the terminal named `name`, creating it with `tid` (a new terminal has STAN counter
    /// 0 and batch 1 open). A terminal's TID never changes: a different `tid` for an existing
    /// name is an error, since its STANs and batches belong to the TID the host knows.
    public func ensureTerminal(name: String, tid: String, createdAt: Int64? = nil) throws -> TerminalRecord {
        try Validate.terminalName(name)
        try Validate.tid(tid)
        let now = createdAt ?? Self.nowMicros()
        return try write("ensure terminal \(name)") { db in
            try db.execute(sql: "INSERT INTO terminal (name, tid, created_at) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING",
                           arguments: [name, tid, now])
            let terminal = try Self.terminal(db, name: name)
            guard terminal.tid == tid else {
                throw LedgerError.invalid(field: "tid", rule: "terminal \"\(name)\" has tid \(terminal.tid), not \(tid); a terminal's TID does not change (use a new name)")
            }
            return terminal
        }
    }

    /// The terminal named `name`, or nil.
    public func terminal(name: String) throws -> TerminalRecord? {
        try read("read terminal \(name)") { db in
            try Row.fetchOne(db, sql: "SELECT * FROM terminal WHERE name = ?", arguments: [name]).map(Self.terminalRecord)
        }
    }

    /// All terminals by name.
    public func terminals() throws -> [TerminalRecord] {
        try read("list terminals") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM terminal ORDER BY name").map(Self.terminalRecord)
        }
    }

    static func terminal(_ db: Database, name: String) throws -> TerminalRecord {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM terminal WHERE name = ?"), arguments: [name]) else {
            throw LedgerError.unknownTerminal(name: name)
        }
        return try terminalRecord(row)
    }

    static func terminalRecord(_ row: Row) throws -> TerminalRecord {
        let last: Int = row["last_stan"]
        return TerminalRecord(id: row["id"], name: row["name"], tid: row["tid"], lastSTAN: STAN(last),
                              batchNumber: row["batch_number"], batchOpen: row["batch_open"],
                              batchCount: row["batch_count"], batchAmount: row["batch_amount"], createdAt: row["created_at"])
    }

    /// Test support: sets a terminal's STAN counter, to reach the wrap without a million rows.
    func setLastSTAN(terminal name: String, _ value: Int) throws {
        try write("set last STAN") { db in
            _ = try Self.terminal(db, name: name)
            try db.execute(sql: "UPDATE terminal SET last_stan = ?1, stan_reserved = ?1 WHERE name = ?2", arguments: [value, name])
        }
    }

    // MARK: - Plumbing

    /// One write transaction (BEGIN IMMEDIATE, so two writers queue on the busy timeout instead
    /// of failing when a read lock cannot be upgraded), committed durably unless `durable` is
    /// false (see `GroupCommit`). Ledger errors thrown by `body` pass
    /// through after the rollback; SQLite errors are named after `operation`.
    func write<T>(_ operation: @autoclosure () -> String, durable: Bool = true, _ body: (Database) throws -> T) throws -> T {
        try naming(operation) { try group.write(pool, durable: durable, body) }
    }

    /// One read, from a snapshot that sees every transaction committed before it started.
    func read<T>(_ operation: @autoclosure () -> String, _ body: (Database) throws -> T) throws -> T {
        try naming(operation) { try pool.read(body) }
    }

    /// One statement's read, outside a transaction: a single SELECT is its own snapshot, and
    /// `read`'s BEGIN and COMMIT (prepared anew by GRDB each time) cost a once-per-sale lookup
    /// more than the lookup.
    func readOneStatement<T>(_ operation: @autoclosure () -> String, _ body: (Database) throws -> T) throws -> T {
        try naming(operation) { try pool.unsafeRead(body) }
    }

    /// Runs `body`; ledger errors pass through, SQLite's are named after `operation`.
    private func naming<T>(_ operation: () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError.database(operation: operation(), message: Self.describe(error))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error.resultCode): \(error.message ?? "no message")"
        }
        return String(describing: error)
    }

    /// Wall-clock microseconds since 1970, for rows whose time the caller does not supply.
    static func nowMicros() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }
}

extension Database {
    /// `execute(sql:arguments:)` through the connection's statement cache, for the statements
    /// every transaction runs: GRDB analyses a statement when it prepares it, which costs more
    /// than the statement.
    func executeCached(sql: String, arguments: StatementArguments = []) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension Ledger {
    /// The floor `cardbench bench sale` compares with: `count` bare durable commits (WAL,
    /// synchronous=FULL, one single-row INSERT each: SQLite's own way to a synced commit, the
    /// same fsync of the WAL the group commit makes) on a new file at `path`, one after another. Returns each commit's time in microseconds.
    public static func measureCommitFloor(path: String, count: Int) throws -> [Double] {
        let pool = try DatabasePool(path: path)
        defer { try? pool.close() }
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        }
        var times: [Double] = []
        times.reserveCapacity(count)
        let clock = ContinuousClock()
        for i in 0..<count {
            let start = clock.now
            try pool.write { db in try db.execute(sql: "INSERT INTO floor (value) VALUES (?)", arguments: ["commit \(i)"]) }
            let d = clock.now - start
            times.append(Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12)
        }
        return times
    }
}

/// Group commit: concurrent writers share one SQLite transaction, and so one WAL sync.
///
/// A durable commit costs an fsync, and SQLite has one writer at a time; with many terminals the
/// syncs, not the work, would bound the throughput. Each caller queues its write; whoever finds
/// no batch running runs every queued write in one transaction, each inside its own savepoint (a
/// failing write rolls back alone and gets its own error, as it would in a transaction of its
/// own), commits once, and hands each caller its result.
///
/// The connection commits with synchronous=NORMAL and the leader then syncs the WAL itself
/// (`syncWAL`), after handing the writer to the next batch: the next batch runs while this one's
/// fsync is in flight, instead of every terminal waiting on it. A caller whose write is durable
/// (the default) returns only after that sync, so what it was told is on disk is on disk. A
/// write that says it need not be (`durable: false`) returns at its commit: it survives the
/// process dying (the operating system has it) but not the machine, until the next sync.
final class GroupCommit: @unchecked Sendable {
    private final class Pending {
        /// Dropped as soon as it has run: the caller's closure must not outlive its call.
        var body: ((Database) throws -> Any)?
        var result: Result<Any, any Error>?
        let durable: Bool
        /// Signalled once: when the write is done (`result` set), or when its caller is to lead
        /// the next batch (`result` still nil). Each waiter has its own, so a commit wakes only
        /// the writers it holds and the next leader, not every thread that waits.
        let wake = DispatchSemaphore(value: 0)
        init(durable: Bool, _ body: @escaping (Database) throws -> Any) {
            self.durable = durable
            self.body = body
        }
    }

    private let lock = NSLock()
    private var queue: [Pending] = []
    /// A leader is running a batch (or has been chosen and is about to).
    private var running = false
    private var syncCount = 0
    /// Set when a sync fails. Linux reports a writeback error once per open file, so a later
    /// sync could succeed while the failed commit (and everything after it in the WAL) is not
    /// on disk: after one failure no write is accepted until the ledger is opened again.
    private var syncFailure: (any Error)?
    /// Batches with durable writes, numbered as they take the writer (under `lock`)...
    private var ticketsIssued = 0
    /// ...and the last one whose sync has finished (under `syncTurn`).
    private var ticketsSynced = 0
    private let syncTurn = NSCondition()
    private let syncWAL: () throws -> Void

    /// - Parameter syncWAL: makes every commit so far durable (an fdatasync of the WAL file).
    init(syncWAL: @escaping () throws -> Void) {
        self.syncWAL = syncWAL
    }

    /// How many times a batch has synced the WAL (for tests).
    var syncs: Int { lock.withLock { syncCount } }

    func write<T>(_ pool: DatabasePool, durable: Bool = true, _ body: (Database) throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let mine = Pending(durable: durable) { try body($0) }
            lock.lock()
            if let syncFailure {
                lock.unlock()
                throw syncFailure
            }
            queue.append(mine)
            let leads = !running
            running = true
            lock.unlock()
            if !leads {
                mine.wake.wait()
            }
            if mine.result == nil {
                lead(batchOf: mine, pool)
            }
            return try mine.result!.get() as! T
        }
    }

    private func lead(batchOf mine: Pending, _ pool: DatabasePool) {
        // Every write queued so far, ours among them. A batch with durable writes takes a
        // ticket: syncs run in the order of the commits they cover (see below).
        lock.lock()
        let batch = queue
        queue = []
        let earlierFailure = syncFailure
        var ticket = 0
        if earlierFailure == nil, batch.contains(where: { $0.durable }) {
            ticketsIssued += 1
            ticket = ticketsIssued
        }
        lock.unlock()
        if let earlierFailure {
            for item in batch {
                item.body = nil
                item.result = .failure(earlierFailure)
            }
        } else {
            Self.run(batch, pool)
        }

        // Whoever queued while this batch ran leads the next one, now.
        lock.lock()
        let next = queue.first
        if next == nil { running = false }
        lock.unlock()
        next?.wake.signal()

        let durable = batch.filter { item in
            guard item.durable, case .success = item.result else { return false }
            return true
        }
        for item in batch where item !== mine && !durable.contains(where: { $0 === item }) { item.wake.signal() }
        guard ticket > 0 else { return }

        // One sync at a time, in commit order: Linux reports a writeback error to one fsync
        // only, so a later batch's sync running alongside could take an earlier batch's error
        // and leave that batch told it was on disk.
        syncTurn.lock()
        while ticketsSynced != ticket - 1 { syncTurn.wait() }
        syncTurn.unlock()
        var failure = lock.withLock { syncFailure }
        if failure == nil {
            do {
                try syncWAL()
                lock.withLock { syncCount += 1 }
            } catch {
                let poisoned = LedgerError.database(operation: "sync the ledger's WAL", message: "\(error); no further writes are accepted: check the disk and restart")
                lock.withLock { syncFailure = poisoned }
                failure = poisoned
            }
        }
        syncTurn.lock()
        ticketsSynced = ticket
        syncTurn.broadcast()
        syncTurn.unlock()
        if let failure {
            for item in durable { item.result = .failure(failure) }
        }
        for item in durable where item !== mine { item.wake.signal() }
    }

    /// Runs a batch in one write transaction, each write in a savepoint of its own so that one
    /// failing write does not take the others with it (a batch of one needs none: its failure
    /// rolls the transaction back). BEGIN, COMMIT and the savepoint statements go through the
    /// connection's statement cache: GRDB's `write` and `inSavepoint` prepare and analyse them
    /// anew each time, which cost a sale more than its own INSERT and UPDATE statements.
    private static func run(_ batch: [Pending], _ pool: DatabasePool) {
        do {
            try pool.writeWithoutTransaction { db in
                try db.executeCached(sql: "BEGIN IMMEDIATE TRANSACTION")
                do {
                    if batch.count == 1, let item = batch.first {
                        let body = item.body!
                        item.body = nil
                        item.result = .success(try body(db))
                    } else {
                        for item in batch {
                            let body = item.body!
                            item.body = nil
                            try db.executeCached(sql: "SAVEPOINT batchItem")
                            do {
                                item.result = .success(try body(db))
                                try db.executeCached(sql: "RELEASE SAVEPOINT batchItem")
                            } catch {
                                item.result = .failure(error)
                                try db.executeCached(sql: "ROLLBACK TRANSACTION TO SAVEPOINT batchItem")
                                try db.executeCached(sql: "RELEASE SAVEPOINT batchItem")
                            }
                        }
                    }
                    try db.executeCached(sql: "COMMIT TRANSACTION")
                } catch {
                    if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK TRANSACTION") }
                    throw error
                }
            }
        } catch {
            // The commit itself failed, or the one write of the batch did: nothing of the batch
            // is on disk. A write's own error stays its result.
            for item in batch {
                item.body = nil
                if case .failure = item.result { continue }
                item.result = .failure(error)
            }
        }
    }
}

/// The ledger's WAL file, opened once for `fdatasync`: SQLite writes it, the group commit syncs
/// it. The WAL exists from the first write on and stays while a connection is open.
final class WALFile: @unchecked Sendable {
    let path: String
    private let lock = NSLock()
    private var fd: Int32 = -1
    /// Syncs running outside the lock: the descriptor is closed only when none is, so a sync
    /// never runs on a number the process has meanwhile given to another file.
    private var syncing = 0
    private var closed = false

    init(path: String) { self.path = path }

    deinit { close() }

    /// Makes everything written to the WAL so far durable.
    func sync() throws {
        let fd = try lock.withLock {
            guard !closed else {
                throw LedgerError.database(operation: "sync \(path)", message: "the ledger is closed")
            }
            if self.fd < 0 {
                self.fd = open(path, O_RDONLY | O_CLOEXEC)
                guard self.fd >= 0 else {
                    throw LedgerError.database(operation: "open \(path) to sync it", message: String(cString: strerror(errno)))
                }
            }
            syncing += 1
            return self.fd
        }
        let result = Self.dataSync(fd)
        let failure = errno
        lock.withLock {
            syncing -= 1
            if closed, syncing == 0 { closeDescriptor() }
        }
        guard result == 0 else {
            throw LedgerError.database(operation: "sync \(path)", message: String(cString: strerror(failure)))
        }
    }

    func close() {
        lock.withLock {
            closed = true
            if syncing == 0 { closeDescriptor() }
        }
    }

    /// Under the lock.
    private func closeDescriptor() {
        guard fd >= 0 else { return }
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
        fd = -1
    }

    private static func dataSync(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
        fdatasync(fd)
        #else
        fcntl(fd, F_FULLFSYNC)
        #endif
    }
}

/// What this process knows to be synced: a reservation is only known durable once a durable
/// write (which syncs the WAL, and so every commit before it, whoever made it) has returned
/// after reading it. A reservation merely committed, by this process or another, is not.
final class SyncedReservations: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Int64: Int] = [:]

    func value(for terminalID: Int64) -> Int? { lock.withLock { values[terminalID] } }

    func set(_ value: Int, for terminalID: Int64) { lock.withLock { values[terminalID] = value } }
}

extension Ledger {
    /// Opens (creating if needed) a ledger file and its PAN key beside it (`<file>.pan-key`), and
    /// the directory it is in.
    public static func openFile(_ path: String, outboxMaxAttempts: Int = 10) throws -> Ledger {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        return try Ledger(path: path, panKey: try loadOrCreatePANKey(at: defaultPANKeyPath(database: path)), outboxMaxAttempts: outboxMaxAttempts)
    }
}
