import Crypto
import Daemon
import Foundation
import Fronts
import Testing
import DaemonTestSupport
import TestSupport

/// Notifications on demand: every surface's callbacks, webhooks and IPNs listed with each
/// attempt, and sent again now (`/v1/notifications…`, `cardbench notifications`).
@Suite("notifications listed and resent", .serialized)
struct NotificationTests {
    struct Key: Decodable { let keyId: String?; let secret: String? }

    @Test("a webhook refused twice, then resent: every attempt listed, the resend the same event signed again; unknown ids and app callbacks answered clearly")
    func webhookResend() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        receiver.answerStatus.store(500, ordering: .relaxed)
        let daemon = try await DaemonProcess(["--demo", "--worldline-port", "0"], config: "callbacks:\n  allowed_hosts: [127.0.0.1]\n")
        defer { daemon.stop(); daemon.remove() }
        // The bench clock stands still: the loop's retry waits on it, so only its first attempt comes during the test.
        _ = try await daemon.client.send(method: "POST", "/v1/clock", json: ClockBody(mode: "manual"))
        let hook = try JSONDecoder().decode(Key.self, from: try await daemon.client.send(
            method: "PUT", "/v1/worldline/merchants/n1/webhook", json: ["url": "http://127.0.0.1:\(receiver.port)/hooks"]).body)
        let body = #"{"order":{"amountOfMoney":{"amount":1234,"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","card":\#(WorldlineHTTPTests.card)}}"#
        let reply = try await daemon.client.send(method: "POST", "/v1/worldline/requests",
                                                 json: WorldlineRequestBody(method: "POST", path: "/v2/n1/payments", body: body))
        let payment = try #require(((try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])?["body"] as? [String: Any])?["payment"] as? [String: Any])
        let record = try JSONSerialization.jsonObject(with: try await daemon.client.send(method: "GET", "/v1/worldline/payments/\(payment["id"] as! String)/record").body) as? [String: Any]
        let transactionID = try #require(((record?["transactions"] as? [[String: Any]])?.first)?["id"] as? Int)

        // The loop's first attempt fails (500) and is listed with what the endpoint answered.
        var list: [NotificationView] = []
        let deadline = Date().addingTimeInterval(30)
        repeat {
            try await Task.sleep(for: .milliseconds(100))
            list = try JSONDecoder().decode([NotificationView].self, from: try await daemon.client.send(method: "GET", "/v1/notifications?transaction=\(transactionID)").body)
        } while list.first?.history.isEmpty != false && Date() < deadline
        let n = try #require(list.first)
        #expect(list.count == 1 && n.kind == "webhook" && n.event == "payment.captured" && n.status == "pending")
        #expect(n.history.count == 1 && n.history[0].outcome == "failed" && n.history[0].answer.contains("HTTP 500") && !n.history[0].resend)
        let eventID = try #require(n.eventId)

        // Resent while the endpoint still refuses: a failed resend, the notification as it was.
        let refused = try JSONDecoder().decode(ResendView.self, from: try await daemon.client.send(method: "POST", "/v1/notifications/\(n.id)/resend").body)
        #expect(refused.attempt.outcome == "failed" && refused.attempt.resend && refused.notification.status == "pending")
        #expect(refused.notification.attempts == 1, "a resend does not count toward the loop's retry limit")

        // Now it takes it: delivered, the same event (same id and payload), signed with the webhook key.
        receiver.answerStatus.store(200, ordering: .relaxed)
        let resent = try JSONDecoder().decode(ResendView.self, from: try await daemon.client.send(method: "POST", "/v1/notifications/\(n.id)/resend").body)
        #expect(resent.attempt.outcome == "delivered" && resent.attempt.resend && resent.attempt.answer.contains("HTTP 200"))
        #expect(resent.notification.status == "delivered" && resent.notification.history.map(\.seq) == [1, 2, 3])
        let bodies = receiver.bodies
        #expect(bodies.count == 3 && Set(bodies).count == 1, "every attempt carries the same payload")
        #expect(bodies.last?.contains(eventID) == true)
        let signature = receiver.requestHeads.last?.split(separator: "\r\n").first { $0.hasPrefix("x-gcs-signature:") }
            .map { $0.dropFirst("x-gcs-signature:".count).trimmingCharacters(in: .whitespaces) }
        #expect(signature == WorldlineAuth.webhookSignature(bodies.last ?? "", secret: try #require(hook.secret)).lowercased())

        // A delivered one may be sent again too: another recorded resend.
        let again = try JSONDecoder().decode(ResendView.self, from: try await daemon.client.send(method: "POST", "/v1/notifications/\(n.id)/resend").body)
        #expect(again.attempt.seq == 4 && again.notification.status == "delivered" && receiver.bodies.count == 4)

        // Refusals name what is wrong.
        #expect(try await daemon.client.send(method: "POST", "/v1/notifications/999999/resend").status == 404)
        #expect(try await daemon.client.send(method: "POST", "/v1/notifications/abc/resend").status == 400)
        #expect(try await daemon.client.send(method: "GET", "/v1/notifications").status == 400)
        #expect(try await daemon.client.send(method: "GET", "/v1/notifications?transaction=nope").status == 404)

        // A Viva callback to the app's scheme went in the reply: listed with no attempt; a resend
        // says there is nothing configured to hand it to.
        let sale = try await daemon.open(saleURL(amount: 500, tip: 0, reference: "notify-1", callback: "posapp://result"))
        let saleID = try #require(sale.result?.transaction?.id)
        let callbacks = try JSONDecoder().decode([NotificationView].self, from: try await daemon.client.send(method: "GET", "/v1/notifications?transaction=\(saleID)").body)
        #expect(callbacks.count == 1 && callbacks[0].kind == "callback" && callbacks[0].status == "delivered" && callbacks[0].history.isEmpty)
        #expect(callbacks[0].event == "success")
        let app = try JSONDecoder().decode(ResendView.self, from: try await daemon.client.send(method: "POST", "/v1/notifications/\(callbacks[0].id)/resend").body)
        #expect(app.attempt.outcome == "failed" && app.attempt.answer.contains("callbacks.command"))

        // The CLI lists the same and exits 1 for a resend the endpoint did not take.
        let cli = try cliOffline(["notifications", String(transactionID), "--socket", daemon.socket], environment: [:])
        #expect(cli.status == 0 && cli.stdout.contains("payment.captured") && cli.stdout.contains("(resend)") && cli.stdout.contains("HTTP 500"),
                "\(cli.stdout)\(cli.stderr)")
        receiver.answerStatus.store(503, ordering: .relaxed)
        let cliResend = try cliOffline(["notifications", "resend", String(n.id), "--socket", daemon.socket], environment: [:])
        #expect(cliResend.status == 1 && cliResend.stdout.contains("HTTP 503"), "\(cliResend.stdout)\(cliResend.stderr)")
    }

    @Test("a Citcon IPN sent again is the same IPN, its sign and all")
    func ipnResend() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        let daemon = try await DaemonProcess(["--citcon-port", "0"], config: "callbacks:\n  allowed_hosts: [127.0.0.1]\n")
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "ipns"])
        let body = #"{"transaction":{"reference":"ipn-resend","amount":700,"currency":"USD","country":"US","auto_capture":true},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}},"urls":{"ipn":"http://127.0.0.1:\#(receiver.port)/ipn"}}"#
        let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                 json: CitconRequestBody(merchantId: "ipns", method: "POST", path: "/v1/charges", body: body))
        #expect(reply.status == 200)
        let deadline = Date().addingTimeInterval(30)
        while receiver.bodies.isEmpty, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let rows = try JSONDecoder().decode([TransactionView].self, from: try await daemon.client.send(method: "GET", "/v1/transactions?provider=citcon").body)
        let row = try #require(rows.first)
        var list: [NotificationView] = []
        repeat {
            list = try JSONDecoder().decode([NotificationView].self, from: try await daemon.client.send(method: "GET", "/v1/notifications?transaction=\(row.id)").body)
            try await Task.sleep(for: .milliseconds(50))
        } while list.first?.status != "delivered" && Date() < deadline
        let ipn = try #require(list.first)
        #expect(ipn.kind == "webhook" && ipn.event?.hasPrefix("ipn.") == true && ipn.history.count == 1 && ipn.history[0].outcome == "delivered")
        let resent = try JSONDecoder().decode(ResendView.self, from: try await daemon.client.send(method: "POST", "/v1/notifications/\(ipn.id)/resend").body)
        #expect(resent.attempt.outcome == "delivered" && resent.notification.history.count == 2)
        #expect(receiver.bodies.count == 2 && receiver.bodies[0] == receiver.bodies[1] && receiver.bodies[1].contains("\"sign\""),
                "\(receiver.bodies)")
    }

    @Test("Worldline's webhook admin: sendtest signs a test event to an allowed endpoint; validateCredentials says whether a key pair is the merchant's")
    func worldlineWebhookAdmin() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        let p = try await WorldlineHTTPTests.Platform()
        defer { p.daemon.stop(); p.daemon.remove() }
        let hook = try JSONDecoder().decode(Key.self, from: try await p.daemon.client.send(
            method: "PUT", "/v1/worldline/merchants/m1/webhook", json: ["url": "http://127.0.0.1:\(receiver.port)/hooks"]).body)
        let sent = try p.send("POST", "/v2/m1/webhooks/sendtest", body: #"{"url":"http://127.0.0.1:\#(receiver.port)/test"}"#)
        #expect(sent.status == 204)
        let event = try #require(try JSONSerialization.jsonObject(with: Data((receiver.bodies.last ?? "").utf8)) as? [String: Any])
        #expect(event["type"] as? String == "webhook.test" && event["merchantId"] as? String == "m1" && event["apiVersion"] as? String == "v1")
        // Another host is refused: an API key does not make the platform call anywhere.
        let elsewhere = try p.send("POST", "/v2/m1/webhooks/sendtest", body: #"{"url":"http://192.0.2.1/test"}"#)
        #expect(elsewhere.status == 400 && elsewhere.property == "url")
        receiver.answerStatus.store(500, ordering: .relaxed)
        let refused = try p.send("POST", "/v2/m1/webhooks/sendtest", body: #"{"url":"http://127.0.0.1:\#(receiver.port)/test"}"#)
        #expect(refused.status == 400 && refused.property == "url")

        let valid = try p.send("POST", "/v2/m1/webhooks/validateCredentials",
                               body: #"{"key":"\#(try #require(hook.keyId))","secret":"\#(try #require(hook.secret))"}"#)
        #expect(valid.status == 200 && valid.json["result"] as? String == "Valid")
        let invalid = try p.send("POST", "/v2/m1/webhooks/validateCredentials", body: #"{"key":"\#(hook.keyId ?? "")","secret":"wrong"}"#)
        #expect(invalid.json["result"] as? String == "Invalid")
        #expect(try p.send("POST", "/v2/m1/webhooks/validateCredentials", body: #"{"key":"k"}"#).property == "secret")
    }
}
