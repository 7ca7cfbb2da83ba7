import EMV
import Fronts
import Ledger
import Terminal
import TestSupport
import Testing
import VirtualCard
@testable import Workflows

/// The workflows in process, with no daemon and no socket: a real ledger file, the emulated host,
/// virtual cards in test terminals, the keypad's queue as a scenario fills it.
@Suite("workflows in process")
struct WorkflowTests {
    let visa: CardProfile

    init() throws { visa = try shippedProfile("visa-credit-cvn10.yaml") }

    func harness() throws -> (WorkflowHarness, TestTerminal) {
        let h = try WorkflowHarness(cards: [visa])
        let t = h.terminals[0]
        t.insert(try VirtualCardSession(visa))
        return (h, t)
    }

    @Test("a Viva sale: approved, recorded with its callback as rendered, and its events in order")
    func vivaSale() async throws {
        let (h, t) = try harness()
        defer { h.remove() }
        _ = try t.keypad.enter(.pin(try #require(visa.pin)))
        let answer = try await VivaFront(context: h.context).open(
            "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=w1", terminal: nil)
        let stored = try #require(answer.transaction)
        #expect(answer.callback.status == "success")
        #expect(answer.callback.value("referenceNumber") == stored.stan.description)
        #expect(answer.callback.value("accountNumber") == PAN.masked(visa.pan))
        #expect(stored.status == .approved)
        // The outbox holds exactly the URL the answer carries, and its fields are the ones the
        // front rendered (what a replay reads back from the outbox).
        let row = try #require(try h.ledger.outbox(transactionID: stored.id).first)
        #expect(row.payload == answer.callback.url)
        #expect(Callback(stored: row, status: "", message: "").fields == answer.callback.fields)
        let names = h.events.all.map(\.name)
        #expect(names == [.transactionStarted, .waitingForCard, .outcome], "\(names)")
    }

    @Test("the same clientTransactionId again gets the first answer, replayed, and charges nothing more")
    func vivaReplay() async throws {
        let (h, t) = try harness()
        defer { h.remove() }
        let front = VivaFront(context: h.context)
        let url = "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=w2"
        _ = try t.keypad.enter(.pin(try #require(visa.pin)))
        let first = try await front.open(url, terminal: "bench1")
        let balance = h.host.account(pan: visa.pan)?.balance
        let second = try await front.open(url, terminal: "bench1")
        #expect(second.replayed && !first.replayed)
        #expect(second.callback == first.callback)
        #expect(h.host.account(pan: visa.pan)?.balance == balance)
        #expect(try h.ledger.transactions(terminal: "bench1").count == 1)
    }

    @Test("a cancel with no reference reads the card and cancels the sale picked from its last ones")
    func vivaCancelByCard() async throws {
        let (h, t) = try harness()
        defer { h.remove() }
        let front = VivaFront(context: h.context)
        let pin = try #require(visa.pin)
        for (i, amount) in [1100, 1300].enumerated() {
            _ = try t.keypad.enter(.pin(pin))
            let sale = try await front.open("vivapayclient://pay/v1?callback=pos://r&action=sale&amount=\(amount)&clientTransactionId=c\(i)",
                                            terminal: nil)
            #expect(sale.callback.status == "success")
        }
        // The newest sale is offered first.
        _ = try t.keypad.enter(.select(2))
        let cancel = try await front.open("vivapayclient://pay/v1?callback=pos://r&action=cancel", terminal: nil)
        #expect(cancel.callback.status == "success", "\(cancel.callback.message)")
        #expect(cancel.callback.value("amount") == "1100")
        let original = try #require(try h.ledger.transactions(terminal: "bench1").first { $0.action == .sale && $0.amount == 1100 })
        #expect(original.status == .cancelled)
    }

    @Test("a card pulled out after the host approved: the approval is reversed and the app is told it failed")
    func removedAfterApproval() async throws {
        let (h, t) = try harness()
        defer { h.remove() }
        let card = try VirtualCardSession(visa)
        t.insert(card)
        _ = try t.keypad.enter(.pin(try #require(visa.pin)))
        let balance = h.host.account(pan: visa.pan)?.balance
        // The first GENERATE AC is answered; the second (after the host) finds no card.
        let probe = try await VivaFront(context: h.context).open(
            "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=500&clientTransactionId=probe", terminal: nil)
        let commands = try h.ledger.trace(transactionID: try #require(probe.transaction).id).count
        let card2 = try VivaCardFixture.removing(visa, afterCommands: commands - 1)
        t.insert(card2)
        _ = try t.keypad.enter(.pin(try #require(visa.pin)))
        let answer = try await VivaFront(context: h.context).open(
            "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=700&clientTransactionId=pulled", terminal: nil)
        #expect(answer.callback.status == "failed")
        let stored = try #require(answer.transaction)
        #expect(stored.status == .reversed, "\(stored.status) \(stored.message ?? "")")
        #expect(h.host.account(pan: visa.pan)?.balance == (balance ?? 0) - 500, "only the first sale stays charged")
    }

    @Test("a busy terminal refuses a second transaction with a conflict naming what it is doing")
    func busy() async throws {
        let (h, t) = try harness()
        defer { h.remove() }
        try t.acquire("something else")
        defer { t.release() }
        await #expect(throws: WorkflowError.conflict("terminal bench1 is busy: something else in progress")) {
            _ = try await VivaFront(context: h.context).open("vivapayclient://pay/v1?callback=pos://r&action=sale&amount=100", terminal: nil)
        }
    }

    @Test("Billpocket: an unknown user token is answered through the callback, and nothing is recorded")
    func billpocketUnknownToken() async throws {
        let (h, _) = try harness()
        defer { h.remove() }
        let answer = try await BillpocketFront(context: h.context).open(
            "billpocket://transaction=venta&amount=100.00&identifier=w-1&userToken=\(String(repeating: "a", count: 64))&urlScheme=myapp",
            terminal: nil)
        #expect(answer.callback.url?.hasPrefix("myapp://") == true)
        #expect(answer.callback.status != "aprobada")
        #expect(answer.transaction == nil)
        #expect(try h.ledger.transactions(terminal: "bench1").isEmpty)
    }
}

/// Cards that leave mid-transaction.
enum VivaCardFixture {
    static func removing(_ profile: CardProfile, afterCommands n: Int) throws -> VirtualCardSession {
        let card = try VirtualCardSession(profile)
        card.removeAfter = n
        return card
    }
}

@Suite("events as the stream shows them")
struct BenchEventTests {
    @Test("a prompt's data: its name, the PIN tries when known, a selection's options one per line")
    func promptData() {
        #expect(BenchEvent.prompt(.pin(online: false, triesLeft: 2)).data == ["prompt": "PIN", "kind": "pin", "triesLeft": "2"])
        #expect(BenchEvent.prompt(.pin(online: true, triesLeft: nil)).data == ["prompt": "online PIN", "kind": "pin"])
        #expect(BenchEvent.prompt(.select(title: "installments", options: ["2", "3"])).data == ["prompt": "installments", "kind": "select", "options": "2\n3"])
        #expect(BenchEvent.prompt(.photo(mandatory: true)).data == ["prompt": "photo (mandatory)", "kind": "photo"])
        #expect(BenchEvent.prompt(.photo(mandatory: true)).name == .prompt)
    }

    @Test("an outcome's duration is for the metrics: the stream does not show it")
    func outcomeData() {
        let event = BenchEvent.outcome(stan: STAN(7)!, status: .approved, responseCode: "00", message: "Approved", microseconds: 1234)
        #expect(event.data == ["stan": "000007", "status": "approved", "responseCode": "00", "message": "Approved"])
        #expect(BenchEvent.recorded(stan: STAN(8)!, status: .cancelled, action: .cancel).name == .outcome)
    }
}
