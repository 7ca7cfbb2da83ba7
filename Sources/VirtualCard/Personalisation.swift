import EMV

/// What `cardbench emv ca personalise` does to a profile: issuer and ICC keys and certificates
/// under a bench CA key, and the signed static data, for each application; optionally spoilt in a
/// named way, for the faulty cards scenarios need. Pure: the caller reads and writes the file.
public struct ODAPersonaliser {
    /// A deliberate defect, each failing a different Book 2 check.
    public enum Fault: String, Sendable, CaseIterable {
        /// 8F names another bench CA key of the same size than the one that signed.
        case wrongCAIndex = "wrong-ca-index"
        /// 8F names a key no terminal has.
        case unknownCAIndex = "unknown-ca-index"
        case corruptIssuerCertificate = "corrupt-issuer-certificate"
        case corruptICCCertificate = "corrupt-icc-certificate"
        case corruptStaticSignature = "corrupt-static-signature"
        /// The card signs its dynamic data with a key that is not the certified one.
        case wrongICCKey = "wrong-icc-key"
    }

    public struct Options: Sendable {
        public var methods: [ODAPersonalisation.Method] = [.sda, .dda, .cda]
        public var caIndex: UInt8 = 0xB0
        public var issuerBits = 1408
        public var iccBits = 1024
        /// 3 or 65537, for both keys.
        public var exponent: UInt32 = 3
        /// MMYY; nil: the card's expiry month.
        public var issuerExpiry: String? = nil
        public var iccExpiry: String? = nil
        public var staticDataTagList: [UInt8]? = [0x82]
        public var ddol: [UInt8]? = [0x9F, 0x37, 0x04]
        public var faults: [Fault] = []

        public init() {}
    }

    public let ca: CertificationAuthority

    public init(ca: CertificationAuthority) { self.ca = ca }

    /// The YAML text of a profile without its `oda:` block (the block is always last and at the
    /// top level, as this tool writes it).
    public static func strippingODA(_ yaml: String) -> String {
        var out: [Substring] = []
        var inBlock = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("oda:") || line.hasPrefix("# Offline data authentication (written by") { inBlock = true; continue }
            if inBlock, let first = line.first, first != " ", first != "#", first != "-" { inBlock = false }
            if !inBlock { out.append(line) }
        }
        while out.last?.isEmpty == true { out.removeLast() }
        return out.joined(separator: "\n") + "\n"
    }

    /// Personalises every application of the profile in `yaml` and returns the new file text.
    public func personalise(yaml: String, file: String, options: Options) throws(ProfileError) -> String {
        func fail(_ field: String, _ reason: String) -> ProfileError { ProfileError(file: file, field: field, reason: reason) }
        guard let signer = ca.key(index: options.caIndex) else {
            throw fail("--ca-index", "the CA has no key \(Hex.encode([options.caIndex])); it has \(ca.keys.map { Hex.encode([$0.index]) }.joined(separator: ", "))")
        }
        guard options.issuerBits <= signer.key.modulus.count * 8 else {
            throw fail("--issuer-bits", "\(options.issuerBits) is longer than the CA key (\(signer.key.modulus.count * 8) bits): Book 2 needs N_I ≤ N_CA")
        }
        guard options.iccBits <= options.issuerBits else { throw fail("--icc-bits", "\(options.iccBits) is longer than the issuer key: Book 2 needs N_IC ≤ N_I") }
        let base = Self.strippingODA(yaml)
        // A first pass with placeholder certificates gives the AIP and records the card will
        // present, which the signatures cover (certificates live in unsigned records).
        let placeholder = try CardProfile.parse(yaml: base, file: file)
        let dummy = [UInt8](repeating: 0, count: 64)
        let dummyKey = RSAPrivateKey(modulus: [UInt8](repeating: 0xFF, count: 64), publicExponent: [3], privateExponent: [UInt8](repeating: 1, count: 64))
        let provisional = placeholder.applications.map { app in
            (app.aid, ODAPersonalisation(methods: options.methods, caIndex: options.caIndex, issuerCertificate: dummy, issuerRemainder: nil,
                                         issuerExponent: [3], signedStaticData: dummy, iccCertificate: dummy, iccRemainder: nil, iccExponent: [3],
                                         iccKey: dummyKey, staticDataTagList: options.staticDataTagList, ddol: options.ddol))
        }
        let provisionalText = base + Self.render(provisional, header: false)
        let presented = try CardProfile.parse(yaml: provisionalText, file: file)
        let card: VirtualCard
        do { card = try VirtualCard(profile: presented) } catch { throw fail("(card)", error.description) }

        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let expiry = two(presented.expiry.month) + two(presented.expiry.year % 100)
        var entries: [([UInt8], ODAPersonalisation)] = []
        for (i, app) in presented.applications.enumerated() {
            let staticData: [UInt8]
            do { staticData = try card.staticDataToBeAuthenticated(application: i) } catch { throw fail("applications[\(i)].records", error.description) }
            do throws(EMVError) {
                let issuerKey = try RSAPrivateKey.generate(bits: options.issuerBits, exponent: options.exponent)
                let identifier = String(presented.pan.prefix(6))
                var (issuerCertificate, issuerRemainder) = try ODA.makeIssuerCertificate(
                    ca: signer.key, issuer: issuerKey.publicKey, issuerIdentifier: identifier, expiry: options.issuerExpiry ?? expiry,
                    serial: SecureRandom.bytes(3))
                var ssad: [UInt8]? = nil
                if options.methods.contains(.sda) {
                    ssad = try ODA.makeStaticSignature(issuer: issuerKey, dataAuthenticationCode: SecureRandom.bytes(2), staticData: staticData)
                }
                var iccCertificate: [UInt8]? = nil, iccRemainder: [UInt8]? = nil, iccKey: RSAPrivateKey? = nil
                if options.methods.contains(.dda) || options.methods.contains(.cda) {
                    let key = try RSAPrivateKey.generate(bits: options.iccBits, exponent: options.exponent)
                    (iccCertificate, iccRemainder) = try ODA.makeICCCertificate(
                        issuer: issuerKey, icc: key.publicKey, pan: presented.pan, expiry: options.iccExpiry ?? expiry, serial: SecureRandom.bytes(3),
                        staticData: staticData)
                    iccKey = key
                    if options.faults.contains(.wrongICCKey) { iccKey = try RSAPrivateKey.generate(bits: options.iccBits, exponent: options.exponent) }
                }
                var index = options.caIndex
                for fault in options.faults {
                    switch fault {
                    case .wrongCAIndex:
                        guard let other = ca.keys.first(where: { $0.index != options.caIndex && $0.key.modulus.count == signer.key.modulus.count }) else {
                            throw EMVError(field: "--fault wrong-ca-index", rule: "the CA has no other key as long as \(Hex.encode([options.caIndex]))")
                        }
                        index = other.index
                    case .unknownCAIndex: index = 0xEE
                    case .corruptIssuerCertificate: issuerCertificate[issuerCertificate.count / 2] ^= 0x01
                    case .corruptICCCertificate:
                        if var c = iccCertificate { c[c.count / 2] ^= 0x01; iccCertificate = c }
                    case .corruptStaticSignature:
                        if var c = ssad { c[c.count / 2] ^= 0x01; ssad = c }
                    case .wrongICCKey: break
                    }
                }
                entries.append((app.aid, ODAPersonalisation(
                    methods: options.methods, caIndex: index, issuerCertificate: issuerCertificate, issuerRemainder: issuerRemainder,
                    issuerExponent: issuerKey.publicExponent, signedStaticData: ssad, iccCertificate: iccCertificate, iccRemainder: iccRemainder,
                    iccExponent: iccKey?.publicExponent, iccKey: iccKey, staticDataTagList: options.staticDataTagList, ddol: options.ddol)))
            } catch {
                throw fail("applications[\(i)]", error.description)
            }
        }
        let text = base + Self.render(entries, header: true, options: options)
        _ = try CardProfile.parse(yaml: text, file: file)
        return text
    }

    /// The `oda:` block.
    static func render(_ entries: [([UInt8], ODAPersonalisation)], header: Bool, options: Options? = nil) -> String {
        var out = "\n"
        if header, let options {
            let faults = options.faults.isEmpty ? "" : "; faults: \(options.faults.map(\.rawValue).joined(separator: ", "))"
            out += "# Offline data authentication (written by `cardbench emv ca personalise`: \(options.methods.map(\.rawValue).joined(separator: ", ")), "
            out += "\(options.issuerBits)-bit issuer, \(options.iccBits)-bit ICC\(faults)).\n"
            out += "# The certificates cover the records marked for ODA: personalise again after changing one.\n"
        }
        out += "oda:\n"
        func line(_ key: String, _ value: [UInt8]?) {
            if let value { out += "    \(key): \"\(Hex.encode(value))\"\n" }
        }
        for (aid, e) in entries {
            out += "  - aid: \"\(Hex.encode(aid))\"\n    methods: [\(e.methods.map(\.rawValue).joined(separator: ", "))]\n"
            line("caIndex", [e.caIndex])
            line("issuerCertificate", e.issuerCertificate)
            line("issuerRemainder", e.issuerRemainder)
            line("issuerExponent", e.issuerExponent)
            line("signedStaticData", e.signedStaticData)
            line("iccCertificate", e.iccCertificate)
            line("iccRemainder", e.iccRemainder)
            line("iccExponent", e.iccExponent)
            line("iccModulus", e.iccKey?.modulus)
            line("iccPrivateExponent", e.iccKey?.privateExponent)
            line("staticDataTagList", e.staticDataTagList)
            line("ddol", e.ddol)
        }
        return out
    }
}
