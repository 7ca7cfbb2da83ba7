import Daemon
import Foundation
import Testing

/// The document's sale URL, as its sample app builds it.
func saleURL(amount: Int = 1200, tip: Int = 200, reference: String? = "12345678901234567890123456789012",
             callback: String = "mycallbackscheme://result", extra: String = "&withInstallments=false") -> String {
    var url = "vivapayclient://pay/v1?callback=\(callback)&merchantKey=SG23323424EXS3&appId=com.example.myapp&action=sale&amount=\(amount)&tipAmount=\(tip)"
    if let reference { url += "&clientTransactionId=\(reference)" }
    return url + extra
}

/// The field names of the document's approved sale response, in its order.
let documentSaleFields = ["status", "message", "action", "clientTransactionId", "amount", "tipAmount", "verificationMethod", "rrn",
                          "cardType", "accountNumber", "referenceNumber", "authorisationCode", "tid", "orderCode", "installments",
                          "transactionDate", "transactionId"]
/// The document's failed sale response (no installments, no transactionId).
let documentFailedSaleFields = ["status", "message", "action", "clientTransactionId", "amount", "tipAmount", "verificationMethod", "rrn",
                                "cardType", "accountNumber", "referenceNumber", "authorisationCode", "tid", "orderCode", "transactionDate"]
let documentCancelFields = ["status", "message", "action", "amount", "cardType", "accountNumber", "tid", "transactionDate", "transactionId"]

/// The document's fields come first and in its order; cardbench's extras (aid, …) only after.
func expectDocumentOrder(_ fields: [(String, String)], _ document: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    let names = fields.map(\.0)
    let documentPart = names.filter(document.contains)
    #expect(documentPart == document.filter(names.contains), "fields \(names)", sourceLocation: sourceLocation)
    #expect(Array(names.prefix(documentPart.count)) == documentPart, "the document's fields come first: \(names)", sourceLocation: sourceLocation)
    #expect(Set(names.dropFirst(documentPart.count)).isSubset(of: ["aid", "shortOrderCode", "transactionType", "entryMode", "currency", "cardholderName"]),
            sourceLocation: sourceLocation)
}

func value(_ fields: [(String, String)], _ name: String) -> String? { fields.first { $0.0 == name }?.1 }

@Suite("cardbenchd and the Viva front, end to end", .serialized)
struct VivaEndToEndTests {
    @Test("an approved chip-and-PIN sale answers the document's callback, field by field, through the CLI")
    func approvedSale() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        let inserted = try InsertedCard("visa-credit-cvn10.yaml", reader: daemon.readerSocket())
        defer { inserted.remove() }
        let pin = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        #expect(pin.status == 0, "\(pin.stderr)")
        let opened = try cli(["open", saleURL()], socket: daemon.socket)
        #expect(opened.status == 0, "\(opened.stderr) \(daemon.logText)")
        let callback = opened.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let (base, fields) = callbackFields(callback)
        #expect(base == "mycallbackscheme://result")
        #expect(callback.hasPrefix("mycallbackscheme://result?status=success&message=Transaction%20successful.&action=sale&"))
        expectDocumentOrder(fields, documentSaleFields)
        #expect(value(fields, "installments") == nil, "paid at once: no installments field")
        #expect(value(fields, "clientTransactionId") == "12345678901234567890123456789012")
        #expect(value(fields, "amount") == "1200")
        #expect(value(fields, "tipAmount") == "200")
        #expect(value(fields, "verificationMethod") == "CHIP-PIN")
        #expect(value(fields, "cardType") == "VISA")
        #expect(value(fields, "accountNumber") == "476173******0010")
        let stan = try #require(value(fields, "referenceNumber"))
        #expect(stan == "000001")
        let rrn = try #require(value(fields, "rrn"))
        #expect(rrn.count == 12 && rrn.allSatisfy(\.isNumber) && rrn.hasSuffix(stan))
        #expect(value(fields, "authorisationCode")?.count == 6)
        #expect(value(fields, "tid") == "10000001")
        #expect(value(fields, "orderCode") == rrn + "0001")
        let date = try #require(value(fields, "transactionDate"))
        #expect(date.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}[+-]\d\d:\d\d$"#, options: .regularExpression) != nil, "\(date)")
        let uuid = try #require(value(fields, "transactionId"))
        #expect(UUID(uuidString: uuid) != nil)

        // The ledger has it, with its trace and the callback in the outbox; the CLI shows it.
        let shown = try cli(["tx", "show", uuid, "--json"], socket: daemon.socket)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        #expect(object["status"] as? String == "approved")
        #expect(object["stan"] as? String == "000001")
        #expect((object["trace"] as? [Any])?.isEmpty == false)
        #expect(((object["callbacks"] as? [[String: Any]])?.first?["payload"] as? String) == callback)
        #expect(!shown.stdout.contains("4761739001010010"), "no full PAN leaves the daemon")
    }

    @Test("host declines, a wrong then right PIN, and the cents table answer with the document's failed structure")
    func declinesAndPIN() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        let inserted = try InsertedCard("visa-credit-cvn10.yaml", reader: daemon.readerSocket())
        defer { inserted.remove() }

        // A queued host outcome (CLI) for this terminal only.
        #expect(try cli(["host", "queue", "bench1", "--code", "51"], socket: daemon.socket).status == 0)
        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let declined = try await daemon.open(saleURL(reference: "decline-1"))
        let d = try #require(declined.result, "\(declined.error)")
        let (_, fields) = callbackFields(try #require(d.callback))
        #expect(fields.map(\.0).prefix(documentFailedSaleFields.count).elementsEqual(documentFailedSaleFields))
        #expect(value(fields, "status") == "failed")
        #expect(value(fields, "message") == "Transaction declined by host. (51) Insufficient funds")
        #expect(value(fields, "referenceNumber") == "" && value(fields, "authorisationCode") == "")
        #expect(value(fields, "accountNumber") == "476173******0010")
        #expect(value(fields, "transactionId") == nil)
        #expect(d.transaction?.status == "declined")
        #expect(d.transaction?.responseCode == "51")

        // Wrong PIN (the card says 63C2), then the right one: approved.
        _ = try cli(["keypad", "bench1", "--pin", "9999"], socket: daemon.socket)
        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let retried = try await daemon.open(saleURL(reference: "pin-retry"))
        #expect(retried.result?.status == "success", "\(retried.error)")
        let trace = try await daemon.json("GET", "/v1/transactions/\(retried.result?.transaction?.id ?? 0)")
        let names = ((trace.1 as? [String: Any])?["trace"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.filter { $0 == "VERIFY" }.count == 2, "two VERIFY commands: \(names)")

        // Viva's cents table: .55 is a wrong online PIN.
        _ = try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket)
        let cents = try await daemon.open(saleURL(amount: 1055, tip: 0, reference: "cents-55"))
        #expect(cents.result?.message == "Transaction declined by host. (55) Incorrect PIN", "\(String(describing: cents.result?.message))")
    }

    @Test("a second sale with the same clientTransactionId returns the first result and charges nothing")
    func idempotency() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let first = try await daemon.open(saleURL(reference: "order-42"))
        let second = try await daemon.open(saleURL(reference: "order-42"))
        let a = try #require(first.result, "\(first.error)")
        let b = try #require(second.result, "\(second.error)")
        #expect(a.status == "success")
        #expect(b.callback == a.callback)
        #expect(b.replayed && !a.replayed)
        let list = try await daemon.json("GET", "/v1/transactions")
        #expect((list.1 as? [Any])?.count == 1, "one ledger row")
        let other = try await daemon.open(saleURL(reference: "order-43"))
        #expect(other.result?.transaction?.stan == "000002")
    }

    @Test("cancel by referenceNumber, again (already cancelled), unknown; and by card with the last 3 on the keypad")
    func cancels() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        for reference in ["c1", "c2", "c3"] {
            #expect(try await daemon.open(saleURL(amount: 1000, tip: 0, reference: reference)).result?.status == "success")
        }
        let cancel = "vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=K&appId=a&action=cancel"
        let byReference = try #require(try await daemon.open(cancel + "&referenceNumber=1").result)
        let (_, fields) = callbackFields(try #require(byReference.callback))
        #expect(fields.map(\.0) == documentCancelFields, "\(fields.map(\.0))")
        #expect(value(fields, "status") == "success")
        #expect(value(fields, "amount") == "1000")
        #expect(value(fields, "accountNumber") == "476173******0010")
        let original = try await daemon.json("GET", "/v1/transactions/1")
        #expect((original.1 as? [String: Any])?["status"] as? String == "cancelled")

        let again = try #require(try await daemon.open(cancel + "&referenceNumber=000001").result)
        #expect(again.status == "failed")
        #expect(again.message == "Transaction already cancelled.")
        let unknown = try #require(try await daemon.open(cancel + "&referenceNumber=999").result)
        #expect(unknown.message == "Transaction not found.")

        // No reference: the card is read and the operator picks from its last 3 approved sales
        // (newest first: STAN 3, then 2; STAN 1 is cancelled).
        _ = try cli(["keypad", "bench1", "--select", "2"], socket: daemon.socket)
        let picked = try #require(try await daemon.open(cancel).result)
        #expect(picked.status == "success", "\(picked.message)")
        let second = try await daemon.json("GET", "/v1/transactions/2")
        #expect((second.1 as? [String: Any])?["status"] as? String == "cancelled")
        let third = try await daemon.json("GET", "/v1/transactions/3")
        #expect((third.1 as? [String: Any])?["status"] as? String == "approved")
    }

    @Test("bad requests: a failed callback naming the field when a callback is known, an API error otherwise; the daemon stays up")
    func badRequests() async throws {
        let daemon = try await DaemonProcess(["--demo"])
        defer { daemon.remove() }
        let unknownAction = try #require(try await daemon.open("vivapayclient://pay/v1?callback=cb://r&action=refundEverything").result)
        #expect(unknownAction.status == "failed")
        #expect(unknownAction.message.contains("action"))
        let badAmount = try #require(try await daemon.open(saleURL(amount: -5)).result)
        #expect(badAmount.message.contains("amount"), "\(badAmount.message)")
        #expect(value(callbackFields(badAmount.callback ?? "").fields, "referenceNumber") == "")
        let noCallback = try await daemon.open("vivapayclient://pay/v1?action=sale&amount=100")
        #expect(noCallback.status == 400)
        #expect(noCallback.error.contains("callback"))
        let malformed = try await daemon.open("not a url at all")
        #expect(malformed.status == 400)
        let cliNoCallback = try cli(["open", "vivapayclient://pay/v1?action=sale&amount=100"], socket: daemon.socket)
        #expect(cliNoCallback.status == 2)
        #expect(cliNoCallback.stderr.contains("callback"))
        let unknownTerminal = try await daemon.open(saleURL(), terminal: "nope")
        #expect(unknownTerminal.status == 404)
        #expect(try await daemon.open(saleURL(reference: "after-errors")).result?.status == "success", "still serving")
    }

    @Test("a busy terminal refuses a second request; abort ends the first with (-57) Aborted")
    func busyAndAbort() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        // No card: the sale waits for one.
        let (status, body) = try await daemon.json("POST", "/v1/open", OpenRequest(url: saleURL(reference: "waits"), wait: false))
        #expect(status == 202)
        let id = try #require((body as? [String: Any])?["id"] as? String)
        var busy = false
        for _ in 0..<50 where !busy {
            let terminals = try await daemon.json("GET", "/v1/terminals")
            busy = ((terminals.1 as? [[String: Any]])?.first?["activity"] as? String) != nil
            if !busy { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(busy)
        let second = try await daemon.open(saleURL(reference: "second"))
        #expect(second.status == 409)
        #expect(second.error.contains("busy"), "\(second.error)")
        let abort = try #require(try await daemon.open("vivapayclient://pay/v1?callback=cb://r&action=abort").result)
        #expect(abort.status == "success")
        let reply = try await daemon.client.send(method: "GET", "/v1/requests/\(id)")
        let first = try JSONDecoder().decode(OpenResult.self, from: reply.body)
        #expect(first.status == "failed")
        #expect(first.message == "(-57) Aborted")
        #expect(first.transaction?.status == "cancelled")
        let idle = try #require(try await daemon.open("vivapayclient://pay/v1?callback=cb://r&action=abort").result)
        #expect(idle.message == "No transaction in progress.")
    }

    @Test("events: card insertion, the PIN prompt and the outcome arrive over server-sent events")
    func events() async throws {
        let daemon = try await DaemonProcess()
        defer { daemon.remove() }
        let collected = EventLog()
        let follower = Task {
            try await daemon.client.stream("/v1/events") { line in
                if line.hasPrefix("event: ") { collected.append(String(line.dropFirst(7))) }
                return !line.contains("event: outcome")
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let inserted = try InsertedCard("visa-credit-cvn10.yaml", reader: daemon.readerSocket())
        defer { inserted.remove() }
        let sale = Task { try await daemon.open(saleURL(reference: "events")) }
        // The PIN is entered once the prompt is up.
        for _ in 0..<100 where !collected.contains("prompt") { try await Task.sleep(for: .milliseconds(20)) }
        #expect(try cli(["keypad", "bench1", "--pin", "1234"], socket: daemon.socket).stdout.contains("answered"))
        #expect(try await sale.value.result?.status == "success")
        _ = try await follower.value
        let types = collected.items
        #expect(types.contains("card-inserted"))
        for expected in ["transaction-started", "waiting-for-card", "prompt", "prompt-answered", "outcome"] {
            #expect(types.contains(expected), "\(types)")
        }
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func append(_ v: String) { lock.withLock { values.append(v) } }
    func contains(_ v: String) -> Bool { lock.withLock { values.contains(v) } }
    var items: [String] { lock.withLock { values } }
}
