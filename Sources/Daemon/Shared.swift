import EMV
import Foundation
import Ledger
import Terminal
import VirtualCard

// What the daemon and the in-process `cardbench sale` share: the issuer's view of a virtual card,
// and opening a ledger file with its key.

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
