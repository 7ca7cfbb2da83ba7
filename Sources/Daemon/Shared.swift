import EMV
import Foundation
import Ledger
import Terminal
import VirtualCard

// What the daemon and the in-process `cardbench sale` share: the host's timing, the issuer's view
// of a virtual card, and opening a ledger file with its key.

/// Applies the emulated host's simulated latency for real, and gives up after `timeout` as a
/// terminal does: the transaction goes on as "unable to go online", and an approval that arrives
/// too late is reversed at the host so the issuer's state stays right.
public struct TimedHost: AuthorisationHost {
    let host: EmulatedHost
    let timeout: Duration
    /// The host queue one-shot outcomes come from: the terminal's name.
    let queue: String
    /// The front's scripted declines by amount.
    let amountTable: AmountTable
    /// The amount the table is read with, when not the request's total (Billpocket: tip excluded).
    let tableAmount: Int?

    /// Wraps `host`; answers later than `timeout` count as no answer.
    public init(_ host: EmulatedHost, timeout: Duration, queue: String = "", amountTable: AmountTable? = nil, tableAmount: Int? = nil) {
        self.host = host
        self.timeout = timeout
        self.queue = queue
        self.amountTable = amountTable ?? host.amountTable
        self.tableAmount = tableAmount
    }

    public func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        let answer = try host.authorise(request, queue: queue, amountTable: amountTable, tableAmount: tableAmount)
        let delay = Duration.milliseconds(answer.delayMilliseconds)
        if delay > timeout {
            Thread.sleep(forTimeInterval: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
            host.reverse(request, approval: answer)
            throw .unavailable(reason: "no answer from the host in \(timeout)")
        }
        if answer.delayMilliseconds > 0 { Thread.sleep(forTimeInterval: Double(answer.delayMilliseconds) / 1000) }
        return answer
    }

    public func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) { host.reverse(request, approval: approval) }
}

extension AmountTable {
    /// The command-line spelling: none, billpocket, stripe-cents.
    public init?(option: String) {
        switch option {
        case "none": self = .none
        case "billpocket": self = .billpocket
        case "stripe-cents": self = .stripeCents
        default: return nil
        }
    }
}

extension EmulatedHost {
    /// Registers a virtual card's account: its balance, PIN and the keys of each application, so
    /// the host checks its ARQCs and answers with ARPCs it accepts.
    public func register(_ profile: CardProfile) throws {
        var keys: [String: CryptogramKeys] = [:]
        for app in profile.applications {
            keys[Hex.encode(app.aid)] = try app.cryptogramKeys(pan: profile.pan, psn: profile.psn)
        }
        setAccount(pan: profile.pan, IssuerAccount(
            balance: profile.issuerState.balance, currency: profile.issuerState.currency,
            blocked: profile.issuerState.blocked, lost: profile.issuerState.lost, stolen: profile.issuerState.stolen,
            expiry: (profile.expiry.year, profile.expiry.month), pin: profile.pin, pinTryLimit: profile.pinTryLimit, keys: keys))
    }
}

/// Opens (creating if needed) a ledger file and its PAN key beside it.
public func openLedgerFile(_ path: String, outboxMaxAttempts: Int = 10) throws -> Ledger {
    let directory = (path as NSString).deletingLastPathComponent
    if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    return try Ledger(path: path, panKey: try Ledger.loadOrCreatePANKey(at: Ledger.defaultPANKeyPath(database: path)),
                      outboxMaxAttempts: outboxMaxAttempts)
}
