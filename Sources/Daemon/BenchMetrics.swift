import Prometheus
import Synchronization

/// The daemon's Prometheus metrics (`GET /metrics`): transactions by final status, their
/// duration, API requests, callback deliveries.
public final class BenchMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let duration: DurationHistogram
    /// Counters already made, by name and labels: the registry's own lookup (descriptor, label
    /// validation, hashing) cost every request and sale more than the increment.
    private let counters = Mutex<[String: Counter]>([:])

    public init() {
        duration = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(namespace: "cardbench", subsystem: "transaction", metricName: "duration",
                                             unitName: "seconds", helpText: "Time from begin to commit of a transaction"),
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5), .seconds(30)])
    }

    /// The counter `make` makes, once per `key`.
    private func counter(_ key: String, _ make: () -> Counter) -> Counter {
        if let made = counters.withLock({ $0[key] }) { return made }
        let made = make()
        counters.withLock { $0[key] = made }
        return made
    }

    func recordTransaction(status: String, micros: Int64?) {
        counter("transactions \(status)") {
            registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "cardbench", metricName: "transactions",
                                                                  unitName: "total", helpText: "Transactions by final status"),
                                 labels: [("status", status)])
        }.increment()
        if let micros { duration.record(.microseconds(micros)) }
    }

    func recordRequest(route: String, status: Int) {
        counter("requests \(route) \(status)") {
            registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "cardbench", subsystem: "api", metricName: "requests",
                                                                  unitName: "total", helpText: "API requests by route and status"),
                                 labels: [("route", route), ("status", String(status))])
        }.increment()
    }

    func recordDelivery(kind: String, delivered: Bool) {
        registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "cardbench", subsystem: "callback", metricName: "deliveries",
                                                              unitName: "total", helpText: "Callback delivery attempts by kind and result"),
                             labels: [("kind", kind), ("result", delivered ? "delivered" : "failed")]).increment()
    }

    /// The exposition text.
    public func text() -> String { registry.emitToString() }
}
