// How the emulated issuer sees a virtual card: its account (balance, PIN, keys) and the facts a
// front asks about. Pure: the daemon, the scenarios and the workflow tests register profiles alike.
import EMV
import Foundation
import Terminal

extension EmulatedHost {
    /// Registers a virtual card's account: its balance, PIN and the keys of each application, so
    /// the host checks its ARQCs and answers with ARPCs it accepts.
    public func register(_ profile: CardProfile) throws {
        var keys: [String: CryptogramKeys] = [:]
        for app in profile.applications {
            keys[Hex.encode(app.aid)] = try app.cryptogramKeys(pan: profile.pan, psn: profile.psn)
            if let contactless = try app.contactlessCryptogramKeys(pan: profile.pan, psn: profile.psn) {
                keys[IssuerAccount.contactlessKey(aid: app.aid)] = contactless
            }
        }
        var account = IssuerAccount(
            balance: profile.issuerState.balance, currency: profile.issuerState.currency,
            blocked: profile.issuerState.blocked, lost: profile.issuerState.lost, stolen: profile.issuerState.stolen,
            expiry: (profile.expiry.year, profile.expiry.month), pin: profile.pin, pinTryLimit: profile.pinTryLimit, keys: keys,
            cvv: profile.cvv)
        account.declinesFallback = profile.issuerState.declinesFallback
        setAccount(pan: profile.pan, account)
    }
}

/// The issuer's card facts, from card profiles by PAN.
public struct ProfileDirectory: CardDirectory {
    let profiles: [String: CardProfile]

    public init(profiles: [String: CardProfile]) { self.profiles = profiles }

    public func facts(pan: String) -> CardFacts? {
        profiles[pan].map { CardFacts(installmentsMaximum: $0.installmentsMaximum, issuerName: $0.issuerName, debit: $0.accountType == .debit) }
    }
}
