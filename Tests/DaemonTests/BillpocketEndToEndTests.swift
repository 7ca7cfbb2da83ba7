import Daemon
import Foundation
import Testing

/// A Billpocket daemon: a manual clock in Mexico City time, two terminals, the Carnet demo card.
func billpocketDaemon(start: String = "2026-11-23T12:00:00-06:00", extra: String = "") async throws -> DaemonProcess {
    try await DaemonProcess(["--demo-card", card("carnet-debit.yaml")], config: """
        clock:
          mode: manual
          start: \(start)
        terminals: [bench1, bench2]
        terminal:
          bench1:
            tid: "10000001"
          bench2:
            tid: "10000002"
        \(extra)
        """)
}

/// A `venta` in the vendor's form: parameters straight after `billpocket://`.
func ventaURL(token: String, amount: String = "100.00", identifier: String = "order-1", urlScheme: String = "Sender",
              extra: String = "") -> String {
    "billpocket://transaction=venta&usertoken=\(token)&amount=\(amount)&identifier=\(identifier)&urlScheme=\(urlScheme)\(extra)"
}

func devolucionURL(token: String, transactionId: String, identifier: String = "refund-1", urlScheme: String = "Sender") -> String {
    "billpocket://transaction=devolucion&usertoken=\(token)&transactionId=\(transactionId)&identifier=\(identifier)&urlScheme=\(urlScheme)"
}

/// A Billpocket callback split as the sender's own code splits it: after `://`, on `&` then `=`.
func billpocketFields(_ url: String) -> [(String, String)] {
    guard let range = url.range(of: "://") else { return [] }
    return url[range.upperBound...].split(separator: "&").map { pair in
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let value = parts.count > 1 ? String(parts[1]) : ""
        return (String(parts[0]), value.removingPercentEncoding ?? value)
    }
}

func field(_ result: OpenResult?, _ name: String) -> String? {
    result?.fields.first { $0.name == name }?.value
}

/// Creates a user through the CLI and returns its id and token.
func createUser(_ daemon: DaemonProcess, _ name: String, msi: String? = nil) throws -> (id: Int, token: String) {
    let out = try cli(["billpocket", "user", "create", "--name", name] + (msi.map { ["--msi", $0] } ?? []), socket: daemon.socket)
    guard out.status == 0 else { throw HarnessError("user create failed: \(out.stderr)") }
    let lines = out.stdout.split(separator: "\n")
    guard let first = lines.first?.split(separator: " "), first.count > 1, let id = Int(first[1]),
          let token = lines.first(where: { $0.hasPrefix("token ") })?.dropFirst(6) else {
        throw HarnessError("unexpected user create output: \(out.stdout)")
    }
    return (id, String(token))
}

func setClock(_ daemon: DaemonProcess, _ iso: String) async throws {
    let (status, _) = try await daemon.json("POST", "/v1/clock", ClockBody(set: iso))
    #expect(status == 200)
}

func advanceClock(_ daemon: DaemonProcess, _ seconds: Int64) async throws {
    let (status, _) = try await daemon.json("POST", "/v1/clock", ClockBody(advanceSeconds: seconds))
    #expect(status == 200)
}

@Suite("Billpocket front through cardbenchd", .serialized)
struct BillpocketEndToEndTests {
    @Test("an approved venta: every field in the document's order, the card's data, a readable voucher")
    func approvedSale() async throws {
        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let user = try createUser(daemon, "Taqueria")
        let reply = try await daemon.open(ventaURL(token: user.token, amount: "300.00", extra: "&tip=15.00&msi=3&email=a@b.mx&phone=5512345678"))
        let result = try #require(reply.result, "\(reply.error)")
        #expect(result.status == "aprobada", "\(result.fields)")
        let callback = try #require(result.callback)
        #expect(callback.hasPrefix("Sender://result=aprobada&statusinfo=&amount=300.00&tip=15.00&transactionid="))
        let fields = billpocketFields(callback)
        #expect(fields.map(\.0) == ["result", "statusinfo", "amount", "tip", "transactionid", "msi", "authorization", "creditcard",
                                    "cardtype", "email", "phone", "arqc", "aid", "applabel", "url", "identifier", "bank", "accountType"])
        let values = Dictionary(fields, uniquingKeysWith: { a, _ in a })
        #expect(values["transactionid"]?.count == 16)
        #expect(values["transactionid"]?.allSatisfy(\.isNumber) == true)
        #expect(values["msi"] == "3")
        #expect(values["authorization"]?.count == 6)
        #expect(values["creditcard"] == "7894")
        #expect(values["cardtype"] == "CARNET")
        #expect(values["arqc"]?.count == 16)
        #expect(values["aid"] == "A0000006721010")
        #expect(values["applabel"] == "CARNET DEBITO")
        #expect(values["identifier"] == "order-1")
        #expect(values["bank"] == "Banco Cardbench")
        #expect(values["accountType"] == "debit")
        #expect(!callback.contains("5061991234567894"), "never the full PAN")
        // The ledger charged amount plus tip, in pesos.
        let t = try #require(result.transaction)
        #expect(t.amount == 31_500 && t.tipAmount == 1_500 && t.currency == 484 && t.provider == "billpocket" && t.installments == 3)

        let voucher = try await daemon.client.send(method: "GET", "/v1/vouchers/\(values["url"] ?? "")")
        #expect(voucher.status == 200)
        let text = String(decoding: voucher.body, as: UTF8.self)
        #expect(text.contains(values["transactionid"] ?? "-"))
        #expect(text.contains("7894"))
        #expect(text.contains("Taqueria"))
        #expect(!text.contains("5061991234567894"))
        let missing = try await daemon.client.send(method: "GET", "/v1/vouchers/nope")
        #expect(missing.status == 404)
    }

    @Test("tokens: unknown, same user again, another user reconfigures, rotated, invalidated, device tokens alive then dead")
    func tokenLifecycle() async throws {
        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let a = try createUser(daemon, "A")
        let b = try createUser(daemon, "B")
        #expect(a.token.count == 64 && b.token.count == 64 && a.token != b.token)
        let issued = try cli(["billpocket", "device-token", "issue", "--user", String(a.id), "--alias", "caja 1"], socket: daemon.socket)
        #expect(issued.status == 0, "\(issued.stderr)")
        let deviceToken = String(try #require(issued.stdout.split(separator: "\n").first { $0.hasPrefix("token ") }).dropFirst(6))
        #expect((8...12).contains(deviceToken.count))

        var statusInfos: Set<String> = []
        func expectError(_ url: String, terminal: String? = nil, _ prefix: String) async throws {
            let result = try #require(try await daemon.open(url, terminal: terminal).result)
            #expect(result.status == "error", "\(result.fields)")
            let info = field(result, "statusinfo") ?? ""
            #expect(info.hasPrefix(prefix), "\(info)")
            #expect(info.count <= 40)
            #expect(result.transaction == nil, "a refused token records nothing")
            statusInfos.insert(info)
        }

        try await expectError(ventaURL(token: String(repeating: "0", count: 64)), "userToken")
        let first = try #require(try await daemon.open(ventaURL(token: a.token, extra: "&devicetoken=\(deviceToken)")).result)
        #expect(first.status == "aprobada")
        let list = try cli(["billpocket", "device-token", "list", "--user", String(a.id)], socket: daemon.socket)
        #expect(list.stdout.contains("dead on bench1"), "\(list.stdout)")
        #expect(!list.stdout.contains(deviceToken), "tokens are never listed")
        // The dead token keeps working on its own device, and nowhere else.
        #expect(try await daemon.open(ventaURL(token: a.token, extra: "&devicetoken=\(deviceToken)")).result?.status == "aprobada")
        try await expectError(ventaURL(token: a.token, extra: "&devicetoken=\(deviceToken)"), terminal: "bench2", "devicetoken")
        try await expectError(ventaURL(token: b.token, extra: "&devicetoken=ZZZZZZZZZZ"), "devicetoken")

        // Another user's token reconfigures the terminal: its voucher is B's.
        let other = try #require(try await daemon.open(ventaURL(token: b.token)).result)
        #expect(other.status == "aprobada")
        let voucher = try await daemon.client.send(method: "GET", "/v1/vouchers/\(field(other, "url") ?? "")")
        #expect(String(decoding: voucher.body, as: UTF8.self).contains(" B"))

        let rotated = try cli(["billpocket", "user", "rotate", String(a.id)], socket: daemon.socket)
        let newToken = String(try #require(rotated.stdout.split(separator: "\n").first { $0.hasPrefix("token ") }).dropFirst(6))
        try await expectError(ventaURL(token: a.token), "userToken")
        #expect(try await daemon.open(ventaURL(token: newToken)).result?.status == "aprobada")

        #expect(try cli(["billpocket", "user", "invalidate", String(b.id)], socket: daemon.socket).status == 0)
        // A user that does not exist is not found (404, LedgerError.unknownBillpocketUser), not a bad request.
        let nobody = try await daemon.client.send(method: "POST", "/v1/billpocket/users/999999/rotate")
        #expect(nobody.status == 404 && String(decoding: nobody.body, as: UTF8.self).contains("no Billpocket user 999999"),
                "\(nobody.status) \(String(decoding: nobody.body, as: UTF8.self))")
        try await expectError(ventaURL(token: b.token), "userToken")
        #expect(statusInfos.count == 5, "unknown, another device, unknown device, rotated and invalidated differ: \(statusInfos)")

        let users = try cli(["billpocket", "user", "list"], socket: daemon.socket)
        #expect(users.stdout.contains("\(a.id) A active") && users.stdout.contains("\(b.id) B invalidated"), "\(users.stdout)")
        #expect(!users.stdout.contains(newToken))
        // Only hashes are stored.
        daemon.stop()
        let database = try Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite"))
            + ((try? Data(contentsOf: URL(fileURLWithPath: daemon.state + "/ledger.sqlite-wal"))) ?? Data())
        for token in [a.token, b.token, newToken, deviceToken] {
            #expect(database.range(of: Data(token.utf8)) == nil, "a token is stored in clear")
        }
    }

    @Test("refund windows: 59 s refused, 60 s allowed; 22:59:58 allowed, 22:59:59 refused; not across midnight; once only")
    func refundWindows() async throws {
        let daemon = try await billpocketDaemon(start: "2026-11-23T12:00:00-06:00")
        defer { daemon.remove() }
        let user = try createUser(daemon, "A")
        let other = try createUser(daemon, "B")
        func sale(_ identifier: String, amount: String = "100.00") async throws -> OpenResult {
            try #require(try await daemon.open(ventaURL(token: user.token, amount: amount, identifier: identifier)).result)
        }
        func refund(_ id: String, token: String? = nil) async throws -> OpenResult {
            try #require(try await daemon.open(devolucionURL(token: token ?? user.token, transactionId: id)).result)
        }

        let first = try await sale("s1")
        let id = try #require(field(first, "transactionid"))
        try await advanceClock(daemon, 59)
        let early = try await refund(id)
        #expect(early.status == "error")
        let tooSoon = field(early, "statusinfo") ?? ""
        try await advanceClock(daemon, 1)
        #expect(try await refund(id, token: other.token).status == "error", "another user's sale is not found")
        let refunded = try await refund(id)
        #expect(refunded.status == "aprobada", "\(refunded.fields)")
        #expect(field(refunded, "amount") == "100.00")
        #expect(field(refunded, "identifier") == "refund-1")
        #expect(field(refunded, "bank") == "Banco Cardbench" && field(refunded, "accountType") == "debit", "the sale's card, from its callback")
        #expect(refunded.transaction?.action == "refund")
        let again = try await refund(id)
        #expect(again.status == "error")
        let sold = try #require(try await daemon.json("GET", "/v1/transactions/\(first.transaction?.id ?? 0)").1 as? [String: Any])
        #expect(sold["status"] as? String == "refunded")

        // The closing second.
        try await setClock(daemon, "2026-11-23T22:57:00-06:00")
        let late1 = try #require(field(try await sale("s2"), "transactionid"))
        let late2 = try #require(field(try await sale("s3"), "transactionid"))
        try await setClock(daemon, "2026-11-23T22:59:58-06:00")
        #expect(try await refund(late1).status == "aprobada")
        try await advanceClock(daemon, 1)
        let closed = try await refund(late2)
        #expect(closed.status == "error")
        let afterHours = field(closed, "statusinfo") ?? ""

        // Across midnight: a sale at 21:00, a refund at 00:00:30 the next day.
        try await setClock(daemon, "2026-11-24T21:00:00-06:00")
        let evening = try #require(field(try await sale("s4"), "transactionid"))
        try await setClock(daemon, "2026-11-25T00:00:30-06:00")
        let nextDay = try await refund(evening)
        #expect(nextDay.status == "error")
        let anotherDay = field(nextDay, "statusinfo") ?? ""

        // An unknown id.
        let unknown = try await refund("9999999999999999")
        #expect(unknown.status == "error")
        #expect(Set([tooSoon, afterHours, anotherDay, field(again, "statusinfo") ?? "", field(unknown, "statusinfo") ?? ""]).count == 5,
                "each refusal has its own statusinfo: \(tooSoon) / \(afterHours) / \(anotherDay)")
    }

    @Test("decoding once, both URL forms, the scheme's case, legacy pin=, the sample's reference round trip, no forged result")
    func encoding() async throws {
        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let user = try createUser(daemon, "A")
        let sample = "Pago & % # ( ) / @ con propina a 3 meses sin intereses"
        let encoded = sample.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        for url in [
            ventaURL(token: user.token, extra: "&reference=\(encoded)"),
            "BillPocket://?transaction=venta&pin=\(user.token)&amount=100.00&identifier=order-1&urlScheme=Sender&reference=\(encoded)",
        ] {
            let result = try #require(try await daemon.open(url).result)
            #expect(result.status == "aprobada", "\(url): \(result.fields)")
            let callback = try #require(result.callback)
            #expect(callback.contains("reference=Pago%20%26%20%25%20%23%20(%20)%20/%20@%20con%20propina%20a%203%20meses%20sin%20intereses&"))
            #expect(billpocketFields(callback).first { $0.0 == "reference" }?.1 == sample)
        }
        // %2520 is decoded once, to %20.
        let once = try #require(try await daemon.open(ventaURL(token: user.token, extra: "&reference=a%2520b")).result)
        #expect(field(once, "reference") == "a%20b")

        // A declined amount with a reference trying to add result=aprobada, encoded or not.
        for injection in ["x%26result%3Daprobada", "x&result=aprobada"] {
            let result = try #require(try await daemon.open(ventaURL(token: user.token, amount: "1005.00", extra: "&reference=\(injection)")).result)
            #expect(result.status == "rechazada")
            let fields = billpocketFields(try #require(result.callback))
            #expect(fields.filter { $0.0 == "result" }.map(\.1) == ["rechazada"], "\(fields)")
        }
        let approved = try #require(try await daemon.open(ventaURL(token: user.token, extra: "&reference=x%26result%3Drechazada")).result)
        let fields = billpocketFields(try #require(approved.callback))
        #expect(fields.filter { $0.0 == "result" }.map(\.1) == ["aprobada"])
        #expect(fields.first { $0.0 == "reference" }?.1 == "x&result=rechazada")
    }

    @Test("declines: the development amount table (tip excluded), statusinfo cut to 40; a host rule; a queued code")
    func declines() async throws {
        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let user = try createUser(daemon, "A")
        let d02 = try #require(try await daemon.open(ventaURL(token: user.token, amount: "1002.00", extra: "&tip=10.00")).result)
        #expect(d02.status == "rechazada")
        #expect(d02.transaction?.responseCode == "02")
        let info = try #require(field(d02, "statusinfo"))
        #expect(!info.isEmpty && info.count <= 40)
        #expect(d02.fields.map(\.name) == ["result", "statusinfo", "identifier"])
        // Balance: the Carnet card holds 2,500.00.
        let broke = try #require(try await daemon.open(ventaURL(token: user.token, amount: "3000.00")).result)
        #expect(broke.status == "rechazada")
        #expect(broke.transaction?.responseCode == "51")
        #expect(try cli(["host", "queue", "bench1", "--code", "05"], socket: daemon.socket).status == 0)
        let queued = try #require(try await daemon.open(ventaURL(token: user.token)).result)
        #expect(queued.status == "rechazada" && queued.transaction?.responseCode == "05")
    }

    @Test("bad input: result=error naming the field when urlScheme is known, HTTP 400 otherwise; msi plans; photo")
    func badInput() async throws {
        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let user = try createUser(daemon, "A", msi: "3:300.00")
        for (extra, prefix) in [("&amount=1.001", "amount"), ("&phone=123456789012345", "phone"), ("&msi=5", "msi"),
                                ("&msi=6", "msi"), ("&msi=3&amount=299.99", "msi"), ("&showPhotoButton=maybe", "showPhotoButton")] {
            let url = "billpocket://transaction=venta&usertoken=\(user.token)&identifier=order-1&urlScheme=Sender"
                + (extra.contains("amount=") ? "" : "&amount=100.00") + extra
            let result = try #require(try await daemon.open(url).result, "\(extra)")
            #expect(result.status == "error", "\(extra): \(result.fields)")
            #expect(field(result, "statusinfo")?.hasPrefix(prefix) == true, "\(extra): \(field(result, "statusinfo") ?? "")")
            #expect(field(result, "identifier") == "order-1")
        }
        let noScheme = try await daemon.open("billpocket://transaction=venta&usertoken=\(user.token)&amount=1.00&identifier=x")
        #expect(noScheme.status == 400)
        #expect(noScheme.error.contains("urlScheme"))

        // A mandatory photo refused on the keypad is an error; taken, the sale goes on.
        #expect(try cli(["keypad", "bench1", "--cancel"], socket: daemon.socket).status == 0)
        let refused = try #require(try await daemon.open(ventaURL(token: user.token, extra: "&showPhotoButton=true&mandatoryPhoto=true")).result)
        #expect(refused.status == "error")
        #expect(field(refused, "statusinfo")?.hasPrefix("photo") == true)
        #expect(try cli(["keypad", "bench1", "--confirm"], socket: daemon.socket).status == 0)
        let taken = try #require(try await daemon.open(ventaURL(token: user.token, extra: "&showPhotoButton=true&mandatoryPhoto=true")).result)
        #expect(taken.status == "aprobada")
    }

    @Test("billpocket.statusinfo_language: es and installments_name: payments: a cancel is \"La transacción fue cancelada\", a plan comes back as payments")
    func calloutStyle() async throws {
        let daemon = try await billpocketDaemon(extra: "billpocket:\n  statusinfo_language: es\n  installments_name: payments\n")
        defer { daemon.remove() }
        let user = try createUser(daemon, "A", msi: "3:300.00")
        #expect(try cli(["keypad", "bench1", "--cancel"], socket: daemon.socket).status == 0)
        let refusedPhoto = try #require(try await daemon.open(ventaURL(token: user.token, extra: "&showPhotoButton=true&mandatoryPhoto=true")).result)
        #expect(refusedPhoto.status == "error")
        #expect(field(refusedPhoto, "statusinfo") == "photo: la foto es obligatoria")
        // Cancelled on the keypad at the PIN: the text a production app was seen to send.
        #expect(try cli(["keypad", "bench1", "--cancel"], socket: daemon.socket).status == 0)
        let cancelled = try #require(try await daemon.open(ventaURL(token: user.token)).result)
        #expect(cancelled.status == "error" && field(cancelled, "statusinfo") == "La transacción fue cancelada", "\(cancelled.fields)")
        let plan = try #require(try await daemon.open(ventaURL(token: user.token, amount: "400.00", extra: "&payments=3")).result)
        #expect(plan.status == "aprobada", "\(plan.fields)")
        #expect(field(plan, "payments") == "3" && field(plan, "msi") == nil, "\(plan.fields)")
        let url = try #require(plan.callback)
        #expect(billpocketFields(url).contains { $0.0 == "payments" && $0.1 == "3" })
        // A refusal of the refund rules, in Spanish.
        let saleID = try #require(field(plan, "transactionid"))
        let tooSoon = try #require(try await daemon.open(devolucionURL(token: user.token, transactionId: saleID)).result)
        #expect(field(tooSoon, "statusinfo") == "Devolución: espere 1 minuto")
    }

    @Test("an http(s) urlScheme is a webhook the outbox delivers")
    func webhook() async throws {
        let server = try await LoopbackHTTPServer(serving: "hook")
        defer { server.stop() }
        let port = server.port, collected = server.requests

        let daemon = try await billpocketDaemon()
        defer { daemon.remove() }
        let user = try createUser(daemon, "A")
        let result = try #require(try await daemon.open(ventaURL(token: user.token, urlScheme: "http://127.0.0.1:\(port)/hook")).result)
        #expect(result.callback?.hasPrefix("http://127.0.0.1:\(port)/hook?result=aprobada&statusinfo=&amount=100.00&") == true)
        var seen = false
        for _ in 0..<100 where !seen {
            try await Task.sleep(for: .milliseconds(50))
            seen = collected.items.contains { $0.contains("GET /hook?result=aprobada&statusinfo=&amount=100.00&") }
        }
        #expect(seen, "the webhook was requested: \(collected.items)")
    }
}
