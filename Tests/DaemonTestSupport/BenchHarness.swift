import Daemon
import Foundation
import TestSupport

/// A daemon core in the test's process: a `Bench` on temporary state and runtime directories,
/// the shipped card profiles, the demo card in its readers, a manual clock. For API tests through
/// the router with no socket, and for tests that call the bench directly.
public final class BenchHarness: @unchecked Sendable {
    public let directory: URL
    public let bench: Bench

    /// `adjust` changes the configuration before the bench is made (terminals, timeouts, …).
    public init(_ adjust: (inout DaemonConfiguration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cardbench-bench-\(UUID().uuidString.prefix(8))")
        var configuration = DaemonConfiguration()
        configuration.stateDirectory = directory.appendingPathComponent("state").path
        configuration.runtimeDirectory = directory.appendingPathComponent("run").path
        configuration.httpPort = nil
        configuration.manualClock = true
        configuration.cardProfiles = [repositoryRoot.appendingPathComponent("Scenarios/cards").path]
        configuration.demoCard = repositoryRoot.appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml").path
        configuration.callbacks.allowedHosts = []
        adjust(&configuration)
        bench = try Bench(configuration: configuration)
        try bench.start()
    }

    /// Stops the bench, closes its ledger and removes its files.
    public func remove() {
        bench.stop()
        try? bench.ledger.close()
        try? FileManager.default.removeItem(at: directory)
    }
}
