import CLibCrypto
import Synchronization

/// An RSA public key as EMV carries it: big-endian modulus and exponent bytes (Book 2 uses
/// exponents 3 and 2^16 + 1).
public struct RSAPublicKey: Sendable, Hashable {
    public let modulus: [UInt8]
    public let exponent: [UInt8]

    public init(modulus: [UInt8], exponent: [UInt8]) {
        self.modulus = modulus
        self.exponent = exponent
    }

    /// The modulus length in bytes (N_CA, N_I, N_IC in Book 2).
    public var length: Int { modulus.count }
    public var bits: Int { RSA.bitLength(modulus) }

    /// The public operation, unpadded: `data^e mod n`, as long as the modulus. Nil when `data`
    /// is not as long as the modulus (Book 2's first check of every recovery). A value above the
    /// modulus (signed with another key) is reduced like any other and fails on its trailer, as
    /// it does in a terminal, whichever way the other key's signature happened to fall.
    public func recover(_ data: [UInt8]) -> [UInt8]? {
        guard data.count == modulus.count else { return nil }
        return RSA.modExp(data, exponent, modulus, secret: false)
    }
}

/// An RSA private key as test material holds it: modulus, public and private exponent.
public struct RSAPrivateKey: Sendable, Hashable {
    public let modulus: [UInt8]
    public let publicExponent: [UInt8]
    public let privateExponent: [UInt8]

    public init(modulus: [UInt8], publicExponent: [UInt8], privateExponent: [UInt8]) {
        self.modulus = modulus
        self.publicExponent = publicExponent
        self.privateExponent = privateExponent
    }

    public var publicKey: RSAPublicKey { RSAPublicKey(modulus: modulus, exponent: publicExponent) }

    /// The private operation, unpadded, in constant time: what a card or a CA signs with. The
    /// caller builds `data` as Book 2 lays out a certificate or signature (header 6A, trailer BC).
    public func sign(_ data: [UInt8]) throws(EMVError) -> [UInt8] {
        guard data.count == modulus.count, data.lexicographicallyPrecedes(modulus) else {
            throw EMVError(field: "RSA input", rule: "must be \(modulus.count) bytes and below the modulus, got \(data.count) bytes")
        }
        guard let out = RSA.modExp(data, privateExponent, modulus, secret: true) else {
            throw EMVError(field: "RSA key", rule: "libcrypto refused the private operation (is the modulus odd?)")
        }
        return out
    }

    /// A fresh key from libcrypto's generator: `bits` a multiple of 8 (EMV moduli are whole
    /// bytes), exponent 3 or 65537.
    public static func generate(bits: Int, exponent: UInt32 = 3) throws(EMVError) -> RSAPrivateKey {
        guard bits % 8 == 0, (512...4096).contains(bits) else { throw EMVError(field: "bits", rule: "must be a multiple of 8 in 512–4096, got \(bits)") }
        guard exponent == 3 || exponent == 65537 else { throw EMVError(field: "exponent", rule: "must be 3 or 65537 (EMV Book 2), got \(exponent)") }
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nil) else { throw EMVError(field: "RSA key", rule: "libcrypto has no RSA") }
        defer { EVP_PKEY_CTX_free(ctx) }
        let e = BN_new()
        defer { BN_free(e) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1,
              BN_set_word(e, UInt(exponent)) == 1, EVP_PKEY_CTX_set1_rsa_keygen_pubexp(ctx, e) == 1,
              EVP_PKEY_keygen(ctx, &pkey) == 1, let pkey else {
            throw EMVError(field: "RSA key", rule: "libcrypto could not generate a \(bits)-bit key")
        }
        defer { EVP_PKEY_free(pkey) }
        func parameter(_ name: String) throws(EMVError) -> [UInt8] {
            var bn: OpaquePointer? = nil
            guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { throw EMVError(field: "RSA key", rule: "no \(name) in the generated key") }
            defer { BN_clear_free(bn) }
            return RSA.bytes(bn, length: nil)
        }
        let n = try parameter(OSSL_PKEY_PARAM_RSA_N), d = try parameter(OSSL_PKEY_PARAM_RSA_D)
        guard RSA.bitLength(n) == bits else { throw EMVError(field: "RSA key", rule: "libcrypto gave a \(RSA.bitLength(n))-bit modulus for \(bits)") }
        return RSAPrivateKey(modulus: n, publicExponent: exponent == 3 ? [0x03] : [0x01, 0x00, 0x01],
                             privateExponent: RSA.pad(d, to: n.count))
    }
}

/// The libcrypto calls behind the keys.
enum RSA {
    /// A modulus as libcrypto works with it, with its Montgomery context: setting that context up
    /// costs more than an exponent-3 operation itself, and a terminal meets the same few CA and
    /// issuer keys again and again. Read-only once made, so threads share it.
    final class Modulus: @unchecked Sendable {
        let n: OpaquePointer
        let mont: OpaquePointer

        init?(_ bytes: [UInt8]) {
            guard let n = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else { return nil }
            guard let ctx = BN_CTX_new(), let mont = BN_MONT_CTX_new() else {
                BN_free(n)
                return nil
            }
            defer { BN_CTX_free(ctx) }
            guard BN_is_odd(n) == 1, BN_MONT_CTX_set(mont, n, ctx) == 1 else {
                BN_free(n)
                BN_MONT_CTX_free(mont)
                return nil
            }
            self.n = n
            self.mont = mont
        }

        deinit {
            BN_MONT_CTX_free(mont)
            BN_free(n)
        }
    }

    /// The moduli met lately; bounded, so a stream of new keys (a personalisation run) cannot grow it.
    private static let moduli = Mutex<[[UInt8]: Modulus]>([:])
    private static let maximumCached = 64

    static func modulus(_ bytes: [UInt8]) -> Modulus? {
        if let known = moduli.withLock({ $0[bytes] }) { return known }
        guard let made = Modulus(bytes) else { return nil }
        moduli.withLock { cache in
            if cache.count >= maximumCached { cache.removeAll(keepingCapacity: true) }
            cache[bytes] = made
        }
        return made
    }

    static func modExp(_ base: [UInt8], _ exponent: [UInt8], _ modulus: [UInt8], secret: Bool) -> [UInt8]? {
        guard let m = Self.modulus(modulus), let ctx = BN_CTX_new() else { return nil }
        defer { BN_CTX_free(ctx) }
        let b = base.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let e = exponent.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let r = BN_new()
        defer {
            BN_clear_free(b)
            BN_clear_free(e)
            BN_clear_free(r)
        }
        guard var b, let e, let r else { return nil }
        // Montgomery exponentiation wants the base below the modulus; a signature made with
        // another key may not be (it then fails on its header and trailer, as in a terminal).
        var reduced: OpaquePointer? = nil
        defer { BN_clear_free(reduced) }
        if BN_cmp(b, m.n) >= 0 {
            guard let fresh = BN_new(), BN_nnmod(fresh, b, m.n, ctx) == 1 else { return nil }
            reduced = fresh
            b = fresh
        }
        let ok = secret ? BN_mod_exp_mont_consttime(r, b, e, m.n, ctx, m.mont) : BN_mod_exp_mont(r, b, e, m.n, ctx, m.mont)
        guard ok == 1 else { return nil }
        return bytes(r, length: modulus.count)
    }

    static func bytes(_ bn: OpaquePointer, length: Int?) -> [UInt8] {
        let size = Int((BN_num_bits(bn) + 7) / 8)
        var out = [UInt8](repeating: 0, count: max(size, 1))
        let written = out.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        out = Array(out.prefix(Int(written)))
        return length.map { pad(out, to: $0) } ?? out
    }

    static func pad(_ bytes: [UInt8], to length: Int) -> [UInt8] {
        bytes.count >= length ? bytes : [UInt8](repeating: 0, count: length - bytes.count) + bytes
    }

    static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.count - first) * 8 - bytes[first].leadingZeroBitCount
    }
}
