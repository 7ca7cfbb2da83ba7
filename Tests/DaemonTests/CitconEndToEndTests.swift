import Daemon
import Foundation
import Testing
import TestSupport

/// The Citcon platform against a merchant backend written in Python with `requests` from
/// Citcon's documents (Tests/Interop/citcon_backend.py): a real cardbenchd, its Citcon listener, a
/// merchant key from the admin API, and the IPN endpoint the script runs.
@Suite("Citcon platform, end to end with a merchant backend", .serialized)
struct CitconEndToEndTests {
    struct Merchant: Decodable { let merchantId: String; let key: String? }

    @Test("token, card charges with and without 3-D Secure, inquiry, capture, refunds, cancel, wallets, IPNs signed, refusals in Citcon's shape")
    func merchantBackend() async throws {
        let daemon = try await DaemonProcess(["--citcon-port", "0"])
        defer { daemon.stop(); daemon.remove() }
        let merchant = try JSONDecoder().decode(Merchant.self, from: try await daemon.client.send(method: "POST", "/v1/citcon/merchants",
                                                                                                json: ["merchantId": "shop1"]).body)
        let port = try String(contentsOfFile: daemon.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try WorldlineEndToEndTests.python())
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/citcon_backend.py").path,
                             "--base", "http://127.0.0.1:\(port)", "--merchant-key", try #require(merchant.key),
                             "--ipn-port", String(WorldlineEndToEndTests.freePort()),
                             // Scenarios/cards/visa-credit-cvn10.yaml
                             "--pan", "4761739001010010", "--expiry", "12/31", "--cvv", "123", "--timeout", "20"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "citcon_backend.py:\n\(text)\ndaemon log:\n\(daemon.logText.suffix(3000))")
        #expect(!text.contains("FAIL"))
        let dump = try Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil)
    }
}
