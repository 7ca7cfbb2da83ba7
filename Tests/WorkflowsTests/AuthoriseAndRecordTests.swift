import Ledger
import Terminal
import TestSupport
import Testing
@testable import Workflows

/// The one authorise-and-record path's rules, against a real ledger file: nothing is asked of the
/// issuer for a row the ledger will not begin; an approval the ledger will not record is taken
/// back and its row recorded failed, never left in progress.
@Suite("the one authorise-and-record path")
struct AuthoriseAndRecordTests {
    final class Counter: @unchecked Sendable { var asked = 0; var takenBack = 0 }

    static let approval = AuthorisationResponse(responseCode: "00", authorisationCode: "123456", issuerAuthenticationData: nil,
                                                rule: "approve", message: "approved", delayMilliseconds: 0)

    static func new(amount: Int64 = 100) -> NewTransaction {
        NewTransaction(terminal: "p1", provider: .worldline, action: .sale, amount: amount, currency: 978, createdAt: 1_000_000)
    }

    @Test("a row the ledger will not begin: nothing is asked, nothing taken back")
    func notBegun() throws {
        let temporary = try TemporaryLedger()
        defer { temporary.remove() }
        _ = try temporary.ledger.ensureTerminal(name: "p1", tid: "90000001")
        let count = Counter()
        #expect(throws: AuthoriseAndRecord.Failure.self) {
            _ = try AuthoriseAndRecord.run(temporary.ledger, Self.new(amount: 0), completedAt: { 2_000_000 },
                                           ask: { count.asked += 1; return .init(response: Self.approval, failure: nil) },
                                           takeBack: { _ in count.takenBack += 1 },
                                           record: { started, _ in try temporary.ledger.complete(id: started.id, .init(status: .approved, completedAt: 2_000_000)) })
        }
        #expect(count.asked == 0 && count.takenBack == 0)
    }

    @Test("an approval the ledger will not record: taken back once, the row failed with the reason; a decline is not taken back")
    func notRecorded() throws {
        let temporary = try TemporaryLedger()
        defer { temporary.remove() }
        _ = try temporary.ledger.ensureTerminal(name: "p1", tid: "90000001")
        let count = Counter()
        var begun: Started? = nil
        do {
            _ = try AuthoriseAndRecord.run(temporary.ledger, Self.new(), completedAt: { 2_000_000 }, onStarted: { begun = $0 },
                                           ask: { count.asked += 1; return .init(response: Self.approval, failure: nil) },
                                           takeBack: { _ in count.takenBack += 1 },
                                           record: { started, _ in
                                               // A response code the ledger does not take: the commit is refused.
                                               try temporary.ledger.complete(id: started.id, .init(status: .approved, responseCode: "XYZ", completedAt: 2_000_000))
                                           })
            Issue.record("the refused record went through")
        } catch {
            guard case .notRecorded(let refused) = error else { Issue.record("\(error)"); return }
            #expect(refused.rule?.field == "responseCode", "\(refused)")
        }
        #expect(count.asked == 1 && count.takenBack == 1)
        let id = try #require(begun).id
        let row = try #require(try temporary.ledger.transaction(id: id))
        #expect(row.status == .failed && row.message?.hasPrefix("not recorded: responseCode") == true, "\(row.status) \(row.message ?? "")")

        // A decline the ledger refuses is failed too, with nothing to take back.
        let decline = AuthorisationResponse(responseCode: "51", authorisationCode: nil, issuerAuthenticationData: nil, rule: "funds",
                                            message: "insufficient funds", delayMilliseconds: 0)
        _ = try? AuthoriseAndRecord.run(temporary.ledger, Self.new(), completedAt: { 2_000_000 },
                                        ask: { .init(response: decline, failure: nil) }, takeBack: { _ in count.takenBack += 1 },
                                        record: { started, _ in
                                            try temporary.ledger.complete(id: started.id, .init(status: .declined, responseCode: "XYZ", completedAt: 2_000_000))
                                        })
        #expect(count.takenBack == 1)
    }
}
