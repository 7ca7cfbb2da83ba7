import Foundation
import Testing
@testable import EMV

/// Known answers made by an independent oracle (Tests/Oracle/oda_oracle.py: `cryptography` for
/// keys, plain `pow` and `hashlib` for the rest, no EMV library), in
/// Fixtures/oda-vectors.json: cardbench must recover every object to the oracle's fields, build
/// byte-identical certificates and signatures from the same keys (unpadded RSA is
/// deterministic), and fail each spoilt object on the check the oracle spoilt.
@Suite("Offline data authentication: Book 2 recoveries and signatures against the oracle's vectors")
struct ODAVectorTests {
    struct Vectors: Decodable {
        struct Key: Decodable { let modulus: String; let publicExponent: String; let privateExponent: String }
        struct CA: Decodable { let rid: String; let index: String; let modulus: String; let publicExponent: String; let privateExponent: String; let checksum: String }
        struct Certificate: Decodable {
            let issuer: String
            let icc: String?
            let expiry: String
            let serial: String
            let issuerIdentifierDigits: Int?
            let tags: [String: String?]
        }
        struct SSAD: Decodable {
            let issuer: String
            let dac: String
            let value: String
            enum CodingKeys: String, CodingKey { case issuer, dac, value = "93" }
        }
        struct DDA: Decodable {
            let icc: String
            let iccDynamicNumber: String
            let ddolData: String
            let sdad: String
            enum CodingKeys: String, CodingKey { case icc, iccDynamicNumber, ddolData, sdad = "9F4B" }
        }
        struct CDA: Decodable {
            let icc: String
            let un: String
            let tdhcInput: String
            let iccDynamicNumber: String
            let cid: String
            let ac: String
            let sdad: String
            enum CodingKeys: String, CodingKey { case icc, un, tdhcInput, iccDynamicNumber, cid, ac, sdad = "9F4B" }
        }
        struct Failure: Decodable {
            let object: String
            let check: String?
            let description: String
            let today: String?
            let issuer: String?
            let icc: String?
            let staticData: String?
            let ddolData: String?
            let un: String?
            let cid: String?
            let tdhcInput: String?
            let tags: [String: String?]
        }
        struct Failures: Decodable { let failing: [Failure]; let passing: [Failure] }
        let pan: String
        let today: String
        let staticData: String
        let ca: CA
        let keys: [String: Key]
        let issuerCertificates: [Certificate]
        let iccCertificates: [Certificate]
        let ssad: [SSAD]
        let dda: [DDA]
        let cda: [CDA]
        let failures: Failures
    }

    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/oda-vectors.json")
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }()

    static func hex(_ s: String?) -> [UInt8]? { s.flatMap { $0.isEmpty ? nil : try! Hex.decode($0) } }
    static func key(_ name: String) -> RSAPrivateKey {
        let k = vectors.keys[name]!
        return RSAPrivateKey(modulus: hex(k.modulus)!, publicExponent: hex(k.publicExponent)!, privateExponent: hex(k.privateExponent)!)
    }
    static var caPrivate: RSAPrivateKey {
        RSAPrivateKey(modulus: hex(vectors.ca.modulus)!, publicExponent: hex(vectors.ca.publicExponent)!, privateExponent: hex(vectors.ca.privateExponent)!)
    }
    static var ca: CAPublicKey {
        CAPublicKey(rid: hex(vectors.ca.rid)!, index: hex(vectors.ca.index)![0], key: caPrivate.publicKey, expiry: ODADate(year: 2035, month: 12, day: 31))
    }
    static func date(_ s: String) -> ODADate { ODADate(bcd: hex(s)!)! }
    static var staticData: [UInt8] { hex(vectors.staticData)! }

    @Test("the CA key's check value is the oracle's")
    func checksum() {
        #expect(Hex.encode(Self.ca.checksum) == Self.vectors.ca.checksum)
    }

    @Test("issuer certificates: recovered to the oracle's fields, and built byte for byte", arguments: vectors.issuerCertificates.indices)
    func issuerCertificate(_ i: Int) throws {
        let c = Self.vectors.issuerCertificates[i]
        let issuer = Self.key(c.issuer)
        let recovered = try ODA.recoverIssuerKey(certificate: Self.hex(c.tags["90"]!)!, remainder: Self.hex(c.tags["92"] ?? nil),
                                                 exponent: Self.hex(c.tags["9F32"]!)!, ca: Self.ca, pan: Self.vectors.pan, today: Self.date(Self.vectors.today))
        #expect(recovered.key == issuer.publicKey)
        #expect(recovered.expiry == c.expiry)
        #expect(Hex.encode(recovered.serial) == c.serial)
        #expect(recovered.issuerIdentifier == String(Self.vectors.pan.prefix(c.issuerIdentifierDigits!)))
        let built = try ODA.makeIssuerCertificate(ca: Self.caPrivate, issuer: issuer.publicKey, issuerIdentifier: recovered.issuerIdentifier,
                                                  expiry: c.expiry, serial: Self.hex(c.serial)!)
        #expect(Hex.encode(built.certificate) == c.tags["90"]!!)
        #expect(built.remainder.map(Hex.encode) == c.tags["92"] ?? nil)
    }

    @Test("ICC certificates: recovered under each issuer key, and built byte for byte", arguments: vectors.iccCertificates.indices)
    func iccCertificate(_ i: Int) throws {
        let c = Self.vectors.iccCertificates[i]
        let issuer = Self.key(c.issuer), icc = Self.key(c.icc!)
        let recovered = try ODA.recoverICCKey(certificate: Self.hex(c.tags["9F46"]!)!, remainder: Self.hex(c.tags["9F48"] ?? nil),
                                              exponent: Self.hex(c.tags["9F47"]!)!, issuer: issuer.publicKey, pan: Self.vectors.pan,
                                              staticData: Self.staticData, today: Self.date(Self.vectors.today))
        #expect(recovered.key == icc.publicKey)
        #expect(recovered.pan == Self.vectors.pan && recovered.expiry == c.expiry && Hex.encode(recovered.serial) == c.serial)
        let built = try ODA.makeICCCertificate(issuer: issuer, icc: icc.publicKey, pan: Self.vectors.pan, expiry: c.expiry, serial: Self.hex(c.serial)!,
                                               staticData: Self.staticData)
        #expect(Hex.encode(built.certificate) == c.tags["9F46"]!!)
        #expect(built.remainder.map(Hex.encode) == c.tags["9F48"] ?? nil)
    }

    @Test("signed static application data: the DAC recovered, the signature rebuilt", arguments: vectors.ssad.indices)
    func ssad(_ i: Int) throws {
        let s = Self.vectors.ssad[i]
        let issuer = Self.key(s.issuer)
        #expect(Hex.encode(try ODA.verifyStaticSignature(Self.hex(s.value)!, issuer: issuer.publicKey, staticData: Self.staticData)) == s.dac)
        #expect(Hex.encode(try ODA.makeStaticSignature(issuer: issuer, dataAuthenticationCode: Self.hex(s.dac)!, staticData: Self.staticData)) == s.value)
    }

    @Test("DDA's signed dynamic data: the dynamic number recovered, the signature rebuilt", arguments: vectors.dda.indices)
    func dda(_ i: Int) throws {
        let d = Self.vectors.dda[i]
        let icc = Self.key(d.icc)
        let dynamic = try ODA.verifyDynamicSignature(Self.hex(d.sdad)!, icc: icc.publicKey, terminalData: Self.hex(d.ddolData)!)
        #expect(Hex.encode(try ODA.dynamicNumber(dynamic)) == d.iccDynamicNumber)
        let number = Self.hex(d.iccDynamicNumber)!
        #expect(Hex.encode(try ODA.makeDynamicSignature(icc: icc, dynamicData: [UInt8(number.count)] + number, terminalData: Self.hex(d.ddolData)!)) == d.sdad)
    }

    @Test("CDA's signature: cryptogram and CID recovered, the transaction data hash checked, the signature rebuilt", arguments: vectors.cda.indices)
    func cda(_ i: Int) throws {
        let c = Self.vectors.cda[i]
        let icc = Self.key(c.icc)
        let cid = Self.hex(c.cid)![0]
        let signed = try ODA.verifyCombinedSignature(Self.hex(c.sdad)!, icc: icc.publicKey, unpredictableNumber: Self.hex(c.un)!, cid: cid,
                                                     hashInput: Self.hex(c.tdhcInput)!)
        #expect(Hex.encode(signed.cryptogram ?? []) == c.ac && Hex.encode(signed.dynamicNumber) == c.iccDynamicNumber)
        let dynamic = ODA.combinedDynamicData(dynamicNumber: Self.hex(c.iccDynamicNumber)!, cid: cid, cryptogram: Self.hex(c.ac)!,
                                              hashInput: Self.hex(c.tdhcInput)!)
        #expect(Hex.encode(try ODA.makeDynamicSignature(icc: icc, dynamicData: dynamic, terminalData: Self.hex(c.un)!)) == c.sdad)
    }

    /// The oracle's check names and cardbench's (`ODAFailure.check`) for the same Book 2 step.
    static let checkNames: [String: String] = [
        "issuer-trailer": "issuer certificate recovered data", "issuer-header": "issuer certificate recovered data", "issuer-format": "issuer certificate format",
        "issuer-hash-algorithm": "issuer certificate algorithm", "issuer-pk-algorithm": "issuer certificate algorithm",
        "issuer-hash": "issuer certificate hash", "issuer-id": "issuer identifier", "issuer-expired": "issuer certificate expiry",
        "issuer-remainder-missing": "issuer key remainder", "issuer-cert-length": "issuer certificate length",
        "icc-trailer": "ICC certificate recovered data", "icc-header": "ICC certificate recovered data", "icc-format": "ICC certificate format",
        "icc-hash-algorithm": "ICC certificate algorithm", "icc-pk-algorithm": "ICC certificate algorithm", "icc-hash": "ICC certificate hash",
        "icc-pan": "ICC certificate PAN", "icc-expired": "ICC certificate expiry", "icc-cert-length": "ICC certificate length",
        "icc-remainder-missing": "ICC key remainder",
        "ssad-trailer": "signed static data recovered data", "ssad-header": "signed static data recovered data", "ssad-format": "signed static data format",
        "ssad-hash-algorithm": "signed static data algorithm", "ssad-hash": "signed static data hash", "ssad-length": "signed static data length",
        "dda-trailer": "signed dynamic data recovered data", "dda-header": "signed dynamic data recovered data", "dda-format": "signed dynamic data format",
        "dda-hash-algorithm": "signed dynamic data algorithm", "dda-hash": "signed dynamic data hash", "dda-dynamic-data": "ICC dynamic number",
        "dda-sdad-length": "signed dynamic data length",
        "cda-trailer": "signed dynamic data recovered data", "cda-header": "signed dynamic data recovered data", "cda-format": "signed dynamic data format",
        "cda-hash-algorithm": "signed dynamic data algorithm", "cda-hash": "signed dynamic data hash", "cda-dynamic-data": "CDA dynamic data",
        "cda-cid": "CDA cryptogram information data", "cda-tdhc": "CDA transaction data hash", "cda-sdad-length": "signed dynamic data length",
    ]

    /// Runs one of the oracle's spoilt (or valid) objects through the matching recovery.
    static func run(_ f: Vectors.Failure) throws(ODAFailure) {
        let tags = f.tags.compactMapValues { hex($0) }
        let today = date(f.today ?? vectors.today)
        switch f.object {
        case "issuer":
            _ = try ODA.recoverIssuerKey(certificate: tags["90"]!, remainder: tags["92"], exponent: tags["9F32"]!, ca: ca, pan: vectors.pan, today: today)
        case "icc":
            _ = try ODA.recoverICCKey(certificate: tags["9F46"]!, remainder: tags["9F48"], exponent: tags["9F47"]!, issuer: key(f.issuer!).publicKey,
                                      pan: vectors.pan, staticData: hex(f.staticData)!, today: today)
        case "ssad":
            _ = try ODA.verifyStaticSignature(tags["93"]!, issuer: key(f.issuer!).publicKey, staticData: hex(f.staticData)!)
        case "dda":
            _ = try ODA.dynamicNumber(try ODA.verifyDynamicSignature(tags["9F4B"]!, icc: key(f.icc!).publicKey, terminalData: hex(f.ddolData)!))
        default:
            _ = try ODA.verifyCombinedSignature(tags["9F4B"]!, icc: key(f.icc!).publicKey, unpredictableNumber: hex(f.un)!, cid: hex(f.cid)![0],
                                                hashInput: hex(f.tdhcInput)!)
        }
    }

    /// The `*-data-missing` vectors leave a tag out: the kernel's concern (kernel tests), not a recovery's.
    static let spoilt = vectors.failures.failing.filter { !($0.check ?? "").hasSuffix("-data-missing") }

    @Test("every spoilt object fails on the check the oracle spoilt", arguments: spoilt.indices)
    func failure(_ i: Int) {
        let f = Self.spoilt[i]
        let wanted = Self.checkNames[f.check!]
        #expect(wanted != nil, "no mapping for the oracle's \(f.check!)")
        do throws(ODAFailure) {
            try Self.run(f)
            Issue.record("\(f.object) \(f.description): passed, expected \(wanted ?? "") to fail")
        } catch {
            #expect(error.check == wanted, "\(f.object) \(f.description): \(error)")
        }
    }

    @Test("an issuer certificate is valid through the last day of its expiry month")
    func lastValidDay() throws {
        for f in Self.vectors.failures.passing { try Self.run(f) }
        #expect(!Self.vectors.failures.passing.isEmpty)
    }
}

@Suite("Offline data authentication: inputs cardbench refuses or builds")
struct ODARulesTests {
    @Test("static data: record templates of SFI 1–10 by value, SFI 11+ whole, then the AIP when 9F4A names it; anything else fails")
    func staticData() throws {
        let record = TLV(0x70, children: [TLV(0x5A, [0x47, 0x61])]).encoded()
        #expect(try ODA.staticData(records: [(2, record)], aip: [0x7C, 0x00], tagList: nil) == [0x5A, 0x02, 0x47, 0x61])
        #expect(try ODA.staticData(records: [(11, record)], aip: [0x7C, 0x00], tagList: [0x82]) == record + [0x7C, 0x00])
        #expect(throws: ODAFailure.self) { try ODA.staticData(records: [(2, [0x71, 0x00])], aip: [], tagList: nil) }
        do throws(ODAFailure) {
            _ = try ODA.staticData(records: [(2, record)], aip: [0x7C, 0x00], tagList: [0x9F, 0x37])
            Issue.record("9F4A naming 9F37 was accepted")
        } catch {
            #expect(error.check == "static data authentication tag list")
        }
    }

    @Test("a revoked issuer certificate fails its own check, after the hash, with its fields kept")
    func revocation() throws {
        let ca = try RSAPrivateKey.generate(bits: 1024)
        let issuer = try RSAPrivateKey.generate(bits: 1024)
        let capk = CAPublicKey(rid: [0xA0, 0, 0, 0, 0x03], index: 0xB0, key: ca.publicKey, expiry: ODADate(year: 2035, month: 12, day: 31))
        let (certificate, remainder) = try ODA.makeIssuerCertificate(ca: ca, issuer: issuer.publicKey, issuerIdentifier: "476173", expiry: "1230",
                                                                     serial: [1, 2, 3])
        #expect(remainder != nil)  // 128 bytes do not fit a 1024-bit certificate's 92
        let today = ODADate(year: 2026, month: 1, day: 1)
        _ = try ODA.recoverIssuerKey(certificate: certificate, remainder: remainder, exponent: [3], ca: capk, pan: "4761739001010010", today: today)
        do throws(ODAFailure) {
            _ = try ODA.recoverIssuerKey(certificate: certificate, remainder: remainder, exponent: [3], ca: capk, pan: "4761739001010010", today: today,
                                         revoked: [RevokedCertificate(rid: capk.rid, index: 0xB0, serial: [1, 2, 3])])
            Issue.record("a revoked certificate was accepted")
        } catch {
            #expect(error.check == "issuer certificate revoked")
            #expect(error.issuer?.serial == [1, 2, 3])
        }
    }

    @Test("libcrypto's keys: the size asked, odd, and their halves match")
    func generatedKeys() throws {
        for (bits, e) in [(1152, UInt32(3)), (1024, UInt32(65537))] {
            let k = try RSAPrivateKey.generate(bits: bits, exponent: e)
            #expect(k.publicKey.bits == bits && k.modulus.count == bits / 8 && k.modulus.last! & 1 == 1)
            let m = [UInt8](repeating: 0x6A, count: k.modulus.count - 1) + [0xBC]
            #expect(k.publicKey.recover(try k.sign(m)) == m)
        }
        #expect(throws: EMVError.self) { try RSAPrivateKey.generate(bits: 1001) }
        #expect(throws: EMVError.self) { try RSAPrivateKey.generate(bits: 1024, exponent: 17) }
    }

    @Test("the builders refuse what Book 2 does not allow")
    func builderRules() throws {
        let small = try RSAPrivateKey.generate(bits: 768), big = try RSAPrivateKey.generate(bits: 1024)
        #expect(throws: EMVError.self) { try ODA.makeIssuerCertificate(ca: small, issuer: big.publicKey, issuerIdentifier: "476173", expiry: "1230", serial: [0, 0, 1]) }
        #expect(throws: EMVError.self) { try ODA.makeIssuerCertificate(ca: big, issuer: small.publicKey, issuerIdentifier: "47", expiry: "1230", serial: [0, 0, 1]) }
        #expect(throws: EMVError.self) { try ODA.makeIssuerCertificate(ca: big, issuer: small.publicKey, issuerIdentifier: "476173", expiry: "1330", serial: [0, 0, 1]) }
        #expect(throws: EMVError.self) { try ODA.makeICCCertificate(issuer: small, icc: big.publicKey, pan: "4761739001010010", expiry: "1230", serial: [0, 0, 1], staticData: []) }
        #expect(throws: EMVError.self) { try ODA.makeDynamicSignature(icc: small, dynamicData: [UInt8](repeating: 1, count: 80), terminalData: []) }
    }
}

/// cardbench's certificates and signatures, made with fresh libcrypto keys of every size the
/// bench uses, checked by the independent oracle (`oda_oracle.py verify`: plain `pow` and
/// `hashlib`). Any difference in a field, a hash input or a padding fails.
@Suite("Offline data authentication: cardbench's objects verified by the Python oracle")
struct ODAOracleCrossCheckTests {
    struct Input: Encodable {
        struct CAPK: Encodable { let rid: String; let index: String; let modulus: String; let exponent: String }
        let capk: CAPK
        let pan: String
        let today: String
        let tags: [String: String]
        let static_data: String
        let ddol_data: String?
        let un: String?
        let tdhc_input: String?
    }

    // Two combinations: every remainder (92 and 9F48) and both exponents. Key generation (e = 3
    // especially) takes seconds on a loaded machine; the vectors cover the other sizes.
    @Test("issuer and ICC certificates, signed static data, DDA and CDA signatures", arguments: [
        (1984, 1984, 1408, UInt32(3)), (1408, 1152, 1024, 65537),
    ])
    func crossCheck(caBits: Int, issuerBits: Int, iccBits: Int, exponent: UInt32) throws {
        let ca = try RSAPrivateKey.generate(bits: caBits)
        let issuer = try RSAPrivateKey.generate(bits: issuerBits, exponent: exponent)
        let icc = try RSAPrivateKey.generate(bits: iccBits, exponent: exponent)
        let pan = "5413330089604004"
        let staticData = try Hex.decode("5A0854133300896040045F24032909305F25032001019F0702FF009F08020002") + [0x7D, 0x00]
        let (cert, rem) = try ODA.makeIssuerCertificate(ca: ca, issuer: issuer.publicKey, issuerIdentifier: "541333", expiry: "1230", serial: [0, 0, 7])
        let (iccCert, iccRem) = try ODA.makeICCCertificate(issuer: issuer, icc: icc.publicKey, pan: pan, expiry: "1229", serial: [0, 0, 8],
                                                           staticData: staticData)
        let ssad = try ODA.makeStaticSignature(issuer: issuer, dataAuthenticationCode: [0xDA, 0xC0], staticData: staticData)
        let ddolData: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        let dda = try ODA.makeDynamicSignature(icc: icc, dynamicData: [8, 1, 2, 3, 4, 5, 6, 7, 8], terminalData: ddolData)
        let hashInput = try Hex.decode("0000000010000000000000000484") + TLV(0x9F27, [0x80]).encoded() + TLV(0x9F36, [0, 2]).encoded()
        let cda = try ODA.makeDynamicSignature(icc: icc, dynamicData: ODA.combinedDynamicData(dynamicNumber: [9, 9, 9, 9], cid: 0x80,
                                               cryptogram: [1, 2, 3, 4, 5, 6, 7, 8], hashInput: hashInput), terminalData: ddolData)
        var tags = ["90": Hex.encode(cert), "9F32": Hex.encode(issuer.publicExponent), "93": Hex.encode(ssad), "9F46": Hex.encode(iccCert),
                    "9F47": Hex.encode(icc.publicExponent), "9F4B": Hex.encode(dda)]
        if let rem { tags["92"] = Hex.encode(rem) }
        if let iccRem { tags["9F48"] = Hex.encode(iccRem) }
        let capk = Input.CAPK(rid: "A000000004", index: "B0", modulus: Hex.encode(ca.modulus), exponent: Hex.encode(ca.publicExponent))
        func verify(_ tags: [String: String], ddol: String?, un: String?, tdhc: String?) throws -> [String: JSONValue] {
            try Oracle.run(script: "oda_oracle.py", arguments: ["verify"],
                           input: Input(capk: capk, pan: pan, today: "260115", tags: tags, static_data: Hex.encode(staticData), ddol_data: ddol,
                                        un: un, tdhc_input: tdhc), as: [String: JSONValue].self)
        }
        let dynamic = try verify(tags, ddol: Hex.encode(ddolData), un: nil, tdhc: nil)
        for part in ["issuer", "icc", "ssad", "sdad"] {
            #expect(dynamic[part]?["error"] == nil, "\(part): \(String(describing: dynamic[part]))")
        }
        #expect(dynamic["ssad"]?["dac"] == .string("DAC0"))
        var combined = tags
        combined["9F4B"] = Hex.encode(cda)
        combined["9F27"] = "80"
        let signed = try verify(combined, ddol: nil, un: Hex.encode(ddolData), tdhc: Hex.encode(hashInput))
        #expect(signed["sdad"]?["error"] == nil, "\(String(describing: signed["sdad"]))")
        #expect(signed["sdad"]?["ac"] == .string("0102030405060708"))
    }
}

/// Just enough JSON to read the oracle's answers.
indirect enum JSONValue: Decodable, Equatable {
    case string(String), number(Double), bool(Bool), null, array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let v = try? c.decode(Bool.self) { self = .bool(v) }
        else if let v = try? c.decode(Double.self) { self = .number(v) }
        else if let v = try? c.decode(String.self) { self = .string(v) }
        else if let v = try? c.decode([JSONValue].self) { self = .array(v) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}
