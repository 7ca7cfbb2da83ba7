import EMV

extension CardProfile {
    /// The PDOL of a Visa contactless application when the profile gives none: the TTQ, then the
    /// data the cryptogram is computed over — the layout of real qVSDC cards.
    static let visaContactlessPDOL = "9F66049F02069F03069F1A0295055F2A029A039C019F3704"

    /// `interfaces`, `formFactor`, `cdcvm`, `contactless` and `magstripe`, with the rules that
    /// tie them to the applications.
    static func parseInterfaces(_ m: YAMLMapping, into profile: inout CardProfile) throws(ProfileError) {
        if let names = try m.stringList("interfaces") {
            var set = Set<CardInterface>()
            for name in names {
                guard let interface = CardInterface(rawValue: name) else {
                    throw m.error("interfaces", "lists '\(name)': each must be contact, contactless or magstripe")
                }
                set.insert(interface)
            }
            guard !set.isEmpty else { throw m.error("interfaces", "must list at least one of contact, contactless, magstripe") }
            profile.interfaces = set
        }
        if let text = try m.string("formFactor") {
            guard let f = FormFactor(rawValue: text) else { throw m.error("formFactor", "must be card, phone or watch, got '\(text)'") }
            profile.formFactor = f
        }
        if let text = try m.string("cdcvm") {
            guard let c = ConsumerDeviceCVM(rawValue: text) else { throw m.error("cdcvm", "must be none, performed or pending, got '\(text)'") }
            guard c == .none || profile.formFactor != .card else {
                throw m.error("cdcvm", "needs a device (formFactor phone or watch): a plastic card has no way to verify its holder")
            }
            profile.consumerDeviceCVM = c
        }
        if let c = try m.mapping("contactless") {
            try c.rejectUnknown(["historicalBytes"])
            guard profile.interfaces.contains(.contactless) else { throw m.error("contactless", "given, but interfaces does not list contactless") }
            profile.contactlessHistoricalBytes = try c.hex("historicalBytes", count: 0...15) ?? []
        }
        let tappable = profile.applications.filter { $0.contactless != nil }
        if profile.interfaces.contains(.contactless) {
            guard !tappable.isEmpty else {
                throw m.error("interfaces", "lists contactless, but no application has a contactless: block (an empty one, {}, takes the defaults)")
            }
        } else if let app = tappable.first {
            throw m.error("interfaces", "does not list contactless, but application \(Hex.encode(app.aid)) has a contactless: block")
        }
        if profile.formFactor != .card, profile.interfaces != [.contactless] {
            throw m.error("interfaces", "must be [contactless] for a \(profile.formFactor.rawValue): a device has no chip contacts or stripe")
        }
        if let s = try m.mapping("magstripe") {
            try s.rejectUnknown(["track1", "track2"])
            guard let t2 = try s.string("track2") else { throw s.error("track2", "is required when magstripe: is given") }
            let t1 = try s.string("track1")
            let parsed: MagneticStripe
            do throws(EMVError) { parsed = try MagneticStripe(track1: t1, track2: t2) } catch {
                throw s.error(error.field, error.rule)
            }
            guard parsed.pan == profile.pan else { throw s.error("track2", "its PAN is not the card's pan") }
            let yymm = String(profile.expiry.year % 100 / 10) + String(profile.expiry.year % 10) + String(profile.expiry.month / 10) + String(profile.expiry.month % 10)
            guard parsed.expiry == yymm else { throw s.error("track2", "its expiry \(parsed.expiry) is not the card's (\(yymm), YYMM)") }
            guard parsed.serviceCode == profile.serviceCode else {
                throw s.error("track2", "its service code \(parsed.serviceCode) is not the card's serviceCode \(profile.serviceCode)")
            }
            guard profile.interfaces.contains(.magstripe) else { throw m.error("magstripe", "given, but interfaces does not list magstripe") }
            profile.magstripeTracks = (parsed.track1, parsed.track2)
        }
    }

    static func parseContactless(_ c: YAMLMapping, application app: ApplicationProfile) throws(ProfileError) -> ContactlessApplication {
        try c.rejectUnknown(["aip", "pdol", "ctq", "offlineApproval", "records", "kernel", "cvn", "fci"])
        let visa = app.cvn.isVisa
        var cvn: CVN? = nil
        if let number = try c.int("cvn", in: 0...255) {
            do { cvn = try CVN(number: number) } catch { throw c.error("cvn", error.rule) }
            guard cvn!.isVisa == visa else {
                throw c.error("cvn", "\(cvn!) on the contactless interface of a \(visa ? "Visa" : "Mastercard") application (\(app.cvn)): the scheme is the application's")
            }
        }
        var aip = app.aip
        if let bytes = try c.hex("aip", count: 2...2) {
            aip = try! AIP(bytes: bytes)
            // The signed static data covers the AIP when 9F4A names it: one AIP for both interfaces.
            if aip != app.aip, let list = app.oda?.staticDataTagList, list.contains(0x82) {
                throw c.error("aip", "differs from the application's contact AIP, which its signed static data covers (9F4A lists 82): give one AIP")
            }
        }
        var pdol: DOL? = nil
        if visa {
            let bytes = try c.hex("pdol") ?? (try! Hex.decode(visaContactlessPDOL))
            let parsed: DOL
            do { parsed = try DOL.parse(bytes, field: c.field("pdol")) } catch { throw c.error("pdol", error.rule) }
            // Book B §3.3.3.6: without the TTQ in the PDOL Kernel 3 cannot run.
            guard parsed.entries.contains(where: { $0.tag == 0x9F66 }) else {
                throw c.error("pdol", "must ask for the TTQ (9F66): Kernel 3 does not select a Visa application without it")
            }
            for tag in CVN.cryptogramTags.map(\.tag) where tag != 0x82 && tag != 0x9F36 {
                guard parsed.entries.contains(where: { $0.tag == tag }) else {
                    throw c.error("pdol", "must request \(tag) (\(tag.name ?? "")): the qVSDC cryptogram is computed at GPO over the PDOL data")
                }
            }
            pdol = parsed
        } else if c.has("pdol") || c.has("ctq") {
            throw c.error(c.has("pdol") ? "pdol" : "ctq", "is for Visa (Kernel 3) applications; a Mastercard one takes the contact PDOL and CDOLs")
        }
        let records = try c.string("records") ?? "all"
        guard records == "all" || records == "none" else { throw c.error("records", "must be all or none, got '\(records)'") }
        if records == "none", !visa { throw c.error("records", "none is for Visa qVSDC; Kernel 2 reads the records (CDOL1, CVM list)") }
        let offline = try c.bool("offlineApproval") ?? false
        if records == "none", offline {
            throw c.error("records", "none leaves a terminal nothing to authenticate an offline approval with (fDDA); give records or drop offlineApproval")
        }
        var contactless = ContactlessApplication(aip: aip, pdol: pdol, ctq: try c.hex("ctq", count: 2...2) ?? [0x20, 0x00],
                                                 offlineApproval: offline, readRecords: records == "all",
                                                 kernel: try c.int("kernel", in: 1...63))
        contactless.cvn = cvn
        if let fci = try c.hex("fci", count: 1...250) {
            try checkFCI(fci, c, label: app.label, priority: app.priority, confirmation: app.requiresConfirmation, pdol: pdol ?? app.pdol,
                         preferredName: app.preferredName)
            contactless.fci = fci
        }
        return contactless
    }

    /// The stripe's track 1 and 2 as a reader returns them: the profile's own, or made from the
    /// card's data (discretionary data: PVKI 1, PVV 0000, CVV1 000 — the emulated host does not
    /// check the stripe's CVV).
    public var magneticStripe: MagneticStripe? {
        guard interfaces.contains(.magstripe) else { return nil }
        if let tracks = magstripeTracks { return try? MagneticStripe(track1: tracks.track1, track2: tracks.track2) }
        let yymm = String(expiry.bcd(day: 1).prefix(2).flatMap { [$0 >> 4, $0 & 0x0F] }.map { Character(String($0)) })
        let discretionary = "1" + "0000" + "000" + "00000"
        let t2 = "\(pan)=\(yymm)\(serviceCode)\(discretionary)"
        // Track 1's name field ends at '^' and its sentinels are '%' and '?': a name holding them
        // is written with spaces there, in track 1's upper-case character set.
        let name = String(cardholderName.uppercased().map { "^%?".contains($0) ? " " : $0 })
        let t1 = "B\(pan)^\(name)^\(yymm)\(serviceCode)\(discretionary)"
        return try? MagneticStripe(track1: t1.count <= 76 ? t1 : nil, track2: String(t2.prefix(37)))
    }

    /// The ATR a PC/SC contactless reader makes for the card (PC/SC part 3).
    public var contactlessATR: [UInt8] { ATR.contactless(historical: contactlessHistoricalBytes) }
}
