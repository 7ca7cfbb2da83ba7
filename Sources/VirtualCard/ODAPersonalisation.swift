import EMV

/// What an application carries for offline data authentication (EMV Book 2): the certificates a
/// personalisation bureau wrote and, for DDA and CDA, the card's own private key. Profile block
/// `oda:` (one entry per application, by AID), written by `cardbench emv ca personalise`.
public struct ODAPersonalisation: Sendable, Hashable {
    /// The methods the card offers in its AIP.
    public enum Method: String, Sendable, CaseIterable, Comparable {
        case sda, dda, cda
        public static func < (a: Method, b: Method) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }
    }

    public let methods: [Method]
    /// 8F.
    public let caIndex: UInt8
    /// 90, 92, 9F32.
    public let issuerCertificate: [UInt8]
    public let issuerRemainder: [UInt8]?
    public let issuerExponent: [UInt8]
    /// 93.
    public let signedStaticData: [UInt8]?
    /// 9F46, 9F48, 9F47.
    public let iccCertificate: [UInt8]?
    public let iccRemainder: [UInt8]?
    public let iccExponent: [UInt8]?
    /// The card's private key: test material, so it lives in the profile.
    public let iccKey: RSAPrivateKey?
    /// 9F4A.
    public let staticDataTagList: [UInt8]?
    /// 9F49.
    public let ddol: [UInt8]?

    public init(methods: [Method], caIndex: UInt8, issuerCertificate: [UInt8], issuerRemainder: [UInt8]?, issuerExponent: [UInt8],
                signedStaticData: [UInt8]?, iccCertificate: [UInt8]?, iccRemainder: [UInt8]?, iccExponent: [UInt8]?,
                iccKey: RSAPrivateKey?, staticDataTagList: [UInt8]?, ddol: [UInt8]?) {
        self.methods = methods
        self.caIndex = caIndex
        self.issuerCertificate = issuerCertificate
        self.issuerRemainder = issuerRemainder
        self.issuerExponent = issuerExponent
        self.signedStaticData = signedStaticData
        self.iccCertificate = iccCertificate
        self.iccRemainder = iccRemainder
        self.iccExponent = iccExponent
        self.iccKey = iccKey
        self.staticDataTagList = staticDataTagList
        self.ddol = ddol
    }

    /// The card-resident value of an ODA tag.
    func value(of tag: EMVTag) -> [UInt8]? {
        switch tag.value {
        case 0x8F: return [caIndex]
        case 0x90: return issuerCertificate
        case 0x92: return issuerRemainder
        case 0x9F32: return issuerExponent
        case 0x93: return signedStaticData
        case 0x9F46: return iccCertificate
        case 0x9F48: return iccRemainder
        case 0x9F47: return iccExponent
        case 0x9F4A: return staticDataTagList
        case 0x9F49: return ddol
        default: return nil
        }
    }

    /// The tags a card keeps in its (unsigned) certificate records, in the order they are placed.
    static let tags: [EMVTag] = [0x90, 0x8F, 0x9F32, 0x92, 0x9F4A, 0x9F49, 0x93, 0x9F46, 0x9F47, 0x9F48]

    static let fields: Set<String> = [
        "aid", "methods", "caIndex", "issuerCertificate", "issuerRemainder", "issuerExponent", "signedStaticData", "iccCertificate",
        "iccRemainder", "iccExponent", "iccModulus", "iccPrivateExponent", "staticDataTagList", "ddol",
    ]

    /// Parses one entry of the profile's `oda:` list.
    static func parse(_ m: YAMLMapping) throws(ProfileError) -> (aid: [UInt8], ODAPersonalisation) {
        try m.rejectUnknown(fields)
        guard let aid = try m.hex("aid", count: 5...16) else { throw m.error("aid", "is required: the application these certificates belong to") }
        guard let names = try m.stringList("methods"), !names.isEmpty else { throw m.error("methods", "is required: a list of sda, dda, cda") }
        var methods: [Method] = []
        for (i, name) in names.enumerated() {
            guard let method = Method(rawValue: name) else { throw m.error("methods[\(i)]", "must be sda, dda or cda, got '\(name)'") }
            guard !methods.contains(method) else { throw m.error("methods[\(i)]", "\(name) is listed twice") }
            methods.append(method)
        }
        guard let index = try m.hex("caIndex", count: 1...1) else { throw m.error("caIndex", "is required (tag 8F, one byte in hex)") }
        guard let issuerCertificate = try m.hex("issuerCertificate", count: 64...248) else {
            throw m.error("issuerCertificate", "is required (tag 90, as long as the CA key)")
        }
        let exponent = try m.hex("issuerExponent", count: 1...3) ?? [0x03]
        let ssad = try m.hex("signedStaticData", count: 64...248)
        if methods.contains(.sda), ssad == nil { throw m.error("signedStaticData", "is required for sda (tag 93)") }
        let iccCertificate = try m.hex("iccCertificate", count: 64...248)
        let modulus = try m.hex("iccModulus", count: 64...248)
        let privateExponent = try m.hex("iccPrivateExponent", count: 64...248)
        let iccExponent = try m.hex("iccExponent", count: 1...3)
        var iccKey: RSAPrivateKey? = nil
        if methods.contains(.dda) || methods.contains(.cda) {
            guard iccCertificate != nil else { throw m.error("iccCertificate", "is required for dda and cda (tag 9F46)") }
            guard let modulus, let privateExponent else {
                throw m.error(modulus == nil ? "iccModulus" : "iccPrivateExponent", "is required for dda and cda: the card signs with its own key")
            }
            guard modulus.last.map({ $0 & 1 == 1 }) ?? false else { throw m.error("iccModulus", "must be odd (an RSA modulus)") }
            iccKey = RSAPrivateKey(modulus: modulus, publicExponent: iccExponent ?? [0x03], privateExponent: privateExponent)
        }
        let tagList = try m.hex("staticDataTagList", count: 1...8)
        let ddol = try m.hex("ddol", count: 2...64)
        if let ddol { do { _ = try DOL.parse(ddol, field: m.field("ddol")) } catch { throw m.error("ddol", error.rule) } }
        return (aid, ODAPersonalisation(
            methods: methods.sorted(), caIndex: index[0], issuerCertificate: issuerCertificate, issuerRemainder: try m.hex("issuerRemainder", count: 1...248),
            issuerExponent: exponent, signedStaticData: ssad, iccCertificate: iccCertificate, iccRemainder: try m.hex("iccRemainder", count: 1...248),
            iccExponent: iccCertificate == nil ? iccExponent : (iccExponent ?? [0x03]), iccKey: iccKey, staticDataTagList: tagList, ddol: ddol))
    }
}
