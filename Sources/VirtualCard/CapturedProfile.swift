import EMV
import Terminal

/// Turns what `CardCapture` read from a card into a profile that answers the same
/// (`cardbench card capture`, docs/recording.md). What a card never reveals is made by the bench
/// and the profile's comments say so: the issuer master key (random, so cryptograms are real and
/// the emulated issuer verifies them), the ODA certificates (re-issued under the bench CA for the
/// same methods, key lengths and expiries), the PIN. A live card's number is replaced by one of
/// the same BIN and length unless `keepPAN`.
public enum CapturedProfile {
    public struct Options: Sendable {
        /// The profile's `name`; nil: made from the first application's label.
        public var name: String?
        /// The PIN the profile gets when its CVM list asks for one (a card never reveals its own).
        public var pin = "1234"
        /// Keep a number that is not on a test range. Off: it is replaced.
        public var keepPAN = false
        /// The bench CA that re-issues the certificates; nil: a card with certificates fails.
        public var ca: CertificationAuthority?
        /// CA public keys to recover the card's own certificates with, for their exact key
        /// lengths and expiries (a real card's CA is in no bench file: then they are estimated).
        public var caKeys: [CAPublicKey] = []
        /// Names the file in errors.
        public var file = "captured.yaml"

        public init() {}
    }

    /// What was copied from the card and what the bench made; no card number in it.
    public struct Report: Sendable, Equatable {
        public var read: [String] = []
        public var made: [String] = []
        /// The number as the report may show it: first six and last four digits.
        public var maskedPAN = ""
        public var panReplaced = false
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// The profile's YAML text and the report.
    public static func make(from capture: CardCapture.Result, options: Options) throws(Failure) -> (yaml: String, report: Report) {
        var report = Report()
        report.read = capture.notes
        let apps = capture.applications.filter { !$0.fci.isEmpty }
        guard !apps.isEmpty else { throw Failure(reason: "no application answered SELECT: there is nothing to make a profile of") }

        // The card number, from the first record or GPO that holds it.
        var realPAN: String?
        for app in apps {
            for bytes in app.records.map(\.bytes) + [app.gpo ?? []] {
                let items = (try? TLV.parse(bytes)) ?? []
                if let v = items.first(0x5A)?.value { realPAN = digits(v); break }
                if let v = items.first(0x57)?.value { realPAN = digits(v).split(separator: "D").first.map(String.init); break }
            }
            if realPAN != nil { break }
        }
        guard let realPAN, (12...19).contains(realPAN.count), realPAN.allSatisfy(\.isNumber) else {
            throw Failure(reason: "no card number (5A or 57) in anything the card answered: a profile needs one")
        }
        var pan = realPAN
        if !TestCardNumbers.isTest(realPAN) && !options.keepPAN {
            pan = TestCardNumbers.substitute(for: realPAN)
            report.panReplaced = true
            report.made.append("card number: not on a known test range, replaced by one of the same BIN and length (--keep-pan keeps it)")
        }
        report.maskedPAN = String(pan.prefix(6)) + String(repeating: "*", count: pan.count - 10) + String(pan.suffix(4))
        let swap: ([UInt8]) -> [UInt8] = { replacingPAN(realPAN, with: pan, in: $0) }

        var out = ""
        func line(_ text: String) { out += text + "\n" }
        let contactless = capture.interface == .contactless
        var values: [UInt32: [UInt8]] = [:]
        for app in apps {
            for record in app.records { for item in ((try? TLV.parse(swap(record.bytes))) ?? []).first(0x70)?.children ?? [] where values[item.tag.value] == nil {
                values[item.tag.value] = item.value
            } }
            for item in primitives(swap(app.gpo ?? [])) where values[item.tag.value] == nil { values[item.tag.value] = item.value }
        }
        let firstFCI = primitiveMap(apps[0].fci)
        let label = printable(firstFCI[0x50]) ?? "CAPTURED"
        line("name: \(YAMLText.quoted(options.name ?? "captured \(label)"))")
        line("pan: \(YAMLText.quoted(pan))")
        if let psn = values[0x5F34]?.first { line("psn: \(YAMLText.quoted(String(format: "%02d", Int(psn >> 4) * 10 + Int(psn & 0x0F))))") }
        let track2 = values[0x57].map(digits)
        let expiry = values[0x5F24].flatMap(yearMonth) ?? track2.flatMap { t in
            t.split(separator: "D").dropFirst().first.flatMap { rest in rest.count >= 4 ? "20\(rest.prefix(2))-\(rest.dropFirst(2).prefix(2))" : nil }
        }
        guard let expiry else { throw Failure(reason: "no expiry date (5F24 or 57) in anything the card answered") }
        line("expiry: \(YAMLText.quoted(expiry))")
        if let effective = values[0x5F25].flatMap(yearMonth), effective <= expiry { line("effective: \(YAMLText.quoted(effective))") }
        if let name = printable(values[0x5F20]), (2...26).contains(name.utf8.count) { line("cardholderName: \(YAMLText.quoted(name))") }
        let serviceCode = values[0x5F30].map { digits($0).suffix(3) }.map(String.init)
            ?? track2.flatMap { t in t.split(separator: "D").dropFirst().first.map { String($0.dropFirst(4).prefix(3)) } }
        if let serviceCode, serviceCode.count == 3 { line("serviceCode: \(YAMLText.quoted(serviceCode))") }
        line("pin: \(YAMLText.quoted(options.pin))")
        report.made.append("PIN: \(options.pin == "1234" ? "1234, the bench's default" : "the one given") (a card never reveals its own)")
        if let tries = apps.compactMap({ $0.getData[0x9F17]?.first }).first {
            line("pinTryLimit: \(max(3, Int(tries)))")
            line("pinTriesRemaining: \(tries)")
            report.made.append("PIN try limit: \(max(3, Int(tries))) (a card tells only the tries left, \(tries))")
        }
        let atc = apps.compactMap { app -> Int? in
            let fromAC = generateACFields(app.generateAC).atc ?? primitiveMap(app.gpo ?? [])[0x9F36]
            return (fromAC ?? app.getData[0x9F36]).map { Int($0.reduce(0) { $0 << 8 | UInt32($1) }) }
        }.max()
        if let atc, atc <= 0xFFFE { line("atc: \(atc)") }
        if let last = apps.compactMap({ $0.getData[0x9F13] }).first { line("lastOnlineATC: \(Int(last.reduce(0) { $0 << 8 | UInt32($1) }))") }
        if contactless {
            line("interfaces: [contactless]")
            if let atr = try? ATR.parse(capture.atr), !atr.historicalBytes.isEmpty {
                line("contactless:")
                line("  historicalBytes: \(YAMLText.quoted(Hex.encode(atr.historicalBytes)))")
            }
            if let fci = capture.directoryFCI { line("ppseFCI: \(YAMLText.quoted(Hex.encode(fci)))") }
        } else {
            line("interfaces: [contact]")
            if (try? ATR.parse(capture.atr)) != nil {
                line("atr: \(YAMLText.quoted(Hex.encode(capture.atr)))")
            } else {
                report.made.append("ATR: \(Hex.encode(capture.atr)) does not parse as ISO 7816-3 requires; the profile keeps the default")
            }
            if let fci = capture.directoryFCI {
                line("pseFCI: \(YAMLText.quoted(Hex.encode(fci)))")
                line("pseDirectory:")
                for record in capture.directoryRecords { line("  - \(YAMLText.quoted(Hex.encode(record)))") }
            } else {
                line("pse: false")
            }
        }
        report.made.append("issuer master keys: random, one per application, so the cryptograms are real and the bench's issuer verifies them")

        line("applications:")
        var odaOptions: ODAPersonaliser.Options?
        for app in apps {
            try application(app, into: &out, pan: pan, swap: swap, contactless: contactless, options: options, report: &report, oda: &odaOptions)
        }
        // The values the profile's fields would make that differ from the card's go in `data:`,
        // so every record reads back byte for byte.
        var text = out
        let parsed: CardProfile
        do { parsed = try CardProfile.parse(yaml: text, file: options.file) } catch { throw Failure(reason: "the captured profile does not load: \(error)") }
        text = try reconcile(text, profile: parsed, apps: apps, swap: swap, file: options.file)
        if let oda = odaOptions {
            guard let ca = options.ca else {
                throw Failure(reason: "the card offers offline data authentication and holds certificates; re-issuing them needs the bench CA (--ca)")
            }
            do { text = try ODAPersonaliser(ca: ca).personalise(yaml: text, file: options.file, options: oda) } catch {
                throw Failure(reason: "re-issuing the certificates: \(error)")
            }
            report.made.append("ODA certificates: re-issued under the bench CA key \(Hex.encode([oda.caIndex])) for \(oda.methods.map(\.rawValue).joined(separator: ", ")), "
                               + "issuer key \(oda.issuerBits) bits, ICC key \(oda.iccBits) bits; the CAPK index (8F) is the bench's")
        }
        let header = (["# Captured by `cardbench card capture` (\(contactless ? "contactless" : "contact")): docs/recording.md.",
                       "# Read from the card:"] + report.read.map { "#   \($0)" }
                      + ["# Made by the bench (the card does not reveal it):"] + report.made.map { "#   \($0)" }).joined(separator: "\n")
        return (header + "\n" + text, report)
    }

    // MARK: One application

    private static func application(_ app: CardCapture.Application, into out: inout String, pan: String, swap: ([UInt8]) -> [UInt8],
                                    contactless: Bool, options: Options, report: inout Report,
                                    oda: inout ODAPersonaliser.Options?) throws(Failure) {
        func line(_ text: String) { out += "    " + text + "\n" }
        let aidText = Hex.encode(app.aid)
        let fciTemplate = (try? TLV.parse(swap(app.fci)))?.first(0x6F)?.first(0xA5)
        let fci = fciTemplate.map { Dictionary($0.children.map { ($0.tag.value, $0.value) }, uniquingKeysWith: { a, _ in a }) } ?? [:]
        var values: [UInt32: [UInt8]] = [:]
        for record in app.records {
            for item in ((try? TLV.parse(swap(record.bytes))) ?? []).first(0x70)?.children ?? [] where values[item.tag.value] == nil {
                values[item.tag.value] = item.value
            }
        }
        let gpo = (try? TLV.parse(swap(app.gpo ?? []))) ?? []
        let ac = (try? TLV.parse(swap(app.generateAC ?? []))) ?? []
        let rid = Array(app.aid.prefix(5))
        let iad = generateACFields(app.generateAC).iad ?? gpo.first(0x9F10)?.value
        let visa = rid == [0xA0, 0, 0, 0, 0x03] || (rid != [0xA0, 0, 0, 0, 0x04] && (iad.map { $0.first == 0x06 || $0.first == 0x1F } ?? true))
        let (cvn, dki, tail, cvnNote) = cryptogramVersion(iad: iad, visa: visa)
        if let cvnNote { report.made.append("\(aidText): \(cvnNote)") }

        out += "  - aid: \(YAMLText.quoted(aidText))\n"
        let label = printable(fci[0x50]) ?? "CAPTURED"
        line("label: \(YAMLText.quoted(label))")
        if let preferred = printable(fci[0x9F12]) { line("preferredName: \(YAMLText.quoted(preferred))") }
        if let api = fci[0x87]?.first {
            line("priority: \(api & 0x0F)")
            if api & 0x80 != 0 { line("confirmation: true") }
        }
        line("cvn: \(cvn.rawValue)")
        line("issuerMasterKey: \(YAMLText.quoted(Hex.encode(SecureRandom.bytes(16))))")
        line("keyDerivationIndex: \(dki)")
        if !tail.isEmpty { line("issuerDiscretionaryData: \(YAMLText.quoted(Hex.encode(tail)))") }
        let pdol = fci[0x9F38]
        if let pdol, !(contactless && visa) { line("pdol: \(YAMLText.quoted(Hex.encode(pdol)))") }
        if let cdol1 = values[0x8C] { line("cdol1: \(YAMLText.quoted(Hex.encode(cdol1)))") }
        if let cdol2 = values[0x8D] { line("cdol2: \(YAMLText.quoted(Hex.encode(cdol2)))") }
        let format1 = gpo.first { $0.tag == 0x80 }
        let aip = format1.map { Array($0.value.prefix(2)) } ?? gpo.first(0x82)?.value
        if let aip, aip.count == 2 { line("aip: \(YAMLText.quoted(Hex.encode(aip)))") }
        if app.gpo != nil, !contactless { line("gpoFormat: \(format1 != nil ? 1 : 2)") }
        if let first = ac.first, first.tag == 0x80 || first.tag == 0x77 { line("generateACFormat: \(first.tag == 0x80 ? 1 : 2)") }
        if let cvm = values[0x8E] {
            line("cvmList: \(YAMLText.quoted(Hex.encode(cvm)))")
        } else {
            line("cvmList: \"00000000000000001F03\"")
            report.made.append("\(aidText): CVM list: none read; the profile says No CVM required")
        }
        if values[0x9F0D] != nil || values[0x9F0E] != nil || values[0x9F0F] != nil {
            line("iac:")
            for (tag, key) in [(UInt32(0x9F0D), "default"), (0x9F0E, "denial"), (0x9F0F, "online")] {
                if let v = values[tag], v.count == 5 { line("  \(key): \(YAMLText.quoted(Hex.encode(v)))") }
            }
        }
        if let auc = values[0x9F07], auc.count == 2 { line("auc: \(YAMLText.quoted(Hex.encode(auc)))") }
        if let v = values[0x9F42] { line("currency: \(YAMLText.quoted(String(digits(v).suffix(3))))") }
        if let v = values[0x9F44]?.first { line("currencyExponent: \(v & 0x0F)") }
        if let v = values[0x5F28] { line("country: \(YAMLText.quoted(String(digits(v).suffix(3))))") }
        if let v = values[0x9F08], v.count == 2 { line("applicationVersion: \(YAMLText.quoted(Hex.encode(v)))") }
        if let lower = values[0x9F14]?.first, let upper = values[0x9F23]?.first, lower <= upper {
            line("offlineLimits: { lower: \(lower), upper: \(upper) }")
        }
        if app.blocked { line("blocked: true") }
        if let fciTemplate, !(contactless) { line("fci: \(YAMLText.quoted(Hex.encode(fciTemplate.value)))") }

        // Records: each tag in the order the card keeps it. Tags the records lack that the
        // profile needs go into a record of their own, said to be made.
        var records: [(sfi: Int, record: Int, tags: [EMVTag], oda: Bool)] = []
        for record in app.records {
            guard let template = (try? TLV.parse(swap(record.bytes)))?.first, template.tag == 0x70 else {
                report.made.append("\(aidText): SFI \(record.sfi) record \(record.record) is not a record template (70): left out")
                continue
            }
            records.append((record.sfi, record.record, template.children.map(\.tag), record.offlineAuthentication))
        }
        let held = Set(records.flatMap(\.tags).map(\.value))
        let missing = [UInt32(0x5A), 0x5F24, 0x8C, 0x8D, 0x8E].filter { !held.contains($0) }
        if !records.isEmpty {
            if !missing.isEmpty, let sfi = (1...10).first(where: { s in !records.contains { $0.sfi == s } }) {
                let tags: [EMVTag] = missing.map { EMVTag($0) }
                records.append((sfi: sfi, record: 1, tags: tags, oda: false))
                report.made.append("\(aidText): SFI \(sfi) record 1 holds \(missing.map { EMVTag($0).description }.joined(separator: ", ")), which the card's records lack")
            }
            line("records:")
            for r in records {
                line("  - { sfi: \(r.sfi), record: \(r.record), tags: [\(r.tags.map { YAMLText.quoted($0.description) }.joined(separator: ", "))]\(r.oda ? ", offlineAuthentication: true" : "") }")
            }
        } else {
            report.made.append("\(aidText): no records read: the profile's default records")
        }
        if let log = app.log {
            line("log:")
            line("  sfi: \(log.sfi)")
            line("  records: [\(log.records.map { YAMLText.quoted(Hex.encode(swap($0))) }.joined(separator: ", "))]")
        }
        if let format = app.getData[0x9F4F] { line("data: { \"9F4F\": \(YAMLText.quoted(Hex.encode(format))) }") }

        if contactless {
            line("contactless:")
            if let aip = gpo.first(0x82)?.value, aip.count == 2 { line("  aip: \(YAMLText.quoted(Hex.encode(aip)))") }
            if visa, let pdol { line("  pdol: \(YAMLText.quoted(Hex.encode(pdol)))") }
            if visa, let ctq = gpo.first(0x9F6C)?.value, ctq.count == 2 { line("  ctq: \(YAMLText.quoted(Hex.encode([ctq[0] & 0x3F, ctq[1] & 0x7F])))") }
            if gpo.first(0x9F27)?.value.first.map({ $0 & 0xC0 == 0x40 }) == true { line("  offlineApproval: true") }
            if visa, gpo.first(0x94) == nil { line("  records: none") }
            if let kernel = app.kernel { line("  kernel: \(kernel)") }
            if let fciTemplate { line("  fci: \(YAMLText.quoted(Hex.encode(fciTemplate.value)))") }
        }

        // Offline data authentication: the methods the AIP offers, re-issued when the card holds certificates.
        let aipByte = aip?.first ?? 0
        var methods: [ODAPersonalisation.Method] = []
        if aipByte & 0x40 != 0 { methods.append(.sda) }
        if aipByte & 0x20 != 0 { methods.append(.dda) }
        if aipByte & 0x01 != 0 { methods.append(.cda) }
        if !methods.isEmpty, oda == nil, let issuerCertificate = values[0x90] {
            var o = ODAPersonaliser.Options()
            o.methods = methods
            let exponent = values[0x9F32] ?? [0x03]
            o.exponent = exponent == [0x01, 0x00, 0x01] ? 65537 : 3
            var issuerLength = issuerCertificate.count - 36 + (values[0x92]?.count ?? 0)
            var iccLength = (values[0x9F46].map { $0.count - 42 + (values[0x9F48]?.count ?? 0) }) ?? min(issuerLength, 128)
            // The card's own certificates give the exact lengths and expiries when its CA key is
            // known; they are read as of 2000, so an expired one is still copied as it is.
            if let index = values[0x8F]?.first, let caKey = options.caKeys.first(where: { $0.rid == rid && $0.index == index }),
               let issuer = try? ODA.recoverIssuerKey(certificate: issuerCertificate, remainder: values[0x92], exponent: exponent, ca: caKey, pan: pan,
                                                     today: ODADate(year: 2000, month: 1, day: 1)) {
                issuerLength = issuer.key.modulus.count
                o.issuerExpiry = issuer.expiry
                if let icc = values[0x9F46], let staticData = try? ODA.staticData(
                    records: app.records.filter(\.offlineAuthentication).map { ($0.sfi, swap($0.bytes)) }, aip: aip ?? [0, 0], tagList: values[0x9F4A]),
                   let recovered = try? ODA.recoverICCKey(certificate: icc, remainder: values[0x9F48], exponent: values[0x9F47] ?? [0x03],
                                                          issuer: issuer.key, pan: pan, staticData: staticData, today: ODADate(year: 2000, month: 1, day: 1)) {
                    iccLength = recovered.key.modulus.count
                    o.iccExpiry = recovered.expiry
                }
                report.read.append("\(aidText): the card's certificates recovered under CA \(Hex.encode(rid)) \(Hex.encode([index])): key lengths and expiries copied")
            } else {
                report.made.append("\(aidText): the card's CA key is not known to the bench: the certificates' key lengths are taken from their sizes, their expiry is the card's")
            }
            // The bench CA key as long as the card's CA key (the issuer certificate's length); N_I ≤ N_CA.
            let benchKey = options.ca.map { bestCAKey($0, length: issuerCertificate.count) }
            o.caIndex = benchKey?.index ?? 0
            o.issuerBits = min(issuerLength, benchKey?.key.modulus.count ?? issuerCertificate.count) * 8
            o.iccBits = min(iccLength, issuerLength) * 8
            o.iccBits = min(o.iccBits, o.issuerBits)
            o.staticDataTagList = values[0x9F4A]
            o.ddol = values[0x9F49]
            oda = o
        } else if !methods.isEmpty, values[0x90] == nil {
            report.made.append("\(aidText): the AIP offers \(methods.map(\.rawValue).joined(separator: ", ")) but the records hold no issuer certificate (90)")
        }
    }

    /// The values the profile's fields make for its records' tags, compared with the card's:
    /// where they differ, the card's value goes in the application's `data:` (a tag with a field
    /// of its own differing is a failure: the field was read from the same value).
    private static func reconcile(_ text: String, profile: CardProfile, apps: [CardCapture.Application], swap: ([UInt8]) -> [UInt8],
                                  file: String) throws(Failure) -> String {
        var blocks: [[UInt8]: [(String, String)]] = [:]
        for (index, app) in apps.enumerated() where index < profile.applications.count {
            let profileApp = profile.applications[index]
            var extra: [(String, String)] = []
            var seen = Set<UInt32>()
            for record in app.records {
                for item in ((try? TLV.parse(swap(record.bytes))) ?? []).first(0x70)?.children ?? [] {
                    let tag = item.tag
                    guard seen.insert(tag.value).inserted, !ODAPersonalisation.tags.contains(tag) else { continue }
                    if profile.value(of: tag, in: profileApp) == item.value || CardProfile.fieldTags[tag.value] != nil { continue }
                    if tag.value == 0x9F4F, app.getData[0x9F4F] != nil { continue }
                    extra.append((tag.description, Hex.encode(item.value)))
                }
            }
            if !extra.isEmpty { blocks[app.aid] = extra }
        }
        guard !blocks.isEmpty else { return text }
        // Each application's block ends before the next "  - aid:" line or the end.
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var i = 0
        var current: [UInt8]?
        var start = 0
        var output: [String] = []
        func flush() {
            if let aid = current, let extra = blocks[aid] {
                // An existing one-line data map (9F4F) is widened.
                if let at = output[start...].lastIndex(where: { $0.hasPrefix("    data: {") }) {
                    let inner = output[at].dropFirst("    data: { ".count).dropLast(2)
                    output[at] = "    data: { \(inner), " + extra.map { "\(YAMLText.quoted($0.0)): \(YAMLText.quoted($0.1))" }.joined(separator: ", ") + " }"
                } else {
                    output.append("    data: { " + extra.map { "\(YAMLText.quoted($0.0)): \(YAMLText.quoted($0.1))" }.joined(separator: ", ") + " }")
                }
            }
        }
        while i < lines.count {
            let l = lines[i]
            if l.hasPrefix("  - aid: ") {
                flush()
                start = output.count
                current = try? Hex.decode(String(l.dropFirst("  - aid: ".count).filter { $0 != "\"" }))
            } else if !l.hasPrefix("    "), !l.hasPrefix("  - "), current != nil, !l.isEmpty {
                flush()
                current = nil
            }
            output.append(l)
            i += 1
        }
        // The last application runs to the end (its trailing empty line stays last).
        if current != nil {
            let trailing = output.last == "" ? output.removeLast() : nil
            flush()
            if let trailing { output.append(trailing) }
        }
        lines = output
        let result = lines.joined(separator: "\n")
        do { _ = try CardProfile.parse(yaml: result, file: file) } catch { throw Failure(reason: "the captured profile does not load: \(error)") }
        return result
    }

    // MARK: Helpers

    /// The ATC and IAD of a GENERATE AC answer: format 1 (80: CID, ATC, AC, IAD run together) or 2 (77).
    static func generateACFields(_ bytes: [UInt8]?) -> (atc: [UInt8]?, iad: [UInt8]?) {
        guard let bytes, let item = (try? TLV.parse(bytes))?.first else { return (nil, nil) }
        if item.tag == 0x80 {
            let v = item.value
            guard v.count >= 11 else { return (nil, nil) }
            return (Array(v[1..<3]), v.count > 11 ? Array(v[11...]) : nil)
        }
        return (item.first(0x9F36)?.value, item.first(0x9F10)?.value)
    }

    /// The CVN, key derivation index and issuer discretionary bytes an IAD shows; a note when the
    /// bench had to choose.
    static func cryptogramVersion(iad: [UInt8]?, visa: Bool) -> (CVN, Int, [UInt8], String?) {
        guard let iad, iad.count >= 2 else {
            return (visa ? .visa10 : .mastercard16, 1, [], "no issuer application data seen: \(visa ? "Visa CVN 10" : "Mastercard CVN 16") assumed")
        }
        if visa {
            if iad[0] == 0x1F, iad.count >= 3, iad[1] == 0x22 { return (.visa22, Int(iad[2]), [], nil) }
            if iad.count >= 7 {
                let tail = Array(iad.dropFirst(7).prefix(25))
                switch iad[2] {
                case 0x0A: return (.visa10, Int(iad[1]), tail, nil)
                case 0x12: return (.visa18, Int(iad[1]), tail, nil)
                default: return (.visa10, Int(iad[1]), tail, "CVN \(Hex.encode([iad[2]])) is not one the bench computes: Visa CVN 10 in its place, the IAD's length kept")
                }
            }
            return (.visa10, 1, [], "an IAD of \(iad.count) bytes is no Visa format: Visa CVN 10 in its place")
        }
        let tail = Array(iad.dropFirst(18).prefix(14))
        switch iad[1] {
        case 0x10: return (.mastercard16, Int(iad[0]), tail, nil)
        case 0x11: return (.mastercard17, Int(iad[0]), tail, nil)
        case 0x14: return (.mastercard20, Int(iad[0]), tail, nil)
        case 0x15: return (.mastercard21, Int(iad[0]), tail, nil)
        default: return (.mastercard16, Int(iad[0]), tail, "CVN \(Hex.encode([iad[1]])) is not one the bench computes: Mastercard CVN 16 in its place")
        }
    }

    /// The bench CA key as long as `length` bytes, else the shortest longer one, else the longest.
    static func bestCAKey(_ ca: CertificationAuthority, length: Int) -> CertificationAuthority.Key {
        let sorted = ca.keys.sorted { $0.key.modulus.count < $1.key.modulus.count }
        return sorted.first { $0.key.modulus.count == length } ?? sorted.first { $0.key.modulus.count > length } ?? sorted.last!
    }

    /// Replaces the card number wherever it appears, packed (5A, 57, 9F6B) or as text (56, 9F1F).
    static func replacingPAN(_ pan: String, with other: String, in bytes: [UInt8]) -> [UInt8] {
        guard pan != other, !bytes.isEmpty else { return bytes }
        var hex = Array(Hex.encode(bytes).utf8)
        let needle = Array(pan.utf8), replacement = Array(other.utf8)
        var i = 0
        while i + needle.count <= hex.count {
            if hex[i..<(i + needle.count)].elementsEqual(needle) {
                hex.replaceSubrange(i..<(i + needle.count), with: replacement)
                i += needle.count
            } else {
                i += 2
            }
        }
        var out = (try? Hex.decode(String(decoding: hex, as: UTF8.self))) ?? bytes
        i = 0
        while i + needle.count <= out.count {
            if out[i..<(i + needle.count)].elementsEqual(needle) {
                out.replaceSubrange(i..<(i + needle.count), with: replacement)
                i += needle.count
            } else {
                i += 1
            }
        }
        return out
    }

    static func digits(_ bytes: [UInt8]) -> String {
        var out = ""
        for byte in bytes {
            for n in [byte >> 4, byte & 0x0F] {
                if n <= 9 { out += String(n) } else if n == 0x0D { out += "D" }
            }
        }
        return out
    }

    static func yearMonth(_ bcd: [UInt8]) -> String? {
        guard bcd.count >= 2 else { return nil }
        let d = digits(Array(bcd.prefix(2)))
        guard d.count == 4, let month = Int(d.suffix(2)), (1...12).contains(month) else { return nil }
        return "20\(d.prefix(2))-\(d.suffix(2))"
    }

    static func printable(_ bytes: [UInt8]?) -> String? {
        guard let bytes, !bytes.isEmpty, bytes.count <= 26, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func primitives(_ bytes: [UInt8]) -> [TLV] {
        func walk(_ items: [TLV]) -> [TLV] { items.flatMap { $0.children.isEmpty ? [$0] : walk($0.children) } }
        return walk((try? TLV.parse(bytes)) ?? [])
    }

    static func primitiveMap(_ bytes: [UInt8]) -> [UInt32: [UInt8]] {
        var out: [UInt32: [UInt8]] = [:]
        for item in primitives(bytes) where out[item.tag.value] == nil { out[item.tag.value] = item.value }
        return out
    }
}
