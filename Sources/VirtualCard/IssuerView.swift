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

extension CardProfile {
    /// The keys a mobile wallet's network token cryptogram for this card is made with, the ones
    /// the issuer checks it with: its first application's by AID (contact keys).
    public func walletKeys() throws(EMVError) -> CryptogramKeys? {
        guard let app = applications.sorted(by: { Hex.encode($0.aid) < Hex.encode($1.aid) }).first else { return nil }
        return try app.cryptogramKeys(pan: pan, psn: psn)
    }

    /// A wallet's payment data for this card as its device PAN: the DPAN, expiry MMYY, the
    /// cryptogram for `amount` in `currency` (base64) and the ECI.
    public func walletPaymentData(amount: Int, currency: Int, eci: String, counter: UInt16) throws(EMVError) -> (dpan: String, expiryDate: String, cryptogram: String, eci: String)? {
        guard let keys = try walletKeys() else { return nil }
        let e = (year: expiry.year, month: expiry.month)
        let bytes = NetworkTokenCryptogram.make(keys: keys, pan: pan, expiry: e, amount: amount, currency: currency, eci: eci, counter: counter)
        let mm = e.month < 10 ? "0\(e.month)" : "\(e.month)", yy = e.year % 100 < 10 ? "0\(e.year % 100)" : "\(e.year % 100)"
        return (pan, mm + yy, Data(bytes).base64EncodedString(), eci)
    }
}
