import Foundation
import Terminal
import Testing

/// A manual clock's waits: a timeline the clock jumps along as soon as nothing else can happen.
@Suite("virtual time")
struct VirtualTimeTests {
    static let start: Int64 = 1_700_000_000

    @Test("a sleep alone on the timeline jumps the clock to its end, to the microsecond")
    func sleepJumps() {
        let clock = ManualClock(secondsSince1970: Self.start)
        clock.sleep(for: .seconds(30))
        clock.sleep(for: .milliseconds(250))
        #expect(clock.nowMicroseconds() == (Self.start + 30) * 1_000_000 + 250_000)
        #expect(clock.waiting.all == 0)
    }

    /// `body` running on a thread of its own, started at once (a sleep blocks its thread, and
    /// the cooperative pool may be busy with the other suites' blocking calls).
    final class Running<T: Sendable>: @unchecked Sendable {
        // Unchecked: `result` is written once before `done` is signalled and read after.
        private let done = DispatchSemaphore(value: 0)
        private var result: T?

        init(_ body: @escaping @Sendable () -> T) {
            Thread { [self] in
                result = body()
                done.signal()
            }.start()
        }

        /// Waits for the thread to end (at most 60 s: a failed expectation then, not a hang).
        var value: T? {
            guard done.wait(timeout: .now() + 60) == .success else { return nil }
            done.signal()
            return result
        }
    }

    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> Running<T> { Running(body) }

    /// Waits until `condition` holds, at most 30 s (a failed expectation then, not a hang).
    static func until(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("the condition never held", sourceLocation: sourceLocation)
                return
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// What the sleeping threads saw when they woke.
    final class Woke: @unchecked Sendable {
        // Unchecked: `times` is under `lock`.
        private let lock = NSLock()
        private var times: [Int64] = []
        func add(_ t: Int64) { lock.withLock { times.append(t) } }
        var all: [Int64] { lock.withLock { times } }
    }

    @Test("sleeps at once end in the order of their deadlines, each at its own time")
    func sleepsInOrder() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        let woke = Woke()
        // A wait for a peer holds the clock while the three sleeps start, the longest first.
        let hold = clock.waitFor(.peer, timeout: .seconds(60))
        var tasks: [Running<Void>] = []
        for (n, seconds) in [300, 100, 200].enumerated() {
            // Each thread's work is an activity of the clock: the clock does not jump past what
            // a woken thread does next.
            tasks.append(Self.onThread {
                clock.activity {
                    clock.sleep(for: .seconds(seconds))
                    woke.add(clock.nowMicroseconds())
                }
            })
            try await Self.until { clock.waiting.all >= n + 2 }
        }
        hold.end()
        for t in tasks { #expect(t.value != nil) }
        #expect(woke.all == [100, 200, 300].map { (Self.start + $0) * 1_000_000 })
    }

    @Test("a wait for a peer holds the clock; once the peer is silent, its timeout comes at once")
    func peerHoldsClock() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        // Long enough in real time that no real bound ends a wait on a loaded machine.
        let wait = clock.waitFor(.peer, timeout: .seconds(300))
        let slept = Self.onThread { clock.activity { clock.sleep(for: .seconds(100)); return clock.nowMicroseconds() } }
        try await Self.until { clock.waiting.all >= 2 }
        try await Task.sleep(for: .milliseconds(20))
        // The peer may still answer: nothing has moved.
        #expect(clock.nowMicroseconds() == Self.start * 1_000_000)
        #expect(!wait.isOver)
        clock.peersSilent()
        // The sleep's end is earlier than the timeout: it comes first.
        #expect(slept.value == (Self.start + 100) * 1_000_000)
        try await Self.until { wait.isOver }
        #expect(clock.nowMicroseconds() == (Self.start + 300) * 1_000_000)
        wait.end()
        #expect(clock.waiting.all == 0)
    }

    @Test("a real peer that never answers still ends the wait in real time, the clock left where it is")
    func peerRealBound() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        let wait = clock.waitFor(.peer, timeout: .milliseconds(30))
        let begun = ContinuousClock.now
        while !wait.isOver { try await Task.sleep(for: wait.slice) }
        #expect(ContinuousClock.now - begun >= .milliseconds(30))
        #expect(clock.nowMicroseconds() == Self.start * 1_000_000)
        wait.end()
    }

    @Test("keypad input holds a virtual clock; in scripted mode only time ends it")
    func inputWaits() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        // A real bound far beyond any stall of a loaded test process: only the clock could end it.
        let held = clock.waitFor(.input, timeout: .seconds(3600))
        try await Task.sleep(for: .milliseconds(10))
        #expect(!held.isOver)
        #expect(clock.nowMicroseconds() == Self.start * 1_000_000)
        held.end()
        clock.waits = .scripted
        // Nobody will type: the prompt's timeout comes at once.
        let scripted = clock.waitFor(.input, timeout: .seconds(30))
        #expect(scripted.isOver)
        #expect(clock.nowMicroseconds() == (Self.start + 30) * 1_000_000)
        scripted.end()
    }

    @Test("an activity that is not waiting holds the clock; one that waits does not")
    func activityHolds() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        let release = DispatchSemaphore(value: 0)
        let working = Self.onThread { clock.activity { release.wait() } }
        try await Self.until { clock.activities > 0 }
        let slept = Self.onThread { clock.sleep(for: .seconds(100)); return clock.nowMicroseconds() }
        try await Self.until { clock.waiting.all >= 1 }
        try await Task.sleep(for: .milliseconds(20))
        // The other thread is still working: the 100 s are not over.
        #expect(clock.nowMicroseconds() == Self.start * 1_000_000)
        release.signal()
        #expect(working.value != nil)
        #expect(slept.value == (Self.start + 100) * 1_000_000)
    }

    @Test("a timer neither holds the clock nor makes it jump; it ends when the clock gets there")
    func timer() async throws {
        let clock = ManualClock(secondsSince1970: Self.start)
        let timer = clock.waitFor(.timer, timeout: .seconds(60))
        #expect(clock.waiting.all == 0)
        // A sleep beside it jumps to its own end, not past it nor to the timer's.
        clock.sleep(for: .seconds(10))
        #expect(clock.nowMicroseconds() == (Self.start + 10) * 1_000_000)
        #expect(!timer.isOver)
        #expect(timer.slice <= .milliseconds(50))
        clock.advance(seconds: 50)
        #expect(timer.isOver)
        timer.end()
    }

    @Test("real waits take real time and leave the clock still")
    func realWaits() {
        let clock = ManualClock(secondsSince1970: Self.start)
        clock.waits = .real
        let begun = ContinuousClock.now
        clock.sleep(for: .milliseconds(30))
        #expect(ContinuousClock.now - begun >= .milliseconds(30))
        #expect(clock.nowMicroseconds() == Self.start * 1_000_000)
    }
}
