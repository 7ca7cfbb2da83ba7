import EMV
import Foundation
import Terminal
import VirtualCard

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
