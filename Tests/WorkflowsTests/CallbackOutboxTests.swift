import Ledger
import TestSupport
import Testing
@testable import Workflows

@Suite("a callback's outbox row: delivered with the transaction when the reply is its only way out")
struct CallbackOutboxTests {
    static func callback(_ url: String) -> Callback {
        Callback(url: url, target: String(url.prefix { $0 != "?" }), fields: [], status: "success", message: "")
    }

    @Test("an app scheme nothing hands on is delivered at once; http(s), or an app scheme a command or xdg-open takes, waits for delivery")
    func which() {
        let app = Self.callback("myapp://result?status=success")
        #expect(app.outbox(now: 7, appSchemesHandedOn: false).map(\.deliveredAt) == [7])
        #expect(app.outbox(now: 7, appSchemesHandedOn: true).map(\.deliveredAt) == [nil])
        for url in ["http://127.0.0.1:9/cb?x=1", "HTTPS://example.test/cb", "Http://h/x"] {
            #expect(Self.callback(url).outbox(now: 7, appSchemesHandedOn: false).map(\.deliveredAt) == [nil], "\(url)")
        }
        #expect(Callback(url: nil, target: nil, fields: [], status: "", message: "").outbox(appSchemesHandedOn: false).isEmpty)
    }

    @Test("the ledger stores such a row delivered, with one attempt, in the transaction's own commit; a pending one as pending")
    func stored() throws {
        let ledger = try TemporaryLedger()
        defer { ledger.remove() }
        _ = try ledger.ledger.ensureTerminal(name: "bench1", tid: "10000001")
        let started = try ledger.ledger.begin(NewTransaction(terminal: "bench1", provider: .viva, action: .sale, amount: 100, currency: 978,
                                                             createdAt: 1_000_000))
        let rows = Self.callback("myapp://result?a=1").outbox(now: 5, appSchemesHandedOn: false)
            + Self.callback("http://127.0.0.1:9/cb").outbox(now: 5, appSchemesHandedOn: false)
        try ledger.ledger.complete(id: started.id, Completion(status: .declined, responseCode: "05", completedAt: 2_000_000), outbox: rows)
        let stored = try ledger.ledger.outbox(transactionID: started.id)
        #expect(stored.map(\.status) == [.delivered, .pending])
        #expect(stored.map(\.attempts) == [1, 0])
        #expect(try ledger.ledger.pendingOutbox(now: .max).map(\.payload) == ["http://127.0.0.1:9/cb"])
    }
}
