import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

/// Kernel 2's CDA (Book C-2): before GENERATE AC only what is missing fails it — a certificate or
/// exponent the card does not give, a CA key the terminal does not have (S456.24–25); the issuer
/// and ICC certificates are recovered together with the signature, after GENERATE AC (S910.4), and
/// a failure there sets "CDA failed" and ends the tap: End Application (S910.46–53), never online.
@Suite("Kernel 2: CDA checked after GENERATE AC (C-2 S456.25, S910.4, S910.46–53)")
struct Kernel2CDATests {
    /// mastercard-paypass-cvn16 with one byte of its ICC public key certificate (9F46) flipped.
    static func flippedICCCertificate() throws -> String {
        let yaml = try String(contentsOf: cards.appendingPathComponent("mastercard-paypass-cvn16.yaml"), encoding: .utf8)
        let line = try #require(yaml.split(separator: "\n").first { $0.contains("iccCertificate:") })
        let hex = String(line.split(separator: "\"")[1])
        var bytes = try Hex.decode(hex)
        bytes[bytes.count / 2] ^= 0xFF
        return try profileVariant("mastercard-paypass-cvn16.yaml", [(hex, Hex.encode(bytes))])
    }

    /// The P1 of each GENERATE AC in a trace, hex.
    static func generateACs(_ trace: [(command: String, response: String)]) -> [String] {
        trace.filter { $0.command.hasPrefix("80AE") }.map { String($0.command.dropFirst(4).prefix(2)) }
    }

    @Test("a flipped ICC certificate byte, tapped at 30.00: a TC asked with CDA, the certificate fails after it, CDA failed, End Application, nothing online")
    func corruptICCCertificate() throws {
        var b = try tapBench(try Self.flippedICCCertificate())
        let before = b.balance
        let f = try b.failure(amount: 3_000)
        guard case .endApplication(let reason) = f.error else {
            Issue.record("expected End Application, got \(f.error)")
            return
        }
        #expect(reason.contains("CDA failed"), "\(reason)")
        #expect(f.entry?.kernel == 2 && f.entry?.outcome == "end application", "\(f.entry?.path ?? [])")
        #expect(f.entry?.path.last?.contains("CDA failed") == true, "\(f.entry?.path ?? [])")
        // The TVR the tap ended with: CDA failed (byte 1 bit 3), nothing else in byte 1.
        let tvr = try #require(f.tvr, "the failure carries the TVR")
        #expect(tvr.contains(TVR.cdaFailed) && tvr.bytes[0] == 0x04, "TVR \(tvr)")
        // One GENERATE AC, for a TC with CDA (P1 50): nothing was judged bad before it.
        #expect(Self.generateACs(f.trace) == ["50"], "\(Self.generateACs(f.trace))")
        let oda = try #require(f.oda)
        #expect(oda.method == .cda && oda.result == .failed, "\(oda.lines)")
        #expect(oda.failedCheck?.hasPrefix("ICC certificate") == true, "\(oda.lines)")
        #expect((oda.failure ?? "").contains("GENERATE AC"), "\(oda.lines)")
        #expect(oda.issuerCertificateSerial != nil, "the issuer certificate was recovered, after GENERATE AC")
        #expect(f.reversal == nil && b.balance == before, "the host was never asked")
    }

    @Test("a CDA signature that fails at the GENERATE AC: CDA failed, End Application, no decline and no host")
    func spoiltSignature() throws {
        var b = try tapBench("mastercard-paypass-cvn16.yaml")
        b.link.alter = ODAKernelTests.spoilSignature(of: 1)
        let before = b.balance
        let f = try b.failure(amount: 15_000)
        guard case .endApplication = f.error else {
            Issue.record("expected End Application, got \(f.error)")
            return
        }
        #expect(f.tvr?.contains(TVR.cdaFailed) == true, "TVR \(f.tvr.map { "\($0)" } ?? "none")")
        #expect(f.oda?.failedCheck == "signed dynamic data recovered data", "\(f.oda?.lines ?? [])")
        // An ARQC asked with CDA (above the floor limit), and no authorisation.
        #expect(Self.generateACs(f.trace) == ["90"], "\(Self.generateACs(f.trace))")
        #expect(f.entry?.outcome == "end application" && b.balance == before)
    }

    @Test("no CA key for the card: CDA failed before GENERATE AC (S456.25), none asked for; the action codes decide")
    func missingCAKey() throws {
        var b = try tapBench("mastercard-paypass-cvn16.yaml") { $0.oda = ODAConfiguration(caKeys: []) }
        let o = try b.run(amount: 3_000)
        #expect(o.tvr.contains(TVR.cdaFailed) && !o.tvr.contains(TVR.iccDataMissing), "TVR \(o.tvr)")
        #expect(o.oda.method == .cda && o.oda.failedCheck == "CA public key", "\(o.oda.lines)")
        #expect(o.oda.issuerCertificateSerial == nil, "nothing recovered")
        // The card's IAC online (B470848000) has CDA failed: an ARQC, without CDA (P1 80).
        #expect(Self.generateACs(o.trace) == ["80"], "\(Self.generateACs(o.trace))")
        #expect(o.entry.outcome == "online request" && o.responseCode.code == "00", "\(o.hostMessage)")
    }

    @Test("CDA passes: the keys and the signature are checked after GENERATE AC, approved offline")
    func passes() throws {
        var b = try tapBench("mastercard-paypass-cvn16.yaml")
        let o = try b.run(amount: 3_000)
        #expect(o.responseCode.code == "Y1" && o.oda.method == .cda && o.oda.result == .passed, "\(o.oda.lines)")
        #expect(o.oda.issuerCertificateSerial != nil && o.oda.iccCertificateSerial != nil && o.oda.dynamicNumber != nil)
        #expect(Self.generateACs(o.trace) == ["50"] && !o.tvr.contains(TVR.cdaFailed))
    }
}
