import EMV

/// What differs between two card profiles in the terminal's terms (`cardbench card diff`): the
/// AIP's bits, the CVM rules, the AFL, the issuer action codes bit by bit, the DOLs, ODA, the CVN
/// and the card's data — to see what makes a card odd. Keys and certificates, which every
/// capture makes anew, are compared by what they are (method, CA index, key lengths), not by value.
public enum ProfileDiff {
    /// One line per difference, `where: what a has → what b has`; empty when the terminal would
    /// see the same card.
    public static func differences(_ a: CardProfile, _ b: CardProfile) -> [String] {
        var out: [String] = []
        func compare<T: Equatable>(_ field: String, _ x: T, _ y: T, _ show: (T) -> String = { "\($0)" }) {
            if x != y { out.append("\(field): \(show(x)) → \(show(y))") }
        }
        compare("pan", PAN.masked(a.pan), PAN.masked(b.pan))
        compare("expiry", a.expiry.description, b.expiry.description)
        compare("serviceCode", a.serviceCode, b.serviceCode)
        compare("atr", Hex.encode(a.atr), Hex.encode(b.atr))
        compare("interfaces", a.interfaces.map(\.rawValue).sorted(), b.interfaces.map(\.rawValue).sorted()) { $0.joined(separator: ", ") }
        compare("pse", a.hasPSE, b.hasPSE)
        compare("pinTryLimit", a.pinTryLimit, b.pinTryLimit)
        compare("applications", a.applications.map { Hex.encode($0.aid) }, b.applications.map { Hex.encode($0.aid) }) { $0.joined(separator: ", ") }
        for x in a.applications {
            guard let y = b.applications.first(where: { $0.aid == x.aid }) else { continue }
            let p = "\(Hex.encode(x.aid))"
            compare("\(p) label", x.label, y.label)
            compare("\(p) priority", x.priority, y.priority)
            compare("\(p) cvn", x.cvn.description, y.cvn.description)
            compare("\(p) keyDerivationIndex", x.keyDerivationIndex, y.keyDerivationIndex)
            bits("\(p) AIP", x.aip, y.aip, into: &out)
            compare("\(p) AFL", afl(a, x), afl(b, y))
            if x.cvmList != y.cvmList {
                if (x.cvmList.amountX, x.cvmList.amountY) != (y.cvmList.amountX, y.cvmList.amountY) {
                    out.append("\(p) CVM list: amounts X \(x.cvmList.amountX) Y \(x.cvmList.amountY) → X \(y.cvmList.amountX) Y \(y.cvmList.amountY)")
                }
                let n = max(x.cvmList.rules.count, y.cvmList.rules.count)
                for i in 0..<n {
                    let r1 = i < x.cvmList.rules.count ? x.cvmList.rules[i].description : "(none)"
                    let r2 = i < y.cvmList.rules.count ? y.cvmList.rules[i].description : "(none)"
                    if r1 != r2 { out.append("\(p) CVM rule \(i + 1): \(r1) → \(r2)") }
                }
            }
            for (name, v1, v2) in [("IAC default", x.issuerActionCodes.default, y.issuerActionCodes.default),
                                   ("IAC denial", x.issuerActionCodes.denial, y.issuerActionCodes.denial),
                                   ("IAC online", x.issuerActionCodes.online, y.issuerActionCodes.online)] {
                bits("\(p) \(name)", TVR(uncheckedBytes: v1), TVR(uncheckedBytes: v2), into: &out)
            }
            compare("\(p) PDOL", x.pdol.map { Hex.encode($0.bytes) } ?? "none", y.pdol.map { Hex.encode($0.bytes) } ?? "none")
            compare("\(p) CDOL1", Hex.encode(x.cdol1.bytes), Hex.encode(y.cdol1.bytes))
            compare("\(p) CDOL2", Hex.encode(x.cdol2.bytes), Hex.encode(y.cdol2.bytes))
            compare("\(p) AUC", Hex.encode(x.applicationUsageControl), Hex.encode(y.applicationUsageControl))
            compare("\(p) currency", x.currencyCode, y.currencyCode)
            compare("\(p) country", x.countryCode, y.countryCode)
            compare("\(p) application version", Hex.encode(x.applicationVersion), Hex.encode(y.applicationVersion))
            compare("\(p) offline limits", x.offlineLimits.map { "\($0.lower)–\($0.upper)" } ?? "none", y.offlineLimits.map { "\($0.lower)–\($0.upper)" } ?? "none")
            compare("\(p) GPO format", x.gpoFormat, y.gpoFormat)
            compare("\(p) GENERATE AC format", x.generateACFormat, y.generateACFormat)
            compare("\(p) IAD length", iadLength(x), iadLength(y))
            compare("\(p) ODA", oda(x), oda(y))
            compare("\(p) contactless", contactless(x), contactless(y))
            compare("\(p) records", records(a, x), records(b, y)) { $0.joined(separator: ", ") }
        }
        return out
    }

    /// Each bit set on one side only, by name.
    static func bits<B: EMVBitString>(_ field: String, _ x: B, _ y: B, into out: inout [String]) {
        guard x != y else { return }
        var named = false
        for bit in B.namedBits where x.contains(bit) != y.contains(bit) {
            out.append("\(field) \(bit): \(x.contains(bit) ? "set" : "clear") → \(y.contains(bit) ? "set" : "clear")")
            named = true
        }
        if !named { out.append("\(field): \(x.hex) → \(y.hex)") }
    }

    /// Each record as the card presents it: the tags it holds a value for.
    static func records(_ profile: CardProfile, _ app: ApplicationProfile) -> [String] {
        app.records.map { r in
            "\(r.sfi).\(r.record)[\(r.tags.filter { profile.value(of: $0, in: app) != nil }.map(\.description).joined(separator: " "))]"
        }
    }

    static func afl(_ profile: CardProfile, _ app: ApplicationProfile) -> String {
        Hex.encode(profile.afl(for: app).flatMap(\.bytes))
    }

    static func iadLength(_ app: ApplicationProfile) -> Int {
        (app.cvn == .visa22 ? 32 : app.cvn.isVisa ? 7 : 18) + app.issuerDiscretionaryData.count
    }

    static func oda(_ app: ApplicationProfile) -> String {
        guard let o = app.oda else { return "none" }
        let issuerBits = (o.issuerCertificate.count - 36 + (o.issuerRemainder?.count ?? 0)) * 8
        var text = "\(o.methods.map(\.rawValue).joined(separator: ", ")) under CA \(Hex.encode([o.caIndex])) (\(o.issuerCertificate.count * 8)-bit), issuer ≤\(issuerBits) bits"
        if let key = o.iccKey { text += ", ICC \(key.modulus.count * 8) bits" }
        if let list = o.staticDataTagList { text += ", 9F4A \(Hex.encode(list))" }
        if let ddol = o.ddol { text += ", DDOL \(Hex.encode(ddol))" }
        return text
    }

    static func contactless(_ app: ApplicationProfile) -> String {
        guard let c = app.contactless else { return "none" }
        var parts = ["AIP \(c.aip.hex)", "CTQ \(Hex.encode(c.ctq))", c.offlineApproval ? "offline approval" : "online only",
                     c.readRecords ? "records" : "no records"]
        if let pdol = c.pdol { parts.append("PDOL \(Hex.encode(pdol.bytes))") }
        if let kernel = c.kernel { parts.append("kernel \(kernel)") }
        if let cvn = c.cvn { parts.append(cvn.description) }
        return parts.joined(separator: ", ")
    }
}
