import Synchronization
import Terminal

/// The bench's clock: the system clock, or a manual one (`clock.mode: manual`). A scenario run
/// may switch it to manual and back through the API (`scenarios.setup`), so a daemon started
/// with no configuration runs the scenario library; what reads the time reads this.
public final class BenchClock: Terminal.Clock, Sendable {
    /// The manual clock, in use while `isManual`.
    public let manual: ManualClock
    private let system = SystemClock()
    private let manualMode: Atomic<Bool>

    init(manual: Bool, startMicroseconds: Int64) {
        self.manual = ManualClock(secondsSince1970: startMicroseconds / 1_000_000)
        manualMode = Atomic(manual)
    }

    /// Whether the manual clock is the one in use.
    public var isManual: Bool { manualMode.load(ordering: .acquiring) }

    /// Switches to the manual clock, set to the system clock's time when it was not in use, or
    /// back to the system clock.
    public func use(manual: Bool) {
        if manual && !isManual { self.manual.set(microsecondsSince1970: system.nowMicroseconds()) }
        manualMode.store(manual, ordering: .releasing)
    }

    private var current: any Terminal.Clock { isManual ? manual : system }

    public func now() -> Int64 { current.now() }
    public func nowMicroseconds() -> Int64 { current.nowMicroseconds() }
    public func sleep(for duration: Duration) { current.sleep(for: duration) }
    public func waitFor(_ what: WaitKind, timeout: Duration) -> ClockWait { current.waitFor(what, timeout: timeout) }
    public func activity<T>(_ body: () throws -> T) rethrows -> T {
        // The manual clock counts activities even while the system one is in use: a switch in
        // the middle of one must not let the manual clock jump past it.
        try manual.activity(body)
    }
}
