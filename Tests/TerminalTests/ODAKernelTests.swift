import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

/// The CA keys shipped in Scenarios/ca/capk.yaml: the bench CA's and the schemes' test keys.
let shippedCAKeys: [CAPublicKey] = {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scenarios/ca/capk.yaml")
    return try! CAPKFile.parse(yaml: String(contentsOf: url, encoding: .utf8), file: url.path)
}()

@Suite("kernel: offline data authentication (EMV Book 2, Book 3 §10.3)")
struct ODAKernelTests {
    static func bench(_ file: String, keys: [CAPublicKey] = shippedCAKeys, capabilities: UInt8 = 0xC8,
                      revoked: [RevokedCertificate] = []) throws -> Bench {
        try Bench(file, pins: ["1234"]) { c in
            c.oda = ODAConfiguration(caKeys: keys, revoked: revoked)
            c.capabilities[2] = capabilities
        }
    }

    /// Each ODA test card, what the kernel decides, the TVR byte 1 it leaves and the check that failed.
    @Test("each ODA test card: method, result, TVR byte 1, TSI, the failed check and the outcome the action codes give", arguments: [
        ("oda-visa-sda.yaml", ODAReport.Method.sda, ODAReport.Result.passed, UInt8(0x02), nil as String?, "00"),
        ("oda-visa-dda.yaml", .dda, .passed, 0x00, nil, "00"),
        ("oda-visa-dda-default-ddol.yaml", .dda, .passed, 0x00, nil, "00"),
        ("oda-mastercard-cda.yaml", .cda, .passed, 0x00, nil, "00"),
        ("visa-t0-get-response.yaml", .dda, .passed, 0x00, nil, "00"),
        ("oda-expired-issuer-certificate.yaml", .dda, .failed, 0x08, "issuer certificate expiry", "00"),
        ("oda-expired-icc-certificate.yaml", .cda, .failed, 0x04, "ICC certificate expiry", "00"),
        ("oda-wrong-ca-index.yaml", .sda, .failed, 0x42, "issuer certificate recovered data", "00"),
        ("oda-unknown-ca-index.yaml", .dda, .failed, 0x08, "CA public key", "00"),
        ("oda-corrupt-static-signature.yaml", .sda, .failed, 0x42, "signed static data recovered data", "00"),
        ("oda-corrupt-issuer-certificate.yaml", .dda, .failed, 0x08, "issuer certificate recovered data", "00"),
        ("oda-corrupt-icc-certificate.yaml", .cda, .failed, 0x04, "ICC certificate recovered data", "00"),
        ("oda-tampered-record.yaml", .sda, .failed, 0x42, "signed static data hash", "00"),
        ("oda-cda-wrong-icc-key.yaml", .cda, .failed, 0x04, "signed dynamic data recovered data", "Z1"),
        ("oda-sda-failure-denied.yaml", .sda, .failed, 0x42, "signed static data recovered data", "Z1"),
        ("oda-icc-data-missing.yaml", .sda, .failed, 0x62, "CA public key index", "00"),
    ])
    func card(file: String, method: ODAReport.Method, result: ODAReport.Result, tvr1: UInt8, check: String?, code: String) throws {
        var b = try Self.bench(file)
        let outcome = try b.run()
        #expect(outcome.oda.method == method)
        #expect(outcome.oda.result == result, "\(outcome.oda.lines)")
        #expect(outcome.tvr.bytes[0] == tvr1, "TVR \(outcome.tvr)")
        #expect(outcome.tsi.contains(TSI.offlineDataAuthenticationPerformed))
        #expect(outcome.oda.failedCheck == check, "\(outcome.oda.failure ?? "")")
        #expect(outcome.responseCode.code == code, "\(outcome.hostMessage)")
        let instructions = b.link.instructions
        #expect(instructions.contains(0x88) == (method == .dda && !(check ?? "").contains("certificate") && check != "CA public key"))
    }

    @Test("the method is the best the card's AIP and the terminal's 9F33 share: CDA, then DDA, then SDA, else none", arguments: [
        (UInt8(0xC8), ODAReport.Method.cda), (0xC0, .dda), (0x80, .sda), (0x08, .cda), (0x00, .none),
    ])
    func selection(capabilities: UInt8, method: ODAReport.Method) throws {
        var b = try Self.bench("oda-mastercard-cda.yaml", capabilities: capabilities)
        let outcome = try b.run()
        #expect(outcome.oda.method == method)
        #expect(outcome.oda.result == (method == .none ? .notPerformed : .passed))
        #expect(outcome.tvr.contains(TVR.offlineDataAuthenticationNotPerformed) == (method == .none))
        #expect(outcome.tvr.contains(TVR.sdaSelected) == (method == .sda))
        #expect(outcome.tsi.contains(TSI.offlineDataAuthenticationPerformed) == (method != .none))
        #expect(outcome.decision == .approved)
        // CDA asks GENERATE AC for a signature (P1 bit 5); the others never do.
        let cdaRequested = b.link.card.profile.applications[0].oda != nil && method == .cda
        #expect(outcome.trace.filter { $0.command.hasPrefix("80AE") }.allSatisfy { (UInt8($0.command.dropFirst(4).prefix(2), radix: 16)! & 0x10 != 0) == cdaRequested })
    }

    @Test("a card without certificates whose AIP offers nothing: ODA not performed, as before")
    func notOffered() throws {
        // The shipped card with its oda: block taken off.
        let plain = try profileVariant("visa-credit-cvn10.yaml", [])
        try ODAPersonaliser.strippingODA(try String(contentsOfFile: plain, encoding: .utf8)).write(toFile: plain, atomically: true, encoding: .utf8)
        var b = try Self.bench(plain)
        let outcome = try b.run()
        #expect(outcome.oda.method == .none && outcome.oda.result == .notPerformed)
        #expect(outcome.oda.reason == "the card's AIP offers no method")
        #expect(outcome.tvr.bytes[0] == 0x80)
        #expect(!outcome.tsi.contains(TSI.offlineDataAuthenticationPerformed))
    }

    @Test("no CA key for the card, an expired CA key, a revoked issuer certificate: each fails its own check")
    func terminalSide() throws {
        var none = try Self.bench("oda-visa-dda.yaml", keys: [])
        #expect(try none.run().oda.failedCheck == "CA public key")
        let expired = shippedCAKeys.map { k in
            CAPublicKey(rid: k.rid, index: k.index, key: k.key, expiry: ODADate(year: 2025, month: 12, day: 31), name: k.name)
        }
        var old = try Self.bench("oda-visa-dda.yaml", keys: expired)
        let o = try old.run()
        #expect(o.oda.failedCheck == "CA public key expiry" && o.tvr.contains(TVR.ddaFailed))
        var first = try Self.bench("oda-visa-dda.yaml")
        let serial = try #require(try first.run().oda.issuerCertificateSerial)
        var revoked = try Self.bench("oda-visa-dda.yaml", revoked: [RevokedCertificate(rid: [0xA0, 0, 0, 0, 0x03], index: 0xB0, serial: try Hex.decode(serial))])
        let r = try revoked.run()
        #expect(r.oda.failedCheck == "issuer certificate revoked" && r.tvr.contains(TVR.ddaFailed))
        #expect(r.oda.issuerCertificateSerial == serial, "the revoked certificate's fields are shown")
    }

    @Test("INTERNAL AUTHENTICATE refused: DDA failed; the card pulled out during it: the transaction ends, nothing to reverse")
    func internalAuthenticate() throws {
        var refused = try Self.bench("oda-visa-dda.yaml")
        refused.link.refuse = [(0x88, 0x0000, [0x69, 0x85])]
        let o = try refused.run()
        #expect(o.oda.failedCheck == "INTERNAL AUTHENTICATE" && o.tvr.contains(TVR.ddaFailed) && !o.tvr.contains(TVR.iccDataMissing))
        var removed = try Self.bench("oda-visa-dda.yaml")
        let before = removed.link.card.profile.applications[0].records.count
        // PSE, 2 directory records, SELECT, GPO, the records: INTERNAL AUTHENTICATE comes next.
        removed.link.removeBefore = 5 + before + 1
        let failure = try removed.failure()
        #expect(failure.error == .cardRemoved(step: "command \(5 + before + 1)"))
        #expect(failure.reversal == nil)
        #expect(removed.link.instructions.last == 0x88)
    }

    /// Flips a bit of the signature (9F4B) in the n-th GENERATE AC's response.
    static func spoilSignature(of generateAC: Int) -> ([UInt8], [UInt8], Int) -> [UInt8] {
        var seen = 0
        return { command, response, _ in
            guard command[1] == 0xAE else { return response }
            seen += 1
            guard seen == generateAC, let tlv = try? TLV.parse(Array(response.dropLast(2))).first, tlv.tag == 0x77 else { return response }
            let children = tlv.children.map { c -> TLV in
                guard c.tag == 0x9F4B else { return c }
                var v = c.value
                v[v.count / 2] ^= 0x01
                return TLV(0x9F4B, v)
            }
            return TLV(0x77, children: children).encoded() + Array(response.suffix(2))
        }
    }

    @Test("a CDA signature that fails at the second GENERATE AC: declined after the host's approval, and the approval reversed")
    func secondGenerateAC() throws {
        var b = try Self.bench("oda-mastercard-cda.yaml")
        b.link.alter = Self.spoilSignature(of: 2)
        let before = b.balance
        let o = try b.run()
        #expect(o.decision == .declined)
        #expect(o.tvr.contains(TVR.cdaFailed))
        #expect(o.oda.result == .failed && (o.oda.failure ?? "").contains("second GENERATE AC"))
        #expect(o.reversal != nil && o.hostMessage.contains("CDA failed at the second GENERATE AC"))
        #expect(b.balance == before, "the reversal restored the balance")
    }

    @Test("a CDA signature that fails at the first GENERATE AC: offline decline, the card closed with an AAC, the host never asked")
    func firstGenerateAC() throws {
        var b = try Self.bench("oda-mastercard-cda.yaml")
        b.link.alter = Self.spoilSignature(of: 1)
        let before = b.balance
        let o = try b.run()
        #expect(o.decision == .declined && o.responseCode.code == "Z1")
        #expect(o.tvr.contains(TVR.cdaFailed) && o.oda.failedCheck == "signed dynamic data recovered data")
        let generateACs = o.trace.filter { $0.command.hasPrefix("80AE") }.map { String($0.command.dropFirst(4).prefix(2)) }
        #expect(generateACs == ["90", "00"], "ARQC with CDA, then an AAC without")
        #expect(b.balance == before)
    }

    @Test("a TC or ARQC without its signature when CDA was asked: CDA failed and ICC data missing")
    func unsignedAnswer() throws {
        var b = try Self.bench("oda-mastercard-cda.yaml")
        b.link.alter = { command, response, _ in
            guard command[1] == 0xAE, command[2] & 0x10 != 0, let tlv = try? TLV.parse(Array(response.dropLast(2))).first else { return response }
            let children = tlv.children.map { $0.tag == 0x9F4B ? TLV(0x9F26, [UInt8](repeating: 0x11, count: 8)) : $0 }
            return TLV(0x77, children: children).encoded() + Array(response.suffix(2))
        }
        let o = try b.run()
        #expect(o.tvr.contains(TVR.cdaFailed) && o.tvr.contains(TVR.iccDataMissing))
        #expect(o.oda.failedCheck == "CDA signature")
        #expect(o.decision == .declined && o.responseCode.code == "Z1")
    }

    @Test("CDA: the ARQC the host verifies is the one inside the signature, and the response carries no 9F26")
    func cryptogramFromTheSignature() throws {
        var b = try Self.bench("oda-mastercard-cda.yaml")
        let o = try b.run()
        #expect(o.decision == .approved, "the host verified the ARQC recovered from 9F4B")
        let first = try #require(o.trace.first { $0.command.hasPrefix("80AE90") })
        let template = try #require(try TLV.parse(Hex.decode(String(first.response.dropLast(4)))).first)
        #expect(template.first(0x9F26) == nil && template.first(0x9F4B) != nil)
        #expect(o.oda.dynamicNumber?.count == 16)
    }
}
