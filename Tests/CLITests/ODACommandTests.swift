import Foundation
import Testing

private let scenarios = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Scenarios")

private func card(_ name: String) -> String { scenarios.appendingPathComponent("cards/\(name)").path }

private func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-oda-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func json(_ r: CLIResult) -> Any? { try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) }

@Suite("cardbench emv ca, capk, oda, records and sale's ODA")
struct ODACommandTests {
    @Test("capk list: every shipped key with its verified check value; a missing or spoilt file is exit 2 naming --capk")
    func capkList() throws {
        let r = try run(["emv", "capk", "list", "--capk", scenarios.appendingPathComponent("ca/capk.yaml").path, "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try #require(json(r) as? [[String: Any]])
        #expect(rows.count >= 40)
        #expect(rows.contains { $0["rid"] as? String == "A000000004" && $0["index"] as? String == "F1" && $0["bits"] as? Int == 1408 })
        #expect(rows.contains { $0["rid"] as? String == "A000000003" && $0["index"] as? String == "B0" && $0["bits"] as? Int == 1984 })
        let missing = try run(["emv", "capk", "list", "--capk", "/nonexistent/capk.yaml"])
        #expect(missing.status == 2 && missing.stderr.contains("--capk") && missing.stderr.contains("cannot read"))
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let text = try String(contentsOf: scenarios.appendingPathComponent("ca/capk.yaml"), encoding: .utf8)
        let spoilt = dir.appendingPathComponent("capk.yaml")
        // One hex digit of the first modulus changed: its check value no longer matches.
        let range = try #require(text.range(of: "modulus: \""))
        var chars = Array(text)
        let at = text.distance(from: text.startIndex, to: range.upperBound) + 10
        chars[at] = chars[at] == "0" ? "1" : "0"
        try String(chars).write(to: spoilt, atomically: true, encoding: .utf8)
        let bad = try run(["emv", "capk", "list", "--capk", spoilt.path])
        #expect(bad.status == 2 && bad.stderr.contains("keys[0].checksum"), "\(bad.stderr)")
    }

    @Test("emv oda: each recovery step of a card's certificates, and the check that fails on a tampered card")
    func oda() throws {
        let good = try run(["emv", "oda", "--card", card("oda-visa-dda.yaml"), "--date", "261124"])
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        #expect(good.stdout.contains("✓ issuer public key certificate (90)") && good.stdout.contains("✓ ICC public key certificate (9F46)"))
        #expect(good.stdout.contains("issuer key 1984-bit") && !good.stdout.contains("4761739001020027"))
        let tampered = try run(["emv", "oda", "--card", card("oda-tampered-record.yaml"), "--date", "261124"])
        #expect(tampered.status == 1)
        #expect(tampered.stdout.contains("✗ signed static application data (93): signed static data hash"), "\(tampered.stdout)")
        let records = try run(["emv", "records", "--card", card("oda-tampered-record.yaml"), "--json"])
        let listing = try #require(json(records) as? [String: Any])
        let rows = try #require(listing["records"] as? [[String: Any]])
        #expect(rows.contains { $0["oda"] as? Bool == true } && !records.stdout.contains("4761739001020092"))
        let expired = try run(["emv", "oda", "--card", card("oda-expired-issuer-certificate.yaml"), "--date", "261124"])
        #expect(expired.status == 1 && expired.stdout.contains("issuer certificate expiry"))
        #expect(try run(["emv", "oda", "--card", card("oda-visa-dda.yaml"), "--date", "26-11"]).status == 2)
    }

    @Test("emv ca: init refuses to overwrite; a fresh CA's capk export loads; personalise writes a card sale authenticates, or spoils it as asked")
    func ca() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let caFile = dir.appendingPathComponent("ca.yaml").path
        #expect(try run(["emv", "ca", "init", "--out", caFile, "--key", "B5:1024"]).status == 0)
        let again = try run(["emv", "ca", "init", "--out", caFile])
        #expect(again.status == 2 && again.stderr.contains("never overwritten"))
        let export = try run(["emv", "ca", "capk", "--ca", caFile])
        #expect(export.status == 0)
        let capk = dir.appendingPathComponent("capk.yaml").path
        try export.stdout.write(toFile: capk, atomically: true, encoding: .utf8)
        let listed = try run(["emv", "capk", "list", "--capk", capk, "--rid", "A000000003", "--json"])
        #expect((json(listed) as? [[String: Any]])?.map { $0["index"] as? String } == ["B5"])

        let profile = dir.appendingPathComponent("card.yaml").path
        try FileManager.default.copyItem(atPath: card("visa-credit-cvn10.yaml"), toPath: profile)
        let done = try run(["emv", "ca", "personalise", profile, "--ca", caFile, "--ca-index", "B5", "--methods", "sda,dda", "--issuer-bits", "1024",
                            "--icc-bits", "1024"])
        #expect(done.status == 0, "\(done.stderr)")
        let sale = try run(["sale", "--card", profile, "--amount", "10.00", "--capk", capk, "--ledger", dir.appendingPathComponent("l.sqlite").path, "--json"])
        let outcome = try #require(json(sale) as? [String: Any])
        let report = try #require(outcome["oda"] as? [String: Any])
        #expect(report["method"] as? String == "dda" && report["result"] as? String == "passed" && report["caIndex"] as? String == "B5")
        // The shipped CAPK file has no B5: the same card fails on the CA key.
        let other = try run(["sale", "--card", profile, "--amount", "10.00", "--ledger", dir.appendingPathComponent("l.sqlite").path, "--json"])
        #expect(((json(other) as? [String: Any])?["oda"] as? [String: Any])?["failedCheck"] as? String == "CA public key")

        for bad in [["--methods", "rsa"], ["--fault", "nope"], ["--issuer-bits", "1408"], ["--ca-index", "B0"], ["--ddol", "zz"]] {
            let r = try run(["emv", "ca", "personalise", profile, "--ca", caFile, "--ca-index", "B5"] + bad.filter { $0 != "--ca-index" && $0 != "B0" }
                                + (bad.first == "--ca-index" ? ["--ca-index", "B0"] : []))
            #expect(r.status == 2, "\(bad): \(r.stderr)")
        }
        let spoilt = try run(["emv", "ca", "personalise", profile, "--ca", caFile, "--ca-index", "B5", "--methods", "dda", "--issuer-bits", "1024",
                              "--fault", "corrupt-icc-certificate"])
        #expect(spoilt.status == 0 && spoilt.stdout.contains("faults: corrupt-icc-certificate"))
        let failed = try run(["sale", "--card", profile, "--amount", "10.00", "--capk", capk, "--ledger", dir.appendingPathComponent("l.sqlite").path])
        #expect(failed.stdout.contains("ODA: method DDA: failed") && failed.stdout.contains("failed check: ICC certificate recovered data"), "\(failed.stdout)")
        #expect(failed.stdout.contains("TVR 08"))
    }

    @Test("sale --revoked takes a certificate out; a malformed entry is exit 2")
    func revoked() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ledger = dir.appendingPathComponent("l.sqlite").path
        let first = try run(["sale", "--card", card("oda-visa-sda.yaml"), "--amount", "10.00", "--ledger", ledger, "--json"])
        let serial = try #require(((json(first) as? [String: Any])?["oda"] as? [String: Any])?["issuerCertificateSerial"] as? String)
        let revoked = try run(["sale", "--card", card("oda-visa-sda.yaml"), "--amount", "10.00", "--ledger", ledger, "--json", "--revoked", "A000000003:B1:\(serial)"])
        let report = (json(revoked) as? [String: Any])?["oda"] as? [String: Any]
        #expect(report?["failedCheck"] as? String == "issuer certificate revoked")
        let offline = try run(["emv", "oda", "--card", card("oda-visa-sda.yaml"), "--date", "261124", "--revoked", "A000000003:B1:\(serial)"])
        #expect(offline.status == 1 && offline.stdout.contains("issuer certificate revoked"), "\(offline.stdout)")
        let bad = try run(["sale", "--card", card("oda-visa-sda.yaml"), "--amount", "10.00", "--ledger", ledger, "--revoked", "A000000003:B1"])
        #expect(bad.status == 2 && bad.stderr.contains("--revoked") && bad.stderr.contains("RID:INDEX:SERIAL"))
    }
}
