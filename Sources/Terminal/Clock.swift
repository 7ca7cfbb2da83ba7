import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the terminal and the host get the time: the system clock in service, a manual clock in
/// tests and scenarios ("refund 30 s after the sale").
public protocol Clock: Sendable {
    /// Seconds since 1970-01-01 UTC.
    func now() -> Int64
    /// Microseconds since 1970-01-01 UTC, for timestamps that show fractions of a second.
    func nowMicroseconds() -> Int64
}

extension Clock {
    public func nowMicroseconds() -> Int64 { now() * 1_000_000 }
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

/// A clock that moves only when told to.
public final class ManualClock: Clock {
    private let time: Mutex<Int64>

    public init(secondsSince1970: Int64) { time = Mutex(secondsSince1970) }

    public func now() -> Int64 { time.withLock { $0 } }

    /// Moves the clock forward (or back, with a negative value).
    public func advance(seconds: Int64) { time.withLock { $0 += seconds } }

    public func set(secondsSince1970: Int64) { time.withLock { $0 = secondsSince1970 } }
}
