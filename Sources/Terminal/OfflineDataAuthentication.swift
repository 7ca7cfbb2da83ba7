import EMV

/// What offline data authentication did in one transaction, for the ledger, `cardbench tx show`
/// and the trace: the method, the CA key, the recovered certificate fields, and the check that
/// failed. Stored as JSON beside the transaction.
public struct ODAReport: Sendable, Equatable, Codable {
    public enum Method: String, Sendable, Codable { case sda, dda, cda, none }
    public enum Result: String, Sendable, Codable {
        case passed, failed
        case notPerformed = "not performed"
    }

    public var method: Method = .none
    public var result: Result = .notPerformed
    /// Why no method was chosen, or what the CDA outcome hinged on.
    public var reason: String? = nil
    public var rid: String? = nil
    public var caIndex: String? = nil
    /// The CA key's name and size as the CAPK file gives it.
    public var caKey: String? = nil
    public var issuerIdentifier: String? = nil
    public var issuerCertificateSerial: String? = nil
    /// MMYY.
    public var issuerCertificateExpiry: String? = nil
    public var issuerKeyBits: Int? = nil
    public var iccCertificateSerial: String? = nil
    public var iccCertificateExpiry: String? = nil
    public var iccKeyBits: Int? = nil
    /// SDA's data authentication code (9F45).
    public var dataAuthenticationCode: String? = nil
    /// DDA's or CDA's ICC dynamic number (9F4C).
    public var dynamicNumber: String? = nil
    /// The Book 2 check that failed (`issuer certificate hash`, …) and what it found.
    public var failedCheck: String? = nil
    public var failure: String? = nil

    public init() {}

    /// Keeps a recovered certificate's fields (a genuine one: its hash checked).
    mutating func record(_ issuer: IssuerCertificate) {
        issuerIdentifier = issuer.issuerIdentifier
        issuerCertificateSerial = Hex.encode(issuer.serial)
        issuerCertificateExpiry = issuer.expiry
        issuerKeyBits = issuer.key.bits
    }

    mutating func record(_ icc: ICCCertificate) {
        iccCertificateSerial = Hex.encode(icc.serial)
        iccCertificateExpiry = icc.expiry
        iccKeyBits = icc.key.bits
    }

    /// One line per fact, as `tx show` prints them.
    public var lines: [String] {
        var out = ["method \(method.rawValue.uppercased()): \(result.rawValue)" + (reason.map { " (\($0))" } ?? "")]
        if let rid, let caIndex { out.append("CA key \(rid) index \(caIndex)" + (caKey.map { ": \($0)" } ?? "")) }
        if let issuerCertificateSerial {
            out.append("issuer certificate: issuer \(issuerIdentifier ?? "?"), serial \(issuerCertificateSerial), expires \(issuerCertificateExpiry ?? "?") (MMYY), \(issuerKeyBits ?? 0)-bit key")
        }
        if let iccCertificateSerial {
            out.append("ICC certificate: serial \(iccCertificateSerial), expires \(iccCertificateExpiry ?? "?") (MMYY), \(iccKeyBits ?? 0)-bit key")
        }
        if let dataAuthenticationCode { out.append("data authentication code (9F45) \(dataAuthenticationCode)") }
        if let dynamicNumber { out.append("ICC dynamic number (9F4C) \(dynamicNumber)") }
        if let failedCheck { out.append("failed check: \(failedCheck)" + (failure.map { ": \($0)" } ?? "")) }
        return out
    }
}

/// A terminal's offline data authentication settings: its CA public keys and revocation list.
public struct ODAConfiguration: Sendable {
    public var caKeys: [CAPublicKey]
    public var revoked: [RevokedCertificate]
    /// Used when the card has no DDOL (9F49); nil: a DDA card without one fails with "ICC data missing".
    public var defaultDDOL: [UInt8]?

    public init(caKeys: [CAPublicKey] = [], revoked: [RevokedCertificate] = [], defaultDDOL: [UInt8]? = [0x9F, 0x37, 0x04]) {
        self.caKeys = caKeys
        self.revoked = revoked
        self.defaultDDOL = defaultDDOL
    }

    /// The key the card's AID (its RID) and 8F name.
    public func key(rid: [UInt8], index: UInt8) -> CAPublicKey? { caKeys.first { $0.rid == rid && $0.index == index } }
}

extension Kernel {
    /// EMV Book 3 §10.3 and Book 2 §§5–6: chooses CDA, DDA or SDA by the AIP and 9F33 byte 3,
    /// recovers the issuer and ICC keys, checks the signatures, and sets the TVR and TSI bits.
    /// CDA only recovers the keys here; its signature comes with GENERATE AC. (Kernel 2 does it
    /// otherwise: `kernel2CDAPrerequisites`.)
    mutating func offlineDataAuthentication(today: [UInt8]) throws(KernelError) {
        var report = ODAReport()
        odaBegun = true
        defer { odaReport = report }
        let aip = AIP(uncheckedBytes: data[0x82] ?? [0, 0])
        let terminal = configuration.capabilities.count > 2 ? configuration.capabilities[2] : 0
        if aip.contains(AIP.cdaSupported), terminal & 0x08 != 0 {
            report.method = .cda
        } else if aip.contains(AIP.ddaSupported), terminal & 0x40 != 0 {
            report.method = .dda
        } else if aip.contains(AIP.sdaSupported), terminal & 0x80 != 0 {
            report.method = .sda
        } else {
            tvr.set(TVR.offlineDataAuthenticationNotPerformed)
            let offered = [(AIP.sdaSupported, "SDA"), (AIP.ddaSupported, "DDA"), (AIP.cdaSupported, "CDA")].filter { aip.contains($0.0) }.map(\.1)
            report.reason = offered.isEmpty ? "the card's AIP offers no method" : "the terminal (9F33) supports none of the card's \(offered.joined(separator: ", "))"
            return
        }
        tsi.set(TSI.offlineDataAuthenticationPerformed)
        if report.method == .sda { tvr.set(TVR.sdaSelected) }
        func fail(_ error: ODAFailure) {
            if let issuer = error.issuer {
                report.record(issuer)
            }
            if let icc = error.icc {
                report.record(icc)
            }
            report.result = .failed
            report.failedCheck = error.check
            report.failure = error.detail
            if error.missingData { tvr.set(TVR.iccDataMissing) }
            tvr.set(report.method == .sda ? TVR.sdaFailed : report.method == .dda ? TVR.ddaFailed : TVR.cdaFailed)
        }
        let icc: RSAPublicKey?
        do throws(ODAFailure) { icc = try recoverKeys(today: today, report: &report) } catch {
            fail(error)
            return
        }
        switch report.method {
        case .dda:
            // A card removed during INTERNAL AUTHENTICATE ends the transaction; a bad answer fails DDA.
            if let failure = try dynamicDataAuthentication(icc: icc!, report: &report) {
                fail(failure)
                return
            }
        case .cda:
            cdaKey = icc
            report.reason = "keys recovered; the signature is checked at GENERATE AC"
        default:
            break
        }
        report.result = .passed
    }

    /// Kernel 2 before GENERATE AC (Book C-2 S456.24–25): CDA, its only method, when the card's
    /// AIP and the terminal's 9F33 byte 3 both offer it; then only what is missing fails it — an
    /// 8F, 90, 9F32, 9F46, 9F47 or 9F4A the card does not give (ICC data missing and CDA failed),
    /// a CA key the terminal does not have or has expired (CDA failed). Nothing is recovered here:
    /// the issuer and ICC certificates are recovered with the signature, after GENERATE AC (S910.4,
    /// `generateAC`), and a bad certificate fails CDA there.
    mutating func kernel2CDAPrerequisites(today: [UInt8], terminal: UInt8) {
        var report = ODAReport()
        odaBegun = true
        defer { odaReport = report }
        let aip = AIP(uncheckedBytes: data[0x82] ?? [0, 0])
        guard aip.contains(AIP.cdaSupported), terminal & 0x08 != 0 else {
            tvr.set(TVR.offlineDataAuthenticationNotPerformed)
            report.reason = aip.contains(AIP.cdaSupported) ? "the terminal (9F33) does not support CDA, Kernel 2's only method"
                : "the card's AIP does not offer CDA, Kernel 2's only method"
            return
        }
        report.method = .cda
        tsi.set(TSI.offlineDataAuthenticationPerformed)
        func fail(_ check: String, _ detail: String, missingData: Bool = false) {
            report.result = .failed
            report.failedCheck = check
            report.failure = "\(detail) (before GENERATE AC)"
            if missingData { tvr.set(TVR.iccDataMissing) }
            tvr.set(TVR.cdaFailed)
        }
        let rid = Array((data[0x9F06] ?? []).prefix(5))
        report.rid = Hex.encode(rid)
        let required: [(tag: EMVTag, check: String)] = [
            (0x8F, "CA public key index"), (0x90, "issuer certificate"), (0x9F32, "issuer certificate"),
            (0x9F46, "ICC certificate"), (0x9F47, "ICC certificate"), (0x9F4A, "static data authentication tag list"),
        ]
        if let missing = required.first(where: { data[$0.tag]?.isEmpty ?? true }) {
            fail(missing.check, "the card gives no \(missing.tag)", missingData: true)
            return
        }
        let index = data[0x8F]![0]
        report.caIndex = Hex.encode([index])
        guard let ca = configuration.oda.key(rid: rid, index: index) else {
            fail("CA public key", "the terminal has no key \(Hex.encode(rid)) index \(Hex.encode([index])) (see cardbench emv capk list)")
            return
        }
        report.caKey = ca.name.contains("-bit") ? ca.name : "\(ca.name.isEmpty ? "unnamed" : ca.name), \(ca.key.bits)-bit"
        if let date = ODADate(bcd: today), date > ca.expiry {
            fail("CA public key expiry", "the key expired on \(ca.expiry), before the transaction date \(date)")
            return
        }
        report.reason = "the certificates are recovered with the signature, after GENERATE AC"
    }

    /// Kernel 2 at GENERATE AC (C-2 S910.4): the issuer and ICC keys, recovered with every Book 2
    /// check just before the signature is verified, and kept in the report.
    mutating func recoverKernel2CDAKey() throws(ODAFailure) -> RSAPublicKey {
        var report = odaReport
        defer { odaReport = report }
        guard let key = try recoverKeys(today: data[0x9A] ?? [], report: &report) else { throw ODAFailure("ICC certificate", "no ICC key") }
        cdaKey = key
        return key
    }

    /// The issuer key and, for DDA and CDA, the ICC key; SDA's signature is checked here.
    mutating func recoverKeys(today: [UInt8], report: inout ODAReport) throws(ODAFailure) -> RSAPublicKey? {
        guard let date = ODADate(bcd: today) else { throw ODAFailure("transaction date", "9A \(Hex.encode(today)) is not a date") }
        let aid = data[0x9F06] ?? []
        let rid = Array(aid.prefix(5))
        report.rid = Hex.encode(rid)
        let staticData = try ODA.staticData(records: odaRecords, aip: data[0x82] ?? [], tagList: data[0x9F4A])
        guard let index = data[0x8F]?.first else { throw ODAFailure("CA public key index", "the card gives no 8F", missingData: true) }
        report.caIndex = Hex.encode([index])
        guard let ca = configuration.oda.key(rid: rid, index: index) else {
            throw ODAFailure("CA public key", "the terminal has no key \(Hex.encode(rid)) index \(Hex.encode([index])) (see cardbench emv capk list)")
        }
        report.caKey = ca.name.contains("-bit") ? ca.name : "\(ca.name.isEmpty ? "unnamed" : ca.name), \(ca.key.bits)-bit"
        guard date <= ca.expiry else { throw ODAFailure("CA public key expiry", "the key expired on \(ca.expiry), before the transaction date \(date)") }
        guard let certificate = data[0x90], let exponent = data[0x9F32] else {
            throw ODAFailure("issuer certificate", "the card gives no \(data[0x90] == nil ? "90" : "9F32")", missingData: true)
        }
        let issuer = try ODA.recoverIssuerKey(certificate: certificate, remainder: data[0x92], exponent: exponent, ca: ca, pan: pan ?? "",
                                              today: date, revoked: configuration.oda.revoked)
        report.record(issuer)
        if report.method == .sda {
            guard let signature = data[0x93] else { throw ODAFailure("signed static data", "the card gives no 93", missingData: true) }
            let dac = try ODA.verifyStaticSignature(signature, issuer: issuer.key, staticData: staticData)
            data[0x9F45] = dac
            report.dataAuthenticationCode = Hex.encode(dac)
            return nil
        }
        guard let iccCertificate = data[0x9F46], let iccExponent = data[0x9F47] else {
            throw ODAFailure("ICC certificate", "the card gives no \(data[0x9F46] == nil ? "9F46" : "9F47")", missingData: true)
        }
        let icc = try ODA.recoverICCKey(certificate: iccCertificate, remainder: data[0x9F48], exponent: iccExponent, issuer: issuer.key,
                                        pan: pan ?? "", staticData: staticData, today: date)
        report.record(icc)
        return icc.key
    }

    /// Book 2 §6.5: INTERNAL AUTHENTICATE with the card's DDOL (or the terminal's default) and
    /// the signed dynamic application data it returns. A card removed meanwhile ends the
    /// transaction (thrown); a bad answer fails DDA (returned).
    private mutating func dynamicDataAuthentication(icc: RSAPublicKey, report: inout ODAReport) throws(KernelError) -> ODAFailure? {
        guard let ddolBytes = data[0x9F49] ?? configuration.oda.defaultDDOL else {
            return ODAFailure("DDOL", "the card gives no 9F49 and the terminal has no default DDOL", missingData: true)
        }
        // Book 2 §6.5.1: the DDOL must ask for the unpredictable number.
        guard let ddol = try? DOL.parse(ddolBytes, field: "DDOL"), ddol.entries.contains(where: { $0.tag == 0x9F37 }) else {
            return ODAFailure("DDOL", "\(Hex.encode(ddolBytes)) does not request the unpredictable number (9F37)", missingData: true)
        }
        let ddolData = ddol.fill { self.data[$0] }
        let response = try send(.internalAuthenticate(ddolData: ddolData), step: "INTERNAL AUTHENTICATE")
        do throws(ODAFailure) {
            guard response.status.isSuccess else { throw ODAFailure("INTERNAL AUTHENTICATE", "the card answered \(response.status)") }
            guard let tlv = (try? TLV.parse(response.data))?.first, let signature = tlv.tag == 0x80 ? tlv.value : tlv.first(0x9F4B)?.value else {
                throw ODAFailure("INTERNAL AUTHENTICATE", "the response holds no signed dynamic application data (80 or 77 with 9F4B)", missingData: true)
            }
            data[0x9F4B] = signature
            let dynamic = try ODA.verifyDynamicSignature(signature, icc: icc, terminalData: ddolData)
            let number = try ODA.dynamicNumber(dynamic)
            data[0x9F4C] = number
            report.dynamicNumber = Hex.encode(number)
            return nil
        } catch {
            return error
        }
    }
}
