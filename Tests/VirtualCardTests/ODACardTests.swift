import Foundation
import Testing
@testable import EMV
@testable import VirtualCard

@Suite("virtual cards: offline data authentication")
struct ODACardTests {
    static let caFile = cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/bench-ca.yaml")
    static var ca: CertificationAuthority {
        try! CertificationAuthority.parse(yaml: String(contentsOf: caFile, encoding: .utf8), file: caFile.path)
    }

    /// Drives a card to the point ODA needs: SELECT, GPO, records read.
    static func selected(_ file: String) throws -> TestTerminal {
        var t = TestTerminal(try VirtualCard(profile: try loadProfile(file)))
        #expect(t.send(.select(name: t.card.profile.applications[0].aid)).status == .success)
        #expect(t.send(.getProcessingOptions(pdolData: [])).status == .success)
        return t
    }

    @Test("the oda: block sets the AIP's method bits and puts the certificates in unsigned records of a free SFI")
    func personalisedLayout() throws {
        let profile = try loadProfile("oda-mastercard-cda.yaml")
        let app = profile.applications[0]
        #expect(app.aip.contains(AIP.sdaSupported) && app.aip.contains(AIP.ddaSupported) && app.aip.contains(AIP.cdaSupported))
        #expect(app.generateACFormat == 2)
        let card = try VirtualCard(profile: profile)
        let records = card.storedRecords(application: 0)
        let certificates = records.filter { r in (try? TLV.parse(r.bytes).first?.children.contains { $0.tag == 0x90 || $0.tag == 0x9F46 }) == true }
        #expect(certificates.count == 2 && certificates.allSatisfy { !$0.offlineAuthentication && $0.sfi == 3 })
        #expect(records.allSatisfy { $0.bytes.count <= 256 }, "every record fits a short response")
        #expect(records.contains { $0.offlineAuthentication })
    }

    @Test("INTERNAL AUTHENTICATE: signed dynamic data over the DDOL data under the certified ICC key; 6D00 on an SDA-only card")
    func internalAuthenticate() throws {
        var t = try Self.selected("oda-visa-dda.yaml")
        let oda = try #require(t.card.profile.applications[0].oda)
        let r = t.send(.internalAuthenticate(ddolData: [1, 2, 3, 4]))
        #expect(r.status == .success)
        let tlv = try #require(try TLV.parse(r.data).first)
        let signature = tlv.tag == 0x80 ? tlv.value : try #require(tlv.first(0x9F4B)?.value)
        let dynamic = try ODA.verifyDynamicSignature(signature, icc: oda.iccKey!.publicKey, terminalData: [1, 2, 3, 4])
        #expect(try ODA.dynamicNumber(dynamic).count == 8)
        let again = t.send(.internalAuthenticate(ddolData: [1, 2, 3, 4]))
        #expect(again.data != r.data, "a fresh ICC dynamic number each time")
        #expect(t.send(.internalAuthenticate(ddolData: [])).status == StatusWord(0x6700))
        var sda = try Self.selected("oda-visa-sda.yaml")
        #expect(sda.send(.internalAuthenticate(ddolData: [1, 2, 3, 4])).status == StatusWord(0x6D00))
    }

    @Test("GENERATE AC with CDA: the ARQC inside a signature over the PDOL, CDOL and response data; an AAC unsigned; no CDA bit, no signature")
    func combined() throws {
        let cdol1 = try Hex.decode("000000010000" + "000000000000" + "0484" + "0000008000" + "0484" + "261122" + "00" + "1A2B3C4D" + "22" + "0000" + "420300")
        var t = try Self.selected("oda-mastercard-cda.yaml")
        let key = try #require(t.card.profile.applications[0].oda?.iccKey?.publicKey)
        let r = t.send(.generateAC(.arqc, cdolData: cdol1, cda: true))
        let template = try #require(try TLV.parse(r.data).first)
        #expect(template.tag == 0x77 && template.first(0x9F26) == nil)
        let hashInput = cdol1 + template.children.filter { $0.tag != 0x9F4B }.flatMap { $0.encoded() }
        let signed = try ODA.verifyCombinedSignature(try #require(template.first(0x9F4B)?.value), icc: key, unpredictableNumber: hex("1A2B3C4D"),
                                                     cid: 0x80, hashInput: hashInput)
        #expect(signed.cryptogram?.count == 8 && signed.cryptogramInformationData == 0x80)

        var declined = try Self.selected("oda-mastercard-cda.yaml")
        let aac = try #require(try TLV.parse(declined.send(.generateAC(.aac, cdolData: cdol1, cda: true)).data).first)
        #expect(aac.first(0x9F4B) == nil && aac.first(0x9F26) != nil)
        var plain = try Self.selected("oda-mastercard-cda.yaml")
        let unsigned = try #require(try TLV.parse(plain.send(.generateAC(.arqc, cdolData: cdol1)).data).first)
        #expect(unsigned.first(0x9F4B) == nil && unsigned.first(0x9F26) != nil)
    }

    static let base = try! String(contentsOf: cardsDirectory.appendingPathComponent("oda-mastercard-cda.yaml"), encoding: .utf8)

    @Test("a bad oda: block names its field and the rule", arguments: [
        ("  - aid: \"A0000000041010\"\n    methods", "  - aid: \"A0000000031010\"\n    methods", "oda[0].aid", "not one of the card's applications"),
        ("methods: [sda, dda, cda]", "methods: [sda, rsa]", "oda[0].methods[1]", "must be sda, dda or cda"),
        ("methods: [sda, dda, cda]", "methods: [sda, sda]", "oda[0].methods[1]", "listed twice"),
        ("    iccModulus:", "    iccModulusX:", "oda[0].iccModulusX", "unknown field"),
        ("    label: \"MASTERCARD\"", "    label: \"MASTERCARD\"\n    generateACFormat: 1", "applications[0].generateACFormat", "must be 2 for a CDA card"),
        ("caIndex: \"B0\"", "caIndex: \"B0B0\"", "oda[0].caIndex", "must be 1 bytes"),
    ])
    func refused(replace: String, with: String, field: String, reason: String) {
        let yaml = Self.base.replacingOccurrences(of: replace, with: with)
        #expect(yaml != Self.base, "\(replace) not in the profile")
        do {
            _ = try CardProfile.parse(yaml: yaml, file: "bad.yaml")
            Issue.record("accepted: \(with)")
        } catch {
            #expect(error.field == field, "\(error)")
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
    }

    @Test("a DDA card without its private key is refused: it could not sign")
    func missingKey() {
        let yaml = Self.base.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.contains("iccPrivateExponent") }.joined(separator: "\n")
        #expect(throws: ProfileError.self) { try CardProfile.parse(yaml: yaml, file: "bad.yaml") }
    }

    @Test("personalising writes an oda: block that recovers under the bench CA, replaces any earlier one, and keeps the rest of the file")
    func personalise() throws {
        var options = ODAPersonaliser.Options()
        options.methods = [.dda]
        options.issuerBits = 1152
        let text = try String(contentsOf: cardsDirectory.appendingPathComponent("visa-credit-cvn10.yaml"), encoding: .utf8)
        let once = try ODAPersonaliser(ca: Self.ca).personalise(yaml: text, file: "v.yaml", options: options)
        let twice = try ODAPersonaliser(ca: Self.ca).personalise(yaml: once, file: "v.yaml", options: options)
        #expect(twice.components(separatedBy: "\noda:\n").count == 2, "one oda: block")
        #expect(ODAPersonaliser.strippingODA(twice) == ODAPersonaliser.strippingODA(text))
        #expect(twice.contains("# 41 03: plaintext PIN by ICC"), "comments elsewhere survive")
        let profile = try CardProfile.parse(yaml: twice, file: "v.yaml")
        let oda = try #require(profile.applications[0].oda)
        #expect(oda.methods == [.dda] && profile.applications[0].aip.contains(AIP.ddaSupported) && !profile.applications[0].aip.contains(AIP.sdaSupported))
        let card = try VirtualCard(profile: profile)
        let ca = Self.ca.publicKeys.first { $0.rid == [0xA0, 0, 0, 0, 0x03] && $0.index == 0xB0 }!
        let issuer = try ODA.recoverIssuerKey(certificate: oda.issuerCertificate, remainder: oda.issuerRemainder, exponent: oda.issuerExponent, ca: ca,
                                              pan: profile.pan, today: ODADate(year: 2026, month: 11, day: 24))
        #expect(issuer.key.bits == 1152 && issuer.issuerIdentifier == "476173")
        let icc = try ODA.recoverICCKey(certificate: oda.iccCertificate!, remainder: oda.iccRemainder, exponent: oda.iccExponent!, issuer: issuer.key,
                                        pan: profile.pan, staticData: try card.staticDataToBeAuthenticated(application: 0),
                                        today: ODADate(year: 2026, month: 11, day: 24))
        #expect(icc.key == oda.iccKey!.publicKey)
    }

    @Test("the personaliser refuses keys Book 2 does not allow and CA indexes it does not have")
    func personaliserRules() throws {
        let text = try String(contentsOf: cardsDirectory.appendingPathComponent("visa-credit-cvn10.yaml"), encoding: .utf8)
        var options = ODAPersonaliser.Options()
        options.caIndex = 0xB1
        options.issuerBits = 1984
        #expect(throws: ProfileError.self) { try ODAPersonaliser(ca: Self.ca).personalise(yaml: text, file: "v.yaml", options: options) }
        options = ODAPersonaliser.Options()
        options.caIndex = 0x99
        #expect(throws: ProfileError.self) { try ODAPersonaliser(ca: Self.ca).personalise(yaml: text, file: "v.yaml", options: options) }
        options = ODAPersonaliser.Options()
        options.iccBits = 1408
        options.issuerBits = 1152
        #expect(throws: ProfileError.self) { try ODAPersonaliser(ca: Self.ca).personalise(yaml: text, file: "v.yaml", options: options) }
    }

    @Test("a CAPK file whose check value does not match a key is refused, naming the key")
    func capkChecksum() throws {
        let url = cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/capk.yaml")
        let text = try String(contentsOf: url, encoding: .utf8)
        let keys = try CAPKFile.parse(yaml: text, file: "capk.yaml")
        #expect(keys.count >= 30 && keys.contains { $0.rid == [0xA0, 0, 0, 0, 0x03] && $0.index == 0x92 })
        let first = try #require(keys.first)
        let spoilt = text.replacingOccurrences(of: Hex.encode(first.checksum), with: String(repeating: "0", count: 40))
        do {
            _ = try CAPKFile.parse(yaml: spoilt, file: "capk.yaml")
            Issue.record("a wrong check value was accepted")
        } catch {
            #expect(error.field == "keys[0].checksum" && error.reason.contains("mistyped"))
        }
        #expect(throws: ProfileError.self) { try CAPKFile.parse(yaml: text + text.components(separatedBy: "keys:\n")[1], file: "capk.yaml") }
    }
}

@Suite("CAPK file dates")
struct CAPKDateTests {
    /// Found by the capk fuzzer: "0097-12-31" parsed, was written back as "97-12-31", which did not.
    @Test("an expiry outside 1990–2099 is refused, and dates are written with four-digit years")
    func expiryYear() throws {
        let url = cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/capk.yaml")
        let text = try String(contentsOf: url, encoding: .utf8)
        let first = try #require(text.range(of: "expiry: \"")).upperBound
        let date = String(text[first...].prefix(10))
        do {
            _ = try CAPKFile.parse(yaml: text.replacingOccurrences(of: "expiry: \"\(date)\"", with: "expiry: \"0097-12-31\""), file: "capk.yaml")
            Issue.record("a CA key expiring in the year 97 was accepted")
        } catch {
            #expect(error.field.hasSuffix(".expiry") && error.reason.contains("1990–2099"))
        }
        #expect(ODADate(year: 997, month: 1, day: 2).description == "0997-01-02")
    }
}

@Suite("CAPK file check values")
struct CAPKCheckValueTests {
    /// Found by the capk fuzzer, whose property was wrong: a check value typed in groups, as scheme
    /// documents print them, loads (hex fields skip spaces), so the property now looks for it in
    /// the file without spaces.
    @Test("a check value written with spaces loads, and is still checked")
    func spacedCheckValue() throws {
        let text = try String(contentsOf: cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/capk.yaml"), encoding: .utf8)
        let start = try #require(text.range(of: "checksum: \"")).upperBound
        let value = String(text[start...].prefix(40))
        let spaced = value.prefix(8) + " " + value.dropFirst(8).prefix(8) + "    " + value.dropFirst(16)
        let keys = try CAPKFile.parse(yaml: text.replacingOccurrences(of: "checksum: \"\(value)\"", with: "checksum: \"\(spaced)\""), file: "capk.yaml")
        #expect(keys == (try CAPKFile.parse(yaml: text, file: "capk.yaml")))
        let wrong = spaced.replacingOccurrences(of: String(spaced.prefix(1)), with: spaced.first == "0" ? "1" : "0", options: [], range: spaced.startIndex..<spaced.index(after: spaced.startIndex))
        #expect(throws: ProfileError.self) {
            try CAPKFile.parse(yaml: text.replacingOccurrences(of: "checksum: \"\(value)\"", with: "checksum: \"\(wrong)\""), file: "capk.yaml")
        }
    }
}

extension CAPKCheckValueTests {
    /// Found by the capk fuzzer in CI, whose property searched the file's text: a quoted check value
    /// wrapped onto a second line is folded by YAML into one space (which hex fields skip), and an
    /// escape is expanded, so both load; the property now reads the field with Yams on its own.
    @Test("a check value wrapped across lines or written with escapes loads, and is still checked")
    func foldedCheckValue() throws {
        let text = try String(contentsOf: cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/capk.yaml"), encoding: .utf8)
        let start = try #require(text.range(of: "checksum: \"")).upperBound
        let value = String(text[start...].prefix(40))
        let original = try CAPKFile.parse(yaml: text, file: "capk.yaml")
        let folded = value.prefix(20) + "\n      " + value.dropFirst(20)
        let escaped = value.prefix(20) + "\\x" + String(value.dropFirst(20).prefix(1)).unicodeScalars.first!.value.hexString + value.dropFirst(21)
        for form in [String(folded), String(escaped)] {
            #expect(try CAPKFile.parse(yaml: text.replacingOccurrences(of: "checksum: \"\(value)\"", with: "checksum: \"\(form)\""), file: "capk.yaml") == original, "\(form)")
        }
        let wrongFolded = (value.first == "0" ? "1" : "0") + value.dropFirst().prefix(19) + "\n      " + value.dropFirst(20)
        #expect(throws: ProfileError.self) {
            try CAPKFile.parse(yaml: text.replacingOccurrences(of: "checksum: \"\(value)\"", with: "checksum: \"\(wrongFolded)\""), file: "capk.yaml")
        }
    }
}

private extension UInt32 {
    var hexString: String { String(self, radix: 16, uppercase: true) }
}

@Suite("CAPK file text fields")
struct CAPKTextTests {
    /// Found by the capk fuzzer: a name holding a line break (an escape in a quoted string) was
    /// written back raw and read back folded into a space.
    @Test("a name or source with a control character or line break is refused")
    func oneLine() throws {
        let text = try String(contentsOf: cardsDirectory.deletingLastPathComponent().appendingPathComponent("ca/capk.yaml"), encoding: .utf8)
        for spoilt in ["name: \"bench\\nCA\"", "name: \"bench\\tCA\"", "source: \"a\\u2028b\""] {
            let field = spoilt.hasPrefix("name") ? "name" : "source"
            let yaml = text.replacingOccurrences(of: try #require(text.components(separatedBy: "\n").first { $0.hasPrefix("    \(field): ") }),
                                                 with: "    " + spoilt)
            do {
                _ = try CAPKFile.parse(yaml: yaml, file: "capk.yaml")
                Issue.record("accepted \(spoilt)")
            } catch {
                #expect(error.field.hasSuffix(".\(field)") && error.reason.contains("one line"), "\(error)")
            }
        }
    }
}
