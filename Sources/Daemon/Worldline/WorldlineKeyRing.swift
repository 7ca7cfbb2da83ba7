import CryptoExtras
import Foundation
import Ledger

/// The Client API's RSA keys, the ones `encryptedCustomerInput` is encrypted to: kept sealed in
/// the ledger, made on first use (RSA-2048), rotated through the admin API. A rotated-out key
/// still decrypts input made with it; only the newest is handed out.
public final class WorldlineKeyRing: @unchecked Sendable {
    let ledger: Ledger
    // NSLock rather than Mutex: the keys are not Sendable, and every access is under the lock.
    private let lock = NSLock()
    private var _state = State()

    struct State {
        var loaded = false
        var keys: [String: _RSA.Encryption.PrivateKey] = [:]
        var current: (keyID: String, publicKeyDER: [UInt8])?
    }

    /// The keys kept in `ledger`.
    public init(ledger: Ledger) {
        self.ledger = ledger
    }

    /// The private key `keyID` names, if the platform has it.
    public func privateKey(_ keyID: String) -> _RSA.Encryption.PrivateKey? {
        try? load()
        return withState { $0.keys[keyID] }
    }

    /// The key id and DER SubjectPublicKeyInfo handed out now; the first call makes the first key.
    public func currentPublicKey() throws -> (keyID: String, publicKeyDER: [UInt8]) {
        try load()
        if let current = withState({ $0.current }) { return current }
        return try rotate()
    }

    /// Makes a new key and hands it out from now on.
    @discardableResult
    public func rotate() throws -> (keyID: String, publicKeyDER: [UInt8]) {
        let key = try _RSA.Encryption.PrivateKey(keySize: .bits2048)
        let keyID = "cardbench-" + UUID().uuidString.lowercased().prefix(8) + "-" + String(Int(Date().timeIntervalSince1970))
        let publicDER = Array(key.publicKey.derRepresentation)
        try ledger.addWorldlineCryptoKey(keyID: keyID, privateKeyDER: Array(key.derRepresentation), publicKeyDER: publicDER,
                                        at: Int64(Date().timeIntervalSince1970 * 1_000_000))
        withState {
            $0.keys[keyID] = key
            $0.current = (keyID, publicDER)
        }
        return (keyID, publicDER)
    }

    private func withState<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&_state)
    }

    private func load() throws {
        guard !withState({ $0.loaded }) else { return }
        let stored = try ledger.worldlineCryptoKeys()
        var keys: [String: _RSA.Encryption.PrivateKey] = [:]
        for k in stored {
            keys[k.keyID] = try _RSA.Encryption.PrivateKey(derRepresentation: k.privateKeyDER)
        }
        let current = stored.first { $0.retiredAt == nil }.map { ($0.keyID, $0.publicKeyDER) }
        withState {
            guard !$0.loaded else { return }
            $0.keys.merge(keys) { a, _ in a }
            if $0.current == nil { $0.current = current }
            $0.loaded = true
        }
    }
}
