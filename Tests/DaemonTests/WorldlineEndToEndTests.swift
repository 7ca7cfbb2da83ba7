import AsyncHTTPClient
import Crypto
import CryptoExtras
import Daemon
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Fronts
import NIOCore
import Testing
import DaemonTestSupport
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
        // The card as a phone's wallet would present it for a 10.00 EUR payment (the script's AMOUNT).
        let wallet = String(decoding: try await daemon.client.send(method: "POST", "/v1/worldline/wallet-data",
                                                                   json: WorldlineWalletDataBody(profile: "visa-credit-cvn10", amount: 1000, currency: "EUR")).body,
                            as: UTF8.self)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.python())
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/Interop/worldline_sdk.py").path,
                             "--endpoint", "http://127.0.0.1:\(port)", "--merchant", "sdkmerchant",
                             "--key-id", key.keyId, "--secret", try #require(key.secretApiKey),
                             "--webhook-key-id", try #require(hook.keyId), "--webhook-secret", try #require(hook.secret),
                             "--webhook-port", String(hookPort),
                             // Scenarios/cards/visa-credit-cvn10.yaml
                             "--pan", "4761739001010010", "--expiry", "1231", "--cvv", "123", "--timeout", "20", "--wallet-data", wallet]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "worldline_sdk.py:\n\(text)\ndaemon log:\n\(daemon.logText.suffix(3000))")
        #expect(!text.contains("FAIL"))
        #expect(text.contains("PASS webhook-captured"))
        #expect(text.contains("PASS token-first-cit-then-mit") && text.contains("PASS session-accounts-on-file") && text.contains("PASS token-delete"))
        #expect(text.contains("PASS hosted-checkout") && text.contains("PASS hosted-tokenization") && text.contains("PASS mobile-wallet") && text.contains("PASS redirect-paypal"))
        // Nothing the SDK sent reached the ledger in clear: the PAN is in no table.
        let dump = try Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil)
    }
}

/// The platform's answers to what the SDKs would never send: each refusal in the platform's
/// error shape, naming the property; signed here with cardbench's own signer (the SDK test
/// above shows it agrees with the official one).
@Suite("Worldline platform, refusals and 3-D Secure over HTTP", .serialized)
struct WorldlineHTTPTests {
    struct Answer: @unchecked Sendable {
        let status: Int
        let json: [String: Any]
        let headers: [String: String]
        var errorID: String? { ((json["errors"] as? [[String: Any]])?.first)?["id"] as? String }
        var property: String? { ((json["errors"] as? [[String: Any]])?.first)?["propertyName"] as? String }
    }

    final class Platform: @unchecked Sendable {
        let daemon: DaemonProcess
        let port: String
        let keyID: String
        let secret: String

        private init(daemon: DaemonProcess, port: String, keyID: String, secret: String) {
            self.daemon = daemon
            self.port = port
            self.keyID = keyID
            self.secret = secret
        }

        /// The same platform, signing with another key.
        static func with(_ p: Platform, keyID: String, secret: String) -> Platform {
            Platform(daemon: p.daemon, port: p.port, keyID: keyID, secret: secret)
        }

        init() async throws {
            daemon = try await DaemonProcess(["--worldline-port", "0"])
            let key = try JSONDecoder().decode(WorldlineEndToEndTests.Key.self, from: try await daemon.client.send(
                method: "POST", "/v1/worldline/api-keys", json: ["merchantId": "m1"]).body)
            keyID = key.keyId
            secret = key.secretApiKey ?? ""
            port = try String(contentsOfFile: daemon.runtime + "/worldline.port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func send(_ method: String, _ path: String, body: String? = nil, contentType: String? = "application/json",
                  secret override: String? = nil, date: Date = Date(), headers extra: [String: String] = [:]) throws -> Answer {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let dateText = formatter.string(from: date)
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method
            request.setValue(dateText, forHTTPHeaderField: "Date")
            if let body {
                request.httpBody = Data(body.utf8)
                if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
            }
            for (k, v) in extra { request.setValue(v, forHTTPHeaderField: k) }
            let gcs = extra.filter { $0.key.lowercased().hasPrefix("x-gcs-") }.map { (name: $0.key, value: $0.value) }
            let text = WorldlineAuth.stringToSign(method: method, contentType: body == nil ? nil : contentType, date: dateText, gcsHeaders: gcs,
                                                  pathAndQuery: path)
            request.setValue("GCS v1HMAC:\(keyID):\(WorldlineAuth.signature(text, secret: override ?? secret))", forHTTPHeaderField: "Authorization")
            return try Self.exchange(request)
        }

        static func exchange(_ request: URLRequest) throws -> Answer {
            let semaphore = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var result: (Data?, URLResponse?) = (nil, nil)
            // A session per request: the shared one queues requests to one host behind each other.
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            session.dataTask(with: request) { data, response, _ in
                result = (data, response)
                semaphore.signal()
            }.resume()
            semaphore.wait()
            let http = result.1 as? HTTPURLResponse
            var headers: [String: String] = [:]
            for (k, v) in http?.allHeaderFields ?? [:] { headers[String(describing: k.base).lowercased()] = String(describing: v) }
            let json = (result.0.flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any]) ?? [:]
            return Answer(status: http?.statusCode ?? 0, json: json, headers: headers)
        }
    }

    static let card = #"{"cardNumber":"4761739001010010","expiryDate":"1231","cvv":"123"}"#

    static func payment(amount: Int = 1000, mode: String = "FINAL_AUTHORIZATION", card: String = card, extra: String = "") -> String {
        #"{"order":{"amountOfMoney":{"amount":\#(amount),"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"\#(mode)","card":\#(card)\#(extra)}}"#
    }

    @Test("wrong signature, unknown key, skewed date, another merchant: 401/403 in the platform's shape")
    func authentication() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        #expect(try p.send("GET", "/v2/m1/services/testconnection").status == 200)
        let wrong = try p.send("GET", "/v2/m1/services/testconnection", secret: "not-the-secret")
        #expect(wrong.status == 401 && wrong.errorID == "MISSING_OR_INVALID_AUTHORIZATION")
        #expect(wrong.json["errorId"] is String)
        let skewed = try p.send("GET", "/v2/m1/services/testconnection", date: Date().addingTimeInterval(-3600))
        #expect(skewed.status == 401)
        let other = try p.send("GET", "/v2/m2/services/testconnection")
        #expect(other.status == 403 && other.errorID == "ACCESS_TO_MERCHANT_NOT_ALLOWED")
        var unsigned = URLRequest(url: URL(string: "http://127.0.0.1:\(p.port)/v2/m1/services/testconnection")!)
        unsigned.setValue("GCS v1HMAC:nokey:c2ln", forHTTPHeaderField: "Authorization")
        unsigned.setValue("Tue, 24 Nov 2026 12:00:00 GMT", forHTTPHeaderField: "Date")
        #expect(try Platform.exchange(unsigned).status == 401)
        // A signature made over another path does not verify for this one.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let date = formatter.string(from: Date())
        let signedForOther = WorldlineAuth.signature(WorldlineAuth.stringToSign(method: "GET", contentType: nil, date: date, gcsHeaders: [],
                                                                                pathAndQuery: "/v2/m1/services/testconnection"), secret: p.secret)
        var moved = URLRequest(url: URL(string: "http://127.0.0.1:\(p.port)/v2/m1/payments/3000000001_0")!)
        moved.setValue(date, forHTTPHeaderField: "Date")
        moved.setValue("GCS v1HMAC:\(p.keyID):\(signedForOther)", forHTTPHeaderField: "Authorization")
        #expect(try Platform.exchange(moved).status == 401)
        // Signed for its own path, the same request reaches the platform (an unknown payment: 404).
        #expect(try p.send("GET", "/v2/m1/payments/3000000001_0").status == 404)
    }

    @Test("bad bodies: wrong content type 415, malformed JSON, a huge body, a missing field: each names what is wrong")
    func badBodies() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        #expect(try p.send("POST", "/v2/m1/payments", body: Self.payment(), contentType: "text/plain").status == 415)
        let malformed = try p.send("POST", "/v2/m1/payments", body: "{\"order\":")
        #expect(malformed.status == 400 && malformed.errorID == "INVALID_REQUEST_BODY")
        let huge = try p.send("POST", "/v2/m1/payments", body: "{\"x\":\"" + String(repeating: "a", count: 200_000) + "\"}")
        #expect(huge.status == 400)
        let missing = try p.send("POST", "/v2/m1/payments", body: #"{"order":{"amountOfMoney":{"currencyCode":"EUR"}}}"#)
        #expect(missing.status == 400 && missing.errorID == "PARAMETER_NOT_FOUND_IN_REQUEST" && missing.property == "order.amountOfMoney.amount")
        #expect(p.daemon.process.isRunning)
    }

    @Test("the issuer decides: balance, card states, CVV, the 13.02 SALE table; declines are 402 with paymentResult")
    func issuer() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let ok = try p.send("POST", "/v2/m1/payments", body: Self.payment(mode: "SALE"))
        #expect(ok.status == 201)
        #expect(((ok.json["payment"] as? [String: Any])?["status"] as? String) == "CAPTURED")
        func declined(_ body: String) throws -> (Int, Int?) {
            let a = try p.send("POST", "/v2/m1/payments", body: body)
            let code = (((a.json["paymentResult"] as? [String: Any])?["payment"] as? [String: Any])?["statusOutput"] as? [String: Any])?["statusCode"] as? Int
            return (a.status, code)
        }
        #expect(try declined(Self.payment(amount: 1302, mode: "SALE")) == (402, 2))
        #expect(try declined(Self.payment(amount: 1302, mode: "FINAL_AUTHORIZATION")).0 == 201, "the table is for SALE only")
        #expect(try declined(Self.payment(card: #"{"cardNumber":"4761739001010010","expiryDate":"1231","cvv":"999"}"#)) == (402, 2))
        #expect(try declined(Self.payment(card: #"{"cardNumber":"4761739001010010","expiryDate":"1130","cvv":"123"}"#)) == (402, 2))
        #expect(try declined(Self.payment(amount: 9_000_000))  == (402, 2), "more than the card's balance")
        // Scenarios/cards/visa-lost.yaml
        let lost = try String(contentsOf: repositoryRoot.appendingPathComponent("Scenarios/cards/visa-lost.yaml"), encoding: .utf8)
        let lostPAN = lost.split(separator: "\n").first { $0.hasPrefix("pan:") }!.split(separator: "\"")[1]
        #expect(try declined(Self.payment(card: #"{"cardNumber":"\#(lostPAN)","expiryDate":"1231","cvv":"123"}"#)) == (402, 2))
        // A number the issuer does not know, passing Luhn: approved, as the sandbox does.
        #expect(try declined(Self.payment(card: #"{"cardNumber":"4111111111111111","expiryDate":"1230","cvv":"123"}"#)).0 == 201)
    }

    @Test("3-D Secure: a REDIRECT to the challenge page; passing authorises, failing rejects; the customer goes back to returnUrl")
    func threeDSecure() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let threeDS = #","threeDSecure":{"redirectionData":{"returnUrl":"https://shop.example/back?x=1"}}"#
        for (result, status) in [("pass", "PENDING_CAPTURE"), ("fail", "REJECTED")] {
            let created = try p.send("POST", "/v2/m1/payments", body: Self.payment(extra: threeDS))
            #expect(created.status == 201)
            let action = try #require(created.json["merchantAction"] as? [String: Any])
            #expect(action["actionType"] as? String == "REDIRECT")
            let redirect = try #require((action["redirectData"] as? [String: Any])?["redirectURL"] as? String)
            let id = try #require((created.json["payment"] as? [String: Any])?["id"] as? String)
            #expect(try p.send("GET", "/v2/m1/payments/\(id)").json["status"] as? String == "REDIRECTED")
            var page = URLRequest(url: URL(string: redirect)!)
            page.httpMethod = "GET"
            #expect(try Platform.exchange(page).status == 200)
            if result == "pass" {
                // Through the admin API, as a script answers.
                let reply = try await p.daemon.client.send(method: "POST", "/v1/worldline/payments/\(id)/challenge", json: ["result": result])
                #expect(reply.status == 200)
                let back = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
                #expect((back?["returnUrl"] as? String)?.hasPrefix("https://shop.example/back?x=1&RETURNMAC=") == true)
            } else {
                // Through the page's form, as a browser answers: a 303 back to the shop (not followed).
                let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
                var form = HTTPClientRequest(url: redirect)
                form.method = .POST
                form.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                form.body = .bytes(ByteBuffer(string: "result=fail"))
                let answer = try await http.execute(form, timeout: .seconds(10))
                try await http.shutdown()
                #expect(answer.status.code == 303)
                let location = answer.headers.first(name: "location") ?? ""
                #expect(location.hasPrefix("https://shop.example/back?x=1&RETURNMAC=") && location.contains("&paymentId=\(id)"), "\(location)")
            }
            let again = try await p.daemon.client.send(method: "POST", "/v1/worldline/payments/\(id)/challenge", json: ["result": result])
            #expect(again.status == 409, "a challenge is answered once")
            #expect(try p.send("GET", "/v2/m1/payments/\(id)").json["status"] as? String == status)
        }
    }

    @Test("idempotence: a replay answers the first result with its timestamp; another request under the key is refused")
    func idempotence() async throws {
        let p = try await Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let first = try p.send("POST", "/v2/m1/payments", body: Self.payment(), headers: ["X-GCS-Idempotence-Key": "k-1"])
        #expect(first.status == 201 && first.headers["x-gcs-idempotence-request-timestamp"] == nil)
        let again = try p.send("POST", "/v2/m1/payments", body: Self.payment(), headers: ["X-GCS-Idempotence-Key": "k-1"])
        #expect(again.status == 201 && again.headers["x-gcs-idempotence-request-timestamp"] != nil)
        let firstID = (first.json["payment"] as? [String: Any])?["id"] as? String
        #expect(firstID != nil && (again.json["payment"] as? [String: Any])?["id"] as? String == firstID)
        let other = try p.send("POST", "/v2/m1/payments", body: Self.payment(amount: 2000), headers: ["X-GCS-Idempotence-Key": "k-1"])
        #expect(other.status == 409)
    }
}

/// The Client API and encrypted customer input over HTTP: what the app side sends, made here as
/// the client SDKs make it (the JWE's layout is checked against jwcrypto in FrontsTests).
@Suite("Worldline platform, the Client API and encrypted input over HTTP", .serialized)
struct WorldlineClientTests {
    /// A JWE as sdk-client-js makes it, for `publicKeyDER` (RSA-OAEP, A256CBC-HS512).
    static func encrypt(_ payload: String, keyID: String, publicKeyDER: [UInt8]) throws -> String {
        let key = try _RSA.Encryption.PublicKey(derRepresentation: publicKeyDER)
        let header = WorldlineJWE.base64URLEncode(Array(#"{"alg":"RSA-OAEP","enc":"A256CBC-HS512","kid":"\#(keyID)"}"#.utf8))
        var cek = [UInt8](repeating: 0, count: 64), iv = [UInt8](repeating: 0, count: 16)
        var g = SystemRandomNumberGenerator()
        for i in cek.indices { cek[i] = UInt8.random(in: 0...255, using: &g) }
        for i in iv.indices { iv[i] = UInt8.random(in: 0...255, using: &g) }
        let wrapped = Array(try key.encrypt(cek, padding: .PKCS1_OAEP))
        let ciphertext = Array(try AES._CBC.encrypt(Array(payload.utf8), using: SymmetricKey(data: cek[32..<64]), iv: try AES._CBC.IV(ivBytes: iv)))
        let aad = Array(header.utf8)
        var input = aad + iv + ciphertext
        let bits = UInt64(aad.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let tag = Array(HMAC<SHA512>.authenticationCode(for: input, using: SymmetricKey(data: cek[0..<32])).prefix(32))
        return [header, WorldlineJWE.base64URLEncode(wrapped), WorldlineJWE.base64URLEncode(iv), WorldlineJWE.base64URLEncode(ciphertext),
                WorldlineJWE.base64URLEncode(tag)].joined(separator: ".")
    }

    static func payload(session: String, nonce: String, number: String = "4761739001010010") -> String {
        #"{"clientSessionId":"\#(session)","nonce":"\#(nonce)","paymentProductId":"1","tokenize":"false","accountOnFileId":12,"paymentValues":[{"key":"cardNumber","value":"\#(number)"},{"key":"expiryDate","value":"12/31"},{"key":"cvv","value":"123"}],"collectedDeviceInformation":{"timezoneOffsetUtcMinutes":60,"locale":"en-GB","browserData":{"javaScriptEnabled":true,"colorDepth":24,"screenHeight":1080,"screenWidth":1920,"innerHeight":900,"innerWidth":1600}}}"#
    }

    func client(_ p: WorldlineHTTPTests.Platform, _ path: String, session: String, method: String = "GET", body: String? = nil) throws -> WorldlineHTTPTests.Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(p.port)\(path)")!)
        request.httpMethod = method
        request.setValue("GCS v1Client:\(session)", forHTTPHeaderField: "Authorization")
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try WorldlineHTTPTests.Platform.exchange(request)
    }

    @Test("a session, the public key, products with the document's mask, IIN details; the Objective-C SDK's trailing slash and string values")
    func clientAPI() async throws {
        let p = try await WorldlineHTTPTests.Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let session = try p.send("POST", "/v2/m1/sessions", body: "{}")
        #expect(session.status == 201)
        let id = try #require(session.json["clientSessionId"] as? String), customer = try #require(session.json["customerId"] as? String)
        #expect((session.json["clientApiUrl"] as? String)?.hasSuffix("/client") == true)
        let key = try client(p, "/client/v1/\(customer)/crypto/publickey", session: id)
        #expect(key.status == 200 && key.json["keyId"] is String)
        let der = try #require(Data(base64Encoded: key.json["publicKey"] as? String ?? ""))
        #expect(try _RSA.Encryption.PublicKey(derRepresentation: der).keySizeInBits == 2048)
        // The same under /v1/{customerId}/ (an SDK that adds /client itself), and products/1/ with its slash.
        let product = try client(p, "/v1/\(customer)/products/1/?countryCode=NL&currencyCode=EUR&amount=1000&isRecurring=True&locale=(null)", session: id)
        #expect(product.status == 200)
        let fields = product.json["fields"] as? [[String: Any]] ?? []
        #expect(((fields.first?["displayHints"] as? [String: Any])?["mask"] as? String) == "{{9999}} {{9999}} {{9999}} {{9999}} {{999}}")
        let iin = try client(p, "/client/v1/\(customer)/services/getIINdetails", session: id, method: "POST",
                             body: #"{"bin":"476173","paymentContext":{"amountOfMoney":{"amount":"1000","currencyCode":"EUR"},"isRecurring":"true","countryCode":"NL"}}"#)
        #expect(iin.status == 200 && iin.json["paymentProductId"] as? Int == 1 && iin.json["isAllowedInContext"] as? Bool == true)
        // Refusals: an unknown session, another customer's path.
        #expect(try client(p, "/client/v1/\(customer)/products", session: "nope").status == 401)
        #expect(try client(p, "/client/v1/someone-else/products", session: id).status == 403)
    }

    @Test("encrypted input pays; its nonce is good once; another merchant's session, a changed byte and an unknown key are 400s naming why")
    func encryptedInput() async throws {
        let p = try await WorldlineHTTPTests.Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let session = try p.send("POST", "/v2/m1/sessions", body: "{}")
        let id = try #require(session.json["clientSessionId"] as? String), customer = try #require(session.json["customerId"] as? String)
        let key = try client(p, "/client/v1/\(customer)/crypto/publickey", session: id)
        let keyID = try #require(key.json["keyId"] as? String)
        let der = Array(try #require(Data(base64Encoded: key.json["publicKey"] as? String ?? "")))
        func pay(_ jwe: String, merchant: String = "m1") throws -> WorldlineHTTPTests.Answer {
            try p.send("POST", "/v2/\(merchant)/payments",
                       body: #"{"order":{"amountOfMoney":{"amount":700,"currencyCode":"EUR"}},"encryptedCustomerInput":"\#(jwe)","cardPaymentMethodSpecificInput":{"authorizationMode":"SALE"}}"#)
        }
        func message(_ a: WorldlineHTTPTests.Answer) -> String { ((a.json["errors"] as? [[String: Any]])?.first?["message"] as? String) ?? "" }
        let jwe = try Self.encrypt(Self.payload(session: id, nonce: "n-1"), keyID: keyID, publicKeyDER: der)
        let paid = try pay(jwe)
        #expect(paid.status == 201, "\(paid.json)")
        #expect(((paid.json["payment"] as? [String: Any])?["status"] as? String) == "CAPTURED")
        let replay = try pay(jwe)
        #expect(replay.status == 400 && replay.property == "encryptedCustomerInput" && message(replay).contains("nonce"))
        // A key of merchant m2 paying with m1's session's input.
        let other = try JSONDecoder().decode(WorldlineEndToEndTests.Key.self, from: try await p.daemon.client.send(
            method: "POST", "/v1/worldline/api-keys", json: ["merchantId": "m2"]).body)
        let p2 = WorldlineHTTPTests.Platform.with(p, keyID: other.keyId, secret: other.secretApiKey ?? "")
        let foreign = try p2.send("POST", "/v2/m2/payments",
                                  body: #"{"order":{"amountOfMoney":{"amount":700,"currencyCode":"EUR"}},"encryptedCustomerInput":"\#(try Self.encrypt(Self.payload(session: id, nonce: "n-2"), keyID: keyID, publicKeyDER: der))"}"#)
        #expect(foreign.status == 400 && message(foreign).contains("client session"))
        var parts = try Self.encrypt(Self.payload(session: id, nonce: "n-3"), keyID: keyID, publicKeyDER: der).split(separator: ".").map(String.init)
        var ct = WorldlineJWE.base64URL(parts[3])!
        ct[0] ^= 1
        parts[3] = WorldlineJWE.base64URLEncode(ct)
        let changed = try pay(parts.joined(separator: "."))
        #expect(changed.status == 400 && message(changed).contains("authentication tag"))
        let unknown = try pay(try Self.encrypt(Self.payload(session: id, nonce: "n-4"), keyID: "not-a-key", publicKeyDER: der))
        #expect(unknown.status == 400 && message(unknown).contains("not a key of this platform"))
        // The card number is in no row of the ledger.
        let dump = try Data(contentsOf: URL(fileURLWithPath: p.daemon.state + "/ledger.sqlite"))
        #expect(dump.range(of: Data("4761739001010010".utf8)) == nil)
    }

    @Test("a second request under an idempotence key while the first runs gets 409 30001002 with the first's timestamp")
    func idempotenceInProgress() async throws {
        let p = try await WorldlineHTTPTests.Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        // The issuer takes 10 s over the first payment: a wide window, since on a loaded 2-core CI
        // machine (blocking reader tests beside this one) the second request reached the daemon
        // more than 4 s after the first was seen in progress.
        _ = try await p.daemon.client.send(method: "POST", "/v1/worldline/merchants/m1/host-queue", json: HostOutcomeBody(delayMs: 10_000))
        // Two at once, through the control API's way in (the same idempotence path as the
        // listener's, and an async client that does not queue requests to one host): whichever
        // claims the key first takes the issuer's 10 s; the other is refused.
        let request = WorldlineRequestBody(method: "POST", path: "/v2/m1/payments", body: WorldlineHTTPTests.payment(mode: "SALE"),
                                           idempotenceKey: "slow-1")
        let client = p.daemon.client
        async let a = client.send(method: "POST", "/v1/worldline/requests", json: request)
        // The second goes once the first holds the key: its ledger row is begun (in progress)
        // before the issuer is asked. Not a fixed sleep: on a loaded machine a task may start late.
        // A full test run starved the first request's task for over 10 s (the second then came
        // after the first had finished, and was answered as a replay): wait as long as it takes.
        let deadline = Date(timeIntervalSinceNow: 120)
        var begun = false
        var seen = ""
        while !begun, Date() < deadline {
            let rows = try await client.send(method: "GET", "/v1/transactions?terminal=worldline.m1&limit=5")
            seen = String(decoding: rows.body, as: UTF8.self)
            begun = seen.contains("in_progress")
            if !begun { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(begun, "the first payment never showed in progress in the ledger; last list: \(seen.prefix(600))")
        async let b = client.send(method: "POST", "/v1/worldline/requests", json: request)
        let answers = try await [a, b].map { (try JSONSerialization.jsonObject(with: $0.body) as? [String: Any]) ?? [:] }
        #expect(answers.map { $0["status"] as? Int ?? 0 }.sorted() == [201, 409])
        let refused = try #require(answers.first { $0["status"] as? Int == 409 })
        let errors = (refused["body"] as? [String: Any])?["errors"] as? [[String: Any]]
        #expect(errors?.first?["errorCode"] as? String == "30001002")
        #expect(refused["idempotenceRequestTimestamp"] != nil)
    }
}
