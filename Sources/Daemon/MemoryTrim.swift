import CGlibcMalloc
import Foundation
import ServiceLifecycle

/// Keeps the daemon's resident memory to what it uses.
///
/// glibc's allocator gives each thread that allocates its own arena (up to eight per core), and
/// keeps freed memory in them; the NIO loops, the cooperative pool and the terminals' threads
/// each left their arena's high-water mark behind, and `cardbench bench sale` saw the daemon's
/// resident set grow by megabytes over 100,000 sales while its heap held a steady 4 MB
/// (valgrind's massif, docs/performance.md). Two arenas and a `malloc_trim` once a minute hand
/// that memory back.
public enum MemoryTrim {
    /// At most two malloc arenas (as many as this machine class has cores); call before any thread starts.
    public static func limitArenas() {
        _ = mallopt(M_ARENA_MAX, 2)
    }

    /// Returns free heap memory to the operating system.
    static func trim() {
        _ = malloc_trim(0)
    }
}

/// Runs blocking work (a lock, SQLite writes) on a dispatch thread, not the cooperative pool or an
/// event loop, and waits for it.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// Runs `action` every `interval` for as long as the daemon runs: the heap's trim (once a minute,
/// `MemoryTrim`), the watchdog, the Worldline settlements. `first` runs it once before the first
/// wait (the watchdog's first ping).
struct PeriodicService: Service {
    let interval: Duration
    var first = false
    let action: @Sendable () async -> Void

    func run() async throws {
        // The sleep ends at a graceful shutdown too, so a stop does not wait out the interval.
        try? await cancelWhenGracefulShutdown {
            if first { await action() }
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                await action()
            }
        }
    }
}
