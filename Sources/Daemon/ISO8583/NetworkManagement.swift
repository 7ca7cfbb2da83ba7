import Foundation
import ISO8583
import Ledger
import Logging
import Terminal

extension Bench {
    /// Sends an 0800 to a terminal's external host, an echo test or a sign-on, with a STAN of the
    /// terminal's own (`POST /v1/terminals/{name}/iso8583/echo`, `cardbench iso8583 echo`).
    public func iso8583Echo(terminal name: String?, signOn: Bool) throws(DaemonError) -> ISO8583EchoView {
        let runtime = try terminal(name)
        let n = runtime.settings.name
        guard let link = context.upstream[n] as? ISO8583UpstreamLink else {
            throw .badRequest(field: "terminal", rule: "terminal \(n) asks the emulated issuer: an 0800 goes to an external host (terminal.\(n).host or host.upstream)")
        }
        return try Self.networkManagement(link, terminal: runtime.settings, ledger: ledger, clock: clock, signOn: signOn)
    }

    static func networkManagement(_ link: ISO8583UpstreamLink, terminal: TerminalSettings, ledger: Ledger, clock: any Terminal.Clock,
                                  signOn: Bool) throws(DaemonError) -> ISO8583EchoView {
        let stan: STAN
        do { stan = try ledger.networkSTAN(terminal: terminal.name) } catch {
            throw .failure("cannot take a STAN for the 0800 on terminal \(terminal.name): \(error)")
        }
        return link.networkManagement(terminal: terminal.name, terminalID: terminal.tid, stan: stan,
                                      date: UTCDateParts(secondsSince1970: clock.nowMicroseconds() / 1_000_000), signOn: signOn)
    }
}

/// The daemon's own 0800s (`host.iso8583.sign_on`, `host.iso8583.echo_interval_seconds`): on a
/// thread of its own, as they block on the network for up to the host timeout each. It logs the
/// first outcome per terminal, then only changes (a host that stops or starts answering).
final class ISO8583NetworkManager: @unchecked Sendable {
    // Unchecked: `stopped` is under `condition`; the rest is immutable.
    private let condition = NSCondition()
    private var stopped = false

    init(links: [(TerminalSettings, ISO8583UpstreamLink)], signOn: Bool, interval: Duration?, ledger: Ledger, clock: any Terminal.Clock,
         logger: Logger) {
        let thread = Thread { [self] in
            var answering: [String: Bool] = [:]
            func send(signOn: Bool) {
                for (terminal, link) in links {
                    if isStopped { return }
                    let outcome: ISO8583EchoView
                    do { outcome = try Bench.networkManagement(link, terminal: terminal, ledger: ledger, clock: clock, signOn: signOn) } catch {
                        logger.warning("ISO 8583 \(signOn ? "sign-on" : "echo test") of terminal \(terminal.name) not sent: \(error)")
                        continue
                    }
                    let ok = outcome.answered && outcome.responseCode == "00"
                    guard signOn || answering[terminal.name] != ok else { continue }
                    answering[terminal.name] = ok
                    let what = "ISO 8583 \(outcome.function) of terminal \(terminal.name) (STAN \(outcome.stan)) to \(outcome.host): "
                    if ok {
                        logger.info("\(what)answered 00 in \(Int(outcome.milliseconds)) ms")
                    } else {
                        logger.warning("\(what)\(outcome.responseCode.map { "answered \($0)" } ?? "no answer: \(outcome.error ?? "")")")
                    }
                }
            }
            if signOn { send(signOn: true) }
            guard let interval else { return }
            while wait(interval, on: clock) { send(signOn: false) }
        }
        thread.name = "cardbench.iso8583.echo"
        thread.start()
    }

    private var isStopped: Bool { condition.withLock { stopped } }

    /// Waits `interval` on the bench clock (a timer: on a manual clock it comes when the clock
    /// gets there), or until stopped: true when the time ran out.
    private func wait(_ interval: Duration, on clock: any Terminal.Clock) -> Bool {
        let timer = clock.waitFor(.timer, timeout: interval)
        defer { timer.end() }
        return condition.withLock {
            while !stopped, !timer.isOver { _ = condition.wait(until: Date(timeIntervalSinceNow: timer.slice.realSeconds)) }
            return !stopped
        }
    }

    /// Ends the thread after the message under way, if any (it closes its own connection).
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }
}
