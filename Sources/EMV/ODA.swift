import Crypto

/// A calendar date for the certificate checks of offline data authentication: the transaction
/// date (9A) against certificate and CA key expiry.
public struct ODADate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// From a YYMMDD BCD date (tag 9A), years 00–49 read as 20YY and 50–99 as 19YY (Book 4 §6.7).
    public init?(bcd: [UInt8]) {
        guard bcd.count == 3, let digits = ODA.digits(bcd), let yy = Int(digits.prefix(2)), let mm = Int(digits.dropFirst(2).prefix(2)),
              let dd = Int(digits.suffix(2)), (1...12).contains(mm), (1...31).contains(dd) else { return nil }
        self.init(year: yy < 50 ? 2000 + yy : 1900 + yy, month: mm, day: dd)
    }

    public static func < (a: ODADate, b: ODADate) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
    public var description: String {
        func pad(_ n: Int, _ width: Int) -> String { String(repeating: "0", count: max(0, width - String(n).count)) + String(n) }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }
}

/// A certification authority public key as a terminal keeps it (EMV Book 2 §11.2.2): filed by
/// RID and index, with the SHA-1 check value over RID, index, modulus and exponent.
public struct CAPublicKey: Sendable, Hashable {
    public let rid: [UInt8]
    public let index: UInt8
    public let key: RSAPublicKey
    /// The last day the key may be used.
    public let expiry: ODADate
    public let name: String
    /// Where the key was published.
    public let source: String

    public init(rid: [UInt8], index: UInt8, key: RSAPublicKey, expiry: ODADate, name: String = "", source: String = "") {
        self.rid = rid
        self.index = index
        self.key = key
        self.expiry = expiry
        self.name = name
        self.source = source
    }

    /// SHA-1 over RID ‖ index ‖ modulus ‖ exponent (Book 2 §11.2.2, the check value a key
    /// is published with).
    public var checksum: [UInt8] { ODA.sha1(rid + [index] + key.modulus + key.exponent) }
}

/// A certificate the terminal's revocation list names (Book 2 §5.3 step 10): the CA key it was
/// signed under (RID, index) and its serial number.
public struct RevokedCertificate: Sendable, Hashable {
    public let rid: [UInt8]
    public let index: UInt8
    public let serial: [UInt8]

    public init(rid: [UInt8], index: UInt8, serial: [UInt8]) {
        self.rid = rid
        self.index = index
        self.serial = serial
    }
}

/// The fields recovered from an issuer public key certificate (tag 90, Book 2 Table 13).
public struct IssuerCertificate: Sendable, Hashable {
    /// The leftmost 3–8 PAN digits the issuer's key covers.
    public let issuerIdentifier: String
    /// MMYY as printed in the certificate.
    public let expiry: String
    public let serial: [UInt8]
    public let key: RSAPublicKey
}

/// The fields recovered from an ICC public key certificate (tag 9F46, Book 2 Table 14).
public struct ICCCertificate: Sendable, Hashable {
    public let pan: String
    /// MMYY.
    public let expiry: String
    public let serial: [UInt8]
    public let key: RSAPublicKey
}

/// What a signed dynamic application data (9F4B) carried: the ICC dynamic number, and for CDA the
/// cryptogram information data and the application cryptogram (Book 2 Tables 17, 19).
public struct DynamicSignature: Sendable, Hashable {
    public let dynamicNumber: [UInt8]
    public let cryptogramInformationData: UInt8?
    public let cryptogram: [UInt8]?
}

/// Why offline data authentication failed: the check that failed, as a payments engineer looks it
/// up in Book 2. `missingData` failures also set TVR "ICC data missing".
public struct ODAFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// A short name of the check, stable for scenarios and tests: `issuer certificate hash`, ….
    public let check: String
    public let detail: String
    public let missingData: Bool
    /// A certificate that recovered and hashed correctly but failed a later check (expiry,
    /// revocation, algorithm): its fields are genuine and worth showing.
    public var issuer: IssuerCertificate? = nil
    public var icc: ICCCertificate? = nil

    public init(_ check: String, _ detail: String, missingData: Bool = false) {
        self.check = check
        self.detail = detail
        self.missingData = missingData
    }

    public var description: String { "\(check): \(detail)" }
}

/// Offline data authentication, both sides (EMV Book 2 §§5–6): the terminal's recoveries and
/// checks, and the certificate and signature building a personalisation bureau and a card do.
/// Pure computation: RSA and SHA-1 through libcrypto and swift-crypto.
public enum ODA {
    static func sha1(_ data: [UInt8]) -> [UInt8] { Array(Insecure.SHA1.hash(data: data)) }

    /// The hex digits of compressed-numeric bytes, F padding removed; nil on a non-digit nibble
    /// before the padding.
    static func digits(_ bytes: some Collection<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        var padding = false
        for byte in bytes {
            for nibble in [byte >> 4, byte & 0x0F] {
                if nibble == 0xF { padding = true; continue }
                guard !padding, nibble <= 9 else { return nil }
                out.append(0x30 + nibble)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Digits as compressed numeric, right-padded with F to `length` bytes.
    static func compressedNumeric(_ digits: String, length: Int) -> [UInt8] {
        var nibbles = digits.utf8.map { $0 - 0x30 }
        while nibbles.count < length * 2 { nibbles.append(0xF) }
        return stride(from: 0, to: length * 2, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// Whether a certificate dated MMYY is still valid on `today`: valid through the month's last day.
    static func expired(_ mmyy: [UInt8], today: ODADate) -> Bool {
        guard let text = digits(mmyy), text.count == 4, let mm = Int(text.prefix(2)), let yy = Int(text.suffix(2)) else { return true }
        let year = yy < 50 ? 2000 + yy : 1900 + yy
        return (year, mm) < (today.year, today.month)
    }

    // MARK: Static data to be authenticated

    /// Book 2 §5.4 and Book 3 §10.3: the records the AFL marks for ODA — for SFI 1–10 the value
    /// of the record template 70 (tag and length left out), for SFI 11–30 the whole record — then
    /// the values the static data authentication tag list names (only the AIP is allowed).
    public static func staticData(records: [(sfi: Int, record: [UInt8])], aip: [UInt8], tagList: [UInt8]?) throws(ODAFailure) -> [UInt8] {
        var out: [UInt8] = []
        for (sfi, record) in records {
            if sfi <= 10 {
                guard let items = try? TLV.parse(record), items.count == 1, items[0].tag == 0x70 else {
                    throw ODAFailure("signed record", "an SFI \(sfi) record marked for ODA is not one record template 70 (Book 3 §10.3)")
                }
                out += items[0].value
            } else {
                out += record
            }
        }
        if let tagList {
            guard tagList == [0x82] else {
                throw ODAFailure("static data authentication tag list", "9F4A is \(Hex.encode(tagList)); it may only name 82, the AIP (Book 3 §10.3)")
            }
            out += aip
        }
        return out
    }

    // MARK: Recovery (the terminal)

    private static func recover(_ certificate: [UInt8], with key: RSAPublicKey, what: String, format: UInt8) throws(ODAFailure) -> [UInt8] {
        guard certificate.count == key.length else {
            throw ODAFailure("\(what) length", "is \(certificate.count) bytes; the key that signed it is \(key.length) bytes")
        }
        guard let recovered = key.recover(certificate) else {
            throw ODAFailure("\(what) recovery", "libcrypto could not compute it")
        }
        // Header and trailer are one check here (Book 2 makes them two steps): garbage from a
        // wrong key or a spoilt signature fails it whichever byte happens to come out right.
        guard recovered.last == 0xBC, recovered.first == 0x6A else {
            throw ODAFailure("\(what) recovered data", "starts \(Hex.encode([recovered[0]])) and ends \(Hex.encode([recovered.last!])), not 6A … BC (wrong key or corrupt signature)")
        }
        guard recovered[1] == format else {
            throw ODAFailure("\(what) format", "is \(Hex.encode([recovered[1]])), not \(Hex.encode([format]))")
        }
        return recovered
    }

    /// The hash over the recovered fields and `extra`, fed in pieces: certificates are hundreds of
    /// bytes, and copying them into one buffer cost more than hashing them.
    private static func checkHash(_ recovered: [UInt8], extra: [UInt8]?..., what: String) throws(ODAFailure) {
        let n = recovered.count
        var hasher = Insecure.SHA1()
        hasher.update(data: recovered[1..<(n - 21)])
        for part in extra { if let part { hasher.update(data: part) } }
        guard hasher.finalize().elementsEqual(recovered[(n - 21)..<(n - 1)]) else {
            throw ODAFailure("\(what) hash", "the SHA-1 in the recovered data does not match the data it covers")
        }
    }

    /// Book 2 §5.3 (and §6.3): recovers and checks the issuer public key certificate (90) under
    /// the CA key, with its remainder (92) and exponent (9F32), for a card with `pan` on `today`.
    public static func recoverIssuerKey(certificate: [UInt8], remainder: [UInt8]?, exponent: [UInt8], ca: CAPublicKey, pan: String,
                                        today: ODADate, revoked: [RevokedCertificate] = []) throws(ODAFailure) -> IssuerCertificate {
        let r = try recover(certificate, with: ca.key, what: "issuer certificate", format: 0x02)
        let n = r.count
        // A key longer than the certificate's room needs all of its remainder, before the hash that covers it.
        try checkRemainder(length: Int(r[13]), room: n - 36, remainder: remainder, what: "issuer")
        try checkHash(r, extra: remainder, exponent, what: "issuer certificate")
        guard let identifier = digits(r[2..<6]), (3...8).contains(identifier.count), pan.hasPrefix(identifier) else {
            throw ODAFailure("issuer identifier", "\(Hex.encode(Array(r[2..<6]))) does not match the leftmost digits of the PAN")
        }
        let expiry = Array(r[6..<8])
        let serial = Array(r[8..<11])
        let key = try assembleKey(length: Int(r[13]), exponentLength: Int(r[14]), leftmost: Array(r[15..<(n - 21)]), remainder: remainder,
                                  exponent: exponent, what: "issuer")
        let certificate = IssuerCertificate(issuerIdentifier: identifier, expiry: Hex.encode(expiry), serial: serial, key: key)
        func fail(_ check: String, _ detail: String) -> ODAFailure {
            var failure = ODAFailure(check, detail)
            failure.issuer = certificate
            return failure
        }
        guard !expired(expiry, today: today) else {
            throw fail("issuer certificate expiry", "expired \(Hex.encode(expiry)) (MMYY), before the transaction date \(today)")
        }
        if revoked.contains(RevokedCertificate(rid: ca.rid, index: ca.index, serial: serial)) {
            throw fail("issuer certificate revoked", "serial \(Hex.encode(serial)) under CA \(Hex.encode(ca.rid)) \(Hex.encode([ca.index])) is on the revocation list")
        }
        guard r[11] == 0x01, r[12] == 0x01 else {
            throw fail("issuer certificate algorithm", "hash \(Hex.encode([r[11]])) / key \(Hex.encode([r[12]])) are not SHA-1 (01) / RSA (01)")
        }
        return certificate
    }

    /// Book 2 §6.4: recovers and checks the ICC public key certificate (9F46) under the issuer key,
    /// with its remainder (9F48), exponent (9F47) and the static data to be authenticated.
    public static func recoverICCKey(certificate: [UInt8], remainder: [UInt8]?, exponent: [UInt8], issuer: RSAPublicKey, pan: String,
                                     staticData: [UInt8], today: ODADate) throws(ODAFailure) -> ICCCertificate {
        let r = try recover(certificate, with: issuer, what: "ICC certificate", format: 0x04)
        let n = r.count
        try checkRemainder(length: Int(r[19]), room: n - 42, remainder: remainder, what: "ICC")
        try checkHash(r, extra: remainder, exponent, staticData, what: "ICC certificate")
        guard let certificatePAN = digits(r[2..<12]), certificatePAN == pan else {
            throw ODAFailure("ICC certificate PAN", "the certificate's PAN does not match the card's (5A)")
        }
        let expiry = Array(r[12..<14])
        let key = try assembleKey(length: Int(r[19]), exponentLength: Int(r[20]), leftmost: Array(r[21..<(n - 21)]), remainder: remainder,
                                  exponent: exponent, what: "ICC")
        let certificate = ICCCertificate(pan: certificatePAN, expiry: Hex.encode(expiry), serial: Array(r[14..<17]), key: key)
        func fail(_ check: String, _ detail: String) -> ODAFailure {
            var failure = ODAFailure(check, detail)
            failure.icc = certificate
            return failure
        }
        guard !expired(expiry, today: today) else {
            throw fail("ICC certificate expiry", "expired \(Hex.encode(expiry)) (MMYY), before the transaction date \(today)")
        }
        guard r[17] == 0x01, r[18] == 0x01 else {
            throw fail("ICC certificate algorithm", "hash \(Hex.encode([r[17]])) / key \(Hex.encode([r[18]])) are not SHA-1 (01) / RSA (01)")
        }
        return certificate
    }

    private static func checkRemainder(length: Int, room: Int, remainder: [UInt8]?, what: String) throws(ODAFailure) {
        guard length > room else { return }
        guard let remainder, remainder.count == length - room else {
            let tag = what == "issuer" ? "92" : "9F48"
            throw ODAFailure("\(what) key remainder", "the \(length)-byte key needs \(length - room) bytes in \(tag); the card gives \(remainder?.count ?? 0)",
                             missingData: remainder == nil)
        }
    }

    private static func assembleKey(length: Int, exponentLength: Int, leftmost: [UInt8], remainder: [UInt8]?, exponent: [UInt8],
                                    what: String) throws(ODAFailure) -> RSAPublicKey {
        guard exponentLength == exponent.count else {
            throw ODAFailure("\(what) key exponent", "the certificate gives \(exponentLength) bytes; the card's exponent is \(exponent.count)")
        }
        // checkRemainder has made sure a key longer than the room has all of its remainder.
        if length <= leftmost.count {
            return RSAPublicKey(modulus: Array(leftmost.prefix(length)), exponent: exponent)
        }
        return RSAPublicKey(modulus: leftmost + (remainder ?? []), exponent: exponent)
    }

    /// Book 2 §5.4: checks the signed static application data (93) and returns the data
    /// authentication code (9F45).
    public static func verifyStaticSignature(_ signature: [UInt8], issuer: RSAPublicKey, staticData: [UInt8]) throws(ODAFailure) -> [UInt8] {
        let r = try recover(signature, with: issuer, what: "signed static data", format: 0x03)
        guard r[2] == 0x01 else { throw ODAFailure("signed static data algorithm", "hash algorithm \(Hex.encode([r[2]])) is not SHA-1 (01)") }
        try checkHash(r, extra: staticData, what: "signed static data")
        return Array(r[3..<5])
    }

    /// Book 2 §6.5 (DDA) and §6.6 (CDA): checks signed dynamic application data (9F4B) under the
    /// ICC key against the terminal dynamic data (the DDOL data, or for CDA the unpredictable
    /// number) and returns the ICC dynamic data it carries.
    public static func verifyDynamicSignature(_ signature: [UInt8], icc: RSAPublicKey, terminalData: [UInt8]) throws(ODAFailure) -> [UInt8] {
        let r = try recover(signature, with: icc, what: "signed dynamic data", format: 0x05)
        guard r[2] == 0x01 else { throw ODAFailure("signed dynamic data algorithm", "hash algorithm \(Hex.encode([r[2]])) is not SHA-1 (01)") }
        let length = Int(r[3])
        guard length >= 3, 4 + length <= r.count - 21 else {
            throw ODAFailure("signed dynamic data format", "ICC dynamic data length \(length) does not fit the signature")
        }
        try checkHash(r, extra: terminalData, what: "signed dynamic data")
        return Array(r[4..<(4 + length)])
    }

    /// DDA: the ICC dynamic number (9F4C) out of the ICC dynamic data.
    public static func dynamicNumber(_ dynamicData: [UInt8]) throws(ODAFailure) -> [UInt8] {
        guard let first = dynamicData.first, (2...8).contains(Int(first)), dynamicData.count >= 1 + Int(first) else {
            throw ODAFailure("ICC dynamic number", "the ICC dynamic data does not start with a 2–8 byte dynamic number")
        }
        return Array(dynamicData[1...Int(first)])
    }

    /// Book 2 §6.6.2: checks a CDA signature from a GENERATE AC response. `hashInput` is the
    /// PDOL data, the CDOL data sent, and the response's data objects except 9F4B; `cid` the 9F27
    /// the card returned. Returns the dynamic number, CID and cryptogram the signature carries.
    public static func verifyCombinedSignature(_ signature: [UInt8], icc: RSAPublicKey, unpredictableNumber: [UInt8], cid: UInt8,
                                               hashInput: [UInt8]) throws(ODAFailure) -> DynamicSignature {
        let dynamic = try verifyDynamicSignature(signature, icc: icc, terminalData: unpredictableNumber)
        let number = try dynamicNumber(dynamic)
        let rest = Array(dynamic.dropFirst(1 + number.count))
        guard rest.count >= 29 else { throw ODAFailure("CDA dynamic data", "holds \(rest.count) bytes after the dynamic number; CID, cryptogram and hash need 29") }
        guard rest[0] == cid else {
            throw ODAFailure("CDA cryptogram information data", "the signature says \(Hex.encode([rest[0]])), the response's 9F27 says \(Hex.encode([cid]))")
        }
        guard Array(rest[9..<29]) == sha1(hashInput) else {
            throw ODAFailure("CDA transaction data hash", "does not match the PDOL, CDOL and response data the terminal hashed")
        }
        return DynamicSignature(dynamicNumber: number, cryptogramInformationData: rest[0], cryptogram: Array(rest[1..<9]))
    }

    // MARK: Building (the bench CA, the personalisation, the card)

    private static func sign(_ fields: [UInt8], extra: [UInt8], key: RSAPrivateKey) throws(EMVError) -> [UInt8] {
        try key.sign([0x6A] + fields + sha1(fields + extra) + [0xBC])
    }

    /// Splits a public key into the part that fits a certificate (padded with BB) and the remainder.
    private static func split(_ modulus: [UInt8], room: Int) -> (leftmost: [UInt8], remainder: [UInt8]?) {
        if modulus.count <= room { return (modulus + [UInt8](repeating: 0xBB, count: room - modulus.count), nil) }
        return (Array(modulus.prefix(room)), Array(modulus.dropFirst(room)))
    }

    /// Book 2 Table 13: the issuer public key certificate a CA signs, and the remainder (92) when
    /// the issuer modulus is longer than N_CA − 36.
    public static func makeIssuerCertificate(ca: RSAPrivateKey, issuer: RSAPublicKey, issuerIdentifier: String, expiry: String,
                                             serial: [UInt8]) throws(EMVError) -> (certificate: [UInt8], remainder: [UInt8]?) {
        guard (3...8).contains(issuerIdentifier.count), issuerIdentifier.allSatisfy(\.isNumber) else {
            throw EMVError(field: "issuer identifier", rule: "must be the leftmost 3–8 PAN digits, got '\(issuerIdentifier)'")
        }
        guard issuer.length <= ca.modulus.count else { throw EMVError(field: "issuer key", rule: "is longer than the CA key (Book 2 §5.1: N_I ≤ N_CA)") }
        let (leftmost, remainder) = split(issuer.modulus, room: ca.modulus.count - 36)
        let fields: [UInt8] = [0x02] + compressedNumeric(issuerIdentifier, length: 4) + (try mmyy(expiry)) + (try three(serial))
            + [0x01, 0x01, UInt8(issuer.length), UInt8(issuer.exponent.count)] + leftmost
        return (try sign(fields, extra: (remainder ?? []) + issuer.exponent, key: ca), remainder)
    }

    /// Book 2 Table 14: the ICC public key certificate an issuer signs over the card's PAN, key
    /// and static data, and the remainder (9F48).
    public static func makeICCCertificate(issuer: RSAPrivateKey, icc: RSAPublicKey, pan: String, expiry: String, serial: [UInt8],
                                          staticData: [UInt8]) throws(EMVError) -> (certificate: [UInt8], remainder: [UInt8]?) {
        guard icc.length <= issuer.modulus.count else { throw EMVError(field: "ICC key", rule: "is longer than the issuer key (Book 2 §6.1: N_IC ≤ N_I)") }
        guard (12...19).contains(pan.count), pan.allSatisfy(\.isNumber) else { throw EMVError(field: "pan", rule: "must be 12–19 digits") }
        let (leftmost, remainder) = split(icc.modulus, room: issuer.modulus.count - 42)
        let fields: [UInt8] = [0x04] + compressedNumeric(pan, length: 10) + (try mmyy(expiry)) + (try three(serial))
            + [0x01, 0x01, UInt8(icc.length), UInt8(icc.exponent.count)] + leftmost
        return (try sign(fields, extra: (remainder ?? []) + icc.exponent + staticData, key: issuer), remainder)
    }

    /// Book 2 Table 7: the signed static application data (93) over the static data, with a data
    /// authentication code.
    public static func makeStaticSignature(issuer: RSAPrivateKey, dataAuthenticationCode: [UInt8], staticData: [UInt8]) throws(EMVError) -> [UInt8] {
        guard dataAuthenticationCode.count == 2 else { throw EMVError(field: "data authentication code", rule: "must be 2 bytes") }
        let fields: [UInt8] = [0x03, 0x01] + dataAuthenticationCode + [UInt8](repeating: 0xBB, count: issuer.modulus.count - 26)
        return try sign(fields, extra: staticData, key: issuer)
    }

    /// Book 2 Table 17: signed dynamic application data over ICC dynamic data and the terminal's.
    public static func makeDynamicSignature(icc: RSAPrivateKey, dynamicData: [UInt8], terminalData: [UInt8]) throws(EMVError) -> [UInt8] {
        guard dynamicData.count <= icc.modulus.count - 25 else {
            throw EMVError(field: "ICC dynamic data", rule: "is \(dynamicData.count) bytes; a \(icc.modulus.count)-byte key holds \(icc.modulus.count - 25)")
        }
        let fields: [UInt8] = [0x05, 0x01, UInt8(dynamicData.count)] + dynamicData
            + [UInt8](repeating: 0xBB, count: icc.modulus.count - dynamicData.count - 25)
        return try sign(fields, extra: terminalData, key: icc)
    }

    /// Book 2 Table 19: the ICC dynamic data of a CDA signature.
    public static func combinedDynamicData(dynamicNumber: [UInt8], cid: UInt8, cryptogram: [UInt8], hashInput: [UInt8]) -> [UInt8] {
        [UInt8(dynamicNumber.count)] + dynamicNumber + [cid] + cryptogram + sha1(hashInput)
    }

    private static func mmyy(_ text: String) throws(EMVError) -> [UInt8] {
        guard text.count == 4, let bytes = try? Hex.decode(text), let d = digits(bytes), d.count == 4, let m = Int(d.prefix(2)), (1...12).contains(m) else {
            throw EMVError(field: "certificate expiry", rule: "must be MMYY, got '\(text)'")
        }
        return bytes
    }

    private static func three(_ serial: [UInt8]) throws(EMVError) -> [UInt8] {
        guard serial.count == 3 else { throw EMVError(field: "certificate serial", rule: "must be 3 bytes, got \(serial.count)") }
        return serial
    }
}
