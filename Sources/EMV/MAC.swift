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
        let (left, right) = try iccMasterKeyHalves(issuerMasterKey: imk, pan: pan, psn: psn, optionB: false)
        return TDESKey(left: left, right: right)
    }

    /// ICC master key, option B (PANs over 16 digits): SHA-1 of PAN‖PSN, decimalised to 16
    /// digits; PANs of 16 digits or fewer use option A, as EMV specifies.
    public static func iccMasterKeyOptionB(issuerMasterKey imk: TDESKey, pan: String, psn: String) throws(EMVError) -> TDESKey {
        let (left, right) = try iccMasterKeyHalves(issuerMasterKey: imk, pan: pan, psn: psn, optionB: true)
        return TDESKey(left: left, right: right)
    }

    /// The ICC master key's two halves, by option A or (for PANs over 16 digits) option B.
    static func iccMasterKeyHalves(issuerMasterKey imk: TDESKey, pan: String, psn: String, optionB: Bool) throws(EMVError) -> (DESBlock, DESBlock) {
        guard imk.length == 16 else {
            throw EMVError(field: "imk", rule: "an issuer master key is a double-length key (16 bytes, 32 hex digits), got \(imk.length) bytes")
        }
        let block = try withDigits(pan: pan, psn: psn) { digits in
            optionB && digits.panCount > 16 ? decimalisedSHA1(digits) : rightmost16(digits)
        }
        var complement = block
        complement.cblock = (~block.cblock.0, ~block.cblock.1, ~block.cblock.2, ~block.cblock.3,
                             ~block.cblock.4, ~block.cblock.5, ~block.cblock.6, ~block.cblock.7)
        return imk.deriveHalves(block, complement)
    }

    // Every cryptogram a card or its issuer makes starts with one of these, so they work on the
    // digits in place (no arrays): `bench crypto` measures them against bare DES.

    /// Checks `pan` and `psn` as `checkedPAN` and `checkedPSN` do, and runs `body` on the
    /// digits of PAN‖PSN (as two buffers, uncopied) and the PAN's length.
    private static func withDigits(pan: String, psn: String,
                                   _ body: (Digits) -> DESBlock) throws(EMVError) -> DESBlock {
        var pan = pan, psn = psn
        let block: DESBlock? = pan.withUTF8 { panBytes in
            psn.withUTF8 { psnBytes in
                guard panBytes.count >= 12, panBytes.count <= 19, psnBytes.count == 2 else { return nil }
                var bad: UInt8 = 0
                for b in panBytes { bad |= b &- 0x30 > 9 ? 1 : 0 }
                bad |= psnBytes[0] &- 0x30 > 9 ? 1 : 0
                bad |= psnBytes[1] &- 0x30 > 9 ? 1 : 0
                guard bad == 0 else { return nil }
                return body(Digits(pan: panBytes, psn: psnBytes))
            }
        }
        guard let block else {
            // Which rule, in the order `checkedPAN` and `checkedPSN` name them.
            _ = try checkedPAN(pan)
            _ = try checkedPSN(psn)
            throw EMVError(field: "pan", rule: "must be 12–19 digits")
        }
        return block
    }

    /// PAN‖PSN's ASCII digits, read in place.
    private struct Digits {
        let pan: UnsafeBufferPointer<UInt8>
        let psn: UnsafeBufferPointer<UInt8>

        var count: Int { pan.count + 2 }
        var panCount: Int { pan.count }

        /// The `i`th digit's value.
        subscript(i: Int) -> UInt8 { (i < pan.count ? pan[i] : psn[i - pan.count]) &- 0x30 }
    }

    /// The rightmost 16 digits, zero-filled on the left, packed as BCD: the PSN's two digits
    /// last, the PAN's rightmost 14 before them.
    private static func rightmost16(_ digits: Digits) -> DESBlock {
        // In a register: no exclusive access to a block in memory per digit.
        let pan = digits.pan.baseAddress!, psn = digits.psn.baseAddress!
        let take = min(14, digits.pan.count)
        var value: UInt64 = 0
        for j in (digits.pan.count - take)..<digits.pan.count { value = value << 4 | UInt64(pan[j] &- 0x30) }
        value = value << 4 | UInt64(psn[0] &- 0x30)
        value = value << 4 | UInt64(psn[1] &- 0x30)
        return DESBlock(bigEndian: value)
    }

    /// SHA-1 over the BCD of the digits (left-padded to whole bytes), decimalised: the digit
    /// nibbles in order, then the letter nibbles A–F as 0–5, until 16 are taken.
    private static func decimalisedSHA1(_ digits: Digits) -> DESBlock {
        let odd = digits.count % 2
        let hash = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: (digits.count + 1) / 2) { bcd in
            bcd.initialize(repeating: 0)
            for i in 0..<digits.count {
                let position = i + odd
                bcd[position >> 1] |= position & 1 == 1 ? digits[i] : digits[i] << 4
            }
            return Insecure.SHA1.hash(data: UnsafeRawBufferPointer(bcd))
        }
        var block = DESBlock(cblock: (0, 0, 0, 0, 0, 0, 0, 0))
        withUnsafeMutableBytes(of: &block.cblock) { packed in
            var taken = 0
            func take(_ nibble: UInt8) {
                packed[taken >> 1] |= taken & 1 == 1 ? nibble : nibble << 4
                taken += 1
            }
            hash.withUnsafeBytes { bytes in
                for b in bytes where taken < 16 {
                    if b >> 4 < 10 { take(b >> 4) }
                    if taken < 16, b & 0x0F < 10 { take(b & 0x0F) }
                }
                for b in bytes where taken < 16 {
                    if b >> 4 >= 10 { take((b >> 4) - 10) }
                    if taken < 16, b & 0x0F >= 10 { take((b & 0x0F) - 10) }
                }
            }
        }
        return block
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
        let (left, right) = commonSessionR(atc: atc)
        return mk.deriveKey(left, right)
    }

    /// R = ATC‖000000000000 with byte 3 set to F0, and to 0F.
    static func commonSessionR(atc: [UInt8]) -> (DESBlock, DESBlock) {
        var left = DESBlock(cblock: (atc[0], atc[1], 0xF0, 0, 0, 0, 0, 0)), right = left
        right.cblock.2 = 0x0F
        return (left, right)
    }

    /// R = ATC‖0000‖UN with byte 3 set to F0, and to 0F.
    static func mastercardSessionR(atc: [UInt8], unpredictableNumber un: [UInt8]) -> (DESBlock, DESBlock) {
        var left = DESBlock(cblock: (atc[0], atc[1], 0xF0, 0, un[0], un[1], un[2], un[3])), right = left
        right.cblock.2 = 0x0F
        return (left, right)
    }

    /// The Mastercard M/Chip session key: R = ATC‖0000‖UN (CVN 16/17).
    public static func mastercardSessionKey(iccMasterKey mk: TDESKey, atc: [UInt8], unpredictableNumber un: [UInt8]) throws(EMVError) -> TDESKey {
        guard atc.count == 2, un.count == 4 else {
            throw EMVError(field: atc.count == 2 ? "tag 9F37" : "tag 9F36", rule: "ATC is 2 bytes and UN 4 bytes, got \(atc.count) and \(un.count)")
        }
        let (left, right) = mastercardSessionR(atc: atc, unpredictableNumber: un)
        return mk.deriveKey(left, right)
    }

    static func checkedPAN(_ pan: String) throws(EMVError) -> String {
        guard !pan.isEmpty, allDigits(pan) else {
            throw EMVError(field: "pan", rule: "must be digits only")
        }
        guard (12...19).contains(pan.utf8.count) else { throw EMVError(field: "pan", rule: "must be 12–19 digits, got \(pan.utf8.count)") }
        return pan
    }

    /// Whether every byte is an ASCII digit, on the string's contiguous bytes (a native string's
    /// always are) rather than through its UTF-8 view's iterator.
    static func allDigits(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            for b in bytes where b &- 0x30 > 9 { return false }
            return true
        }
    }

    static func checkedPSN(_ psn: String) throws(EMVError) -> String {
        guard psn.utf8.count == 2, allDigits(psn) else {
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
