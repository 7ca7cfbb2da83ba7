import EMV
import Yams

/// A year and month, as card expiry and effective dates are given (`2030-12`).
public struct YearMonth: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int

    public init(year: Int, month: Int) {
        self.year = year
        self.month = month
    }

    /// Parses `YYYY-MM`.
    init?(text: String) {
        let parts = text.split(separator: "-")
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), (1...12).contains(m), y >= 2000, y <= 2099 else { return nil }
        self.init(year: y, month: m)
    }

    public static func < (a: YearMonth, b: YearMonth) -> Bool { (a.year, a.month) < (b.year, b.month) }

    public var description: String { String(format: "%04d-%02d", year, month) }

    /// The last day of the month, which is when a card expiring that month stops working.
    var lastDay: Int {
        switch month {
        case 2: return (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// YYMMDD in BCD, as tags 5F24 and 5F25 hold dates.
    func bcd(day: Int) -> [UInt8] {
        [UInt8(year % 100), UInt8(month), UInt8(day)].map { ($0 / 10) << 4 | ($0 % 10) }
    }
}

/// Credit or debit, as the issuer reports the account behind a card.
public enum AccountType: String, Sendable, CaseIterable {
    case credit, debit
}

/// What the emulated issuer knows about the card's account: the host (issue 4) decides with it.
public struct IssuerState: Hashable, Sendable {
    /// Available balance in minor units of `currency`.
    public var balance: Int
    /// ISO 4217 numeric currency code, e.g. 484 for MXN.
    public var currency: Int
    public var blocked: Bool
    public var lost: Bool
    public var stolen: Bool
    /// The issuer declines fallback transactions (a chip card swiped after a failed insert, POS
    /// entry mode 80), as issuers may since they carry the liability (profile `issuerState.fallback: decline`).
    public var declinesFallback = false
}

/// What a card is, for the contactless kernels: Visa's form factor indicator (9F6E) and
/// Mastercard's third-party data device type.
public enum FormFactor: String, Sendable, CaseIterable {
    case card, phone, watch

    /// Visa FFI byte 1 (version 1, form factor) as Book C-3 codes it.
    var visaFFI: [UInt8] {
        switch self {
        case .card: [0x20, 0x70, 0x00, 0x00]
        case .phone: [0x23, 0x88, 0x00, 0x00]
        case .watch: [0x24, 0x88, 0x00, 0x00]
        }
    }

    /// Mastercard device type (an2) in third-party data: "00" card, "01" phone, "03" watch.
    var mastercardDeviceType: String {
        switch self {
        case .card: "00"
        case .phone: "01"
        case .watch: "03"
        }
    }
}

/// A mobile wallet's consumer device CVM: none on a plain card; verified on the device
/// already; or pending, when the first tap asks the holder to look at the phone (Visa 6986,
/// Mastercard "See Phone") and the holder authenticates before tapping again.
public enum ConsumerDeviceCVM: String, Sendable, CaseIterable {
    case none, performed, pending
}

/// An application's contactless personalisation: what differs from its contact interface.
public struct ContactlessApplication: Hashable, Sendable {
    /// The AIP returned at GPO on the contactless interface.
    public let aip: AIP
    /// Visa: the PDOL (must ask for the TTQ, 9F66, and the cryptogram's data).
    public let pdol: DOL?
    /// Visa: the card transaction qualifiers' static bits (9F6C).
    public let ctq: [UInt8]
    /// The card may approve offline (a qVSDC or Kernel 2 TC) when the reader does not require online.
    public let offlineApproval: Bool
    /// Whether GPO names records to read (an online-only Visa card often gives no AFL).
    public let readRecords: Bool
    /// The kernel identifier announced in the PPSE (9F2A); nil: none, the RID's default kernel.
    public let kernel: Int?
    /// The cryptogram version on this interface, when not the application's (real dual-interface
    /// cards often use another CVN on their contactless interface); same issuer master key.
    public var cvn: CVN? = nil
    /// The FCI proprietary template (A5) SELECT answers on this interface, as a captured card
    /// answered it; nil: made from the profile's fields.
    public var fci: [UInt8]? = nil
}

/// An application's transaction log (EMV Book 3 Annex D): the log entry (9F4D) names its SFI, and
/// each record holds the values the log format (9F4F) lists, with no template.
public struct TransactionLog: Hashable, Sendable {
    public let sfi: Int
    public let records: [[UInt8]]
}

/// One EMV application on a card.
public struct ApplicationProfile: Hashable, Sendable {
    public let aid: [UInt8]
    public let label: String
    public let preferredName: String?
    /// Application priority indicator (tag 87): priority 1–15 (0 = none) and bit 8, "cardholder
    /// confirmation required".
    public let priority: Int
    public let requiresConfirmation: Bool
    public let cvn: CVN
    public let issuerMasterKey: TDESKey
    public let keyDerivationIndex: UInt8
    public let pdol: DOL?
    public let cdol1: DOL
    public let cdol2: DOL
    public let aip: AIP
    /// GPO response format: 1 (tag 80) or 2 (tag 77).
    public let gpoFormat: Int
    /// GENERATE AC response format: 1 (tag 80) or 2 (tag 77).
    public let generateACFormat: Int
    public let records: [RecordLayout]
    public let issuerActionCodes: (default: [UInt8], denial: [UInt8], online: [UInt8])
    public let cvmList: CVMList
    public let applicationUsageControl: [UInt8]
    public let currencyCode: Int
    public let currencyExponent: Int
    public let countryCode: Int
    public let applicationVersion: [UInt8]
    /// Lower and upper consecutive offline limits (9F14, 9F23) for terminal velocity checking.
    public let offlineLimits: (lower: Int, upper: Int)?
    /// The card may approve offline (return a TC to a first GENERATE AC asking for one); when
    /// false it always goes online, like most issuers' debit cards.
    public let offlineApproval: Bool
    /// The application is blocked: SELECT answers 6283 and nothing else works.
    public let blocked: Bool
    /// Certificates and keys for offline data authentication; nil for a card without them.
    public let oda: ODAPersonalisation?
    /// The contactless interface's personalisation; nil: the application cannot be tapped.
    public internal(set) var contactless: ContactlessApplication? = nil
    /// Card-resident values the profile has no field for (`data:`), such as a captured card's
    /// track 1 discretionary data (9F1F) or log format (9F4F): records and GET DATA answer them.
    public internal(set) var data: [EMVTag: [UInt8]] = [:]
    /// The FCI proprietary template (A5) SELECT answers on contact, byte for byte (`fci:`); nil:
    /// made from the label, priority, PDOL and preferred name.
    public internal(set) var fci: [UInt8]? = nil
    /// Issuer discretionary bytes the card appends to the CVN's issuer application data (9F10),
    /// so a captured card's IAD keeps its length.
    public internal(set) var issuerDiscretionaryData: [UInt8] = []
    /// The transaction log READ RECORD serves (`log:`); nil: none.
    public internal(set) var log: TransactionLog? = nil

    public static func == (a: ApplicationProfile, b: ApplicationProfile) -> Bool { a.aid == b.aid && a.label == b.label }
    public func hash(into hasher: inout Hasher) { hasher.combine(aid) }

    /// The ICC master key the card was personalised with.
    public func cryptogramKeys(pan: String, psn: String) throws(EMVError) -> CryptogramKeys {
        try CryptogramKeys(cvn: cvn, issuerMasterKey: issuerMasterKey, pan: pan, psn: psn)
    }

    /// The keys of the contactless interface, when its CVN is not the application's.
    public func contactlessCryptogramKeys(pan: String, psn: String) throws(EMVError) -> CryptogramKeys? {
        guard let other = contactless?.cvn, other != cvn else { return nil }
        return try CryptogramKeys(cvn: other, issuerMasterKey: issuerMasterKey, pan: pan, psn: psn)
    }
}

/// Which tags one record of an application holds.
public struct RecordLayout: Hashable, Sendable {
    public let sfi: Int
    public let record: Int
    public let tags: [EMVTag]
    /// Whether the record is signed for offline data authentication (counted in the AFL).
    public let offlineAuthentication: Bool
}

/// A virtual card: the card, its applications, its PIN and the issuer's view of its account.
public struct CardProfile: Sendable {
    public let name: String
    public let file: String
    public let pan: String
    public let psn: String
    public let expiry: YearMonth
    public let effective: YearMonth
    public let cardholderName: String
    public let serviceCode: String
    public let pin: String?
    /// The card verification value printed on the card (3 digits, 4 for American Express):
    /// what a card-not-present payment is checked against. Nil: not checked.
    public internal(set) var cvv: String? = nil
    public let pinTryLimit: Int
    public let pinTriesRemaining: Int
    public let atcStart: Int
    public let issuerName: String
    public let accountType: AccountType
    public let installmentsMaximum: Int?
    public let issuerState: IssuerState
    public let atr: [UInt8]
    /// Whether the card answers SELECT 1PAY.SYS.DDF01 (otherwise a terminal uses its AID list).
    public let hasPSE: Bool
    /// Whether the card answers as a T=0 card on the wire (`61xx` and GET RESPONSE, `6Cxx`; see
    /// `VirtualCard.respond(to:)`): profile field `t0GetResponse`, for a T=0 ATR.
    public internal(set) var t0GetResponse = false
    public let applications: [ApplicationProfile]
    /// The ways the card can be read (`interfaces:`): contact chip, contactless, magnetic stripe.
    public internal(set) var interfaces: Set<CardInterface> = [.contact, .magstripe]
    public internal(set) var formFactor = FormFactor.card
    public internal(set) var consumerDeviceCVM = ConsumerDeviceCVM.none
    /// The historical bytes of the card's ATS, which a PC/SC contactless reader puts in its ATR.
    public internal(set) var contactlessHistoricalBytes: [UInt8] = []
    /// Tracks given in the profile (`magstripe:`); nil: derived from the card's data.
    public internal(set) var magstripeTracks: (track1: String?, track2: String)? = nil
    /// The PSE's FCI (the whole 6F template) as a captured card answered it; nil: made.
    public internal(set) var pseFCI: [UInt8]? = nil
    /// The PSE directory's records (SFI 1, each a 70 template) byte for byte; nil: one record per application.
    public internal(set) var pseDirectory: [[UInt8]]? = nil
    /// The PPSE's FCI (6F) byte for byte; nil: made from the tappable applications.
    public internal(set) var ppseFCI: [UInt8]? = nil
    /// The last online ATC (9F13) before the first transaction.
    public internal(set) var lastOnlineATC = 0

    /// The brand of the PAN, from its IIN.
    public var brand: CardBrand? { CardBrand.detect(pan: pan) }

    /// A T=0 ATR with historical bytes, as most EMV contact cards answer.
    public static let defaultATR: [UInt8] = [0x3B, 0x68, 0x00, 0x00, 0x80, 0x66, 0xA2, 0x06, 0x02, 0x01, 0x32, 0x0E]

    /// Parses a profile from YAML text; `file` names it in errors.
    public static func parse(yaml: String, file: String) throws(ProfileError) -> CardProfile {
        let node: Node?
        do { node = try Yams.compose(yaml: yaml) } catch {
            throw ProfileError(file: file, field: "(document)", reason: "not valid YAML: \(String(describing: error).split(separator: "\n").first ?? "")")
        }
        guard let node else { throw ProfileError(file: file, field: "(document)", reason: "is empty") }
        return try parse(YAMLMapping(node, file: file, path: ""))
    }

    static let topLevelFields: Set<String> = [
        "name", "pan", "psn", "expiry", "effective", "cardholderName", "serviceCode", "pin", "pinTryLimit", "pinTriesRemaining",
        "cvv", "atc", "issuer", "installments", "issuerState", "atr", "pse", "applications", "t0GetResponse", "oda",
        "interfaces", "formFactor", "cdcvm", "contactless", "magstripe", "pseFCI", "pseDirectory", "ppseFCI", "lastOnlineATC",
    ]

    static func parse(_ m: YAMLMapping) throws(ProfileError) -> CardProfile {
        try m.rejectUnknown(topLevelFields)
        let name = try m.requiredString("name")
        guard let pan = try m.digits("pan", count: 12...19) else { throw m.error("pan", "is required") }
        guard Luhn.isValid(pan) else { throw m.error("pan", "fails the Luhn check (a real card number always passes it)") }
        let psn = try m.digits("psn", count: 2...2) ?? "00"
        guard let expiryText = try m.string("expiry") else { throw m.error("expiry", "is required (YYYY-MM)") }
        guard let expiry = YearMonth(text: expiryText) else { throw m.error("expiry", "must be YYYY-MM, got '\(expiryText)'") }
        let effectiveText = try m.string("effective") ?? "2020-01"
        guard let effective = YearMonth(text: effectiveText) else { throw m.error("effective", "must be YYYY-MM, got '\(effectiveText)'") }
        guard effective <= expiry else { throw m.error("effective", "\(effective) is after the expiry date \(expiry)") }
        let holder = try m.string("cardholderName") ?? "CARDBENCH/TEST CARD"
        guard (2...26).contains(holder.utf8.count), holder.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw m.error("cardholderName", "must be 2–26 printable ASCII characters (tag 5F20)")
        }
        let serviceCode = try m.digits("serviceCode", count: 3...3) ?? "201"
        let pin = try m.digits("pin", count: 4...12)
        let tryLimit = try m.int("pinTryLimit", in: 1...15) ?? 3
        let triesRemaining = try m.int("pinTriesRemaining", in: 0...15) ?? tryLimit
        guard triesRemaining <= tryLimit else { throw m.error("pinTriesRemaining", "is more than pinTryLimit (\(tryLimit))") }
        let atc = try m.int("atc", in: 0...0xFFFE) ?? 1

        var issuerName = "CARDBENCH BANK", accountType = AccountType.credit
        if let issuer = try m.mapping("issuer") {
            try issuer.rejectUnknown(["name", "accountType"])
            issuerName = try issuer.string("name") ?? issuerName
            if let t = try issuer.string("accountType") {
                guard let type = AccountType(rawValue: t) else { throw issuer.error("accountType", "must be credit or debit, got '\(t)'") }
                accountType = type
            }
        }

        var installments: Int? = nil
        if let inst = try m.mapping("installments") {
            try inst.rejectUnknown(["supported", "maximum"])
            if try inst.bool("supported") ?? false {
                installments = try inst.int("maximum", in: 2...48) ?? 12
            } else if inst.has("maximum") {
                throw inst.error("maximum", "given while installments are not supported")
            }
        }

        var state = IssuerState(balance: 1_000_000, currency: 484, blocked: false, lost: false, stolen: false)
        if let s = try m.mapping("issuerState") {
            try s.rejectUnknown(["balance", "currency", "blocked", "lost", "stolen", "fallback"])
            if let text = try s.string("balance") {
                guard let minor = Self.minorUnits(text) else { throw s.error("balance", "must be an amount like 1500.00, got '\(text)'") }
                state.balance = minor
            }
            if let c = try s.digits("currency", count: 3...3) { state.currency = Int(c)! }
            state.blocked = try s.bool("blocked") ?? false
            state.lost = try s.bool("lost") ?? false
            state.stolen = try s.bool("stolen") ?? false
            if let f = try s.string("fallback") {
                guard f == "accept" || f == "decline" else { throw s.error("fallback", "must be accept or decline, got '\(f)'") }
                state.declinesFallback = f == "decline"
            }
        }

        let atr: [UInt8]
        if let given = try m.hex("atr", count: 2...33) {
            do { _ = try ATR.parse(given) } catch { throw m.error("atr", error.rule) }
            atr = given
        } else {
            atr = defaultATR
        }

        // A stripe-only card (interfaces: [magstripe]) has no chip and so no application.
        let stripeOnly = try m.stringList("interfaces").map { !$0.isEmpty && Set($0) == ["magstripe"] } ?? false
        let appNodes = try m.sequence("applications") ?? []
        guard !appNodes.isEmpty || stripeOnly else {
            throw m.error("applications", "at least one application is required (none only for interfaces: [magstripe])")
        }
        if stripeOnly, !appNodes.isEmpty { throw m.error("applications", "a stripe-only card (interfaces: [magstripe]) has no chip applications") }
        // Offline data authentication material, by AID: a block of its own so that
        // `cardbench emv ca personalise` can rewrite it without touching the rest of the file.
        var oda: [[UInt8]: (index: Int, ODAPersonalisation)] = [:]
        for (i, node) in (try m.sequence("oda") ?? []).enumerated() {
            let (aid, entry) = try ODAPersonalisation.parse(YAMLMapping(node, file: m.file, path: "oda[\(i)]"))
            guard oda[aid] == nil else { throw m.error("oda[\(i)].aid", "\(Hex.encode(aid)) has two oda entries") }
            oda[aid] = (i, entry)
        }
        var apps: [ApplicationProfile] = []
        for (i, node) in appNodes.enumerated() {
            let a = try YAMLMapping(node, file: m.file, path: "applications[\(i)]")
            apps.append(try parseApplication(a, pan: pan, expiry: expiry, effective: effective, oda: { oda[$0]?.1 }))
        }
        for (aid, (i, _)) in oda where !apps.contains(where: { $0.aid == aid }) {
            throw m.error("oda[\(i)].aid", "\(Hex.encode(aid)) is not one of the card's applications")
        }
        var seen = Set<[UInt8]>()
        for (i, app) in apps.enumerated() where !seen.insert(app.aid).inserted {
            throw m.error("applications[\(i)].aid", "\(Hex.encode(app.aid)) appears twice")
        }
        if pin == nil, apps.contains(where: { $0.cvmList.rules.contains { [.plaintextPINByICC, .plaintextPINByICCAndSignature, .encipheredPINOnline].contains($0.method) } }) {
            throw m.error("pin", "is required: a CVM list offers PIN verification")
        }

        let cvv = try m.digits("cvv", count: 3...4)
        var profile = CardProfile(name: name, file: m.file, pan: pan, psn: psn, expiry: expiry, effective: effective, cardholderName: holder,
                           serviceCode: serviceCode, pin: pin, pinTryLimit: tryLimit, pinTriesRemaining: triesRemaining, atcStart: atc,
                           issuerName: issuerName, accountType: accountType, installmentsMaximum: installments, issuerState: state,
                           atr: atr, hasPSE: try m.bool("pse") ?? true, applications: apps)
        profile.cvv = cvv
        try parseInterfaces(m, into: &profile)
        try parseCapturedCard(m, into: &profile)
        if let t0 = try m.bool("t0GetResponse"), t0 {
            // The answers only make sense to a terminal sending T=0 TPDUs.
            guard (try? ATR.parse(atr)).map({ $0.protocols.first ?? 0 }) == 0 else {
                throw m.error("t0GetResponse", "needs an ATR offering T=0 first: a T=1 terminal sends whole APDUs")
            }
            profile.t0GetResponse = true
        }
        return profile
    }

    static let applicationFields: Set<String> = [
        "aid", "label", "preferredName", "priority", "confirmation", "cvn", "issuerMasterKey", "keyDerivationIndex", "pdol", "cdol1",
        "cdol2", "aip", "gpoFormat", "generateACFormat", "records", "iac", "cvmList", "auc", "currency", "currencyExponent", "country",
        "applicationVersion", "offlineLimits", "offlineApproval", "blocked", "contactless", "data", "fci", "issuerDiscretionaryData", "log",
    ]

    static func parseApplication(_ a: YAMLMapping, pan: String, expiry: YearMonth, effective: YearMonth,
                                 oda odaFor: ([UInt8]) -> ODAPersonalisation? = { _ in nil }) throws(ProfileError) -> ApplicationProfile {
        try a.rejectUnknown(applicationFields)
        guard let aid = try a.hex("aid", count: 5...16) else { throw a.error("aid", "is required") }
        let oda = odaFor(aid)
        let label = try a.requiredString("label")
        guard label.utf8.count <= 16, label.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw a.error("label", "must be 1–16 printable ASCII characters (tag 50)")
        }
        let preferred = try a.string("preferredName")
        if let p = preferred, !(1...16).contains(p.utf8.count) { throw a.error("preferredName", "must be 1–16 characters (tag 9F12)") }
        guard let cvnNumber = try a.int("cvn", in: 0...255) else { throw a.error("cvn", "is required") }
        let cvn: CVN
        do { cvn = try CVN(number: cvnNumber) } catch { throw a.error("cvn", error.rule) }
        guard let imkBytes = try a.hex("issuerMasterKey", count: 16...16) else { throw a.error("issuerMasterKey", "is required (32 hex digits)") }
        let imk = try! TDESKey(imkBytes)
        let visa = cvn.isVisa

        func dol(_ key: String, default value: String?) throws(ProfileError) -> DOL? {
            guard let bytes = try a.hex(key) ?? value.map({ try! Hex.decode($0) }) else { return nil }
            do { return try DOL.parse(bytes, field: a.field(key)) } catch { throw a.error(key, error.rule) }
        }
        // Defaults follow the schemes' common contact personalisations: Visa takes the ARPC in
        // EXTERNAL AUTHENTICATE (AIP issuer authentication bit set), Mastercard M/Chip in tag 91
        // of CDOL2.
        let cdol1Default = visa ? "9F02069F03069F1A0295055F2A029A039C019F3704" : "9F02069F03069F1A0295055F2A029A039C019F37049F35019F45029F3403"
        let cdol2Default = visa ? "8A029F02069F03069F1A0295055F2A029A039C019F3704" : "910A8A0295059F3704"
        let pdol = try dol("pdol", default: nil)
        let cdol1 = try dol("cdol1", default: cdol1Default)!
        let cdol2 = try dol("cdol2", default: cdol2Default)!
        for tag in CVN.cryptogramTags.map(\.tag) where tag != 0x82 && tag != 0x9F36 {
            guard cdol1.entries.contains(where: { $0.tag == tag }) else {
                throw a.error("cdol1", "must request \(tag) (\(tag.name ?? "")): \(cvn) puts it in the cryptogram")
            }
        }

        let aip: AIP
        if let bytes = try a.hex("aip", count: 2...2) { aip = try! AIP(bytes: bytes) } else {
            var bits = AIP()
            bits.set(AIP.cardholderVerificationSupported)
            bits.set(AIP.terminalRiskManagementRequired)
            if visa { bits.set(AIP.issuerAuthenticationSupported) }
            for method in oda?.methods ?? [] {
                bits.set(method == .sda ? AIP.sdaSupported : method == .dda ? AIP.ddaSupported : AIP.cdaSupported)
            }
            // Kernel 2 runs EMV mode only when AIP byte 2 bit 8 says the card supports it; the
            // contact kernel ignores byte 2, so one AIP serves both interfaces (and the signed data).
            if !visa, a.has("contactless") { bits.bytes[1] |= 0x80 }
            aip = bits
        }
        let gpoFormat = try a.int("gpoFormat", in: 1...2) ?? (visa ? 1 : 2)
        let cda = oda?.methods.contains(.cda) ?? false
        // CDA puts its signature beside the other data objects: only format 2 has room (Book 3 §6.5.5.4).
        let acFormat = try a.int("generateACFormat", in: 1...2) ?? (visa && !cda ? 1 : 2)
        if cda, acFormat == 1 { throw a.error("generateACFormat", "must be 2 for a CDA card: the signature (9F4B) goes in a format 2 response") }

        let cvmList: CVMList
        guard let cvmBytes = try a.hex("cvmList") else { throw a.error("cvmList", "is required (tag 8E in hex)") }
        do { cvmList = try CVMList.parse(cvmBytes) } catch { throw a.error("cvmList", error.rule) }

        var iac = (default: [UInt8](repeating: 0, count: 5), denial: [UInt8](repeating: 0, count: 5), online: [UInt8](repeating: 0, count: 5))
        if let codes = try a.mapping("iac") {
            try codes.rejectUnknown(["default", "denial", "online"])
            iac.default = try codes.hex("default", count: 5...5) ?? iac.default
            iac.denial = try codes.hex("denial", count: 5...5) ?? iac.denial
            iac.online = try codes.hex("online", count: 5...5) ?? iac.online
        }

        var limits: (Int, Int)? = nil
        if let l = try a.mapping("offlineLimits") {
            try l.rejectUnknown(["lower", "upper"])
            let lower = try l.int("lower", in: 0...255) ?? 0
            let upper = try l.int("upper", in: 0...255) ?? 0
            guard lower <= upper else { throw l.error("lower", "is above upper (\(upper))") }
            limits = (lower, upper)
        }

        var records: [RecordLayout]
        if let nodes = try a.sequence("records") {
            var out: [RecordLayout] = []
            for (i, node) in nodes.enumerated() {
                let r = try YAMLMapping(node, file: a.file, path: a.field("records[\(i)]"))
                try r.rejectUnknown(["sfi", "record", "tags", "offlineAuthentication"])
                guard let sfi = try r.int("sfi", in: 1...10) else { throw r.error("sfi", "is required (1–10 for EMV application files)") }
                guard let number = try r.int("record", in: 1...255) else { throw r.error("record", "is required") }
                guard let tagTexts = try r.stringList("tags"), !tagTexts.isEmpty else { throw r.error("tags", "at least one tag is required") }
                var tags: [EMVTag] = []
                for (j, text) in tagTexts.enumerated() {
                    do { tags.append(try EMVTag(hex: text, field: r.field("tags[\(j)]"))) } catch { throw r.error("tags[\(j)]", error.rule) }
                }
                out.append(RecordLayout(sfi: sfi, record: number, tags: tags, offlineAuthentication: try r.bool("offlineAuthentication") ?? false))
            }
            records = out
        } else {
            records = [
                RecordLayout(sfi: 1, record: 1, tags: [0x57, 0x5F20, 0x9F1F], offlineAuthentication: false),
                RecordLayout(sfi: 2, record: 1, tags: [0x5A, 0x5F24, 0x5F25, 0x5F28, 0x5F34, 0x5F30, 0x9F07, 0x9F08, 0x9F42, 0x9F44],
                             offlineAuthentication: true),
                RecordLayout(sfi: 2, record: 2, tags: [0x8C, 0x8D, 0x8E, 0x9F0D, 0x9F0E, 0x9F0F, 0x9F14, 0x9F23], offlineAuthentication: false),
            ]
        }
        var places = Set<[Int]>()
        for (i, r) in records.enumerated() where !places.insert([r.sfi, r.record]).inserted {
            throw a.error("records[\(i)]", "SFI \(r.sfi) record \(r.record) is defined twice")
        }
        if let oda {
            records += try odaRecords(oda, after: records, a)
        }
        for required: EMVTag in [0x5A, 0x5F24, 0x8C, 0x8D] where !records.contains(where: { $0.tags.contains(required) }) {
            throw a.error("records", "no record holds \(required) (\(required.name ?? "")), which a terminal must read")
        }

        let country = try a.digits("country", count: 3...3).map { Int($0)! } ?? 484
        let currency = try a.digits("currency", count: 3...3).map { Int($0)! } ?? 484
        var application = ApplicationProfile(
            aid: aid, label: label, preferredName: preferred, priority: try a.int("priority", in: 0...15) ?? 1,
            requiresConfirmation: try a.bool("confirmation") ?? false, cvn: cvn, issuerMasterKey: imk,
            keyDerivationIndex: UInt8(try a.int("keyDerivationIndex", in: 0...255) ?? 1), pdol: pdol, cdol1: cdol1, cdol2: cdol2,
            aip: aip, gpoFormat: gpoFormat, generateACFormat: acFormat, records: records, issuerActionCodes: iac, cvmList: cvmList,
            applicationUsageControl: try a.hex("auc", count: 2...2) ?? [0xFF, 0x00], currencyCode: currency,
            currencyExponent: try a.int("currencyExponent", in: 0...3) ?? 2, countryCode: country,
            applicationVersion: try a.hex("applicationVersion", count: 2...2) ?? (visa ? [0x00, 0x8C] : [0x00, 0x02]),
            offlineLimits: limits, offlineApproval: try a.bool("offlineApproval") ?? false, blocked: try a.bool("blocked") ?? false,
            oda: oda)
        try parseCapturedApplication(a, into: &application, pan: pan, expiry: expiry, effective: effective)
        if let c = try a.mapping("contactless") {
            application.contactless = try parseContactless(c, application: application)
        }
        return application
    }

    /// The records that hold an application's certificates when its `records:` do not place them:
    /// in the first SFI it does not use, never marked for ODA (certificates are not signed data),
    /// packed so each record fits a short response.
    static func odaRecords(_ oda: ODAPersonalisation, after records: [RecordLayout], _ a: YAMLMapping) throws(ProfileError) -> [RecordLayout] {
        let placed = Set(records.flatMap(\.tags))
        let tags = ODAPersonalisation.tags.filter { !placed.contains($0) && oda.value(of: $0) != nil }
        guard !tags.isEmpty else { return [] }
        guard let sfi = (1...10).first(where: { s in !records.contains { $0.sfi == s } }) else {
            throw a.error("records", "uses every SFI 1–10; leave one free for the ODA certificates or place them in a record")
        }
        var out: [RecordLayout] = []
        var current: [EMVTag] = [], size = 0
        for tag in tags {
            let length = TLV(tag, oda.value(of: tag)!).encoded().count
            if size + length > 250, !current.isEmpty {
                out.append(RecordLayout(sfi: sfi, record: out.count + 1, tags: current, offlineAuthentication: false))
                (current, size) = ([], 0)
            }
            current.append(tag)
            size += length
        }
        out.append(RecordLayout(sfi: sfi, record: out.count + 1, tags: current, offlineAuthentication: false))
        return out
    }

    /// "1500.00" or "1500" to minor units (two decimals).
    static func minorUnits(_ text: String) -> Int? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = Int(parts[0]), whole >= 0 else { return nil }
        if parts.count == 1 { return whole * 100 }
        guard parts[1].count == 2, let cents = Int(parts[1]) else { return nil }
        return whole * 100 + cents
    }

    // MARK: Data the card holds, derived from the profile

    /// Track 2 equivalent data (tag 57): PAN, separator D, YYMM, service code, discretionary data.
    public var track2: [UInt8] {
        var nibbles: [UInt8] = pan.utf8.map { $0 - 0x30 } + [0xD]
        nibbles += [UInt8(expiry.year % 100 / 10), UInt8(expiry.year % 10), UInt8(expiry.month / 10), UInt8(expiry.month % 10)]
        nibbles += serviceCode.utf8.map { $0 - 0x30 }
        nibbles += [0, 0, 0, 0, 0]  // PIN verification value and CVV placeholders
        if nibbles.count % 2 == 1 { nibbles.append(0xF) }
        return stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// The value of a card-resident tag for `app`, or nil when the card has none.
    public func value(of tag: EMVTag, in app: ApplicationProfile) -> [UInt8]? {
        func n(_ value: Int, bytes: Int) -> [UInt8] {
            var digits = String(value).utf8.map { $0 - 0x30 }
            while digits.count < bytes * 2 { digits.insert(0, at: 0) }
            return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
        }
        if let given = app.data[tag] { return given }
        switch tag.value {
        case 0x57: return track2
        case 0x5A:
            var nibbles: [UInt8] = pan.utf8.map { $0 - 0x30 }
            if nibbles.count % 2 == 1 { nibbles.append(0xF) }
            return stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
        case 0x5F20: return Array(cardholderName.utf8)
        case 0x5F24: return expiry.bcd(day: expiry.lastDay)
        case 0x5F25: return effective.bcd(day: 1)
        case 0x5F28: return n(app.countryCode, bytes: 2)
        case 0x5F30: return n(Int(serviceCode)!, bytes: 2)
        case 0x5F34: return n(Int(psn)!, bytes: 1)
        case 0x9F07: return app.applicationUsageControl
        case 0x9F08: return app.applicationVersion
        case 0x9F42: return n(app.currencyCode, bytes: 2)
        case 0x9F44: return n(app.currencyExponent, bytes: 1)
        case 0x8C: return app.cdol1.bytes
        case 0x8D: return app.cdol2.bytes
        case 0x8E: return app.cvmList.bytes
        case 0x9F0D: return app.issuerActionCodes.default
        case 0x9F0E: return app.issuerActionCodes.denial
        case 0x9F0F: return app.issuerActionCodes.online
        case 0x9F14: return app.offlineLimits.map { [UInt8($0.lower)] }
        case 0x9F23: return app.offlineLimits.map { [UInt8($0.upper)] }
        case 0x9F1F: return Array("0000000000".utf8)
        case 0x50: return Array(app.label.utf8)
        case 0x9F12: return app.preferredName.map { Array($0.utf8) }
        case 0x87: return [UInt8(app.priority) | (app.requiresConfirmation ? 0x80 : 0)]
        case 0x4F: return app.aid
        default: return app.oda?.value(of: tag)
        }
    }

    /// The AFL a GPO returns: one entry per run of consecutive records in an SFI.
    public func afl(for app: ApplicationProfile) -> [AFLEntry] {
        var out: [AFLEntry] = []
        for sfi in Set(app.records.map(\.sfi)).sorted() {
            let records = app.records.filter { $0.sfi == sfi }.sorted { $0.record < $1.record }
            var start = 0
            while start < records.count {
                var end = start
                while end + 1 < records.count, records[end + 1].record == records[end].record + 1 { end += 1 }
                let run = records[start...end]
                // ODA records must lead a run: EMV counts them from the first record named.
                let oda = run.prefix(while: \.offlineAuthentication).count
                out.append(AFLEntry(sfi: sfi, firstRecord: run.first!.record, lastRecord: run.last!.record, offlineAuthenticationRecords: oda))
                start = end + 1
            }
        }
        return out
    }
}
