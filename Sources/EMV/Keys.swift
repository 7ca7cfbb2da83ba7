import CLibCrypto
import Crypto
import CryptoExtras

/// A DES key of single (8), double (16) or triple (24) length, with its key schedules prepared
/// once. The cipher itself is libcrypto's; this type only holds the schedules.
///
/// The key never prints itself: `description` shows the key check value only.
public struct TDESKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private let key: [UInt8]
    private let k1: DES_key_schedule
    private let k2: DES_key_schedule
    private let k3: DES_key_schedule

    /// Makes a key from 8, 16 or 24 bytes. Parity bits are not checked (keys from tests and HSM
    /// dumps often ignore them), matching what issuers' tools accept.
    public init(_ bytes: [UInt8], field: String = "key") throws(EMVError) {
        guard [8, 16, 24].contains(bytes.count) else {
            throw EMVError(field: field, rule: "a DES key is 8, 16 or 24 bytes (16, 32 or 48 hex digits), got \(bytes.count) bytes")
        }
        key = bytes
        k1 = Self.schedule(bytes, 0)
        k2 = bytes.count >= 16 ? Self.schedule(bytes, 8) : k1
        k3 = bytes.count == 24 ? Self.schedule(bytes, 16) : k1
    }

    /// Parses a key written in hex.
    public init(hex: String, field: String = "key") throws(EMVError) {
        try self.init(Hex.decode(hex, field: field), field: field)
    }

    private static func schedule(_ bytes: [UInt8], _ offset: Int) -> DES_key_schedule {
        var block: DES_cblock = (bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3],
                                 bytes[offset + 4], bytes[offset + 5], bytes[offset + 6], bytes[offset + 7])
        var ks = DES_key_schedule()
        DES_set_key_unchecked(&block, &ks)
        return ks
    }

    /// Key length in bytes.
    public var length: Int { key.count }

    /// The left and right 8-byte halves of a double-length key, as single-DES keys.
    var halves: (left: TDESKey, right: TDESKey) {
        (try! TDESKey(Array(key[0..<8])), try! TDESKey(Array(key[8..<16])))
    }

    /// The key's bytes in clear — for callers that must hand a derived key to a person (the
    /// `cardbench emv arqc --json` output); nothing else should need it.
    public var clearBytes: [UInt8] { key }

    /// The key check value: the first 3 bytes of the key encrypting a zero block.
    public var checkValue: [UInt8] { Array(encryptBlock([0, 0, 0, 0, 0, 0, 0, 0]).prefix(3)) }

    public var description: String { "TDESKey(\(key.count * 8) bits, KCV \(Hex.encode(checkValue)))" }
    public var debugDescription: String { description }

    public static func == (a: TDESKey, b: TDESKey) -> Bool { a.key == b.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }

    /// Encrypts one 8-byte block (EDE with K1, K2, K3; a single-length key is plain DES).
    public func encryptBlock(_ block: [UInt8]) -> [UInt8] { crypt(block, encrypt: true) }

    /// Decrypts one 8-byte block.
    public func decryptBlock(_ block: [UInt8]) -> [UInt8] { crypt(block, encrypt: false) }

    private func crypt(_ block: [UInt8], encrypt: Bool) -> [UInt8] {
        precondition(block.count == 8, "DES blocks are 8 bytes")
        var input: DES_cblock = (block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7])
        var output: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        var s1 = k1, s2 = k2, s3 = k3
        DES_ecb3_encrypt(&input, &output, &s1, &s2, &s3, encrypt ? DES_ENCRYPT : DES_DECRYPT)
        return [output.0, output.1, output.2, output.3, output.4, output.5, output.6, output.7]
    }

    /// ECB over whole blocks.
    public func encryptECB(_ data: [UInt8]) -> [UInt8] {
        precondition(data.count % 8 == 0, "ECB data is whole 8-byte blocks")
        var out: [UInt8] = []
        out.reserveCapacity(data.count)
        for i in stride(from: 0, to: data.count, by: 8) { out += encryptBlock(Array(data[i..<i + 8])) }
        return out
    }

    /// ECB decryption over whole blocks.
    public func decryptECB(_ data: [UInt8]) -> [UInt8] {
        precondition(data.count % 8 == 0, "ECB data is whole 8-byte blocks")
        var out: [UInt8] = []
        out.reserveCapacity(data.count)
        for i in stride(from: 0, to: data.count, by: 8) { out += decryptBlock(Array(data[i..<i + 8])) }
        return out
    }

    /// CBC encryption with libcrypto's chaining; returns all ciphertext blocks.
    public func encryptCBC(_ data: [UInt8], iv: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0]) -> [UInt8] {
        precondition(data.count % 8 == 0 && iv.count == 8, "CBC data is whole 8-byte blocks with an 8-byte IV")
        var out = [UInt8](repeating: 0, count: data.count)
        var ivBlock: DES_cblock = (iv[0], iv[1], iv[2], iv[3], iv[4], iv[5], iv[6], iv[7])
        var s1 = k1, s2 = k2, s3 = k3
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                DES_ede3_cbc_encrypt(input.baseAddress, output.baseAddress, data.count, &s1, &s2, &s3, &ivBlock, DES_ENCRYPT)
            }
        }
        return out
    }

    /// A copy with each byte's low bit set for odd parity, as derived EMV keys are.
    public func withOddParity() -> TDESKey {
        try! TDESKey(key.map { b in
            let ones = (b >> 1).nonzeroBitCount
            return ones % 2 == 0 ? (b | 1) : (b & 0xFE)
        })
    }

    /// Compares in time independent of where the keys differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}

/// An AES key (128, 192 or 256 bits) for ISO 9564 format 4 PIN blocks. The block cipher and the
/// CMAC are swift-crypto's.
public struct AESKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    let key: SymmetricKey

    public init(_ bytes: [UInt8], field: String = "key") throws(EMVError) {
        guard [16, 24, 32].contains(bytes.count) else {
            throw EMVError(field: field, rule: "an AES key is 16, 24 or 32 bytes (32, 48 or 64 hex digits), got \(bytes.count) bytes")
        }
        key = SymmetricKey(data: bytes)
    }

    public init(hex: String, field: String = "key") throws(EMVError) {
        try self.init(Hex.decode(hex, field: field), field: field)
    }

    /// Encrypts one 16-byte block.
    public func encryptBlock(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 16, "AES blocks are 16 bytes")
        var b = block
        // Cannot fail: the key size was checked at init and the block is one AES block.
        try! AES.permute(&b, key: key)
        return b
    }

    /// Decrypts one 16-byte block.
    public func decryptBlock(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 16, "AES blocks are 16 bytes")
        var b = block
        try! AES.inversePermute(&b, key: key)
        return b
    }

    /// The AES key check value of ANSI X9.24-1:2017: the first 5 bytes of CMAC over a zero block.
    public var checkValue: [UInt8] {
        var mac = try! AES.CMAC(key: key)
        mac.update(data: [UInt8](repeating: 0, count: 16))
        return Array(mac.finalize().withUnsafeBytes { Array($0) }.prefix(5))
    }

    public var description: String { "AESKey(\(key.bitCount) bits, KCV \(Hex.encode(checkValue)))" }
    public var debugDescription: String { description }
}

/// Random bytes from the system CSPRNG, through swift-crypto's key generation.
public enum SecureRandom {
    public static func bytes(_ count: Int) -> [UInt8] {
        SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
    }
}
