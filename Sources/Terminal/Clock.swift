import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the terminal and the host get the time: the system clock in service, a manual clock in
/// tests and scenarios ("refund 30 s after the sale").
///
/// Waits go through the clock too. On the system clock they take real time. On a manual clock
/// they are virtual (docs/scenarios.md, "Virtual time"): a host's 3-second timeout is a point on
/// the clock's timeline, and the clock jumps to it as soon as nothing else can happen, so it
/// costs microseconds and still comes in the order it would in real time.
public protocol Clock: Sendable {
    /// Seconds since 1970-01-01 UTC.
    func now() -> Int64
    /// Microseconds since 1970-01-01 UTC, for timestamps that show fractions of a second.
    func nowMicroseconds() -> Int64
    /// Waits `duration` on this clock (a host's scripted latency, its timeout).
    func sleep(for duration: Duration)
    /// Starts a wait for something that comes from outside (`what`: an answer on a socket, a
    /// key pressed) and gives up `timeout` from now on this clock. The waiter polls `isOver` and
    /// calls `end()` when done.
    func waitFor(_ what: WaitKind, timeout: Duration) -> ClockWait
    /// Runs `body` as work the clock waits for: while it runs (and is not itself waiting on this
    /// clock), a manual clock does not jump. A terminal's transaction runs so.
    func activity<T>(_ body: () throws -> T) rethrows -> T
}

extension Clock {
    public func nowMicroseconds() -> Int64 { now() * 1_000_000 }
    public func sleep(for duration: Duration) { if duration > .zero { Thread.sleep(forTimeInterval: duration.realSeconds) } }
    public func waitFor(_ what: WaitKind, timeout: Duration) -> ClockWait { ClockWait(realTimeout: timeout) }
    public func activity<T>(_ body: () throws -> T) rethrows -> T { try body() }
}

/// Which of a manual clock's waits are virtual.
public enum WaitMode: String, Sendable, CaseIterable {
    /// Sleeps and timeouts are points on the clock's timeline; a wait for a peer or for input
    /// holds the clock still while it lasts (the default: a person at the console may be typing).
    case virtual
    /// As `virtual`, and a wait for input is one only time ends too: whoever drives the bench
    /// queues its keypad answers before the transaction (the scenario runner does).
    case scripted
    /// Every wait takes real time, as on the system clock (a scenario with a slow real host).
    case real
}

/// What a wait with a timeout is waiting for: on a manual clock, what may still end it early.
public enum WaitKind: Sendable {
    /// A peer's answer (an external host): it comes when it comes, in real time, unless the
    /// peer is a scripted one that says it will not answer (`ManualClock.peersSilent()`).
    case peer
    /// Input through the API (a keypad answer): nothing the clock knows of brings it.
    case input
    /// A timer of the bench's own (an echo interval): it ends when the clock reaches it and
    /// never moves the clock nor holds it; on a manual clock only the clock's time ends it.
    case timer
}

extension Duration {
    /// The duration in seconds, with its fraction.
    public var realSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}

/// One wait with a timeout: over when its deadline passes on its clock, or, whatever the clock,
/// when as much real time as the timeout has passed (a real peer that never answers still ends
/// the wait on a manual clock nobody moves).
public final class ClockWait: Sendable {
    private let realDeadline: ContinuousClock.Instant
    private let clock: ManualClock?
    let id: UInt64
    let deadline: Int64
    /// The waiting thread was doing the clock's work (`activity`): it is again once the wait ends.
    let resumes: Bool
    /// A timer: only the clock's time ends it (no real bound), looked at every 50 ms rather than 2.
    let timer: Bool
    /// Whether `end()` has run (it runs once: from the waiter, or at the latest on deinit).
    private let done = Atomic<Bool>(false)

    /// A wait on real time only.
    public init(realTimeout: Duration) {
        realDeadline = .now + realTimeout
        clock = nil
        id = 0
        deadline = 0
        resumes = false
        timer = false
    }

    init(clock: ManualClock, id: UInt64, deadline: Int64, realTimeout: Duration?, resumes: Bool) {
        timer = realTimeout == nil
        // A timer's real bound is a century: only the clock ends it.
        realDeadline = .now + (realTimeout ?? .seconds(3_153_600_000))
        self.clock = clock
        self.id = id
        self.deadline = deadline
        self.resumes = resumes
    }

    /// Whether the wait has timed out.
    public var isOver: Bool {
        if ContinuousClock.now >= realDeadline { return true }
        guard let clock else { return false }
        return clock.nowMicroseconds() >= deadline
    }

    /// How long to block in one go before looking at `isOver` again: the real time left, or on
    /// a manual clock a few milliseconds (the clock may jump meanwhile).
    public var slice: Duration {
        let left = max(.zero, realDeadline - .now)
        return clock == nil ? left : min(left, .milliseconds(timer ? 50 : 2))
    }

    /// The wait is over (answered or timed out): the clock no longer waits for it.
    public func end() {
        guard !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        clock?.remove(id, resuming: resumes)
    }

    deinit { end() }
}

/// The system's wall clock.
public struct SystemClock: Clock {
    public init() {}
    public func now() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    public func nowMicroseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000
    }
}

/// A clock that moves only when told to, or, for its waits, when nothing else can happen.
///
/// Its waits form a timeline (a discrete-event step, as test clocks do): each `sleep` and each
/// `waitFor` is a point on it. When every wait in progress is one that only time can end (a
/// sleep, or a peer that said it will not answer), the clock jumps to the earliest point and
/// wakes that wait. A wait for a real peer's answer holds the clock still while it lasts, and
/// ends in real time if the answer never comes. `waits` says which waits are virtual
/// (`WaitMode`); with `.real`, waits take real time and the clock moves only when told.
public final class ManualClock: Clock, @unchecked Sendable {
    // Unchecked: everything below is under `condition`.
    private let condition = NSCondition()
    private var micros: Int64
    private struct Waiter {
        let deadline: Int64
        /// Only time ends it: a sleep, or a wait for a peer that will not answer.
        var timeOnly: Bool
        let kind: WaitKind?
    }
    private var waiters: [UInt64: Waiter] = [:]
    private var nextID: UInt64 = 1
    /// Activities running and not waiting on this clock.
    private var busy = 0
    /// The threads in an activity of this clock, and how deep.
    private var active: [UInt64: Int] = [:]
    private var mode = WaitMode.virtual
    private var real: Bool { mode == .real }

    public init(secondsSince1970: Int64) { micros = secondsSince1970 * 1_000_000 }

    public func now() -> Int64 {
        condition.lock()
        defer { condition.unlock() }
        return micros / 1_000_000
    }

    public func nowMicroseconds() -> Int64 {
        condition.lock()
        defer { condition.unlock() }
        return micros
    }

    /// Moves the clock forward (or back, with a negative value).
    public func advance(seconds: Int64) { advance(microseconds: seconds * 1_000_000) }

    /// Moves the clock forward (or back, with a negative value), to the microsecond.
    public func advance(microseconds: Int64) {
        condition.lock()
        micros += microseconds
        condition.broadcast()
        condition.unlock()
    }

    public func set(secondsSince1970: Int64) { set(microsecondsSince1970: secondsSince1970 * 1_000_000) }

    public func set(microsecondsSince1970: Int64) {
        condition.lock()
        micros = microsecondsSince1970
        condition.broadcast()
        condition.unlock()
    }

    /// Which waits are virtual.
    public var waits: WaitMode {
        get { condition.withLock { mode } }
        set {
            condition.lock()
            mode = newValue
            stepIfIdle()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// How many activities are running and not waiting on the clock.
    public var activities: Int { condition.withLock { busy } }

    /// How many waits are in progress, and how many of them only time can end.
    public var waiting: (all: Int, timeOnly: Int) {
        condition.withLock { (waiters.count, waiters.values.filter(\.timeOnly).count) }
    }

    public func sleep(for duration: Duration) {
        guard duration > .zero else { return }
        condition.lock()
        if real {
            condition.unlock()
            Thread.sleep(forTimeInterval: duration.realSeconds)
            return
        }
        let deadline = micros + duration.microseconds
        let (id, resumes) = register(Waiter(deadline: deadline, timeOnly: true, kind: nil))
        // A virtual sleep never takes longer than the real one: held by a wait for a real
        // peer or a person, it ends in real time, the clock left where it is.
        let realDeadline = Date(timeIntervalSinceNow: duration.realSeconds)
        while micros < deadline, !real, condition.wait(until: realDeadline) {}
        waiters[id] = nil
        // The thread goes on with its activity before the clock may jump again.
        if resumes { busy += 1 }
        stepIfIdle()
        condition.unlock()
    }

    public func activity<T>(_ body: () throws -> T) rethrows -> T {
        let thread = Self.threadID()
        condition.lock()
        busy += 1
        active[thread, default: 0] += 1
        condition.unlock()
        defer {
            condition.lock()
            busy -= 1
            active[thread]! -= 1
            if active[thread] == 0 { active[thread] = nil }
            stepIfIdle()
            condition.unlock()
        }
        return try body()
    }

    /// Puts a wait on the timeline: the calling thread stops working for the clock while it
    /// waits (when it was: `resumes`), and the clock steps if that left nothing else to happen.
    /// Called with `condition` held.
    private func register(_ waiter: Waiter) -> (id: UInt64, resumes: Bool) {
        let id = nextID
        nextID += 1
        waiters[id] = waiter
        let resumes = active[Self.threadID()] != nil
        if resumes { busy -= 1 }
        stepIfIdle()
        return (id, resumes)
    }

    private static func threadID() -> UInt64 { UInt64(pthread_self()) }

    public func waitFor(_ what: WaitKind, timeout: Duration) -> ClockWait {
        condition.lock()
        defer { condition.unlock() }
        if real { return ClockWait(realTimeout: timeout) }
        if what == .timer {
            // Not on the timeline: it neither holds the clock nor makes it jump.
            return ClockWait(clock: self, id: 0, deadline: micros + timeout.microseconds, realTimeout: nil, resumes: false)
        }
        let deadline = micros + timeout.microseconds
        let (id, resumes) = register(Waiter(deadline: deadline, timeOnly: false, kind: what))
        return ClockWait(clock: self, id: id, deadline: deadline, realTimeout: timeout, resumes: resumes)
    }

    /// Says that no peer a wait is waiting on will answer (a scripted host told to time out):
    /// those waits are now ones only time ends.
    public func peersSilent() {
        condition.lock()
        for (id, w) in waiters where w.kind == .peer { waiters[id]!.timeOnly = true }
        stepIfIdle()
        condition.unlock()
    }

    func remove(_ id: UInt64, resuming: Bool) {
        condition.lock()
        waiters[id] = nil
        if resuming { busy += 1 }
        stepIfIdle()
        condition.unlock()
    }

    /// The discrete-event step: when every wait is one only time ends, the clock goes to the
    /// earliest deadline. Called with `condition` held.
    private func stepIfIdle() {
        guard !real, busy == 0, !waiters.isEmpty,
              waiters.values.allSatisfy({ $0.timeOnly || (mode == .scripted && $0.kind == .input) }) else { return }
        let earliest = waiters.values.map(\.deadline).min()!
        if earliest > micros { micros = earliest }
        condition.broadcast()
    }
}
