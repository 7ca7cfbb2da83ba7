import Foundation
import Testing
@testable import EMV

/// Random cases compared with pyemv, every CVN, ARQC and ARPC. A single difference fails.
///
/// The seed is random each run and printed on failure; set CARDBENCH_CROSSCHECK_SEED to replay
/// one. pyemv runs in CARDBENCH_PYTHON, else the package's .venv (`make venv` creates it).
@Suite("Cross-check with pyemv")
struct PyemvCrossCheckTests {
    struct Case: Encodable {
        let cvn: Int
        let imk: String
        let pan: String
        let psn: String
        let tags: [String: String]
        let cvr: String
        let iad: String
        let counters: String
        let arc: String
        let csu: String
        let proprietary: String
        /// Whether cardbench is given the CVR and counters inside an IAD rather than directly.
        let viaIAD: Bool

        enum CodingKeys: String, CodingKey { case cvn, imk, pan, psn, tags, cvr, iad, counters, arc, csu, proprietary }
    }

    struct Answer: Decodable {
        let arqc: String
        let arpc: String
    }

    static let casesPerCVN = 100

    static func makeCases(seed: UInt64) -> [Case] {
        var rng = SplitMix64(state: seed)
        func hex(_ n: Int) -> String { Hex.encode((0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        func digits(_ n: Int) -> String { String((0..<n).map { _ in Character(String(Int.random(in: 0...9, using: &rng))) }) }
        var cases: [Case] = []
        for cvn in CVN.allCases {
            for _ in 0..<casesPerCVN {
                var tags: [String: String] = [:]
                for (tag, length) in CVN.cryptogramTags { tags[tag.description] = hex(length) }
                let cvr: String, iad: String, counters = hex(8)
                switch cvn {
                case .visa10:
                    cvr = "03" + hex(3)
                    iad = "06010A" + cvr
                case .visa18, .visa22:
                    cvr = "03" + hex(3)
                    iad = "0601" + Hex.encode([UInt8(cvn.rawValue)]) + cvr + hex(Int.random(in: 0...25, using: &rng))
                default:
                    cvr = hex(6)
                    iad = "01" + Hex.encode([UInt8(cvn.rawValue)]) + cvr + hex(2) + counters + hex(Int.random(in: 0...14, using: &rng))
                }
                cases.append(Case(cvn: cvn.rawValue, imk: hex(16), pan: digits(Int.random(in: 13...19, using: &rng)), psn: digits(2),
                                  tags: tags, cvr: cvr, iad: iad, counters: counters, arc: hex(2), csu: hex(4),
                                  proprietary: hex(Int.random(in: 0...8, using: &rng)), viaIAD: Bool.random(using: &rng)))
            }
        }
        return cases
    }

    static func cardbench(_ c: Case) throws -> (arqc: String, arpc: String) {
        let cvn = try CVN(number: c.cvn)
        let keys = try CryptogramKeys(cvn: cvn, issuerMasterKey: TDESKey(hex: c.imk), pan: c.pan, psn: c.psn)
        var tags: [EMVTag: [UInt8]] = [:]
        for (k, v) in c.tags { tags[try EMVTag(hex: k)] = try Hex.decode(v) }
        let data: CryptogramData
        if cvn == .visa18 || cvn == .visa22 || c.viaIAD {
            data = CryptogramData(tags: tags, issuerApplicationData: try Hex.decode(c.iad))
        } else {
            data = CryptogramData(tags: tags, cvr: try Hex.decode(c.cvr), counters: try Hex.decode(c.counters))
        }
        let arqc = try keys.generate(data).cryptogram
        #expect(try keys.verify(arqc, data))
        let input: ARPCInput = cvn.arpcMethod == 1 ? .responseCode(try Hex.decode(c.arc))
            : .cardStatusUpdate(try Hex.decode(c.csu), proprietaryData: try Hex.decode(c.proprietary))
        let arpc = try keys.arpc(arqc: arqc, input, atc: tags[0x9F36])
        return (Hex.encode(arqc), Hex.encode(arpc))
    }

    @Test("700 random cases, every CVN, ARQC and ARPC equal to pyemv's")
    func randomCasesAgreeWithPyemv() throws {
        let seed = ProcessInfo.processInfo.environment["CARDBENCH_CROSSCHECK_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        let cases = Self.makeCases(seed: seed)
        #expect(cases.count >= 500)
        let answers = try Oracle.run(script: "pyemv_oracle.py", input: cases, as: [Answer].self)
        try #require(answers.count == cases.count, "pyemv answered \(answers.count) of \(cases.count) cases (seed \(seed))")
        var differences = 0
        for (c, answer) in zip(cases, answers) {
            let ours = try Self.cardbench(c)
            if ours.arqc != answer.arqc || ours.arpc != answer.arpc {
                differences += 1
                Issue.record("seed \(seed), CVN \(c.cvn), PAN length \(c.pan.count): cardbench \(ours.arqc)/\(ours.arpc), pyemv \(answer.arqc)/\(answer.arpc)")
            }
        }
        #expect(differences == 0, "replay with CARDBENCH_CROSSCHECK_SEED=\(seed)")
    }
}

/// Runs a Python script from Tests/Oracle with JSON in and JSON out.
enum Oracle {
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func python() throws -> String {
        if let env = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"], !env.isEmpty { return env }
        let venv = packageRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: venv) else {
            throw OracleError(message: "no pyemv oracle: \(venv) is missing; run `make venv` (or set CARDBENCH_PYTHON)")
        }
        return venv
    }

    static func run<In: Encodable, Out: Decodable>(script: String, arguments: [String] = [], input: In, as: Out.Type) throws -> Out {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        process.arguments = [packageRoot.appendingPathComponent("Tests/Oracle/\(script)").path] + arguments
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let payload = try JSONEncoder().encode(input)
        // Write from another thread: a large input must not deadlock against a full stdout pipe.
        let writer = Thread {
            stdin.fileHandleForWriting.write(payload)
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw OracleError(message: "\(script) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Out.self, from: out)
    }

    struct OracleError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}

