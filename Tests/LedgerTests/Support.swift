import Foundation
import GRDB
import Terminal
import Testing
@testable import Ledger

/// A fresh directory under /tmp, removed by `remove()`.
struct TempDir {
    let path: String

    init() throws {
        var template = Array("/tmp/cardbench-ledger-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
    }

    var database: String { path + "/ledger.sqlite" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

let keyA = [UInt8](repeating: 0xA5, count: 32)
let keyB = [UInt8](repeating: 0x5A, count: 32)

/// A public Visa test PAN and a second card.
let panA = "4761739001010010"
let panB = "5413330089010434"
let maskedA = "476173******0010"
let maskedB = "541333******0434"

/// 2024-02-29 13:45:10 UTC: a leap day, so the RRN's day of year is 060.
let leapDay: Int64 = 1_709_214_310 * 1_000_000

func sale(_ terminal: String = "t1", amount: Int64 = 1200, tip: Int64 = 0, reference: String? = nil, provider: Provider = .viva,
          at micros: Int64 = leapDay, pan: String? = nil) -> NewTransaction {
    NewTransaction(terminal: terminal, provider: provider, action: .sale, amount: amount, tipAmount: tip, currency: 978,
                   clientReference: reference, createdAt: micros, pan: pan)
}

func undo(_ action: TransactionAction, of id: Int64, amount: Int64 = 1200, terminal: String = "t1") -> NewTransaction {
    NewTransaction(terminal: terminal, provider: .viva, action: action, amount: amount, currency: 978, originalID: id,
                   createdAt: leapDay + 60_000_000)
}

func approved(pan: String? = panA, masked: String? = maskedA, at micros: Int64 = leapDay + 5_000_000, reversal: Bool = false) -> Completion {
    Completion(status: .approved, responseCode: "00", message: "Transaction successful.", authorisationCode: "690882",
               maskedPAN: masked, pan: pan, brand: "VISA", aid: "A0000000031010", applicationLabel: "VISA CREDIT",
               cardholderName: "TEST/CARD", arqc: "29CCA15AE665FA2E", atc: "001C", tvr: "0000008000", cvm: "PIN",
               entryMode: .chip, completedAt: micros, reversal: reversal)
}

func declined(pan: String? = panA) -> Completion {
    Completion(status: .declined, responseCode: "51", message: "Insufficient funds", maskedPAN: pan == nil ? nil : maskedA,
               pan: pan, completedAt: leapDay + 5_000_000)
}

let sampleTrace = [
    TraceEntry(command: "00A404000E315041592E5359532E444446303100", response: "6F1A840E315041592E5359532E44444630319000"),
    TraceEntry(command: "00B2010C00", response: "70185A08476173FFFFFF00105F24032512319000"),
]

func callback(_ payload: String = "cb://result?status=success") -> OutboxMessage {
    OutboxMessage(kind: .callback, target: "cb://result", payload: payload)
}

/// Runs `body` and returns the ledger error it threw, failing the test when it threw none.
func ledgerError(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> LedgerError? {
    do {
        try body()
        Issue.record("expected a LedgerError, got none", sourceLocation: sourceLocation)
        return nil
    } catch let error as LedgerError {
        return error
    } catch {
        Issue.record("expected a LedgerError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

extension Ledger {
    /// Test access to raw SQL.
    func rows(_ sql: String, _ arguments: StatementArguments = []) throws -> [Row] {
        try pool.read { try Row.fetchAll($0, sql: sql, arguments: arguments) }
    }

    func int(_ sql: String, _ arguments: StatementArguments = []) throws -> Int {
        try pool.read { try Int.fetchOne($0, sql: sql, arguments: arguments) } ?? 0
    }
}
