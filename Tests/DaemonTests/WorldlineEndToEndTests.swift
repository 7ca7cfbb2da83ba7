import Daemon
import Foundation
import Testing
import TestSupport

/// The Worldline platform against the official Python server SDK (`onlinepayments-sdk-python3`,
/// Tests/Interop/worldline_sdk.py): a real cardbenchd, its Worldline listener, a key made through
/// the admin API, and a webhook endpoint the script runs. Every request the SDK signs must verify.
@Suite("Worldline platform, end to end with the official SDK", .serialized)
struct WorldlineEndToEndTests {
    struct Key: Decodable { let keyId: String; let secretApiKey: String? }
    struct Webhook: Decodable { let keyId: String?; let secret: String? }

    static func python() throws -> String {
        if let env = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"], !env.isEmpty { return env }
        let venv = repositoryRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: venv) else { throw HarnessError("no \(venv): run `make venv`") }
        return venv
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test("the official SDK runs a payment's whole life: session, encrypted input, capture, refund, cancel, decline, idempotence, webhook")
    func officialSDK() async throws {
        let daemon = try await DaemonProcess(["--worldline-port", "0"])
        defer { daemon.stop(); daemon.remove() }
        let key = try JSONDecoder().decode(Key.self, from: try await daemon.client.send(method: "POST", "/v1/worldline/api-keys",
                                                                                       json: ["merchantId": "sdkmerchant"]).body)
        let hookPort = Self.freePort()
        let hook = try JSONDecoder().decode(Webhook.self, from: try await daemon.client.send(
            method: "PUT", "/v1/worldline/merchants/sdkmerchant/webhook", json: ["url": "http://127.0.0.1:\(hookPort)/hooks"]).body)
        let port = try String(contentsOfFile: daemon.runtime + "/worldline.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.python())
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/worldline_sdk.py").path,
                             "--endpoint", "http://127.0.0.1:\(port)", "--merchant", "sdkmerchant",
                             "--key-id", key.keyId, "--secret", try #require(key.secretApiKey),
                             "--webhook-key-id", try #require(hook.keyId), "--webhook-secret", try #require(hook.secret),
                             "--webhook-port", String(hookPort),
                             // Scenarios/cards/visa-credit-cvn10.yaml
                             "--pan", "4761739001010010", "--expiry", "1231", "--cvv", "123", "--timeout", "20"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "worldline_sdk.py:\n\(text)\ndaemon log:\n\(daemon.logText.suffix(3000))")
        #expect(!text.contains("FAIL"))
        #expect(text.contains("PASS webhook-captured"))
        // Nothing the SDK sent reached the ledger in clear: the PAN is in no table.
        let dump = try Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil)
    }
}
