import Foundation
import Synchronization
import Terminal
import Workflows

/// A `BenchEvent` as `GET /v1/events` streams it (server-sent events: the `event:` line is
/// `type`, the `data:` line this value as JSON).
public struct DaemonEvent: Sendable, Codable, Equatable {
    /// One of `BenchEvent.Name`'s.
    public let type: String
    public let terminal: String?
    /// Microseconds since 1970 on the daemon's clock.
    public let at: Int64
    /// Event-specific fields (never a PAN or a PIN).
    public let data: [String: String]

    public init(type: String, terminal: String?, at: Int64, data: [String: String] = [:]) {
        self.type = type
        self.terminal = terminal
        self.at = at
        self.data = data
    }

    public init(_ event: BenchEvent, terminal: String?, at: Int64) {
        self.init(type: event.name.rawValue, terminal: terminal, at: at, data: event.data)
    }
}

/// The workflows' and terminals' events, stamped with the bench's clock, into the hub; a card
/// transaction's outcome is counted in the metrics too.
struct EventFeed: EventSink {
    let hub: EventHub
    let clock: any Terminal.Clock
    let metrics: BenchMetrics

    func publish(_ event: BenchEvent, terminal: String?) {
        if case .outcome(_, let status, _, _, let micros) = event { metrics.recordTransaction(status: status.rawValue, micros: micros) }
        // An event's fields are a dictionary of strings: made only when someone listens.
        guard hub.hasSubscribers else { return }
        hub.publish(DaemonEvent(event, terminal: terminal, at: clock.nowMicroseconds()))
    }
}

/// Fans events out to every subscriber. A subscriber that falls more than `bufferLimit` events
/// behind loses the oldest ones rather than slowing the terminals down.
public final class EventHub: Sendable {
    private struct State {
        var next = 0
        var subscribers: [Int: AsyncStream<DaemonEvent>.Continuation] = [:]
    }

    private let state = Mutex(State())
    private let bufferLimit: Int

    public init(bufferLimit: Int = 1024) {
        self.bufferLimit = bufferLimit
    }

    /// Every event from now on, until the stream is dropped or cancelled.
    public func subscribe() -> AsyncStream<DaemonEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: DaemonEvent.self, bufferingPolicy: .bufferingNewest(bufferLimit))
        let id = state.withLock { s in
            s.next += 1
            s.subscribers[s.next] = continuation
            return s.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Whether any stream is open.
    public var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    public func publish(_ event: DaemonEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for s in subscribers { s.yield(event) }
    }

    /// Ends every stream (shutdown).
    public func finish() {
        let subscribers = state.withLock { s in
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for s in subscribers { s.finish() }
    }
}
