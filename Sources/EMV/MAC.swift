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
        if padding == .method2 { out.append(0x80) }
        let rem = out.count % 8
        if rem != 0 || out.isEmpty { out += [UInt8](repeating: 0, count: rem == 0 ? 8 : 8 - rem) }
        return out
    }

    /// MAC algorithm 1: CBC-MAC with the whole key (single DES or TDES), zero IV, last block.
    public static func algorithm1(key: TDESKey, data: [UInt8], padding: Padding, length: Int = 8) -> [UInt8] {
        let padded = pad(data, padding)
        return Array(key.encryptCBC(padded).suffix(8).prefix(length))
    }

    /// MAC algorithm 3 (the "retail MAC"): single-DES CBC-MAC with the left half, then decrypt
    /// with the right half and encrypt with the left. The key must be double length.
    public static func algorithm3(key: TDESKey, data: [UInt8], padding: Padding, length: Int = 8) -> [UInt8] {
        precondition(key.length == 16, "MAC algorithm 3 takes a double-length key")
        let (left, right) = key.halves
        let chained = Array(left.encryptCBC(pad(data, padding)).suffix(8))
        return Array(left.encryptBlock(right.decryptBlock(chained)).prefix(length))
    }
}

/// EMV key derivation (EMV Book 2 Annex A1.4 and A1.3).
public enum KeyDerivation {
    /// ICC master key, option A: encrypt the rightmost 16 digits of PAN‖PSN (zero-filled on the
    /// left) and its complement under the issuer master key; odd parity.
    public static func iccMasterKeyOptionA(issuerMasterKey imk: TDESKey, pan: String, psn: String) throws(EMVError) -> TDESKey {
        let digits = try checkedPAN(pan) + checkedPSN(psn)
        let y = String(digits.suffix(16)).leftPadded(to: 16, with: "0")
        let a = try Hex.decode(y, field: "pan")
        return try derive(imk, a)
    }

    /// ICC master key, option B (PANs over 16 digits): SHA-1 of PAN‖PSN, decimalised to 16
    /// digits; PANs of 16 digits or fewer use option A, as EMV specifies.
    public static func iccMasterKeyOptionB(issuerMasterKey imk: TDESKey, pan: String, psn: String) throws(EMVError) -> TDESKey {
        let panDigits = try checkedPAN(pan)
        let psnDigits = try checkedPSN(psn)
        guard panDigits.count > 16 else { return try iccMasterKeyOptionA(issuerMasterKey: imk, pan: pan, psn: psn) }
        var x = panDigits + psnDigits
        if x.count % 2 == 1 { x = "0" + x }
        let digest = Hex.encode(Insecure.SHA1.hash(data: try Hex.decode(x, field: "pan")))
        var y = String(digest.filter { $0.isNumber }.prefix(16))
        if y.count < 16 {
            // Decimalise the letters A–F as 0–5 and take as many as are still missing.
            let letters = digest.filter { !$0.isNumber }.map { c -> Character in
                Character(String(c.asciiValue! - UInt8(ascii: "A")))
            }
            y += String(letters.prefix(16 - y.count))
        }
        return try derive(imk, Hex.decode(y, field: "pan"))
    }

    private static func derive(_ imk: TDESKey, _ a: [UInt8]) throws(EMVError) -> TDESKey {
        guard imk.length == 16 else {
            throw EMVError(field: "imk", rule: "an issuer master key is a double-length key (16 bytes, 32 hex digits), got \(imk.length) bytes")
        }
        let b = a.map { ~$0 }
        return try TDESKey(imk.encryptECB(a + b)).withOddParity()
    }

    /// The EMV common session key (Book 2 A1.3.1): R with byte 3 set to F0, and to 0F,
    /// encrypted under the ICC master key; odd parity.
    public static func commonSessionKey(iccMasterKey mk: TDESKey, r: [UInt8]) throws(EMVError) -> TDESKey {
        guard r.count == 8 else { throw EMVError(field: "R", rule: "the diversification value is 8 bytes, got \(r.count)") }
        var left = r, right = r
        left[2] = 0xF0
        right[2] = 0x0F
        return try TDESKey(mk.encryptECB(left + right)).withOddParity()
    }

    /// The EMV common session key for an ATC: R = ATC‖000000000000 (Visa CVN 18/22, MC CVN 20/21).
    public static func commonSessionKey(iccMasterKey mk: TDESKey, atc: [UInt8]) throws(EMVError) -> TDESKey {
        try commonSessionKey(iccMasterKey: mk, r: atc + [0, 0, 0, 0, 0, 0])
    }

    /// The Mastercard M/Chip session key: R = ATC‖0000‖UN (CVN 16/17).
    public static func mastercardSessionKey(iccMasterKey mk: TDESKey, atc: [UInt8], unpredictableNumber un: [UInt8]) throws(EMVError) -> TDESKey {
        try commonSessionKey(iccMasterKey: mk, r: atc + [0, 0] + un)
    }

    static func checkedPAN(_ pan: String) throws(EMVError) -> String {
        guard !pan.isEmpty, pan.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw EMVError(field: "pan", rule: "must be digits only")
        }
        guard (12...19).contains(pan.count) else { throw EMVError(field: "pan", rule: "must be 12–19 digits, got \(pan.count)") }
        return pan
    }

    static func checkedPSN(_ psn: String) throws(EMVError) -> String {
        guard psn.count == 2, psn.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
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
