import CardIO
import EMV
import Foundation
import Testing
import VirtualCard

/// `cardbench card insert` as a separate process, attached to a real VirtualReader socket.
@Suite("cardbench card insert")
struct CardInsertTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static func profile(_ name: String) -> String { root.appendingPathComponent("Scenarios/cards/\(name)").path }

    /// A started card process, its reader, and what it printed.
    final class InsertedCard {
        let directory: URL
        let reader: VirtualReader
        let process = Process()
        let output = Pipe()

        init(profile: String, extra: [String] = []) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-insert-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let socket = directory.appendingPathComponent("reader.sock").path
            reader = try VirtualReader(name: "test", socketPath: socket, responseTimeout: .seconds(5))
            try reader.start()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("cardbench")
            process.arguments = ["card", "insert", "--profile", profile, "--reader", socket, "--remove-after", "20"] + extra
            process.standardOutput = output
            process.standardError = output
            try process.run()
        }

        /// Removes the card (SIGINT, as Ctrl-C) and returns everything it printed.
        func remove() -> String {
            if process.isRunning { process.interrupt() }
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            reader.stop()
            try? FileManager.default.removeItem(at: directory)
            return text
        }
    }

    static func transmit(_ channel: any CardChannel, _ command: CommandAPDU) throws -> ResponseAPDU {
        try ResponseAPDU(bytes: channel.transmit(command.bytes))
    }

    @Test("a full first GENERATE AC over the socket; the trace masks the PAN and withholds the PIN")
    func transactionOverTheSocket() throws {
        let card = try InsertedCard(profile: Self.profile("visa-credit-cvn10.yaml"), extra: ["--trace"])
        let channel = try card.reader.connect(timeout: .seconds(10))
        #expect(channel.atr == CardProfile.defaultATR)
        #expect(try Self.transmit(channel, .select(name: try Hex.decode("A0000000031010"))).status == .success)
        #expect(try Self.transmit(channel, .getProcessingOptions(pdolData: [])).status == .success)
        let record = try Self.transmit(channel, .readRecord(sfi: 2, record: 1))
        #expect(try TLV.parse(record.data).first(0x5A)?.value == (try Hex.decode("4761739001010010")))
        #expect(try Self.transmit(channel, .verify(pinBlock: try PlaintextPINBlock.encode(pin: "1234"))).status == .success)
        let cdol1 = try Hex.decode("000000010000" + "000000000000" + "0484" + "0000008000" + "0484" + "261122" + "00" + "1A2B3C4D")
        let ac = try Self.transmit(channel, .generateAC(.arqc, cdolData: cdol1))
        #expect(ac.status == .success)
        // Format 1: CID ATC(2) AC(8) IAD; the issuer recomputes the ARQC from its master key.
        let v = try #require(try TLV.parse(ac.data).first?.value)
        let keys = try CryptogramKeys(cvn: .visa10, issuerMasterKey: TDESKey(hex: "0123456789ABCDEFFEDCBA9876543210"),
                                      pan: "4761739001010010", psn: "01")
        // AIP 7C00: cardholder verification, terminal risk management, issuer authentication, SDA and DDA.
        var tags: [EMVTag: [UInt8]] = [0x82: try Hex.decode("7C00"), 0x9F36: Array(v[1..<3])]
        for (tag, length) in CVN.cryptogramTags where tag != 0x82 && tag != 0x9F36 {
            let offset = CVN.cryptogramTags.prefix { $0.tag != tag }.filter { $0.tag != 0x82 && $0.tag != 0x9F36 }.reduce(0) { $0 + $1.length }
            tags[tag] = Array(cdol1[offset..<offset + length])
        }
        #expect(try keys.verify(Array(v[3..<11]), CryptogramData(tags: tags, issuerApplicationData: Array(v[11...]))))

        let printed = card.remove()
        #expect(printed.contains("card inserted: Visa credit (CVN 10, offline PIN) (476173******0010)"))
        #expect(printed.contains("476173******0010"), "the trace shows the record with the PAN masked")
        #expect(!printed.contains("4761739001010010"), "no full PAN anywhere in the output")
        #expect(printed.contains("> 0020008008****************  VERIFY"), "the PIN block is withheld")
        #expect(printed.contains("card removed"))
    }

    @Test("--state keeps the ATC and PIN tries across insertions")
    func statePersists() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("cb-state-\(UUID().uuidString.prefix(8)).json").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        for expectedTries: UInt8 in [3, 2] {
            let card = try InsertedCard(profile: Self.profile("visa-credit-cvn10.yaml"), extra: ["--state", state])
            let channel = try card.reader.connect(timeout: .seconds(10))
            #expect(try Self.transmit(channel, .select(name: try Hex.decode("A0000000031010"))).status == .success)
            #expect(try Self.transmit(channel, .getData(0x9F17)).data == [0x9F, 0x17, 0x01, expectedTries])
            // A wrong PIN costs one try, and the next insertion must still know it.
            _ = try Self.transmit(channel, .verify(pinBlock: try PlaintextPINBlock.encode(pin: "0000")))
            _ = card.remove()
        }
        let saved = try JSONDecoder().decode(CardState.self, from: Data(contentsOf: URL(fileURLWithPath: state)))
        #expect(saved.pinTriesRemaining == 1)
    }

    @Test(arguments: [
        (["card", "insert", "--profile", "/nonexistent.yaml", "--reader", "/tmp/x.sock"], "--profile: cannot read '/nonexistent.yaml'"),
        (["card", "insert", "--profile", CardInsertTests.profile("visa-credit-cvn10.yaml"), "--reader", "host:99999"], "--reader:"),
        (["card", "insert", "--profile", CardInsertTests.profile("visa-credit-cvn10.yaml"), "--reader", "/nonexistent/dir/reader.sock"], "cardbench: "),
        (["card", "insert", "--profile", CardInsertTests.profile("visa-credit-cvn10.yaml"), "--reader", "/tmp/x.sock", "--remove-after", "0"], "--remove-after"),
    ])
    func rejects(arguments: [String], message: String) throws {
        let r = try run(arguments)
        #expect(r.status != 0)
        #expect(r.stderr.split(separator: "\n").count == 1, "stderr was: \(r.stderr)")
        #expect(r.stderr.contains(message), "stderr was: \(r.stderr)")
    }

    @Test func badProfileNamesFileFieldAndRule() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cb-bad-\(UUID().uuidString.prefix(8)).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        let good = try String(contentsOfFile: Self.profile("visa-credit-cvn10.yaml"), encoding: .utf8)
        try good.replacingOccurrences(of: "cvn: 10", with: "cvn: 12").write(to: file, atomically: true, encoding: .utf8)
        let r = try run(["card", "insert", "--profile", file.path, "--reader", "/tmp/x.sock"])
        #expect(r.status == 2)
        #expect(r.stderr == "cardbench: --profile: \(file.path): applications[0].cvn: must be one of 10, 18, 22 (Visa) or 16, 17, 20, 21 (Mastercard), got 12\n")
    }
}
