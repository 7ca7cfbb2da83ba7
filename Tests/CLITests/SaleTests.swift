import Foundation
import Testing

private let cards = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios/cards")

/// A fresh directory for a ledger; removed by the caller.
private func scratch() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-sale-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func sale(_ card: String, _ ledger: URL, _ extra: [String] = []) throws -> (CLIResult, [String: Any]) {
    let r = try run(["sale", "--card", cards.appendingPathComponent(card).path, "--amount", "100.00",
                     "--ledger", ledger.appendingPathComponent("ledger.sqlite").path, "--json"] + extra)
    let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any] ?? [:]
    return (r, object)
}

@Suite("cardbench sale")
struct SaleCommandTests {
    @Test("approved sales take consecutive STANs from the ledger, which keeps no PAN")
    func approvedSalesAndDurableSTANs() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (first, a) = try sale("visa-credit-cvn10.yaml", dir)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(a["result"] as? String == "approved")
        #expect(a["responseCode"] as? String == "00")
        #expect((a["authorisationCode"] as? String)?.count == 6)
        #expect(a["stan"] as? String == "000001")
        #expect(a["ledgerStatus"] as? String == "approved")
        #expect(a["maskedPAN"] as? String == "476173******0010")
        let (second, b) = try sale("mastercard-debit-cvn20.yaml", dir, ["--pin", "9876"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(b["stan"] as? String == "000002", "the STAN is allocated durably, per terminal, across processes")
        #expect((b["rrn"] as? String)?.hasSuffix("000002") == true)
        for (r, pan) in [(first, "4761739001010010"), (second, "5204730000000005")] {
            #expect(!r.stdout.contains(pan))
        }
        // Neither the database nor its WAL holds a full PAN.
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            let bytes = try Data(contentsOf: dir.appendingPathComponent(name))
            #expect(bytes.range(of: Data("4761739001010010".utf8)) == nil, "\(name)")
        }
        let key = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("ledger.sqlite.pan-key").path)
        #expect((key[.posixPermissions] as? Int) == 0o600)
    }

    @Test("a host decline is an outcome: exit 0, the code and its meaning")
    func hostDecline() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (r, o) = try sale("visa-credit-cvn10.yaml", dir, ["--host-code", "51"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(o["result"] as? String == "declined")
        #expect(o["responseCode"] as? String == "51")
        #expect(o["authorisationCode"] == nil)
        #expect(o["ledgerStatus"] as? String == "declined")
    }

    @Test("removal after the host approved: exit 1, the sale reversed in the ledger")
    func removalAfterApproval() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        // visa-credit-cvn10: PSE, 2 directory records, SELECT, GPO, 6 records (3 of them certificates),
        // INTERNAL AUTHENTICATE (DDA), 3 GET DATA, VERIFY, GENERATE AC, then EXTERNAL AUTHENTICATE (18) —
        // the 18th command is after the host's approval.
        let (r, o) = try sale("visa-credit-cvn10.yaml", dir, ["--remove-before", "18"])
        #expect(r.status == 1)
        #expect(o["result"] as? String == "failed")
        #expect(o["reversed"] as? Bool == true)
        #expect(o["ledgerStatus"] as? String == "reversed")
        #expect((o["message"] as? String)?.contains("card removed during command 18") == true)
        let (early, e) = try sale("visa-credit-cvn10.yaml", dir, ["--remove-before", "3"])
        #expect(early.status == 1)
        #expect(e["reversed"] as? Bool == false)
        #expect(e["ledgerStatus"] as? String == "failed")
    }

    @Test("a host slower than the terminal's timeout: unable to go online, Z3 for this card")
    func hostTimeout() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (slow, s) = try sale("visa-credit-cvn10.yaml", dir, ["--host-delay", "300", "--host-timeout", "0.1"])
        #expect(slow.status == 0, "\(slow.stderr)")
        #expect(s["responseCode"] as? String == "Z3")
        #expect((s["message"] as? String)?.contains("no answer from the host in") == true)
        let (late, l) = try sale("visa-credit-cvn10.yaml", dir, ["--host-delay", "100", "--host-timeout", "5"])
        #expect(late.status == 0, "\(late.stderr)")
        #expect(l["responseCode"] as? String == "00", "a slow answer within the timeout still counts")
    }

    @Test("text output names the verdict, STAN, card and CVM; --trace shows masked APDUs")
    func textOutput() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try run(["sale", "--card", cards.appendingPathComponent("amex-signature.yaml").path, "--amount", "12.5",
                         "--ledger", dir.appendingPathComponent("l.sqlite").path, "--trace"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.first?.hasPrefix("sale 12.50 on bench1: APPROVED 00 (Approved) auth ") == true, "\(r.stdout)")
        #expect(r.stdout.contains("STAN 000001"))
        #expect(r.stdout.contains("CVM: Signature (paper) (CVM results 1E0300)"))
        #expect(r.stdout.contains("> 00A404000E315041592E5359532E444446303100  SELECT"))
        #expect(r.stdout.contains("GENERATE AC"))
    }

    @Test("bad input names the option and the rule", arguments: [
        (["--amount", "0"], "--amount: must be more than 0"),
        (["--amount", "1.234"], "--amount: must be a positive amount with up to 2 decimals, e.g. 100.00"),
        (["--amount=-5"], "--amount: must be a positive amount with up to 2 decimals, e.g. 100.00"),
        (["--amount", "5", "--host-code", "5"], "--host-code: must be 2 letters or digits, e.g. 51"),
        (["--amount", "5", "--amount-table", "visa"], "--amount-table: must be none, billpocket or stripe-cents"),
        (["--amount", "5", "--pin", "12"], "--pin: must be 4–12 digits"),
        (["--amount", "5", "--tid", "123"], "--tid: "),
        (["--amount", "5", "--host-timeout", "0"], "--host-timeout: must be more than 0 and at most 600 s"),
    ])
    func badInput(arguments: [String], message: String) throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try run(["sale", "--card", cards.appendingPathComponent("visa-credit-cvn10.yaml").path,
                         "--ledger", dir.appendingPathComponent("l.sqlite").path] + arguments)
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("cardbench: \(message)"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func unreadableProfileNamesTheOption() throws {
        let r = try run(["sale", "--card", "/nonexistent.yaml", "--amount", "1.00"])
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("cardbench: --card: cannot read '/nonexistent.yaml'"))
    }
}
