import AsyncHTTPClient
import Daemon
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import DaemonTestSupport
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

extension CitconEndToEndTests {
    @Test("a client token may not capture (4010), a non-JSON body is 4102, the wallet page shows its buttons and answers with a 303")
    func refusalsAndPages() async throws {
        let daemon = try await DaemonProcess(["--citcon-port", "0"])
        defer { daemon.stop(); daemon.remove() }
        let merchant = try JSONDecoder().decode(Merchant.self, from: try await daemon.client.send(method: "POST", "/v1/citcon/merchants",
                                                                                                json: ["merchantId": "shop2"]).body)
        let port = try String(contentsOfFile: daemon.runtime + "/citcon.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        func send(_ method: HTTPMethod, _ path: String, _ body: String? = nil, auth: String? = nil, type: String = "application/json")
            async throws -> (Int, [String: Any], HTTPHeaders, String) {
            var r = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            r.method = method
            if let auth { r.headers.add(name: "Authorization", value: "Bearer \(auth)") }
            if let body {
                r.headers.add(name: "Content-Type", value: type)
                r.body = .bytes(ByteBuffer(string: body))
            }
            let answer = try await http.execute(r, timeout: .seconds(10))
            let text = String(buffer: try await answer.body.collect(upTo: 1 << 20))
            return (Int(answer.status.code), (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:], answer.headers, text)
        }
        func code(_ json: [String: Any]) -> String? { (json["data"] as? [String: Any])?["code"] as? String }
        let token = try #require(((try await send(.POST, "/v1/access-tokens", #"{"token_type":"client"}"#, auth: merchant.key)).1["data"] as? [String: Any])?["access_token"] as? String)
        let card = #"{"transaction":{"reference":"t1","amount":1000,"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}}"#
        let charge = try await send(.POST, "/v1/charges", card, auth: token)
        #expect(charge.0 == 200, "\(charge.3)")
        let id = try #require((charge.1["data"] as? [String: Any])?["id"] as? String)
        let capture = try await send(.POST, "/v1/captures", #"{"transaction_id":"\#(id)"}"#, auth: token)
        #expect(capture.0 == 401 && code(capture.1) == "4010", "a client token captured: \(capture.3)")
        let form = try await send(.POST, "/v1/charges", "transaction=1", auth: token, type: "application/x-www-form-urlencoded")
        #expect(form.0 == 415 && code(form.1) == "4102")
        let wallet = try await send(.POST, "/v1/charges",
                                    #"{"transaction":{"reference":"t2","amount":500,"currency":"USD","country":"US"},"payment":{"method":"toss"},"urls":{"cancel":"https://shop.example/cancel"}}"#,
                                    auth: token)
        let client = try #require(((wallet.1["data"] as? [String: Any])?["payment"] as? [String: Any])?["client"] as? [[String: Any]])
        let page = try #require(client.first?["content"] as? String)
        #expect(client.first?["format"] as? String == "redirect")
        let shown = try await send(.GET, String(page.dropFirst("http://127.0.0.1:\(port)".count)))
        #expect(shown.0 == 200 && shown.3.contains("id=\"approve\"") && shown.3.contains("id=\"expire\""))
        let answered = try await send(.POST, String(page.dropFirst("http://127.0.0.1:\(port)".count)), "action=cancel", type: "application/x-www-form-urlencoded")
        #expect(answered.0 == 303 && answered.2.first(name: "location") == "https://shop.example/cancel")
        try await http.shutdown()
    }
}

extension CitconEndToEndTests {
    @Test("under the 2.1.0 document: PayPal and Venmo are methods, Cash App is not (4000), and a confirmed charge publishes citcon-order-confirmed; under 2.2.0 it does not")
    func documentVersions() async throws {
        for version in ["2.1.0", "2.2.0"] {
            let daemon = try await DaemonProcess([], config: "citcon:\n  version: \"\(version)\"\n")
            defer { daemon.stop(); daemon.remove() }
            _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "v\(version.filter(\.isNumber))"])
            let merchant = "v\(version.filter(\.isNumber))"
            func platform(_ path: String, _ body: String) async throws -> [String: Any] {
                let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                        json: CitconRequestBody(merchantId: merchant, method: "POST", path: path, body: body))
                return (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]) ?? [:]
            }
            let paypal = try await platform("/v1/charges", #"{"transaction":{"reference":"p","amount":100,"currency":"USD","country":"US"},"payment":{"method":"paypal"}}"#)
            #expect((paypal["status"] as? Int) == 200, "\(version): \(paypal)")
            let venmo = try await platform("/v1/charges", #"{"transaction":{"reference":"v","amount":100,"currency":"USD","country":"US"},"payment":{"method":"venmo"}}"#)
            #expect((venmo["status"] as? Int) == 200, "\(version): \(venmo)")
            let cashApp = try await platform("/v1/charges", #"{"transaction":{"reference":"a","amount":100,"currency":"USD","country":"US"},"payment":{"method":"cashapppay"}}"#)
            #expect((cashApp["status"] as? Int) == (version == "2.1.0" ? 400 : 200), "\(version): \(cashApp)")
            let created = try await platform("/v1/charges", #"{"transaction":{"reference":"c","amount":100,"currency":"USD","country":"US"}}"#)
            let token = try #require(((created["body"] as? [String: Any])?["data"] as? [String: Any])?["charge_token"] as? String)
            let seen = Seen()
            let watcher = Task {
                try await daemon.client.stream("/v1/events") { line in
                    if line.hasPrefix("event: citcon-order-confirmed") { seen.set() }
                    return !seen.value && !Task.isCancelled
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            let confirmed = try await platform("/v1/charges/\(token)", #"{"payment":{"method":"alipay"}}"#)
            #expect(((confirmed["body"] as? [String: Any])?["data"] as? [String: Any])?["status"] as? String == "succeeded")
            for _ in 0..<20 where !seen.value { try await Task.sleep(for: .milliseconds(50)) }
            #expect(seen.value == (version == "2.1.0"), "\(version): citcon-order-confirmed seen \(seen.value)")
            watcher.cancel()
        }
    }
}

final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    var value: Bool { lock.withLock { flag } }
    func set() { lock.withLock { flag = true } }
}

extension CitconEndToEndTests {
    @Test("citcon.amount_table scripts card declines by amount: stripe-cents declines .05 with 05; off by default")
    func amountTable() async throws {
        for (config, declined) in [("citcon:\n  amount_table: stripe-cents\n", true), ("", false)] {
            let daemon = try await DaemonProcess([], config: config.isEmpty ? nil : config)
            defer { daemon.stop(); daemon.remove() }
            _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "tbl"])
            let body = #"{"transaction":{"reference":"t","amount":1005,"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}}"#
            let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                    json: CitconRequestBody(merchantId: "tbl", method: "POST", path: "/v1/charges", body: body))
            let answer = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
            let status = ((answer?["body"] as? [String: Any])?["data"] as? [String: Any])?["status"] as? String
            #expect(status == (declined ? "failed" : "authorized"), "\(config): \(String(describing: answer))")
        }
    }
}

extension CitconEndToEndTests {
    @Test("an IPN goes only to callbacks.allowed_hosts: one to another host is attempted, refused and kept for retry, never sent")
    func ipnAllowedHosts() async throws {
        let daemon = try await DaemonProcess([], config: "callbacks:\n  allowed_hosts: [shop.example]\n")
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "ipn"])
        let body = #"{"transaction":{"reference":"i","amount":100,"currency":"USD","country":"US"},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}},"urls":{"ipn":"http://127.0.0.1:9/ipn"}}"#
        let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                json: CitconRequestBody(merchantId: "ipn", method: "POST", path: "/v1/charges", body: body))
        let id = try #require((((try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["body"] as? [String: Any])?["data"]
            as? [String: Any])?["id"] as? String)
        let record = try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/citcon/charges/\(id)").body) as? [String: Any]
        let transaction = try #require((record?["transactions"] as? [[String: Any]])?.first?["id"] as? Int)
        var callbacks: [[String: Any]] = []
        for _ in 0..<50 {
            let t = try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/transactions/\(transaction)").body) as? [String: Any]
            callbacks = t?["callbacks"] as? [[String: Any]] ?? []
            if (callbacks.first?["attempts"] as? Int ?? 0) > 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(callbacks.count == 1)
        #expect(callbacks.first?["status"] as? String == "pending")
        #expect((callbacks.first?["lastError"] as? String)?.contains("not in callbacks.allowed_hosts") == true, "\(callbacks)")
    }
}

@Suite("Citcon SDK orders: the document's conditional requirements")
struct CitconSDKOrderTests {
    @Test("requestOrder: Alipay needs scheme, card/PayPal/Venmo need consumer, 3-D Secure needs the consumer's details and a billing address, vaulting needs consumer.reference")
    func conditionalRequirements() async throws {
        let daemon = try await DaemonProcess([])
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "sdk"])
        var n = 0
        func order(_ payment: String, _ extra: String = "") async throws -> (Int, String) {
            n += 1
            let body = #"{"transaction":{"reference":"sdk-\#(n)","amount":700,"currency":"USD","country":"US"},"payment":\#(payment),"urls":{"ipn":"http://127.0.0.1:9/ipn"}\#(extra)}"#
            let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                    json: CitconRequestBody(merchantId: "sdk", method: "POST", path: "/citcon/sdk/requestOrder", body: body))
            let answer = (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]) ?? [:]
            let text = String(data: try JSONSerialization.data(withJSONObject: answer["body"] ?? [:]), encoding: .utf8) ?? ""
            return (answer["status"] as? Int ?? 0, text)
        }
        let consumer = #","consumer":{"reference":"c-1","firstName":"Ada","lastName":"Bench","phone":"5551234567","email":"ada@example.com"}"#
        let alipay = try await order(#"{"method":"alipay","client":["mobile_native"]}"#)
        #expect(alipay.0 == 400 && alipay.1.contains("4000") && alipay.1.contains("scheme"), "\(alipay)")
        #expect(try await order(#"{"method":"alipay","client":["mobile_native"]}"#, #","scheme":"com.example.shop""#).0 == 200)
        let paypal = try await order(#"{"method":"paypal","client":["mobile_native"]}"#)
        #expect(paypal.0 == 400 && paypal.1.contains("consumer"), "\(paypal)")
        #expect(try await order(#"{"method":"paypal","client":["mobile_native"]}"#, consumer).0 == 200)
        let card = #"{"method":"card","request_3ds":true,"data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}"#
        let noName = try await order(card, #","consumer":{"reference":"c-1"}"#)
        #expect(noName.0 == 400 && noName.1.contains("consumer.firstName"), "\(noName)")
        let noAddress = try await order(card, consumer)
        #expect(noAddress.0 == 400 && noAddress.1.contains("payment.billingAddress.city"), "\(noAddress)")
        let full = #"{"method":"card","request_3ds":true,"billingAddress":{"street":"1 Main St","city":"Chicago","state":"IL","zip":"12345","country":"US"},"data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}"#
        let accepted = try await order(full, consumer)
        #expect(accepted.0 == 200, "\(accepted)")
        let vault = try await order(#"{"method":"card","requestToken":true,"data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}"#, #","consumer":{"firstName":"Ada"}"#)
        #expect(vault.0 == 400 && vault.1.contains("consumer.reference"), "\(vault)")
    }
}

@Suite("Citcon: back to the app")
struct CitconBackToAppTests {
    @Test("a requestOrder naming the app's scheme or universal link brings the payer back there when the charge ends: the URL handed to the bench's command")
    func backToApp() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("citcon-app-\(UUID().uuidString.prefix(6)).txt").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let daemon = try await DaemonProcess([], config: "callbacks:\n  command: [\"/bin/sh\", \"-c\", \"printf '%s\\\\n' \\\"$1\\\" >> \(file)\", \"sh\", \"{url}\"]\n")
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "app"])
        func order(_ body: String) async throws -> Int {
            let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                    json: CitconRequestBody(merchantId: "app", method: "POST", path: "/citcon/sdk/requestOrder", body: body))
            return (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["status"] as? Int ?? 0
        }
        let consumer = #","consumer":{"reference":"c-1"}"#
        #expect(try await order(#"{"transaction":{"reference":"app-1","amount":700,"currency":"USD","country":"US"},"payment":{"method":"paypal","client":["mobile_native"]},"scheme":"shopapp"\#(consumer)}"#) == 200)
        #expect(try await order(#"{"transaction":{"reference":"app-2-cancel","amount":700,"currency":"USD","country":"US"},"payment":{"method":"alipay","client":["mobile_native"]},"scheme":"shopapp"}"#) == 200)
        #expect(try await order(#"{"transaction":{"reference":"app-3","amount":700,"currency":"USD","country":"US"},"payment":{"method":"wechatpay","client":["mobile_native"]},"universalLink":"https://shop.example/app/citcon"}"#) == 200)
        #expect(try await order(#"{"transaction":{"reference":"app-4","amount":700,"currency":"USD","country":"US"},"payment":{"method":"wechatpay"},"universalLink":"http://shop.example"}"#) == 400)
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(20)
        while lines.count < 2, Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            lines = ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        #expect(lines.contains { $0.hasPrefix("shopapp://citcon/result?status=success&code=0&transaction_id=") && $0.contains("reference=app-1") && $0.contains("charge_status=authorized") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("shopapp://citcon/result?status=cancel&code=6001") && $0.contains("reference=app-2-cancel") }, "\(lines)")
        // The CPayResult rides along, percent-encoded JSON the app's SDK double can read.
        let result = lines.first { $0.contains("reference=app-1") }.flatMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "result" }?.value }
        let cpay = try #require(result.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(cpay["status"] as? String == "success" && (cpay["data"] as? [String: Any])?["reference"] as? String == "app-1", "\(cpay)")
        let app1 = try #require(lines.first { $0.contains("reference=app-1") }.flatMap { URLComponents(string: $0)?.queryItems })
        #expect(app1.first { $0.name == "notification" }?.value == "NTFY_ASYNC")
        let check = try #require(app1.first { $0.name == "check" }?.value.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(((check["data"] as? [String: Any])?["id"] as? String)?.isEmpty == false, "\(check)")
        let cancelled = try #require(lines.first { $0.contains("reference=app-2-cancel") }.flatMap { URLComponents(string: $0)?.queryItems })
        #expect(cancelled.first { $0.name == "notification" } == nil, "a cancel is no finished trade")
        // The universal link is an https URL: requested as an http callback, only on an allowed host (shop.example is not).
        let rows = try JSONDecoder().decode([TransactionView].self, from: try await daemon.client.send(method: "GET", "/v1/transactions?provider=citcon").body)
        var targets: [String] = []
        for row in rows {
            let list = try JSONDecoder().decode([NotificationView].self, from: try await daemon.client.send(method: "GET", "/v1/notifications?transaction=\(row.id)").body)
            targets += list.map(\.target)
        }
        #expect(targets.contains("https://shop.example/app/citcon"), "\(targets)")
    }
}

@Suite("Citcon: chargebacks through the CLI")
struct CitconChargebackCLITests {
    @Test("cardbench citcon chargeback opens and decides a chargeback; the charge lists it and its IPNs; a bad action is refused before the daemon")
    func chargebackCLI() async throws {
        let daemon = try await DaemonProcess([])
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "cb"])
        let body = #"{"transaction":{"reference":"cb-1","amount":1500,"currency":"USD","country":"US","auto_capture":true},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}},"urls":{"ipn":"http://127.0.0.1:9/ipn"}}"#
        let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests", json: CitconRequestBody(merchantId: "cb", method: "POST", path: "/v1/charges", body: body))
        let id = try #require((((try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["body"] as? [String: Any])?["data"] as? [String: Any])?["id"] as? String)
        let opened = try cliOffline(["citcon", "chargeback", id, "open", "--amount", "500", "--reason", "not received", "--socket", daemon.socket], environment: [:])
        #expect(opened.status == 0 && opened.stdout.contains("\"opened\"") && opened.stdout.contains("not received"), "\(opened.stdout)\(opened.stderr)")
        let lost = try cliOffline(["citcon", "chargeback", id, "lost", "--socket", daemon.socket], environment: [:])
        #expect(lost.status == 0 && lost.stdout.contains("\"lost\""), "\(lost.stdout)\(lost.stderr)")
        let record = try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/citcon/charges/\(id)").body) as? [String: Any]
        let types = (record?["ipns"] as? [[String: Any]] ?? []).map { "\($0["transaction_type"] ?? "")/\($0["status"] ?? "")" }
        #expect(types == ["charge/captured", "chargeback/opened", "chargeback/lost"], "\(types)")
        let rows = (record?["transactions"] as? [[String: Any]] ?? []).map { "\($0["action"] ?? "") \($0["amount"] ?? "")" }
        #expect(rows == ["sale 1500", "refund 500"], "\(rows)")
        let bad = try cliOffline(["citcon", "chargeback", id, "maybe", "--socket", daemon.socket], environment: [:])
        #expect(bad.status == 2 && bad.stderr.contains("action"))
    }
}

@Suite("Citcon: the vault")
struct CitconVaultTests {
    @Test("requestToken vaults an approved card for its consumer (a vault IPN, payment.token in the inquiry); the token pays for that consumer only; a declined charge vaults nothing")
    func vault() async throws {
        let daemon = try await DaemonProcess([])
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "vault"])
        func charge(_ payment: String, consumer: String? = "c-42", amount: Int = 900, ref: String) async throws -> (Int, [String: Any]) {
            let body = #"{"transaction":{"reference":"\#(ref)","amount":\#(amount),"currency":"USD","country":"US","auto_capture":true},"payment":\#(payment)\#(consumer.map { #","consumer":{"reference":"\#($0)"}"# } ?? ""),"urls":{"ipn":"http://127.0.0.1:9/ipn"}}"#
            let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests", json: CitconRequestBody(merchantId: "vault", method: "POST", path: "/v1/charges", body: body))
            let answer = (try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]) ?? [:]
            return (answer["status"] as? Int ?? 0, (answer["body"] as? [String: Any]) ?? [:])
        }
        func record(_ id: String) async throws -> [String: Any] {
            (try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/citcon/charges/\(id)").body) as? [String: Any]) ?? [:]
        }
        let card = #"{"method":"card","requestToken":true,"data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}}"#
        let (status, first) = try await charge(card, ref: "v-1")
        #expect(status == 200, "\(first)")
        let id = try #require((first["data"] as? [String: Any])?["id"] as? String)
        let r1 = try await record(id)
        let token = try #require((r1["charge"] as? [String: Any]).flatMap { ($0["payment"] as? [String: Any])?["token"] as? String })
        let ipns = (r1["ipns"] as? [[String: Any]] ?? []).map { "\($0["transaction_type"] ?? "")/\($0["status"] ?? "")" }
        #expect(ipns == ["charge/captured", "vault/success"], "\(ipns)")
        // The token pays for its consumer, no card data sent.
        let (paid, second) = try await charge(#"{"method":"card","token":"\#(token)"}"#, ref: "v-2")
        #expect(paid == 200 && ((second["data"] as? [String: Any])?["status"] as? String) == "succeeded", "\(second)")
        // Another consumer, an unknown token, no consumer: refused naming the field.
        let other = try await charge(#"{"method":"card","token":"\#(token)"}"#, consumer: "someone-else", ref: "v-3")
        #expect(other.0 == 400 && "\(other.1)".contains("consumer.reference"))
        let unknown = try await charge(#"{"method":"card","token":"nope"}"#, ref: "v-4")
        #expect(unknown.0 == 400 && "\(unknown.1)".contains("payment.token"))
        let anonymous = try await charge(card, consumer: nil, ref: "v-5")
        #expect(anonymous.0 == 400 && "\(anonymous.1)".contains("consumer.reference"))
        // Declined (wrong CVV): no vault IPN, no token.
        let (_, declined) = try await charge(#"{"method":"card","requestToken":true,"data":{"pan":"5413330089604004","expiry":"09/29","cvv":"999"}}"#, ref: "v-6")
        let did = try #require((declined["data"] as? [String: Any])?["id"] as? String)
        let r6 = try await record(did)
        #expect((r6["charge"] as? [String: Any]).flatMap { ($0["payment"] as? [String: Any])?["token"] as? String } == nil)
        #expect(!(r6["ipns"] as? [[String: Any]] ?? []).contains { $0["transaction_type"] as? String == "vault" })
        let dump = try Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil && dump.range(of: Data(token.utf8)) == nil)
    }
}
