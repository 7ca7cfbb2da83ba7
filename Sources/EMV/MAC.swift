import Crypto

/// ISO/IEC 9797-1 MACs over DES, as EMV cryptograms use them.
public enum ISO9797 {
    /// The two padding methods EMV uses.
    public enum Padding: Int, Sendable, CaseIterable {
        /// Method 1: zero bits to a whole block; empty data becomes one zero block.
        case method1 = 1
        /// Method 2: a single 1 bit (`80`) then zeros to a whole block.
        case method2 = 2
    }

    /// Pads `data` to whole 8-byte blocks.
    public static func pad(_ data: [UInt8], _ padding: Padding) -> [UInt8] {
        var out = data
        pad(&out, padding)
        return out
    }

    /// Pads in place, so a caller that built the data can MAC it without another copy.
    public static func pad(_ data: inout [UInt8], _ padding: Padding) {
        if padding == .method2 { data.append(0x80) }
        let rem = data.count % 8
        if rem != 0 || data.isEmpty {
            for _ in 0..<(rem == 0 ? 8 : 8 - rem) { data.append(0) }
        }
    }

    /// MAC algorithm 1: CBC-MAC with the whole key (single DES or TDES), zero IV, last block.
    public static func algorithm1(key: TDESKey, data: [UInt8], padding: Padding, length: Int = 8) -> [UInt8] {
        key.cbcMAC(padded: pad(data, padding)).prefix(length)
    }

    /// MAC algorithm 3 (the "retail MAC"): single-DES CBC-MAC with the left half, then decrypt
    /// with the right half and encrypt with the left. The key must be double length.
    public static func algorithm3(key: TDESKey, data: [UInt8], padding: Padding, length: Int = 8) -> [UInt8] {
        precondition(key.length == 16, "MAC algorithm 3 takes a double-length key")
        return key.retailMAC(padded: pad(data, padding)).prefix(length)
    }
}

/// EMV key derivation (EMV Book 2 Annex A1.4 and A1.3).
public enum KeyDerivation {
    /// ICC master key, option A: encrypt the rightmost 16 digits of PAN‖PSN (zero-filled on the
    /// left) and its complement under the issuer master key; odd parity.
    public static func iccMasterKeyOptionA(issuerMasterKey imk: TDESKey, pan: String, psn: String) throws(EMVError) -> TDESKey {
        let digits = try Array(checkedPAN(pan).utf8) + Array(checkedPSN(psn).utf8)
        // Rightmost 16 digits of PAN‖PSN, zero-filled on the left, packed as BCD.
        var nibbles = [UInt8](repeating: 0, count: 16)
        let take = min(16, digits.count)
        for i in 0..<take { nibbles[16 - take + i] = digits[digits.count - take + i] - 0x30 }
        return try derive(imk, (0..<8).map { nibbles[2 * $0] << 4 | nibbles[2 * $0 + 1] })
    }

    /// ICC master key, option B (PANs over 16 digits): SHA-1 of PAN‖PSN, decimalised to 16
    /// digits; PANs of 16 digits or fewer use option A, as EMV specifies.
    public static func iccMasterKeyOptionB(issuerMasterKey imk: TDESKey, pan: String, psn: String) throws(EMVError) -> TDESKey {
        let panDigits = try checkedPAN(pan)
        let psnDigits = try checkedPSN(psn)
        guard panDigits.utf8.count > 16 else { return try iccMasterKeyOptionA(issuerMasterKey: imk, pan: pan, psn: psn) }
        // SHA-1 over the BCD of PAN‖PSN (left-padded to whole bytes), then decimalise: the
        // digit nibbles in order, then the letter nibbles A–F as 0–5, until 16 are taken.
        var digits = Array(panDigits.utf8) + Array(psnDigits.utf8)
        if digits.count % 2 == 1 { digits.insert(0x30, at: 0) }
        var bcd: [UInt8] = []
        bcd.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            let high: UInt8 = digits[i] - 0x30
            let low: UInt8 = digits[i + 1] - 0x30
            bcd.append(high << 4 | low)
        }
        var nibbles: [UInt8] = []
        nibbles.reserveCapacity(40)
        for b in Insecure.SHA1.hash(data: bcd) { nibbles.append(b >> 4); nibbles.append(b & 0x0F) }
        var y = nibbles.filter { $0 < 10 }.prefix(16).map { $0 }
        if y.count < 16 { y += nibbles.filter { $0 >= 10 }.prefix(16 - y.count).map { $0 - 10 } }
        var packed: [UInt8] = []
        for i in 0..<8 { packed.append(y[2 * i] << 4 | y[2 * i + 1]) }
        return try derive(imk, packed)
    }

    private static func derive(_ imk: TDESKey, _ a: [UInt8]) throws(EMVError) -> TDESKey {
        guard imk.length == 16 else {
            throw EMVError(field: "imk", rule: "an issuer master key is a double-length key (16 bytes, 32 hex digits), got \(imk.length) bytes")
        }
        let block = DESBlock(a)
        var complement = block
        complement.cblock = (~block.cblock.0, ~block.cblock.1, ~block.cblock.2, ~block.cblock.3,
                             ~block.cblock.4, ~block.cblock.5, ~block.cblock.6, ~block.cblock.7)
        return imk.deriveKey(block, complement)
    }

    /// The EMV common session key (Book 2 A1.3.1): R with byte 3 set to F0, and to 0F,
    /// encrypted under the ICC master key; odd parity.
    public static func commonSessionKey(iccMasterKey mk: TDESKey, r: [UInt8]) throws(EMVError) -> TDESKey {
        guard r.count == 8 else { throw EMVError(field: "R", rule: "the diversification value is 8 bytes, got \(r.count)") }
        var left = DESBlock(r), right = left
        left.cblock.2 = 0xF0
        right.cblock.2 = 0x0F
        return mk.deriveKey(left, right)
    }

    /// The EMV common session key for an ATC: R = ATC‖000000000000 (Visa CVN 18/22, MC CVN 20/21).
    public static func commonSessionKey(iccMasterKey mk: TDESKey, atc: [UInt8]) throws(EMVError) -> TDESKey {
        guard atc.count == 2 else { throw EMVError(field: "tag 9F36", rule: "the ATC is 2 bytes, got \(atc.count)") }
        var left = DESBlock(cblock: (atc[0], atc[1], 0xF0, 0, 0, 0, 0, 0)), right = left
        right.cblock.2 = 0x0F
        return mk.deriveKey(left, right)
    }

    /// The Mastercard M/Chip session key: R = ATC‖0000‖UN (CVN 16/17).
    public static func mastercardSessionKey(iccMasterKey mk: TDESKey, atc: [UInt8], unpredictableNumber un: [UInt8]) throws(EMVError) -> TDESKey {
        guard atc.count == 2, un.count == 4 else {
            throw EMVError(field: atc.count == 2 ? "tag 9F37" : "tag 9F36", rule: "ATC is 2 bytes and UN 4 bytes, got \(atc.count) and \(un.count)")
        }
        var left = DESBlock(cblock: (atc[0], atc[1], 0xF0, 0, un[0], un[1], un[2], un[3])), right = left
        right.cblock.2 = 0x0F
        return mk.deriveKey(left, right)
    }

    static func checkedPAN(_ pan: String) throws(EMVError) -> String {
        guard !pan.isEmpty, pan.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw EMVError(field: "pan", rule: "must be digits only")
        }
        guard (12...19).contains(pan.utf8.count) else { throw EMVError(field: "pan", rule: "must be 12–19 digits, got \(pan.utf8.count)") }
        return pan
    }

    static func checkedPSN(_ psn: String) throws(EMVError) -> String {
        guard psn.utf8.count == 2, psn.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw EMVError(field: "psn", rule: "the PAN sequence number is 2 digits (00–99)")
        }
        return psn
    }
}

extension String {
    func leftPadded(to n: Int, with c: Character) -> String {
        count >= n ? self : String(repeating: c, count: n - count) + self
    }
}
