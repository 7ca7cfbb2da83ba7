import EMV

/// The profile fields a captured card needs to answer byte for byte what the real card answered
/// (`cardbench card capture`, docs/recording.md): values with no field of their own, the FCIs and
/// directories as read, the IAD's issuer discretionary bytes and the transaction log.
extension CardProfile {
    /// Tags whose value a field of the profile gives: `data:` may not hold them, so a profile
    /// cannot say one thing in a field and another in a record.
    static let fieldTags: [UInt32: String] = [
        0x5A: "pan", 0x5F20: "cardholderName", 0x5F28: "country", 0x5F30: "serviceCode", 0x5F34: "psn", 0x9F07: "auc",
        0x9F08: "applicationVersion", 0x9F42: "currency", 0x9F44: "currencyExponent", 0x8C: "cdol1", 0x8D: "cdol2", 0x8E: "cvmList",
        0x9F0D: "iac.default", 0x9F0E: "iac.denial", 0x9F0F: "iac.online", 0x9F14: "offlineLimits", 0x9F23: "offlineLimits",
        0x50: "label", 0x9F12: "preferredName", 0x87: "priority", 0x4F: "aid", 0x84: "aid", 0x82: "aip", 0x94: "records",
        0x9F38: "pdol", 0x9F36: "atc", 0x9F13: "lastOnlineATC", 0x9F17: "pinTriesRemaining", 0x9F10: "cvn", 0x9F26: "cvn",
        0x9F27: "cvn", 0x8F: "oda", 0x90: "oda", 0x92: "oda", 0x9F32: "oda", 0x93: "oda", 0x9F46: "oda", 0x9F47: "oda",
        0x9F48: "oda", 0x9F4A: "oda", 0x9F49: "oda",
    ]

    static func parseCapturedCard(_ m: YAMLMapping, into profile: inout CardProfile) throws(ProfileError) {
        if let fci = try m.hex("pseFCI", count: 4...250) {
            guard let parsed = try? TLV.parse(fci), parsed.count == 1, parsed[0].tag == 0x6F else {
                throw m.error("pseFCI", "must be one FCI template (6F …), as SELECT 1PAY.SYS.DDF01 answers")
            }
            guard profile.hasPSE else { throw m.error("pseFCI", "given, but pse is false") }
            profile.pseFCI = fci
        }
        if let records = try m.stringList("pseDirectory") {
            guard profile.hasPSE else { throw m.error("pseDirectory", "given, but pse is false") }
            var out: [[UInt8]] = []
            for (i, text) in records.enumerated() {
                let field = "pseDirectory[\(i)]"
                let bytes: [UInt8]
                do { bytes = try Hex.decode(text, field: m.field(field)) } catch { throw m.error(field, error.rule) }
                guard let parsed = try? TLV.parse(bytes), parsed.count == 1, parsed[0].tag == 0x70 else {
                    throw m.error(field, "must be one record template (70 …) of directory entries (61)")
                }
                for entry in parsed[0].children where entry.tag == 0x61 {
                    if let aid = entry.first(0x4F)?.value, !profile.applications.contains(where: { $0.aid == aid }) {
                        throw m.error(field, "lists \(Hex.encode(aid)), which is not one of the card's applications")
                    }
                }
                out.append(bytes)
            }
            profile.pseDirectory = out
        }
        if let fci = try m.hex("ppseFCI", count: 4...250) {
            guard let parsed = try? TLV.parse(fci), parsed.count == 1, parsed[0].tag == 0x6F else {
                throw m.error("ppseFCI", "must be one FCI template (6F …), as SELECT 2PAY.SYS.DDF01 answers")
            }
            let entries = parsed[0].first(0xA5)?.first(0xBF0C)?.children.filter { $0.tag == 0x61 } ?? []
            for entry in entries {
                if let aid = entry.first(0x4F)?.value, !profile.applications.contains(where: { $0.aid == aid && $0.contactless != nil }) {
                    throw m.error("ppseFCI", "lists \(Hex.encode(aid)), which is not one of the card's tappable applications")
                }
            }
            profile.ppseFCI = fci
        }
        profile.lastOnlineATC = try m.int("lastOnlineATC", in: 0...0xFFFF) ?? 0
    }

    static func parseCapturedApplication(_ a: YAMLMapping, into app: inout ApplicationProfile, pan: String, expiry: YearMonth,
                                         effective: YearMonth) throws(ProfileError) {
        if let values = try a.mapping("data") {
            var out: [EMVTag: [UInt8]] = [:]
            for key in values.keys {
                let tag: EMVTag
                do { tag = try EMVTag(hex: key, field: values.field(key)) } catch { throw values.error(key, error.rule) }
                guard let value = try values.hex(key, count: 0...252) else { continue }
                if let field = fieldTags[tag.value] {
                    throw values.error(key, "\(tag) (\(tag.name ?? "")) is given by the field \(field), not by data")
                }
                out[tag] = value
            }
            app.data = out
        }
        if let fci = try a.hex("fci", count: 1...250) {
            try checkFCI(fci, a, label: app.label, priority: app.priority, confirmation: app.requiresConfirmation, pdol: app.pdol,
                         preferredName: app.preferredName)
            app.fci = fci
        }
        if let tail = try a.hex("issuerDiscretionaryData", count: 1...31) {
            let standard = app.cvn == .visa22 ? 32 : app.cvn.isVisa ? 7 : 18
            guard standard + tail.count <= 32 else {
                throw a.error("issuerDiscretionaryData", "\(app.cvn)'s issuer application data is \(standard) bytes; with \(tail.count) more it passes 32, the most 9F10 holds")
            }
            app.issuerDiscretionaryData = tail
        }
        if let log = try a.mapping("log") {
            try log.rejectUnknown(["sfi", "records"])
            guard let sfi = try log.int("sfi", in: 11...30) else { throw log.error("sfi", "is required: 11–30, the log entry's (9F4D) SFI") }
            var records: [[UInt8]] = []
            for (i, text) in (try log.stringList("records") ?? []).enumerated() {
                do { records.append(try Hex.decode(text, field: log.field("records[\(i)]"))) } catch { throw log.error("records[\(i)]", error.rule) }
            }
            app.log = TransactionLog(sfi: sfi, records: records)
        }
        // Dates given as data may move the day only: the month is the field's.
        for (tag, field, month) in [(EMVTag(0x5F24), "expiry", expiry), (EMVTag(0x5F25), "effective", effective)] {
            guard let value = app.data[tag] else { continue }
            guard value.count == 3, Array(value.prefix(2)) == Array(month.bcd(day: 1).prefix(2)) else {
                throw a.error("data.\(tag)", "must be 3 bytes YYMMDD in the \(field) field's month (\(month))")
            }
        }
        // A track 2 given as data must still be the card's: the same PAN, expiry and service code.
        if let t2 = app.data[0x57] {
            let digits = t2.flatMap { [$0 >> 4, $0 & 0x0F] }
            guard let separator = digits.firstIndex(of: 0x0D), digits.count >= separator + 8,
                  String(digits[..<separator].map { Character(String($0)) }) == pan else {
                throw a.error("data.57", "track 2 equivalent data must start with the card's pan and a D separator")
            }
            let after = digits[(separator + 1)...].prefix(7).map { $0 }
            guard after.allSatisfy({ $0 <= 9 }) else { throw a.error("data.57", "the expiry and service code after D must be digits") }
        }
    }

    /// Checks that a byte-for-byte FCI proprietary template says what the profile's fields say,
    /// so an edit to a field cannot leave the FCI answering the old value.
    static func checkFCI(_ fci: [UInt8], _ a: YAMLMapping, label: String, priority: Int, confirmation: Bool, pdol: DOL?,
                         preferredName: String?) throws(ProfileError) {
        guard let items = try? TLV.parse(fci) else { throw a.error("fci", "must be BER-TLV: the FCI proprietary template's (A5) contents") }
        func value(_ tag: EMVTag) -> [UInt8]? { items.first { $0.tag == tag }?.value }
        if let l = value(0x50), l != Array(label.utf8) { throw a.error("fci", "its label (50) '\(String(decoding: l, as: UTF8.self))' is not the label field's") }
        if let p = value(0x87), p != [UInt8(priority) | (confirmation ? 0x80 : 0)] {
            throw a.error("fci", "its priority indicator (87) \(Hex.encode(p)) is not what priority and confirmation say")
        }
        if value(0x9F38) != pdol?.bytes { throw a.error("fci", "its PDOL (9F38) is not the pdol field's") }
        if let n = value(0x9F12), n != preferredName.map({ Array($0.utf8) }) { throw a.error("fci", "its preferred name (9F12) is not the preferredName field's") }
    }
}
