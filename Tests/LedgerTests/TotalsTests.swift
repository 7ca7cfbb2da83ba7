import EMV
import Foundation
import Terminal
import Testing
@testable import Ledger

/// The ledger checks a payment's totals in the write that records each operation, whoever asks:
/// operations begun against the same state (as racing requests are) cannot together capture more
/// than was authorised or refund more than was captured.
@Suite("the ledger's totals per payment")
struct TotalsTests {
    func ledgerWithTerminal(_ dir: TempDir) throws -> Ledger {
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        return ledger
    }

    /// An approved pre-authorisation of `amount` on t1.
    func approvedPreAuth(_ ledger: Ledger, amount: Int64) throws -> Started {
        var auth = sale(amount: amount)
        auth.action = .preAuth
        let p = try ledger.begin(auth)
        try ledger.complete(id: p.id, approved())
        return p
    }

    @Test("two captures begun on one pre-authorisation: the second to complete is refused, and the batch counts one")
    func overCapture() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let p = try approvedPreAuth(ledger, amount: 100)
        let first = try ledger.begin(undo(.capture, of: p.id, amount: 100))
        let second = try ledger.begin(undo(.capture, of: p.id, amount: 100))
        try ledger.complete(id: first.id, approved())
        let refused = ledgerError { try ledger.complete(id: second.id, approved()) }
        #expect(refused?.field == "amount" && refused?.rule.contains("more than its authorised 100") == true, "\(String(describing: refused))")
        #expect(try ledger.transaction(id: second.id)?.status == .inProgress, "nothing of the refused write is kept")
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 100)
        // A cancel of the captured pre-authorisation is refused too: refund the capture instead.
        let cancel = try ledger.begin(undo(.cancel, of: p.id, amount: 100))
        #expect(ledgerError { try ledger.complete(id: cancel.id, approved()) }?.field == "originalID")
    }

    @Test("a pre-authorisation cancelled in part stays approved for the rest: captured up to what is left, never beyond; the last cancel marks it cancelled")
    func partialCancel() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let p = try approvedPreAuth(ledger, amount: 800)
        let cancel = try ledger.begin(undo(.cancel, of: p.id, amount: 600))
        try ledger.complete(id: cancel.id, approved())
        #expect(try ledger.transaction(id: p.id)?.status == .approved)
        let over = try ledger.begin(undo(.capture, of: p.id, amount: 300))
        #expect(ledgerError { try ledger.complete(id: over.id, approved()) }?.rule.contains("with 600 cancelled") == true)
        let capture = try ledger.begin(undo(.capture, of: p.id, amount: 200))
        try ledger.complete(id: capture.id, approved())
        #expect(try ledger.terminal(name: "t1")?.batchAmount == 200)
        // Nothing is left to cancel.
        let late = try ledger.begin(undo(.cancel, of: p.id, amount: 1))
        #expect(ledgerError { try ledger.complete(id: late.id, approved()) } != nil)
        // Cancelled in two parts with no capture: the last part marks it cancelled.
        let q = try approvedPreAuth(ledger, amount: 500)
        for part: Int64 in [200, 300] {
            let c = try ledger.begin(undo(.cancel, of: q.id, amount: part))
            try ledger.complete(id: c.id, approved())
        }
        #expect(try ledger.transaction(id: q.id)?.status == .cancelled)
    }

    @Test("a capture refunded in full still counts as captured: nothing more is captured or cancelled of its pre-authorisation")
    func refundedCaptureCounts() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let p = try approvedPreAuth(ledger, amount: 100)
        let capture = try ledger.begin(undo(.capture, of: p.id, amount: 100))
        try ledger.complete(id: capture.id, approved())
        let refund = try ledger.begin(undo(.refund, of: capture.id, amount: 100))
        try ledger.complete(id: refund.id, approved())
        #expect(try ledger.transaction(id: capture.id)?.status == .refunded)
        let again = try ledger.begin(undo(.capture, of: p.id, amount: 1))
        #expect(ledgerError { try ledger.complete(id: again.id, approved()) }?.field == "amount")
        let cancel = try ledger.begin(undo(.cancel, of: p.id, amount: 100))
        #expect(ledgerError { try ledger.complete(id: cancel.id, approved()) } != nil)
    }

    @Test("refunds begun together on one sale: those that would pass its amount are refused at completion")
    func overRefund() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        let s = try ledger.begin(sale(amount: 100))
        try ledger.complete(id: s.id, approved())
        let begun = try (0..<4).map { _ in try ledger.begin(undo(.refund, of: s.id, amount: 30)) }
        var results: [Bool] = []
        for r in begun { results.append((try? ledger.complete(id: r.id, approved())) != nil) }
        #expect(results == [true, true, true, false])
        #expect(try Ledger.refundedTotal(ledger, s.id) == 90)
    }

    /// A random interleaving of captures, refunds and cancels on one pre-authorisation: each begun
    /// against whatever state was there (as concurrent requests see), completed in another order.
    /// After every completion the totals hold.
    @Test("random interleavings of capture, refund and cancel on one payment keep captured ≤ authorised and refunded ≤ captured", arguments: 0..<40)
    func interleavings(seed: UInt64) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledgerWithTerminal(dir)
        // Seeded, so a failing interleaving can be run again.
        var random = SplitMix64(state: seed)
        let authorised: Int64 = 1000
        var auth = sale(amount: authorised)
        auth.action = .preAuth
        let p = try ledger.begin(auth)
        try ledger.complete(id: p.id, approved())
        var begun: [(id: Int64, action: TransactionAction)] = []
        for _ in 0..<30 {
            if begun.isEmpty || random.next() % 3 != 0 {
                let amount = Int64(random.next() % 600) + 1
                let captures = try ledger.transactions(originalID: p.id).filter { $0.action == .capture && $0.status == .approved }
                let action: TransactionAction
                let original: Int64
                switch random.next() % 3 {
                case 0: (action, original) = (.capture, p.id)
                case 1: (action, original) = (.cancel, p.id)
                default:
                    guard let capture = captures.randomElement(using: &random) else { continue }
                    (action, original) = (.refund, capture.id)
                }
                // Begin may refuse (the original is no longer approved, the amount is over): a
                // surface would answer that; the race is among those that began.
                if let started = try? ledger.begin(undo(action, of: original, amount: amount)) { begun.append((started.id, action)) }
            } else {
                let i = Int(random.next() % UInt64(begun.count))
                let op = begun.remove(at: i)
                _ = try? ledger.complete(id: op.id, approved())
            }
            try checkTotals(ledger, preAuth: p.id, authorised: authorised)
        }
        for op in begun {
            _ = try? ledger.complete(id: op.id, approved())
            try checkTotals(ledger, preAuth: p.id, authorised: authorised)
        }
    }

    func checkTotals(_ ledger: Ledger, preAuth: Int64, authorised: Int64) throws {
        let operations = try ledger.transactions(originalID: preAuth)
        let captures = operations.filter { $0.action == .capture && [.approved, .refunded].contains($0.status) }
        let captured = captures.reduce(0) { $0 + $1.amount }
        let cancelled = operations.filter { $0.action == .cancel && $0.status == .approved }.reduce(0) { $0 + $1.amount }
        #expect(captured + cancelled <= authorised, "captured \(captured) and cancelled \(cancelled) of \(authorised)")
        for capture in captures {
            let refunded = try Ledger.refundedTotal(ledger, capture.id)
            #expect(refunded <= capture.amount, "refunded \(refunded) of a capture of \(capture.amount)")
        }
    }
}

extension Ledger {
    /// The approved refunds of `id`, read in a transaction of their own.
    static func refundedTotal(_ ledger: Ledger, _ id: Int64) throws -> Int64 {
        try ledger.pool.read { try refundedAmount($0, originalID: id) }
    }
}

@Suite("brands as the ledger keeps them")
struct BrandTests {
    @Test("a card's brand is kept by its display name; its code name is refused naming the rule; a wallet's name passes")
    func displayNames() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        var coded = approved()
        coded.brand = "visa"
        let s = try ledger.begin(sale())
        let refused = ledgerError { try ledger.complete(id: s.id, coded) }
        #expect(refused?.field == "brand" && refused?.rule.contains("VISA") == true, "\(String(describing: refused))")
        var typed = approved()
        typed.cardBrand = .visa
        #expect(typed.brand == "VISA")
        let stored = try ledger.complete(id: s.id, typed)
        #expect(stored.cardBrand == .visa)
        var wallet = approved(pan: nil, masked: nil)
        wallet.brand = "WECHATPAY"
        let w = try ledger.begin(sale())
        #expect(try ledger.complete(id: w.id, wallet).cardBrand == nil)
    }
}


@Suite("Citcon operation references in the ledger")
struct CitconReferenceTests {
    func charge(_ id: String, reference: String, operations: [(String, String)]) -> CitconCharge {
        var c = CitconCharge(id: id, chargeToken: "tok-" + id, merchantID: "shop", reference: reference, amount: 1000, currency: "USD", country: "US",
                             autoCapture: true, note: nil, method: "card", status: .succeeded, timeCreated: 0, urls: [:])
        c.operations = operations.map { CitconOperation(object: "refund", id: $0.0, reference: $0.1, amount: 100, status: "succeeded", timeCreated: 0,
                                                        transactionID: nil) }
        return c
    }

    @Test("an operation's reference is the merchant's once: the write recording a second one under it is refused naming the rule; the same operation again is not")
    func once() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.setCitconMerchantKey("shop", key: "k", at: 0)
        let a = try #require(try ledger.insertCitconCharge(charge("a", reference: "ca", operations: [])))
        let b = try #require(try ledger.insertCitconCharge(charge("b", reference: "cb", operations: [])))
        #expect(try !ledger.citconOperationReferenceUsed(merchantID: "shop", reference: "r1"))
        var first = a
        first.operations = charge("a", reference: "ca", operations: [("op1", "r1")]).operations
        try ledger.completeCitconCharge(transactionID: nil, nil, charge: first, outbox: [])
        #expect(try ledger.citconOperationReferenceUsed(merchantID: "shop", reference: "r1"))
        // Writing the charge again with the same operation is fine.
        try ledger.completeCitconCharge(transactionID: nil, nil, charge: first, outbox: [])
        // Another charge's operation under r1 is refused, and nothing of its write is kept.
        var second = b
        second.operations = charge("b", reference: "cb", operations: [("op2", "r1")]).operations
        let refused = ledgerError { try ledger.completeCitconCharge(transactionID: nil, nil, charge: second, outbox: []) }
        #expect(refused?.field == "reference" && refused?.rule == LedgerRules.citconReferenceUsed, "\(String(describing: refused))")
        #expect(try ledger.citconCharge(id: "b")?.operations.isEmpty == true)
    }
}
