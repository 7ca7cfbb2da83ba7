import ArgumentParser
import CLibCrypto
import EMV
import Foundation

/// `cardbench bench oda`: offline data authentication's RSA work, cardbench's recoveries and
/// signatures beside libcrypto's own raw RSA (`RSA_public_decrypt`/`RSA_private_encrypt`,
/// unpadded) on the same keys in the same run.
struct ODABench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "oda",
        abstract: "Offline data authentication per second: certificate recovery, signature checks and signing, beside libcrypto's raw RSA.",
        discussion: """
        Keys as a bench uses them: a 1984-bit CA key, a 1408-bit issuer key and a 1024-bit ICC key, exponent 3 \
        (generated fresh by libcrypto). Each cardbench figure is a whole Book 2 step (RSA, then the format, \
        hash and field checks); each floor is libcrypto's RSA alone on the same input. "DDA in full" is what a \
        terminal does per DDA transaction: issuer certificate, ICC certificate, signed dynamic data.
        """)

    @Option(help: "Seconds to run each measurement.")
    var seconds: Double = 1

    @Flag(help: "Print the figures as JSON.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be more than 0 and at most 600", code: 2) }
    }

    struct Row: Encodable {
        let operation: String
        let cardbenchPerSecond: Double
        let floor: String
        let floorPerSecond: Double
        let shareOfFloor: Double
    }

    /// Runs `body` repeatedly for `seconds`; operations per second.
    func rate(_ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        var n = 0
        repeat {
            for _ in 0..<8 { try body() }
            n += 8
        } while clock.now - start < .milliseconds(Int64(seconds * 1000))
        let elapsed = clock.now - start
        return Double(n) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// libcrypto's raw RSA on `key`: its own RSA object and method, no EMV parsing.
    final class LibcryptoRSA {
        let rsa: OpaquePointer
        let size: Int
        init(_ modulus: [UInt8], _ e: [UInt8], _ d: [UInt8]?) {
            rsa = RSA_new()
            let bn = { (b: [UInt8]) in b.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) } }
            RSA_set0_key(rsa, bn(modulus), bn(e), d.map(bn) ?? nil)
            size = modulus.count
        }
        deinit { RSA_free(rsa) }
        func publicOp(_ input: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: size)
            _ = input.withUnsafeBufferPointer { i in out.withUnsafeMutableBufferPointer { RSA_public_decrypt(Int32(size), i.baseAddress, $0.baseAddress, rsa, RSA_NO_PADDING) } }
            return out
        }
        func privateOp(_ input: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: size)
            _ = input.withUnsafeBufferPointer { i in out.withUnsafeMutableBufferPointer { RSA_private_encrypt(Int32(size), i.baseAddress, $0.baseAddress, rsa, RSA_NO_PADDING) } }
            return out
        }
    }

    func run() throws {
        let ca = try RSAPrivateKey.generate(bits: 1984), issuer = try RSAPrivateKey.generate(bits: 1408), icc = try RSAPrivateKey.generate(bits: 1024)
        let capk = CAPublicKey(rid: [0xA0, 0, 0, 0, 3], index: 0xB0, key: ca.publicKey, expiry: ODADate(year: 2035, month: 12, day: 31))
        let pan = "4761739001010010", today = ODADate(year: 2026, month: 11, day: 24)
        let staticData = try Hex.decode("5A0847617390010100105F24033112315F25032401015F280204845F3401015F300202019F0702FF009F0802008C") + [0x7C, 0x00]
        let (issuerCertificate, issuerRemainder) = try ODA.makeIssuerCertificate(ca: ca, issuer: issuer.publicKey, issuerIdentifier: "476173",
                                                                                  expiry: "1230", serial: [0, 0, 1])
        let (iccCertificate, iccRemainder) = try ODA.makeICCCertificate(issuer: issuer, icc: icc.publicKey, pan: pan, expiry: "1230", serial: [0, 0, 2],
                                                                        staticData: staticData)
        let ddolData: [UInt8] = [0x1A, 0x2B, 0x3C, 0x4D]
        let dynamic: [UInt8] = [8, 1, 2, 3, 4, 5, 6, 7, 8]
        let sdad = try ODA.makeDynamicSignature(icc: icc, dynamicData: dynamic, terminalData: ddolData)
        let caRSA = LibcryptoRSA(ca.modulus, ca.publicExponent, nil), issuerRSA = LibcryptoRSA(issuer.modulus, issuer.publicExponent, nil)
        let iccRSA = LibcryptoRSA(icc.modulus, icc.publicExponent, icc.privateExponent)
        // The floors do the same RSA: check it before timing anything.
        guard caRSA.publicOp(issuerCertificate) == ca.publicKey.recover(issuerCertificate), issuerRSA.publicOp(iccCertificate) == issuer.publicKey.recover(iccCertificate),
              iccRSA.publicOp(sdad) == icc.publicKey.recover(sdad) else {
            throw CLIError(message: "libcrypto's RSA and cardbench's disagree; refusing to compare speeds of different work")
        }
        let signInput = [0x6A] + [UInt8](repeating: 0xBB, count: icc.modulus.count - 2) + [0xBC]
        guard iccRSA.privateOp(signInput) == (try icc.sign(signInput)) else {
            throw CLIError(message: "libcrypto's private RSA and cardbench's disagree; refusing to compare")
        }
        var rows: [Row] = []
        func add(_ name: String, _ ours: Double, _ floorName: String, _ floor: Double) {
            rows.append(Row(operation: name, cardbenchPerSecond: ours.rounded(), floor: floorName, floorPerSecond: floor.rounded(),
                            shareOfFloor: (ours / floor * 1000).rounded() / 1000))
        }
        add("issuer certificate recovery (1984-bit CA)",
            try rate { _ = try ODA.recoverIssuerKey(certificate: issuerCertificate, remainder: issuerRemainder, exponent: [3], ca: capk, pan: pan, today: today) },
            "RSA_public_decrypt, 1984-bit", rate { _ = caRSA.publicOp(issuerCertificate) })
        add("ICC certificate recovery (1408-bit issuer)",
            try rate { _ = try ODA.recoverICCKey(certificate: iccCertificate, remainder: iccRemainder, exponent: [3], issuer: issuer.publicKey, pan: pan,
                                                 staticData: staticData, today: today) },
            "RSA_public_decrypt, 1408-bit", rate { _ = issuerRSA.publicOp(iccCertificate) })
        add("signed dynamic data check (1024-bit ICC)",
            try rate { _ = try ODA.verifyDynamicSignature(sdad, icc: icc.publicKey, terminalData: ddolData) },
            "RSA_public_decrypt, 1024-bit", rate { _ = iccRSA.publicOp(sdad) })
        add("DDA in full (the three above)",
            try rate {
                let i = try ODA.recoverIssuerKey(certificate: issuerCertificate, remainder: issuerRemainder, exponent: [3], ca: capk, pan: pan, today: today)
                let c = try ODA.recoverICCKey(certificate: iccCertificate, remainder: iccRemainder, exponent: [3], issuer: i.key, pan: pan,
                                              staticData: staticData, today: today)
                _ = try ODA.verifyDynamicSignature(sdad, icc: c.key, terminalData: ddolData)
            },
            "the three RSA_public_decrypt", rate {
                _ = caRSA.publicOp(issuerCertificate)
                _ = issuerRSA.publicOp(iccCertificate)
                _ = iccRSA.publicOp(sdad)
            })
        add("card signs dynamic data (1024-bit ICC, private)",
            try rate { _ = try ODA.makeDynamicSignature(icc: icc, dynamicData: dynamic, terminalData: ddolData) },
            "RSA_private_encrypt, 1024-bit (no CRT)", rate { _ = iccRSA.privateOp(signInput) })
        if json { return try printJSON(rows) }
        print("cardbench bench oda: \(seconds) s per measurement; keys 1984 (CA), 1408 (issuer), 1024 (ICC), exponent 3")
        for r in rows {
            print(String(format: "%-48@ %10.0f /s   floor %-38@ %10.0f /s   %5.1f%% of floor", r.operation as NSString, r.cardbenchPerSecond,
                         r.floor as NSString, r.floorPerSecond, 100 * r.shareOfFloor))
        }
    }
}
