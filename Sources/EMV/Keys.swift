import CLibCrypto
import Crypto
import CryptoExtras

/// A DES key of single (8), double (16) or triple (24) length, with its key schedules prepared
/// once. The cipher itself is libcrypto's; this type only holds the schedules.
///
/// The key never prints itself: `description` shows the key check value only.
public struct TDESKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    private let key: [UInt8]
    /// K1, K2, K3 schedules. A double-length key's K3 is K1, a single-length key's K2 and K3 are
    /// K1, so one EDE call serves every length.
    private let schedules: Schedules

    /// Makes a key from 8, 16 or 24 bytes. Parity bits are not checked (keys from tests and HSM
    /// dumps often ignore them), matching what issuers' tools accept.
    public init(_ bytes: [UInt8], field: String = "key") throws(EMVError) {
        guard [8, 16, 24].contains(bytes.count) else {
            throw EMVError(field: field, rule: "a DES key is 8, 16 or 24 bytes (16, 32 or 48 hex digits), got \(bytes.count) bytes")
        }
        self.init(unchecked: bytes)
    }

    init(unchecked bytes: [UInt8]) {
        key = bytes
        schedules = Schedules(bytes)
    }

    /// Parses a key written in hex.
    public init(hex: String, field: String = "key") throws(EMVError) {
        try self.init(Hex.decode(hex, field: field), field: field)
    }

    /// Key length in bytes.
    public var length: Int { key.count }

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
    public func encryptBlock(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 8, "DES blocks are 8 bytes")
        var b = DESBlock(block)
        ede(&b, encrypt: true)
        return b.bytes
    }

    /// Decrypts one 8-byte block.
    public func decryptBlock(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 8, "DES blocks are 8 bytes")
        var b = DESBlock(block)
        ede(&b, encrypt: false)
        return b.bytes
    }

    /// ECB over whole blocks.
    public func encryptECB(_ data: [UInt8]) -> [UInt8] { ecb(data, encrypt: true) }

    /// ECB decryption over whole blocks.
    public func decryptECB(_ data: [UInt8]) -> [UInt8] { ecb(data, encrypt: false) }

    private func ecb(_ data: [UInt8], encrypt: Bool) -> [UInt8] {
        precondition(data.count % 8 == 0, "ECB data is whole 8-byte blocks")
        var out: [UInt8] = []
        out.reserveCapacity(data.count)
        for i in stride(from: 0, to: data.count, by: 8) {
            var b = DESBlock(data, at: i)
            ede(&b, encrypt: encrypt)
            b.append(to: &out)
        }
        return out
    }

    /// CBC encryption (EDE) with libcrypto's chaining; returns all ciphertext blocks.
    public func encryptCBC(_ data: [UInt8], iv: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0]) -> [UInt8] {
        precondition(data.count % 8 == 0 && iv.count == 8, "CBC data is whole 8-byte blocks with an 8-byte IV")
        var out = [UInt8](repeating: 0, count: data.count)
        var ivBlock = DESBlock(iv).cblock
        let ks = schedules.pointer
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                DES_ede3_cbc_encrypt(input.baseAddress, output.baseAddress, data.count, ks, ks + 1, ks + 2, &ivBlock, DES_ENCRYPT)
            }
        }
        return out
    }

    /// ISO 9797-1 MAC algorithm 3 on this double-length key's halves: single-DES CBC with K1,
    /// then decrypt with K2 and encrypt with K1. `data` is already padded.
    func retailMAC(padded data: [UInt8]) -> DESBlock {
        let ks = schedules.pointer
        var iv: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: data.count) { scratch in
            data.withUnsafeBufferPointer { input in
                // DES_ncbc_encrypt leaves the last ciphertext block in the IV.
                DES_ncbc_encrypt(input.baseAddress, scratch.baseAddress, data.count, ks, &iv, DES_ENCRYPT)
            }
        }
        var middle: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        var out: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        DES_ecb_encrypt(&iv, &middle, ks + 1, DES_DECRYPT)
        DES_ecb_encrypt(&middle, &out, ks, DES_ENCRYPT)
        return DESBlock(cblock: out)
    }

    /// CBC-MAC with the whole key (ISO 9797-1 algorithm 1). `data` is already padded.
    func cbcMAC(padded data: [UInt8]) -> DESBlock {
        let ks = schedules.pointer
        var iv: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: data.count) { scratch in
            data.withUnsafeBufferPointer { input in
                DES_ede3_cbc_encrypt(input.baseAddress, scratch.baseAddress, data.count, ks, ks + 1, ks + 2, &iv, DES_ENCRYPT)
            }
        }
        return DESBlock(cblock: iv)
    }

    /// Encrypts two blocks in ECB and makes a double-length key of the result with odd parity:
    /// the shape of every EMV key derivation.
    func deriveKey(_ left: DESBlock, _ right: DESBlock) -> TDESKey {
        var l = left, r = right
        ede(&l, encrypt: true)
        ede(&r, encrypt: true)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        l.append(to: &bytes)
        r.append(to: &bytes)
        for i in 0..<16 { bytes[i] = TDESKey.oddParity(bytes[i]) }
        return TDESKey(unchecked: bytes)
    }

    @inline(__always)
    func ede(_ block: inout DESBlock, encrypt: Bool) {
        let ks = schedules.pointer
        var input = block.cblock
        var output: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        DES_ecb3_encrypt(&input, &output, ks, ks + 1, ks + 2, encrypt ? DES_ENCRYPT : DES_DECRYPT)
        block = DESBlock(cblock: output)
    }

    @inline(__always)
    static func oddParity(_ b: UInt8) -> UInt8 {
        (b >> 1).nonzeroBitCount % 2 == 0 ? (b | 1) : (b & 0xFE)
    }

    /// A copy with each byte's low bit set for odd parity, as derived EMV keys are.
    public func withOddParity() -> TDESKey {
        TDESKey(unchecked: key.map(TDESKey.oddParity))
    }

    /// Compares in time independent of where the values differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    /// The three key schedules in one allocation, so a block operation passes pointers instead
    /// of copying 384 bytes of schedule. Immutable after init, hence safe to share.
    private final class Schedules: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<DES_key_schedule>

        init(_ key: [UInt8]) {
            pointer = .allocate(capacity: 3)
            Self.schedule(key, 0, into: pointer)
            if key.count >= 16 { Self.schedule(key, 8, into: pointer + 1) } else { (pointer + 1).initialize(to: pointer.pointee) }
            if key.count == 24 { Self.schedule(key, 16, into: pointer + 2) } else { (pointer + 2).initialize(to: pointer.pointee) }
        }

        deinit { pointer.deallocate() }

        private static func schedule(_ key: [UInt8], _ offset: Int, into target: UnsafeMutablePointer<DES_key_schedule>) {
            var block = DESBlock(key, at: offset).cblock
            target.initialize(to: DES_key_schedule())
            DES_set_key_unchecked(&block, target)
        }
    }
}

/// One 8-byte DES block held inline (no heap allocation), convertible to libcrypto's DES_cblock.
struct DESBlock {
    var cblock: DES_cblock

    init(cblock: DES_cblock) { self.cblock = cblock }

    init(_ bytes: [UInt8], at i: Int = 0) {
        cblock = (bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3], bytes[i + 4], bytes[i + 5], bytes[i + 6], bytes[i + 7])
    }

    var bytes: [UInt8] { [cblock.0, cblock.1, cblock.2, cblock.3, cblock.4, cblock.5, cblock.6, cblock.7] }

    /// The first `n` bytes (a truncated MAC).
    func prefix(_ n: Int) -> [UInt8] { n >= 8 ? bytes : Array(bytes.prefix(n)) }

    func append(to out: inout [UInt8]) {
        out.append(cblock.0); out.append(cblock.1); out.append(cblock.2); out.append(cblock.3)
        out.append(cblock.4); out.append(cblock.5); out.append(cblock.6); out.append(cblock.7)
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
