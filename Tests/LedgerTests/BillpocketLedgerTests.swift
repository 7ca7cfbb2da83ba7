import Foundation
import GRDB
import Testing
@testable import Ledger

@Suite("Billpocket users, device tokens and terminal configuration")
struct BillpocketLedgerTests {
    let tokenA = String(repeating: "a", count: 64)
    let tokenB = String(repeating: "b", count: 64)
    let tokenA2 = String(repeating: "c", count: 64)

    func ledger(_ dir: TempDir) throws -> Ledger {
        let ledger = try Ledger(path: dir.database, panKey: keyA)
        _ = try ledger.ensureTerminal(name: "t1", tid: "16016684")
        _ = try ledger.ensureTerminal(name: "t2", tid: "16016685")
        return ledger
    }

    @Test("tokens are stored only as hashes, and the plans round-trip")
    func hashedTokens() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledger(dir)
        let user = try ledger.createBillpocketUser(name: "Tacos", token: tokenA, msiMinimums: [3: 30_000, 12: 120_000], at: 1)
        #expect(user.state == .active)
        #expect(user.msiMinimums == [3: 30_000, 12: 120_000])
        _ = try ledger.issueBillpocketDeviceToken(userID: user.id, alias: "caja 1", token: "DEVTOKEN1", at: 2)
        let dump = try ledger.rows("SELECT * FROM billpocket_user").description + (try ledger.rows("SELECT * FROM billpocket_device_token")).description
        #expect(!dump.contains(tokenA))
        #expect(!dump.contains("DEVTOKEN1"))
        #expect(try ledger.billpocketUsers() == [user])
        #expect(throws: LedgerError.self) { try ledger.createBillpocketUser(name: "x", token: tokenB, msiMinimums: [4: 1], at: 1) }
        #expect(throws: LedgerError.self) { try ledger.createBillpocketUser(name: "", token: tokenB, msiMinimums: [:], at: 1) }
    }

    @Test("user token lifecycle: same token same configuration, another user reconfigures, rotated and invalidated tokens have their own answers")
    func userTokens() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledger(dir)
        let a = try ledger.createBillpocketUser(name: "A", token: tokenA, msiMinimums: [:], at: 1)
        let b = try ledger.createBillpocketUser(name: "B", token: tokenB, msiMinimums: [:], at: 1)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: "nope", deviceToken: nil, at: 2) == .unknownUserToken)
        #expect(try ledger.billpocketUser(configuredOn: "t1") == nil)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenA, deviceToken: nil, at: 2) == .granted(user: a, reconfigured: true))
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenA, deviceToken: nil, at: 3) == .granted(user: a, reconfigured: false))
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenB, deviceToken: nil, at: 4) == .granted(user: b, reconfigured: true))
        #expect(try ledger.billpocketUser(configuredOn: "t1") == b)

        let rotated = try ledger.rotateBillpocketUser(id: a.id, newToken: tokenA2, at: 5)
        #expect(try ledger.configureBillpocket(terminal: "t2", userToken: tokenA, deviceToken: nil, at: 6) == .rotatedUserToken)
        #expect(try ledger.configureBillpocket(terminal: "t2", userToken: tokenA2, deviceToken: nil, at: 6) == .granted(user: rotated, reconfigured: true))

        let invalidated = try ledger.invalidateBillpocketUser(id: b.id, at: 7)
        #expect(invalidated.state == .invalidated)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenB, deviceToken: nil, at: 8) == .invalidatedUserToken)
        #expect(try ledger.billpocketUser(configuredOn: "t1") == nil, "an invalidated user's terminals stop working for it")
        #expect(throws: LedgerError.self) { try ledger.invalidateBillpocketUser(id: b.id, at: 9) }
        #expect(throws: LedgerError.self) { try ledger.issueBillpocketDeviceToken(userID: b.id, alias: nil, token: "DEVTOKEN9", at: 9) }
        #expect(throws: LedgerError.self) { try ledger.rotateBillpocketUser(id: 99, newToken: tokenB, at: 9) }
    }

    @Test("device tokens: alive until they configure a device, then dead and working only there")
    func deviceTokens() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledger(dir)
        let a = try ledger.createBillpocketUser(name: "A", token: tokenA, msiMinimums: [:], at: 1)
        let b = try ledger.createBillpocketUser(name: "B", token: tokenB, msiMinimums: [:], at: 1)
        let issued = try ledger.issueBillpocketDeviceToken(userID: a.id, alias: "caja", token: "DEV12345", at: 2)
        #expect(issued.isAlive)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenA, deviceToken: "UNKNOWN1", at: 3) == .unknownDeviceToken)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenB, deviceToken: "DEV12345", at: 3) == .deviceTokenOfAnotherUser)
        #expect(try ledger.billpocketDeviceTokens(userID: a.id).first?.isAlive == true, "a refusal changes nothing")
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenA, deviceToken: "DEV12345", at: 4) == .granted(user: a, reconfigured: true))
        let dead = try #require(ledger.billpocketDeviceTokens().first)
        #expect(!dead.isAlive)
        #expect(dead.device == "t1")
        #expect(dead.boundAt == 4)
        #expect(try ledger.configureBillpocket(terminal: "t1", userToken: tokenA, deviceToken: "DEV12345", at: 5) == .granted(user: a, reconfigured: false))
        #expect(try ledger.configureBillpocket(terminal: "t2", userToken: tokenA, deviceToken: "DEV12345", at: 6) == .deviceTokenOfAnotherDevice(device: "t1"))
        #expect(try ledger.billpocketUser(configuredOn: "t2") == nil)
        _ = b
    }

    @Test("a Billpocket transaction is found by its transactionid through the partial index")
    func byTransactionID() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ledger = try ledger(dir)
        var new = sale(provider: .billpocket)
        new.extra = #"{"transactionid":"7203712345678901"}"#
        let started = try ledger.begin(new)
        try ledger.complete(id: started.id, approved())
        #expect(try ledger.billpocketTransaction(transactionID: "7203712345678901")?.id == started.id)
        #expect(try ledger.billpocketTransaction(transactionID: "7203712345678902") == nil)
        let plan = try ledger.pool.read { db in
            try Row.fetchAll(db, sql: """
                EXPLAIN QUERY PLAN SELECT txn.id FROM txn WHERE txn.provider = 'billpocket'
                AND json_extract(txn.extra, '$.transactionid') = ?
                """, arguments: ["x"]).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("txn_billpocket_transactionid") }, "\(plan)")
    }
}
