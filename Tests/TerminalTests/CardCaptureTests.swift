import Foundation
import Testing
@testable import EMV
@testable import Terminal
@testable import VirtualCard
import TestSupport

/// Every exchange a link passes on.
final class Recorder: @unchecked Sendable {
    var exchanges: [(command: [UInt8], response: [UInt8])] = []
}

func capture(_ card: VirtualCard, interface: CardInterface = .contact, configure: (InProcessCard) -> Void = { _ in })
    throws -> (CardCapture.Result, InProcessCard) {
    let link = InProcessCard(card)
    link.interface = interface
    configure(link)
    var options = CardCapture.Options()
    options.interface = interface
    return (try CardCapture.run(link, options: options), link)
}

func captured(_ result: CardCapture.Result, pin: String = "4321", keepPAN: Bool = false) throws -> (yaml: String, report: CapturedProfile.Report) {
    var options = CapturedProfile.Options()
    options.pin = pin
    options.keepPAN = keepPAN
    options.ca = benchCA
    options.caKeys = benchCA.publicKeys
    return try CapturedProfile.make(from: result, options: options)
}

@Suite("card capture: a card read into a profile that answers the same")
struct CardCaptureTests {
    /// The values of a response's primitive objects, in order.
    func objects(_ response: [UInt8]) -> [(EMVTag, [UInt8])] {
        func walk(_ items: [TLV]) -> [(EMVTag, [UInt8])] { items.flatMap { $0.children.isEmpty ? [($0.tag, $0.value)] : walk($0.children) } }
        return walk((try? TLV.parse(Array(response.dropLast(2)))) ?? [])
    }

    @Test("an odd card through capture: every command of a sale answered the same (certificates and cryptograms re-made), the same TVR and CVM results")
    func oddCard() throws {
        let yaml = try oddCardYAML(pan: "4761739001010333".dropLast() + String(Luhn.checkDigit(for: "476173900101033")!))
        let original = try CardProfile.parse(yaml: yaml, file: "odd.yaml")
        let (result, link) = try capture(try VirtualCard(profile: original))
        let (text, report) = try captured(result)
        let copy = try CardProfile.parse(yaml: text, file: "captured.yaml")
        #expect(copy.pan == original.pan && !report.panReplaced, "a test range number is kept")
        #expect(copy.atr == original.atr)
        #expect(copy.applications.map(\.aid) == original.applications.map(\.aid))
        #expect(copy.applications.map(\.cvn) == [.visa18, .visa10])
        #expect(copy.applications[0].keyDerivationIndex == 2)
        #expect(copy.applications[0].issuerDiscretionaryData == original.applications[0].issuerDiscretionaryData)
        #expect(copy.applications.map(\.cvmList) == original.applications.map(\.cvmList))
        #expect(copy.applications.map(\.issuerMasterKey) != original.applications.map(\.issuerMasterKey), "the keys are the bench's")
        let oda = try #require(copy.applications[0].oda)
        #expect(oda.methods == [.sda] && oda.caIndex == 0xB1, "the same method under the bench key as long as the card's")
        #expect(oda.issuerCertificate.count == original.applications[0].oda!.issuerCertificate.count)
        #expect(oda.issuerRemainder?.count == original.applications[0].oda!.issuerRemainder?.count)
        #expect(oda.issuerCertificate != original.applications[0].oda!.issuerCertificate, "re-issued, not copied")
        #expect(text.contains("# Made by the bench"), "\(text)")
        #expect(report.read.contains { $0.contains("recovered") }, "\(report.read)")

        // A sale on the original, its commands replayed to the card the capture left and to the copy.
        var sale = try Bench(writeTemporary(yaml), pins: ["4321"]) { $0.oda = ODAConfiguration(caKeys: shippedCAKeys) }
        let recorder = Recorder()
        sale.link.alter = { command, response, _ in recorder.exchanges.append((command, response)); return response }
        let saleOutcome = try sale.run()
        #expect(saleOutcome.decision == .approved)
        var left = link.card
        var twin = try VirtualCard(profile: copy)
        _ = left.powerOn(.contact)
        _ = twin.powerOn(.contact)
        #expect(recorder.exchanges.count > 10)
        let certificateTags: Set<EMVTag> = [0x90, 0x92, 0x93, 0x9F46, 0x9F48]
        for (command, _) in recorder.exchanges {
            let a = left.respond(to: command), b = twin.respond(to: command)
            let name = (try? CommandAPDU(bytes: command).instructionName) ?? "?"
            #expect(a.suffix(2) == b.suffix(2), "\(name): \(Hex.encode(a.suffix(2))) vs \(Hex.encode(b.suffix(2)))")
            switch command[1] {
            case 0xAE:
                let (x, y) = (objects(a), objects(b))
                #expect(x.count == y.count)
                #expect(a.count == b.count, "GENERATE AC: same format and lengths")
                #expect(Array(a.prefix(1)) == Array(b.prefix(1)))
                // Format 1: CID, ATC, cryptogram, IAD — all but the cryptogram alike.
                if a.first == 0x80, a.count > 14 {
                    #expect(Array(a[2..<5]) == Array(b[2..<5]), "CID and ATC")
                    #expect(Array(a[13...]) == Array(b[13...]), "IAD (CVR and discretionary data)")
                }
            case 0xB2:
                let (x, y) = (objects(a), objects(b))
                #expect(x.map(\.0) == y.map(\.0), "READ RECORD: the same tags in the same order")
                for ((tag, va), (_, vb)) in zip(x, y) {
                    if certificateTags.contains(tag) { #expect(va.count == vb.count, "\(tag): same length") } else { #expect(va == vb, "\(tag)") }
                }
            default:
                #expect(a == b, "\(name): \(Hex.encode(a)) vs \(Hex.encode(b))")
            }
        }

        // The copy's sale: the same TVR, CVM results and outcome as the original's.
        var again = try Bench(writeTemporary(text), pins: ["4321"]) { $0.oda = ODAConfiguration(caKeys: shippedCAKeys) }
        let copyOutcome = try again.run()
        #expect(copyOutcome.decision == saleOutcome.decision)
        #expect(copyOutcome.tvr == saleOutcome.tvr, "\(copyOutcome.tvr) vs \(saleOutcome.tvr)")
        #expect(copyOutcome.cvmResults == saleOutcome.cvmResults)
        #expect(copyOutcome.tsi == saleOutcome.tsi)
    }

    @Test("a live card's number is replaced (same BIN and length, Luhn-valid) everywhere, and kept only with keepPAN")
    func livePAN() throws {
        let live = luhnNumber("491234567890123")
        #expect(!TestCardNumbers.isTest(live))
        let yaml = try oddCardYAML(pan: live)
        let (result, _) = try capture(try VirtualCard(profile: try CardProfile.parse(yaml: yaml, file: "live.yaml")))
        let (text, report) = try captured(result)
        #expect(report.panReplaced)
        #expect(!text.contains(live), "the number in clear")
        #expect(!text.uppercased().contains(live.uppercased()), "the number packed in a hex value")
        let copy = try CardProfile.parse(yaml: text, file: "captured.yaml")
        #expect(copy.pan != live && copy.pan.count == live.count && copy.pan.hasPrefix(String(live.prefix(8))) && Luhn.isValid(copy.pan))
        #expect(report.maskedPAN.hasPrefix(String(copy.pan.prefix(6))) && report.maskedPAN.contains("*"))
        // Track 2 equivalent data carries the new number too.
        let track2 = try #require(copy.value(of: 0x57, in: copy.applications[0]))
        #expect(Hex.encode(track2).hasPrefix(copy.pan))
        let kept = try captured(result, keepPAN: true)
        let keptProfile = try CardProfile.parse(yaml: kept.yaml, file: "k.yaml")
        #expect(!kept.report.panReplaced && keptProfile.pan == live)
    }

    @Test("no PSE, a refused GET DATA and a refused GENERATE AC: captured as far as it goes, the report says so")
    func refusals() throws {
        let yaml = try oddCardYAML(pan: luhnNumber("476173900101044"), pse: false)
        let (result, _) = try capture(try VirtualCard(profile: try CardProfile.parse(yaml: yaml, file: "no-pse.yaml"))) { link in
            link.refuse = [(0xCA, 0x9F17, [0x6A, 0x88]), (0xAE, 0x0000, [0x69, 0x85])]
        }
        #expect(result.directoryFCI == nil)
        #expect(result.applications.count == 2, "both found through the AID list")
        #expect(result.notes.contains { $0.contains("no PSE") })
        #expect(result.notes.contains { $0.contains("GET DATA 9F17: 6A88") })
        #expect(result.notes.contains { $0.contains("GENERATE AC (AAC requested): 6985") })
        let (text, report) = try captured(result)
        let copy = try CardProfile.parse(yaml: text, file: "captured.yaml")
        #expect(!copy.hasPSE)
        #expect(report.made.contains { $0.contains("no issuer application data seen") })
        #expect(copy.applications.count == 2)
    }

    @Test("a tapped card: PPSE, the contactless FCI, a qVSDC GPO and Kernel 2 records give a profile whose tap has the same outcome",
          arguments: ["visa-credit-qvsdc-fdda.yaml", "mastercard-paypass-cvn16.yaml"])
    func tapped(file: String) throws {
        let original = try CardProfile.parse(yaml: String(contentsOf: cards.appendingPathComponent(file), encoding: .utf8), file: file)
        let (result, _) = try capture(try VirtualCard(profile: original), interface: .contactless)
        let (text, _) = try captured(result, pin: original.pin ?? "1234")
        let copy = try CardProfile.parse(yaml: text, file: "captured.yaml")
        #expect(copy.interfaces == [.contactless])
        #expect(copy.applications.map { $0.contactless?.kernel } == original.applications.filter { $0.contactless != nil }.map { $0.contactless?.kernel })
        var a = try tapBench(file)
        var b = try tapBench(writeTemporary(text))
        let x = try a.run(amount: 2_000), y = try b.run(amount: 2_000)
        #expect(x.decision == y.decision && x.tvr == y.tvr && x.cvm == y.cvm, "\(x.decision) \(x.tvr) vs \(y.decision) \(y.tvr)")
    }

    @Test("an IAD's CVN, key derivation index and discretionary bytes, per scheme format", arguments: [
        ("06010A03A00000", true, CVN.visa10, 1, ""), ("06021203A000000F0102", true, .visa18, 2, "0F0102"),
        ("1F2201000000000000" + String(repeating: "00", count: 23), true, .visa22, 1, ""),
        ("0110A00003220000000000000000000000FF", false, .mastercard16, 1, ""), ("0214A00003220000000000000000000000FFAB", false, .mastercard20, 2, "AB"),
    ])
    func iad(hex: String, visa: Bool, cvn: CVN, dki: Int, tail: String) throws {
        let (c, k, t, note) = CapturedProfile.cryptogramVersion(iad: try Hex.decode(hex), visa: visa)
        #expect(c == cvn && k == dki && Hex.encode(t) == tail && note == nil)
    }
}

func writeTemporary(_ text: String) throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-capture-\(UUID().uuidString.prefix(8)).yaml")
    try text.write(to: url, atomically: true, encoding: .utf8)
    return url.path
}

@Suite("card diff: two profiles in the terminal's terms")
struct ProfileDiffTests {
    @Test("the AIP bit by bit, CVM rules, IACs by TVR bit, the AFL; nothing for the same card")
    func differences() throws {
        let a = try CardProfile.parse(yaml: String(contentsOf: cards.appendingPathComponent("visa-credit-cvn10.yaml"), encoding: .utf8), file: "a")
        #expect(ProfileDiff.differences(a, a).isEmpty)
        let variant = try profileVariant("visa-credit-cvn10.yaml", [
            ("cvmList: \"000000000000000041031E031F00\"", "cvmList: \"000000000000000042031E031F00\""),
            ("default: \"DC4000A800\"", "default: \"DC4000A880\""),
            ("    issuerMasterKey:", "    aip: \"3C00\"\n    records:\n      - { sfi: 1, record: 1, tags: [\"57\", \"5F20\"] }\n      - { sfi: 2, record: 1, tags: [\"5A\", \"5F24\", \"8C\", \"8D\", \"8E\"], offlineAuthentication: true }\n    issuerMasterKey:"),
        ])
        let b = try CardProfile.parse(yaml: String(contentsOfFile: variant, encoding: .utf8), file: "b")
        let lines = ProfileDiff.differences(a, b)
        #expect(lines.contains { $0.contains("CVM rule 1: ") && $0.contains("→") }, "\(lines)")
        #expect(lines.contains { $0.contains("IAC default byte 5 bit 8: Default TDOL used: clear → set") }, "\(lines)")
        #expect(lines.contains { $0.contains("AIP byte 1 bit 7: SDA supported: set → clear") }, "\(lines)")
        #expect(lines.contains { $0.contains(" AFL: ") }, "\(lines)")
        #expect(!lines.contains { $0.contains("issuerMasterKey") }, "keys are not compared")
    }
}

@Suite("card capture: the transaction log")
struct CaptureLogTests {
    @Test("the log entry (9F4D) in the FCI, the log format (9F4F) and each log record are read and answered again")
    func log() throws {
        var yaml = try String(contentsOf: cards.appendingPathComponent("visa-credit-cvn10.yaml"), encoding: .utf8)
        yaml = ODAPersonaliser.strippingODA(yaml)
        // A log in SFI 11 of two entries (amount, date), named in the FCI's issuer discretionary data.
        yaml = yaml.replacingOccurrences(of: "    offlineLimits: { lower: 5, upper: 10 }", with: """
                offlineLimits: { lower: 5, upper: 10 }
                aip: "1C00"
                fci: "500C56495341204352454449544F8701015F2D02656E9F120C56495341204352454449544FBF0C059F4D020B02"
                data: { "9F4F": "9F02069A03" }
                log:
                  sfi: 11
                  records: ["000000001500261101", "000000002500261102"]
            """)
        let original = try CardProfile.parse(yaml: yaml, file: "log.yaml")
        #expect(original.applications[0].log?.records.count == 2)
        var link = InProcessCard(try VirtualCard(profile: original))
        let result = try CardCapture.run(link, options: CardCapture.Options())
        let app = try #require(result.applications.first)
        #expect(app.log?.sfi == 11 && app.log?.records.map(Hex.encode) == ["000000001500261101", "000000002500261102"])
        #expect(app.getData[0x9F4F] == [0x9F, 0x02, 0x06, 0x9A, 0x03])
        let (text, _) = try captured(result, pin: "1234")
        let copy = try CardProfile.parse(yaml: text, file: "captured.yaml")
        #expect(copy.applications[0].log == original.applications[0].log)
        #expect(copy.applications[0].data[0x9F4F] == original.applications[0].data[0x9F4F])
        link = InProcessCard(try VirtualCard(profile: copy))
        let again = try CardCapture.run(link, options: CardCapture.Options())
        #expect(again.applications.first?.fci == app.fci, "the FCI with its log entry, byte for byte")
    }
}

@Suite("the captured profile in docs/examples")
struct CapturedExampleTests {
    @Test("it loads, keeps the card's two applications, its IAD's issuer data and its SDA, and its card answers a sale")
    func example() throws {
        let url = cards.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/examples/captured-two-applications.yaml")
        let profile = try CardProfile.parse(yaml: String(contentsOf: url, encoding: .utf8), file: url.path)
        #expect(profile.applications.count == 2 && profile.applications[0].issuerDiscretionaryData.count == 16)
        #expect(profile.applications[0].oda?.methods == [.sda] && profile.applications[0].data[0x5F24] == [0x30, 0x06, 0x15])
        // Bench deletes the file it is given: it gets a copy.
        var sale = try Bench(try writeTemporary(String(contentsOf: url, encoding: .utf8)), pins: ["4321"]) {
            $0.oda = ODAConfiguration(caKeys: shippedCAKeys)
        }
        sale.keypad.selection = 1
        let outcome = try sale.run()
        #expect(outcome.decision == .approved, "\(outcome.responseCode)")
    }
}

@Suite("captured-card profile fields: each refusal names the field and the rule")
struct CapturedFieldRuleTests {
    @Test("data may not hold what a field gives, nor move a date's month; fci must say what the fields say; the IAD fits 32 bytes; the log's SFI is 11–30",
          arguments: [
            ("data: { \"9F1F\": \"3132333435\", \"5F24\": \"300615\" }", "data: { \"8E\": \"00\" }", "8E", "is given by the field cvmList"),
            ("data: { \"9F1F\": \"3132333435\", \"5F24\": \"300615\" }", "data: { \"5F24\": \"300715\" }", "data.5F24", "in the expiry field's month"),
            ("data: { \"9F1F\": \"3132333435\", \"5F24\": \"300615\" }", "data: { \"57\": \"5413330089600010D30062010000000F\" }", "data.57", "must start with the card's pan"),
            ("issuerDiscretionaryData: \"0F0102030405060708090A0B0C0D0E0F\"", "issuerDiscretionaryData: \"" + String(repeating: "00", count: 26) + "\"", "issuerDiscretionaryData", "passes 32"),
            ("pdol: \"9F1A02\"", "pdol: \"9F1A02\"\n    fci: \"500856495341204F4444870101\"", "fci", "priority indicator (87) 01"),
            ("pdol: \"9F1A02\"", "pdol: \"9F1A02\"\n    log: { sfi: 2, records: [] }", "log.sfi", "must be 11–30"),
          ])
    func refusals(old: String, new: String, field: String, rule: String) throws {
        let yaml = try oddCardYAML(pan: "4761739001010333".dropLast() + String(Luhn.checkDigit(for: "476173900101033")!))
        #expect(yaml.contains(old))
        do {
            _ = try CardProfile.parse(yaml: yaml.replacingOccurrences(of: old, with: new), file: "bad.yaml")
            Issue.record("accepted \(new)")
        } catch {
            #expect(error.field.hasSuffix(field) && error.reason.contains(rule), "\(error)")
        }
    }
}
