import Foundation
import Fronts
import LedgerModel

/// A chargeback's life as one transition function (docs/citcon.md, "Chargebacks"): opened, then
/// under review when the merchant answers, then won or lost. Its statuses are cardbench's (the
/// IPN guide names `chargeback` as a transaction type and no statuses); `LifecycleTests` checks
/// the table.
public enum CitconChargebackLifecycle {
    public enum Status: String, Sendable, CaseIterable {
        case opened, underReview = "under_review", won, lost
    }

    /// What may come next: `opened` only when it begins, then review, then an outcome once.
    public static func next(_ status: Status?, _ to: Status) -> Result<Status, Refusal> {
        switch (status, to) {
        case (nil, .opened): .success(.opened)
        case (.opened?, .underReview): .success(.underReview)
        case (.opened?, .won), (.opened?, .lost), (.underReview?, .won), (.underReview?, .lost): .success(to)
        case (nil, _): .failure(Refusal(rule: "no chargeback is open on the charge: open one first"))
        case (let s?, _): .failure(Refusal(rule: "the chargeback is \(s.rawValue); it cannot become \(to.rawValue)"))
        }
    }

    public struct Refusal: Error, Sendable, Equatable {
        public let rule: String
    }
}

extension CitconFront {
    /// Opens a chargeback on a captured charge (`amount`: what the cardholder disputes, all of
    /// what is captured and not refunded or disputed when nil), or moves its latest one
    /// (`under_review`, `won`, `lost`). Each step sends its IPN (`transaction_type: chargeback`)
    /// under the charge's row; a lost chargeback takes the money back as a refund row of the
    /// charge's capture, so the ledger's totals hold it.
    public func chargeback(chargeID: String, action: String, amount: Int64?, reason: String?) throws(CitconError) -> CitconResult {
        try serialised(chargeID) { () throws(CitconError) -> CitconResult in
            guard var c = try stored("read the charge", { try store.citconCharge(id: chargeID, chargeToken: nil) }) else {
                throw .notFound("not found: no charge \(shownValue(chargeID, 40))")
            }
            guard let to = CitconChargebackLifecycle.Status(rawValue: action == "open" ? "opened" : action) else {
                throw .badRequest("action", "must be open, under_review, won or lost")
            }
            let index = c.operations.lastIndex { $0.object == "chargeback" }
            let current = index.flatMap { CitconChargebackLifecycle.Status(rawValue: c.operations[$0].status) }
            // A decided chargeback is done: a new one may be opened on what is left.
            let from: CitconChargebackLifecycle.Status? = to == .opened && (current == .won || current == .lost) ? nil : current
            let next: CitconChargebackLifecycle.Status
            switch CitconChargebackLifecycle.next(from, to) {
            case .success(let s): next = s
            case .failure(let refusal): throw .badRequest("action", refusal.rule)
            }
            guard let row = c.transactionID else { throw .badRequest("transaction_id", "the charge has no ledger row to dispute") }
            if next == .opened {
                guard c.status == .succeeded, let captured = c.amountCaptured else {
                    throw .badRequest("transaction_id", "the charge is \(c.status); only a captured charge can be disputed")
                }
                let disputed = c.operations.filter { $0.object == "chargeback" && $0.status == "lost" }.reduce(0) { $0 + $1.amount }
                let left = captured - (c.amountRefunded ?? 0) - disputed
                let amount = amount ?? left
                guard amount > 0, amount <= left else {
                    throw .badRequest("amount", "must be 1 to \(left): what is captured and neither refunded nor lost to a chargeback")
                }
                let operation = CitconOperation(object: "chargeback", id: PlatformText.hex(16), reference: reason ?? "", amount: amount, status: next.rawValue,
                                                timeCreated: nowMillis, transactionID: nil)
                c.operations.append(operation)
                try stored("record the chargeback") { try store.recordCitconChargeEvent(c, outbox: ipn(c, refund: operation).map { (row, $0) }) }
                return .operation(operation, c)
            }
            guard let i = index else { throw .internalError("the chargeback is missing") }
            if next == .lost {
                return try loseChargeback(&c, at: i)
            }
            c.operations[i].status = next.rawValue
            let operation = c.operations[i]
            try stored("record the chargeback") { try store.recordCitconChargeEvent(c, outbox: ipn(c, refund: operation).map { (row, $0) }) }
            return .operation(operation, c)
        }
    }

    /// A lost chargeback: a refund row of the charge's capture (the ledger checks it fits what is
    /// left) recorded with the chargeback's new status and its IPN, in one write.
    func loseChargeback(_ c: inout CitconCharge, at i: Int) throws(CitconError) -> CitconResult {
        let amount = c.operations[i].amount
        guard let originalID = c.operations.first(where: { $0.object == "capture" })?.transactionID ?? c.transactionID,
              let original = try stored("read the original", { try store.transaction(id: originalID) }) else {
            throw .internalError("the charge has no captured transaction in the ledger")
        }
        let new = NewTransaction(terminal: terminal(c.merchantID), provider: .citcon, action: .refund, amount: amount, currency: original.currency,
                                 clientReference: c.reference, originalID: originalID, createdAt: context.clock.nowMicroseconds())
        let before = c
        do throws(PlatformOperation.Failure) {
            let (_, done) = try PlatformOperation.run(context, store, new, acting: original, record: { started, completion in
                var next = before
                next.operations[i].status = CitconChargebackLifecycle.Status.lost.rawValue
                next.operations[i].transactionID = started.id
                try store.completeCitconCharge(transactionID: started.id, completion, charge: next, outbox: ipn(next, refund: next.operations[i]))
                return next
            })
            c = done
        } catch {
            if let rule = error.rule { throw .badRequest("amount", "the lost chargeback cannot be recorded: \(rule.field): \(rule.rule)") }
            throw .internalError("the lost chargeback could not be recorded: \(error)")
        }
        if let code = c.authorisationCode { context.host.void(authorisationCode: code, amount: Int(amount)) }
        return .operation(c.operations[i], c)
    }
}
