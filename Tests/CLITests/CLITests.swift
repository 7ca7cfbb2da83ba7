import Foundation
import Testing

/// Runs the built `cardbench` executable as a user would and checks what it prints.
struct CLIResult: Sendable {
    let status: Int32
    let stdout: String
    let stderr: String
    var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
}

let imk = "0123456789ABCDEFFEDCBA9876543210"
let visaTags = ["9F02=000000004000", "9F03=000000000000", "9F1A=0124", "95=8000048000", "5F2A=0124", "9A=191105",
                "9C=01", "9F37=52BF4585", "82=1800", "9F36=001C"].flatMap { ["--tag", $0] }
let mcTags = ["9F02=000000009999", "9F03=000000000000", "9F1A=0124", "95=8000000000", "5F2A=0124", "9A=209906",
              "9C=00", "9F37=ABCDEF12", "82=1800", "9F36=001C"].flatMap { ["--tag", $0] }

func run(_ arguments: [String]) throws -> CLIResult {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let process = Process()
    process.executableURL = directory.appendingPathComponent("cardbench")
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CLIResult(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
}

@Suite("cardbench emv arqc / arpc")
struct CryptogramCommandTests {
    @Test("every CVN's published ARQC is alone on the first line", arguments: [
        ("10", ["--cvr", "03A06010"], "29CCA15AE665FA2E", false),
        ("18", ["--iad", "06011203A0B800"], "7A788EA6B8A3E733", false),
        ("22", ["--tag", "9F10=06011203A0B800"], "7A788EA6B8A3E733", false),
        ("16", ["--cvr", "A00003220000"], "24CCF3DEE3158C70", true),
        ("17", ["--cvr", "A00003220000", "--counters", "00000000000322FF"], "EAE8A620A75648D8", true),
        ("20", ["--cvr", "A00003220000"], "CD29615D6452E70E", true),
        ("21", ["--cvr", "A00003220000", "--counters", "00000000000322FF"], "C30E54BE496CF5E5", true),
    ])
    func arqc(cvn: String, extra: [String], expected: String, mastercard: Bool) throws {
        let r = try run(["emv", "arqc", "--cvn", cvn, "--imk", imk, "--pan", "1234567890123456", "--psn", "00"]
                        + (mastercard ? mcTags : visaTags) + extra)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.first == expected)
    }

    @Test func arqcJSON() throws {
        let r = try run(["emv", "arqc", "--cvn", "16", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--cvr", "A00003220000", "--json"] + mcTags)
        #expect(r.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: String]
        #expect(object == ["arqc": "24CCF3DEE3158C70", "iccMasterKey": "154F349D8585CB7F6B0798E9839B10C1",
                           "sessionKey": "5D8F37BCD9E5DA68048CDFA2EA255D9E"])
    }

    @Test("ARPC, both methods", arguments: [
        (["--cvn", "10", "--arqc", "29CCA15AE665FA2E", "--arc", "3030"], "28993816AFAE4AEB", "91: 28993816AFAE4AEB3030"),
        (["--cvn", "18", "--arqc", "7A788EA6B8A3E733", "--csu", "00000000", "--tag", "9F36=001C"], "9AF514C1", "91: 9AF514C100000000"),
        (["--cvn", "16", "--arqc", "24CCF3DEE3158C70", "--arc", "0010"], "73F6BBF389A6586C", "91: 73F6BBF389A6586C0010"),
        (["--cvn", "21", "--arqc", "C30E54BE496CF5E5", "--arc", "0010", "--tag", "9F36=001C"], "4F51F9CC63CE8B3C", "91: 4F51F9CC63CE8B3C0010"),
    ])
    func arpc(arguments: [String], expected: String, issuerData: String) throws {
        let r = try run(["emv", "arpc", "--imk", imk, "--pan", "1234567890123456", "--psn", "00"] + arguments)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines == [expected, issuerData])
    }
}

@Suite("bad input: one line naming the argument and the rule, non-zero exit")
struct BadInputTests {
    static let base = ["emv", "arqc", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--cvr", "03A06010"]

    @Test(arguments: [
        (["emv", "arqc", "--cvn", "11", "--imk", imk, "--pan", "1234567890123456", "--psn", "00"] + visaTags, "--cvn", "must be one of"),
        (["emv", "arqc", "--cvn", "ten", "--imk", imk, "--pan", "1234567890123456", "--psn", "00"] + visaTags, "--cvn", "must be a number"),
        (["emv", "arqc", "--cvn", "10", "--imk", "0123", "--pan", "1234567890123456", "--psn", "00"] + visaTags, "--imk", "must be 16 bytes"),
        (["emv", "arqc", "--cvn", "10", "--imk", "012", "--pan", "1234567890123456", "--psn", "00"] + visaTags, "--imk", "even number of hex digits"),
        (["emv", "arqc", "--cvn", "10", "--imk", imk, "--pan", "12345678901234AB", "--psn", "00"] + visaTags, "--pan", "digits only"),
        (["emv", "arqc", "--cvn", "10", "--imk", imk, "--pan", "1234567890123456", "--psn", "7"] + visaTags, "--psn", "2 digits"),
        (["emv", "arqc", "--cvn", "10", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--cvr", "03A06010"]
            + visaTags.filter { !$0.hasPrefix("9F37") && $0 != "--tag" } .flatMap { ["--tag", $0] }, "--tag 9F37", "missing"),
        (["emv", "arqc", "--cvn", "10", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--cvr", "03A06010", "--tag", "9F02=0000004000"]
            + Array(visaTags.dropFirst(2)), "--tag 9F02", "must be 6 bytes"),
        (["emv", "arqc", "--cvn", "18", "--imk", imk, "--pan", "1234567890123456", "--psn", "00"] + visaTags, "--iad", "missing"),
        (["emv", "arqc", "--cvn", "10", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--tag", "9F02"], "--tag", "TAG=HEX"),
        (["emv", "arpc", "--cvn", "18", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--arqc", "7A788EA6B8A3E733", "--arc", "3030", "--tag", "9F36=001C"], "--arc", "method 2"),
        (["emv", "arpc", "--cvn", "20", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--arqc", "7A788EA6B8A3E733", "--arc", "3030"], "--tag 9F36", "missing"),
        (["emv", "arpc", "--cvn", "10", "--imk", imk, "--pan", "1234567890123456", "--psn", "00", "--arqc", "7A78", "--arc", "3030"], "--arqc", "must be 8 bytes"),
        (["emv", "tlv", "9F0206000000"], "TLV", "declares 6 bytes but only 3 remain"),
        (["emv", "tlv", "9F02060"], "hex", "even number"),
        (["emv", "atr", "3B6800"], "ATR", "truncated"),
        (["emv", "pinblock", "--format", "1", "--pin", "1234", "--pan", "4111111111111111"], "--format", "must be 0 or 4"),
        (["emv", "pinblock", "--format", "0", "--pin", "12a4", "--pan", "4111111111111111"], "--pin", "digits only"),
        (["emv", "pinblock", "--format", "4", "--pin", "1234", "--pan", "4111111111111111"], "--key", "AES key"),
        (["emv", "pinblock", "--format", "0", "--pin", "1234", "--pan", "4111111111111111", "--key", "0011"], "--key", "8, 16 or 24 bytes"),
        (["emv", "arqc", "--cvn", "10"], "", "Missing expected argument"),
        (["sale", "--card", "Scenarios/cards/visa-credit-cvn10.yaml", "--amount", "1.00", "--ledger", "/nonexistent/l.sqlite", "--pin"]
            + Array(repeating: "1234", count: 16), "--pin", "at most 15 PINs"),
        (["sale", "--card", "Scenarios/cards/visa-credit-cvn10.yaml", "--amount", "1.00", "--ledger", "/nonexistent/l.sqlite", "--tap", "--swipe"],
            "--tap and --swipe", "give one"),
        (["sale", "--card", "Scenarios/cards/visa-credit-cvn10.yaml", "--amount", "1.00", "--ledger", "/nonexistent/l.sqlite", "--then", "wave"],
            "--then", "insert, tap or swipe"),
        (["sale", "--card", "Scenarios/cards/visa-credit-cvn10.yaml", "--amount", "1.00", "--ledger", "/nonexistent/l.sqlite", "--tap"],
            "--card", "cannot be presented by tap"),
        (["card", "swipe", "--profile", "Scenarios/cards/magstripe-only-101.yaml", "--reader", "/nonexistent/reader.sock"],
            "--reader", "a swipe reaches a daemon terminal only"),
        (["card", "tap", "--profile", "Scenarios/cards/visa-debit-contactless.yaml"], "give exactly one of", "--reader and --terminal"),
    ])
    func rejects(arguments: [String], option: String, rule: String) throws {
        let r = try run(arguments)
        #expect(r.status != 0)
        #expect(r.stdout.isEmpty)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1, "stderr was: \(r.stderr)")
        #expect(r.stderr.hasPrefix("cardbench: \(option)"), "stderr was: \(r.stderr)")
        #expect(r.stderr.contains(rule), "stderr was: \(r.stderr)")
    }
}

@Suite("cardbench emv tlv / atr / pinblock")
struct DecodingCommandTests {
    @Test func tlvTree() throws {
        let r = try run(["emv", "tlv", "6F1A840E315041592E5359532E4444463031A5088801025F2D02656E"])
        #expect(r.status == 0)
        #expect(r.lines == [
            "6F File Control Information (FCI) Template [26]",
            "  84 Dedicated File (DF) Name [14]: 315041592E5359532E4444463031",
            "  A5 File Control Information (FCI) Proprietary Template [8]",
            "    88 Short File Identifier (SFI) [1]: 02",
            "    5F2D Language Preference [2]: 656E \"en\"",
        ])
    }

    @Test func tlvJSON() throws {
        let r = try run(["emv", "tlv", "--json", "500B5649534120435245444954"])
        #expect(r.status == 0)
        let array = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        #expect(array[0]["tag"] as? String == "50")
        #expect(array[0]["name"] as? String == "Application Label")
        #expect(array[0]["value"] as? String == "5649534120435245444954")
        #expect(array[0]["text"] as? String == "VISA CREDIT")
    }

    @Test func atr() throws {
        let r = try run(["emv", "atr", "3B 68 00 00 80 66 A2 06 02 01 32 0E"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.lines.first?.hasPrefix("TS = 3B") == true)
        #expect(r.stdout.contains("T=0"))
        let json = try run(["emv", "atr", "--json", "3B6800008066A2060201320E"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["convention"] as? String == "direct")
        #expect(object["historicalBytes"] as? String == "8066A2060201320E")
    }

    @Test func pinBlocks() throws {
        // PIN 1234, PAN 4111111111111111: 041234FFFFFFFFFF xor 0000111111111111.
        let clear = try run(["emv", "pinblock", "--format", "0", "--pin", "1234", "--pan", "4111111111111111"])
        #expect(clear.lines == ["041225EEEEEEEEEE"])
        #expect(!clear.stdout.contains("1234"))
        let enciphered = try run(["emv", "pinblock", "--format", "0", "--pin", "1234", "--pan", "4111111111111111", "--key", imk])
        #expect(enciphered.status == 0)
        #expect(enciphered.lines.first?.count == 16)
        #expect(enciphered.lines.first != "041225EEEEEEEEEE")
        let f4a = try run(["emv", "pinblock", "--format", "4", "--pin", "1234", "--pan", "4111111111111111", "--key", imk])
        let f4b = try run(["emv", "pinblock", "--format", "4", "--pin", "1234", "--pan", "4111111111111111", "--key", imk])
        #expect(f4a.lines.first?.count == 32)
        // The random fill makes each format 4 block different.
        #expect(f4a.lines.first != f4b.lines.first)
    }
}

@Suite("cardbench bench crypto")
struct BenchCommandTests {
    /// The venv `make test` prepares; the bench needs pyemv for its comparison.
    static var python: String {
        ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".venv/bin/python").path
    }

    @Test("runs both sides on the same cases and reports rates, the ratio and the DES floor")
    func runsAndReports() throws {
        let r = try run(["bench", "crypto", "--seconds", "0.05", "--cases", "21", "--python", Self.python, "--json"])
        try #require(r.status == 0, "\(r.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let ours = try #require(object["cardbenchOpsPerSecond"] as? Double)
        let theirs = try #require(object["pyemvOpsPerSecond"] as? Double)
        let floor = try #require(object["desFloorOpsPerSecond"] as? Double)
        #expect(ours > 0 && theirs > 0 && floor > 0)
        let share = try #require(object["shareOfDESFloor"] as? Double)
        #expect(abs(share - ours / floor) < 0.01)
        #expect(object["goalShareOfDESFloor"] as? Double == 0.9)
        #expect(object["pyemv"] as? String == "1.5.0")
        #expect(object["cases"] as? Int == 21)
    }

    @Test("without pyemv: cardbench and the DES floor, with the floor goal's verdict")
    func withoutPyemv() throws {
        let r = try run(["bench", "crypto", "--seconds", "0.05", "--cases", "21", "--without-pyemv", "--python", "/nonexistent/python"])
        try #require(r.status == 0, "\(r.stderr)")
        #expect(r.lines.count == 3)
        #expect(r.lines.first?.hasPrefix("cardbench (Swift, libcrypto DES)") == true)
        #expect(r.lines.last.map { $0.hasPrefix("goal: at least 90% of the DES floor's rate: ") && ($0.hasSuffix(", met") || $0.hasSuffix(", not met")) } == true)
    }

    @Test(arguments: [
        (["bench", "crypto", "--seconds", "0"], "--seconds"),
        (["bench", "crypto", "--cases", "0"], "--cases"),
        (["bench", "crypto", "--seconds", "0.05", "--python", "/nonexistent/python"], "pyemv run with '/nonexistent/python' failed"),
    ])
    func rejects(arguments: [String], message: String) throws {
        let r = try run(arguments)
        #expect(r.status != 0)
        #expect(r.stderr.split(separator: "\n").count == 1, "stderr was: \(r.stderr)")
        #expect(r.stderr.contains(message), "stderr was: \(r.stderr)")
    }
}

@Suite("cardbench bench card")
struct CardBenchCommandTests {
    static let profile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml").path

    @Test("measures each size and the real virtual card, beside the socket floor")
    func runsAndReports() throws {
        let r = try run(["bench", "card", "--seconds", "0.05", "--sizes", "0,32", "--profile", Self.profile, "--json"])
        try #require(r.status == 0, "\(r.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let rows = try #require(object["sizes"] as? [[String: Any]])
        #expect(rows.compactMap { $0["label"] as? String } == ["size 0", "size 32", "virtual card, READ RECORD"])
        for row in rows {
            #expect((row["cardbenchRoundTripsPerSecond"] as? Double ?? 0) > 0)
            #expect((row["floorRoundTripsPerSecond"] as? Double ?? 0) > 0)
        }
        // The virtual card answers READ RECORD SFI 2 record 1 with its real record, not an echo.
        #expect((rows[2]["commandBytes"] as? Int) == 5)
        #expect((rows[2]["responseBytes"] as? Int ?? 0) > 40)
    }

    @Test(arguments: [
        (["bench", "card", "--sizes", "0,300"], "--sizes"),
        (["bench", "card", "--sizes", "abc"], "--sizes"),
        (["bench", "card", "--seconds", "0"], "--seconds"),
        (["bench", "card", "--seconds", "0.01", "--sizes", "0", "--profile", "/nonexistent.yaml"], "--profile: cannot read '/nonexistent.yaml'"),
    ])
    func rejects(arguments: [String], message: String) throws {
        let r = try run(arguments)
        #expect(r.status != 0)
        #expect(r.stderr.split(separator: "\n").count == 1, "stderr was: \(r.stderr)")
        #expect(r.stderr.contains(message), "stderr was: \(r.stderr)")
    }
}
