import CLibCrypto
import Crypto
import CryptoExtras

/// A DES key of single (8), double (16) or triple (24) length, with its key schedules prepared
/// once. The cipher itself is libcrypto's; this type only holds the schedules.
///
/// The key never prints itself: `description` shows the key check value only.
public struct TDESKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The key's bytes and its K1, K2, K3 schedules in one allocation (a double-length key's K3
    /// is K1, a single-length key's K2 and K3 are K1, so one EDE call serves every length). Every
    /// cryptogram derives two keys; one allocation each, not three, shows in `bench crypto`.
    private var storage: KeyStorage { shared.storage }
    private let shared: SharedStorage

    /// `ManagedBuffer` is never `Sendable`; this one is immutable once made.
    private struct SharedStorage: @unchecked Sendable { let storage: KeyStorage }

    /// Makes a key from 8, 16 or 24 bytes. Parity bits are not checked (keys from tests and HSM
    /// dumps often ignore them), matching what issuers' tools accept.
    public init(_ bytes: [UInt8], field: String = "key") throws(EMVError) {
        guard [8, 16, 24].contains(bytes.count) else {
            throw EMVError(field: field, rule: "a DES key is 8, 16 or 24 bytes (16, 32 or 48 hex digits), got \(bytes.count) bytes")
        }
        self.init(unchecked: bytes)
    }

    init(unchecked bytes: [UInt8]) {
        var blocks = [DESBlock](repeating: DESBlock(cblock: (0, 0, 0, 0, 0, 0, 0, 0)), count: 3)
        for i in 0..<bytes.count / 8 { blocks[i] = DESBlock(bytes, at: 8 * i) }
        shared = SharedStorage(storage: KeyStorage.make(blocks[0], blocks[1], blocks[2], length: bytes.count))
    }

    /// A double-length key of two blocks.
    init(left: DESBlock, right: DESBlock) {
        shared = SharedStorage(storage: KeyStorage.make(left, right, left, length: 16))
    }

    /// Parses a key written in hex.
    public init(hex: String, field: String = "key") throws(EMVError) {
        try self.init(Hex.decode(hex, field: field), field: field)
    }

    /// Key length in bytes.
    public var length: Int { storage.header.length }

    /// The key's bytes in clear — for callers that must hand a derived key to a person (the
    /// `cardbench emv arqc --json` output); nothing else should need it.
    public var clearBytes: [UInt8] { storage.header.bytes }

    private var key: [UInt8] { storage.header.bytes }

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
        let ks = storage.schedules
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
        data.withUnsafeBufferPointer { Self.retailMAC(schedules: storage.schedules, padded: $0) }
    }

    func retailMAC(padded data: UnsafeBufferPointer<UInt8>) -> DESBlock {
        Self.retailMAC(schedules: storage.schedules, padded: data)
    }

    /// The retail MAC with K1 at `ks` and K2 at `ks + 1`.
    static func retailMAC(schedules ks: UnsafeMutablePointer<DES_key_schedule>, padded data: UnsafeBufferPointer<UInt8>) -> DESBlock {
        var iv: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: data.count) { scratch in
            // DES_ncbc_encrypt leaves the last ciphertext block in the IV.
            DES_ncbc_encrypt(data.baseAddress, scratch.baseAddress, data.count, ks, &iv, DES_ENCRYPT)
        }
        var middle: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        var out: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        DES_ecb_encrypt(&iv, &middle, ks + 1, DES_DECRYPT)
        DES_ecb_encrypt(&middle, &out, ks, DES_ENCRYPT)
        return DESBlock(cblock: out)
    }

    /// CBC-MAC with the whole key (ISO 9797-1 algorithm 1). `data` is already padded.
    func cbcMAC(padded data: [UInt8]) -> DESBlock {
        let ks = storage.schedules
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
        let (l, r) = deriveHalves(left, right)
        return TDESKey(left: l, right: r)
    }

    /// `deriveKey`'s two halves, for a key used once and never kept (a session key's MAC).
    func deriveHalves(_ left: DESBlock, _ right: DESBlock) -> (DESBlock, DESBlock) {
        Self.deriveHalves(left, right, schedules: storage.schedules)
    }

    /// `deriveHalves` under the K1, K2, K3 schedules at `ks`.
    static func deriveHalves(_ left: DESBlock, _ right: DESBlock, schedules ks: UnsafeMutablePointer<DES_key_schedule>) -> (DESBlock, DESBlock) {
        var l = left.cblock, r = right.cblock
        var outL: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0), outR: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        DES_ecb3_encrypt(&l, &outL, ks, ks + 1, ks + 2, DES_ENCRYPT)
        DES_ecb3_encrypt(&r, &outR, ks, ks + 1, ks + 2, DES_ENCRYPT)
        var a = DESBlock(cblock: outL), b = DESBlock(cblock: outR)
        a.setOddParity()
        b.setOddParity()
        return (a, b)
    }

    /// Runs `body` with this key's K1, K2, K3 schedules.
    func withSchedules<R>(_ body: (UnsafeMutablePointer<DES_key_schedule>) -> R) -> R {
        withExtendedLifetime(shared) { body(storage.schedules) }
    }

    /// Runs `body` with K1, K2, K3 schedules of the double-length key `left`‖`right` made on the
    /// stack (K3 is K1).
    static func withSchedules<R>(_ left: DESBlock, _ right: DESBlock, _ body: (UnsafeMutablePointer<DES_key_schedule>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: DES_key_schedule.self, capacity: 3) { ks in
            let base = ks.baseAddress!
            var k1 = left.cblock, k2 = right.cblock
            base.initialize(to: DES_key_schedule())
            (base + 1).initialize(to: DES_key_schedule())
            DES_set_key_unchecked(&k1, base)
            DES_set_key_unchecked(&k2, base + 1)
            (base + 2).initialize(to: base.pointee)
            return body(base)
        }
    }

    /// `retailMAC` under the double-length key `left`‖`right`, its two schedules on the stack: a
    /// session key MACs one message, so allocating a key for it costs more than the schedules.
    static func retailMAC(left: DESBlock, right: DESBlock, padded data: UnsafeBufferPointer<UInt8>) -> DESBlock {
        withUnsafeTemporaryAllocation(of: DES_key_schedule.self, capacity: 2) { ks in
            var k1 = left.cblock, k2 = right.cblock
            let base = ks.baseAddress!
            base.initialize(to: DES_key_schedule())
            (base + 1).initialize(to: DES_key_schedule())
            DES_set_key_unchecked(&k1, base)
            DES_set_key_unchecked(&k2, base + 1)
            return retailMAC(schedules: base, padded: data)
        }
    }

    @inline(__always)
    func ede(_ block: inout DESBlock, encrypt: Bool) {
        let ks = storage.schedules
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

    /// The key's blocks and length, and its three schedules after them, in one object. Immutable
    /// after `make`, hence safe to share.
    private final class KeyStorage: ManagedBuffer<KeyStorage.Header, DES_key_schedule> {
        struct Header {
            let blocks: (DESBlock, DESBlock, DESBlock)
            let length: Int

            var bytes: [UInt8] {
                var out: [UInt8] = []
                out.reserveCapacity(length)
                blocks.0.append(to: &out)
                if length >= 16 { blocks.1.append(to: &out) }
                if length == 24 { blocks.2.append(to: &out) }
                return out
            }
        }

        /// K1, K2 and K3 from the blocks (K2 and K3 copy K1, or K3 copies K1, for shorter keys).
        static func make(_ k1: DESBlock, _ k2: DESBlock, _ k3: DESBlock, length: Int) -> KeyStorage {
            let made = unsafeDowncast(create(minimumCapacity: 3) { _ in Header(blocks: (k1, k2, k3), length: length) }, to: KeyStorage.self)
            made.withUnsafeMutablePointerToElements { ks in
                var block = k1.cblock
                ks.initialize(to: DES_key_schedule())
                DES_set_key_unchecked(&block, ks)
                if length >= 16 {
                    block = k2.cblock
                    (ks + 1).initialize(to: DES_key_schedule())
                    DES_set_key_unchecked(&block, ks + 1)
                } else {
                    (ks + 1).initialize(to: ks.pointee)
                }
                if length == 24 {
                    block = k3.cblock
                    (ks + 2).initialize(to: DES_key_schedule())
                    DES_set_key_unchecked(&block, ks + 2)
                } else {
                    (ks + 2).initialize(to: ks.pointee)
                }
            }
            return made
        }

        /// The schedules: stable for the object's life (its elements never move), which the
        /// key keeps.
        var schedules: UnsafeMutablePointer<DES_key_schedule> { withUnsafeMutablePointerToElements { $0 } }
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

    /// The eight bytes of `value`, most significant first.
    init(bigEndian value: UInt64) {
        cblock = (UInt8(truncatingIfNeeded: value >> 56), UInt8(truncatingIfNeeded: value >> 48), UInt8(truncatingIfNeeded: value >> 40),
                  UInt8(truncatingIfNeeded: value >> 32), UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                  UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value))
    }

    /// Sets each byte's low bit for odd parity, as derived EMV keys have.
    mutating func setOddParity() {
        withUnsafeMutableBytes(of: &cblock) { bytes in
            for i in 0..<8 { bytes[i] = TDESKey.oddParity(bytes[i]) }
        }
    }

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
