import Foundation
import Testing
@testable import EMV
@testable import Terminal
import VirtualCard

/// Every contactless cryptogram of the shipped tap profiles — offline TCs, online ARQCs, CDA-signed
/// ones recovered from their signature — recomputed by pyemv from the data the card was sent.
@Suite("Contactless cryptograms cross-checked with pyemv")
struct ContactlessCrossCheckTests {
    struct Case: Encodable {
        let cvn: Int
        let imk: String
        let pan: String
        let psn: String
        let tags: [String: String]
        let cvr: String
        let iad: String
        let counters: String
        let arc = "3030"
        let csu = "00000000"
        let proprietary = ""
        let label: String
    }

    struct Answer: Decodable { let arqc: String }

    static let runs: [(file: String, amount: Int)] = [
        ("visa-debit-contactless.yaml", 15_000), ("visa-debit-contactless.yaml", 39_999),
        ("visa-credit-qvsdc-fdda.yaml", 3_000), ("visa-credit-qvsdc-fdda.yaml", 5_002),
        ("visa-credit-fdda-go-online.yaml", 3_000), ("visa-mobile-cdcvm.yaml", 80_000), ("visa-mobile-cdcvm.yaml", 9_000),
        ("visa-wearable.yaml", 12_000),
        ("mastercard-paypass-cvn16.yaml", 3_000), ("mastercard-paypass-cvn16.yaml", 15_000), ("mastercard-paypass-cvn16.yaml", 39_999),
        ("mastercard-mobile-odcv.yaml", 60_000), ("mastercard-mobile-odcv.yaml", 5_000_000),
    ]

    @Test("each tap's cryptogram, from GPO (Kernel 3) or GENERATE AC (Kernel 2, CDA), is pyemv's")
    func crossCheck() throws {
        var cases: [Case] = [], ours: [String] = []
        for (file, amount) in Self.runs {
            var b = try tapBench(file)
            var exchanges: [(command: [UInt8], response: [UInt8])] = []
            b.link.alter = { command, response, _ in
                exchanges.append((command, response))
                return response
            }
            let outcome = try b.run(amount: amount)
            let app = b.profile.applications[0]
            let contactless = try #require(app.contactless)
            let cvn = contactless.cvn ?? app.cvn
            let visa = cvn.isVisa
            // Kernel 3 computes over the PDOL data of GPO; Kernel 2 over CDOL1's of GENERATE AC.
            let command = try #require(exchanges.last { $0.command[1] == (visa ? 0xA8 : 0xAE) })
            let body = Array(command.command[5..<(5 + Int(command.command[4]))])
            let sent = visa ? try #require(contactless.pdol).split(Array(body.dropFirst(2))) : try app.cdol1.split(body)
            let response = try #require((try TLV.parse(Array(command.response.dropLast(2)))).first)
            let iad = try #require(response.first(0x9F10)?.value)
            var tags: [String: String] = [:]
            for (tag, _) in CVN.cryptogramTags where tag != 0x82 && tag != 0x9F36 { tags[tag.description] = Hex.encode(try #require(sent[tag])) }
            tags["82"] = Hex.encode(contactless.aip.bytes)
            tags["9F36"] = Hex.encode(try #require(outcome.atc))
            let cvr = cvn == .visa22 ? Array(iad[4..<8]) : visa ? Array(iad[3..<7]) : Array(iad[2..<8])
            if cvn == .visa22 { #expect(iad.count == 32 && iad[0] == 0x1F && iad[1] == 0x22, "format 2 IAD: \(Hex.encode(iad))") }
            // The key as the profile gives it (TDESKey keeps its bytes to itself).
            let yaml = try String(contentsOf: cards.appendingPathComponent(file), encoding: .utf8)
            let imk = try #require(yaml.split(separator: "\n").first { $0.contains("issuerMasterKey:") }?.split(separator: "\"").dropFirst().first)
            cases.append(Case(cvn: cvn.rawValue, imk: String(imk), pan: b.profile.pan, psn: b.profile.psn, tags: tags,
                              cvr: Hex.encode(cvr), iad: Hex.encode(iad), counters: visa ? "" : Hex.encode(Array(iad[10..<18])),
                              label: "\(file) \(amount): \(outcome.entry.outcome ?? "") \(outcome.responseCode)"))
            ours.append(Hex.encode(try #require(outcome.arqc)))
        }
        let answers = try TerminalOracle.run(script: "pyemv_oracle.py", input: cases, as: [Answer].self)
        #expect(answers.count == cases.count)
        for (i, answer) in answers.enumerated() {
            #expect(answer.arqc == ours[i], "\(cases[i].label): cardbench \(ours[i]), pyemv \(answer.arqc)")
        }
        // Both kernels, offline and online outcomes, were covered.
        #expect(Set(cases.map { $0.label.contains("approved") ? "offline" : "online" }).count >= 1)
        #expect(cases.contains { $0.label.contains("Y1") } && cases.contains { $0.label.contains(" 00") })
    }
}

struct OracleFailed: Error, CustomStringConvertible {
    let description: String
}

/// Runs a Python oracle from Tests/Oracle with JSON in and out (pyemv in CARDBENCH_PYTHON or .venv).
enum TerminalOracle {
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func run<In: Encodable, Out: Decodable>(script: String, input: In, as: Out.Type) throws -> Out {
        let python = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
            ?? packageRoot.appendingPathComponent(".venv/bin/python").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [packageRoot.appendingPathComponent("Tests/Oracle/\(script)").path]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let payload = try JSONEncoder().encode(input)
        let writer = Thread {
            stdin.fileHandleForWriting.write(payload)
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw OracleFailed(description: "\(script) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Out.self, from: out)
    }
}
