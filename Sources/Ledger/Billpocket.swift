import LedgerModel
import Crypto
import Foundation
import GRDB

extension Ledger {
    /// The stored form of a token: lower-case hex SHA-256. Tokens are long random strings, so an
    /// unkeyed hash cannot be reversed by guessing; the PAN key is not needed for them.
    static func tokenHash(_ token: String) -> String {
        Validate.lowerHex(Array(SHA256.hash(data: Array(token.utf8))))
    }

    /// Creates a user whose token is `token` (the caller generates it and shows it once; only its
    /// hash is stored).
    public func createBillpocketUser(name: String, token: String, msiMinimums: [Int: Int64], at now: Int64) throws -> BillpocketUser {
        try Validate.text(name, field: "name", maxLength: 64)
        guard !name.isEmpty else { throw LedgerError.invalid(field: "name", rule: "must not be empty") }
        try Self.validatePlans(msiMinimums)
        return try write("create Billpocket user \(name)") { db in
            try db.execute(sql: """
                INSERT INTO billpocket_user (name, token_hash, state, msi, created_at, updated_at)
                VALUES (?, ?, 'active', ?, ?, ?)
                """, arguments: [name, Self.tokenHash(token), Self.encodePlans(msiMinimums), now, now])
            return try Self.billpocketUser(db, id: db.lastInsertedRowID)
        }
    }

    /// Gives user `id` a new token: the old one (if any) answers "rotated" from now on, and an
    /// invalidated user is active again.
    public func rotateBillpocketUser(id: Int64, newToken: String, at now: Int64) throws -> BillpocketUser {
        try write("rotate Billpocket user \(id)") { db in
            _ = try Self.billpocketUser(db, id: id)
            try Self.retireToken(db, user: id, reason: "rotated", at: now)
            try db.execute(sql: "UPDATE billpocket_user SET token_hash = ?, state = 'active', updated_at = ? WHERE id = ?",
                           arguments: [Self.tokenHash(newToken), now, id])
            return try Self.billpocketUser(db, id: id)
        }
    }

    /// Kills user `id`'s token: it answers "invalidated" from now on, until a rotation.
    public func invalidateBillpocketUser(id: Int64, at now: Int64) throws -> BillpocketUser {
        try write("invalidate Billpocket user \(id)") { db in
            let user = try Self.billpocketUser(db, id: id)
            guard user.state == .active else {
                throw LedgerError.invalid(field: "user", rule: "user \(id) is already invalidated")
            }
            try Self.retireToken(db, user: id, reason: "invalidated", at: now)
            try db.execute(sql: "UPDATE billpocket_user SET token_hash = NULL, state = 'invalidated', updated_at = ? WHERE id = ?",
                           arguments: [now, id])
            // Its terminals no longer work for it.
            try db.execute(sql: "DELETE FROM billpocket_terminal WHERE user_id = ?", arguments: [id])
            return try Self.billpocketUser(db, id: id)
        }
    }

    /// Every user, oldest first.
    public func billpocketUsers() throws -> [BillpocketUser] {
        try read("list Billpocket users") { db in
            try Row.fetchAll(db, sql: "SELECT * FROM billpocket_user ORDER BY id").map(Self.billpocketUser)
        }
    }

    /// Issues a device token for user `userID` (alive until it configures a device).
    public func issueBillpocketDeviceToken(userID: Int64, alias: String?, token: String, at now: Int64) throws -> BillpocketDeviceToken {
        try Validate.text(alias, field: "alias", maxLength: 64)
        return try write("issue a device token for user \(userID)") { db in
            let user = try Self.billpocketUser(db, id: userID)
            guard user.state == .active else {
                throw LedgerError.invalid(field: "user", rule: "user \(userID) is invalidated; rotate its token first")
            }
            try db.execute(sql: """
                INSERT INTO billpocket_device_token (user_id, token_hash, alias, created_at) VALUES (?, ?, ?, ?)
                """, arguments: [userID, Self.tokenHash(token), alias, now])
            return try Self.deviceToken(db, id: db.lastInsertedRowID)
        }
    }

    /// Device tokens, of one user or all, oldest first.
    public func billpocketDeviceTokens(userID: Int64? = nil) throws -> [BillpocketDeviceToken] {
        try read("list device tokens") { db in
            if let userID {
                return try Row.fetchAll(db, sql: "SELECT * FROM billpocket_device_token WHERE user_id = ? ORDER BY id",
                                        arguments: [userID]).map(Self.deviceToken)
            }
            return try Row.fetchAll(db, sql: "SELECT * FROM billpocket_device_token ORDER BY id").map(Self.deviceToken)
        }
    }

    /// Checks a request's user token (and device token, when sent) and configures `terminal` for
    /// that user, in one write transaction: an alive device token dies here, bound to `terminal`.
    /// A refusal changes nothing.
    public func configureBillpocket(terminal: String, userToken: String, deviceToken: String?, at now: Int64) throws -> BillpocketAccess {
        try write("configure terminal \(terminal) for Billpocket") { db in
            let terminalID = try Self.terminal(db, name: terminal).id
            let hash = Self.tokenHash(userToken)
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM billpocket_user WHERE token_hash = ?", arguments: [hash]) else {
                let retired = try String.fetchOne(db, sql: "SELECT reason FROM billpocket_retired_token WHERE token_hash = ?",
                                                  arguments: [hash])
                switch retired {
                case "rotated": return .rotatedUserToken
                case "invalidated": return .invalidatedUserToken
                default: return .unknownUserToken
                }
            }
            let user = try Self.billpocketUser(row)
            if let deviceToken {
                guard let device = try Row.fetchOne(db, sql: "SELECT * FROM billpocket_device_token WHERE token_hash = ?",
                                                    arguments: [Self.tokenHash(deviceToken)]).map(Self.deviceToken) else {
                    return .unknownDeviceToken
                }
                guard device.userID == user.id else { return .deviceTokenOfAnotherUser }
                if let bound = device.device {
                    guard bound == terminal else { return .deviceTokenOfAnotherDevice(device: bound) }
                } else {
                    try db.execute(sql: "UPDATE billpocket_device_token SET device = ?, bound_at = ? WHERE id = ?",
                                   arguments: [terminal, now, device.id])
                }
            }
            let current = try Int64.fetchOne(db, sql: "SELECT user_id FROM billpocket_terminal WHERE terminal_id = ?",
                                             arguments: [terminalID])
            if current != user.id {
                try db.execute(sql: """
                    INSERT INTO billpocket_terminal (terminal_id, user_id, configured_at) VALUES (?, ?, ?)
                    ON CONFLICT (terminal_id) DO UPDATE SET user_id = excluded.user_id, configured_at = excluded.configured_at
                    """, arguments: [terminalID, user.id, now])
            }
            return .granted(user: user, reconfigured: current != user.id)
        }
    }

    /// The user `terminal` is configured for, if any.
    public func billpocketUser(configuredOn terminal: String) throws -> BillpocketUser? {
        try read("read the Billpocket user of \(terminal)") { db in
            try Row.fetchOne(db, sql: """
                SELECT billpocket_user.* FROM billpocket_terminal
                JOIN billpocket_user ON billpocket_user.id = billpocket_terminal.user_id
                JOIN terminal ON terminal.id = billpocket_terminal.terminal_id
                WHERE terminal.name = ?
                """, arguments: [terminal]).map(Self.billpocketUser)
        }
    }

    /// The Billpocket transaction whose `transactionid` (kept in the row's `extra`) is `id`.
    public func billpocketTransaction(transactionID id: String) throws -> StoredTransaction? {
        try Validate.noNUL(id, field: "transactionId")
        return try read("find Billpocket transaction \(id)") { db in
            try Self.fetch(db, """
                SELECT \(Self.columns) FROM txn JOIN terminal ON terminal.id = txn.terminal_id
                WHERE txn.provider = 'billpocket' AND json_extract(txn.extra, '$.transactionid') = ?
                ORDER BY txn.id DESC LIMIT 1
                """, [id]).first
        }
    }

    // MARK: Rows

    static func retireToken(_ db: Database, user: Int64, reason: String, at now: Int64) throws {
        try db.execute(sql: """
            INSERT OR REPLACE INTO billpocket_retired_token (token_hash, user_id, reason, retired_at)
            SELECT token_hash, id, ?, ? FROM billpocket_user WHERE id = ? AND token_hash IS NOT NULL
            """, arguments: [reason, now, user])
    }

    static func billpocketUser(_ db: Database, id: Int64) throws -> BillpocketUser {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM billpocket_user WHERE id = ?", arguments: [id]) else {
            throw LedgerError.unknownBillpocketUser(id: id)
        }
        return try billpocketUser(row)
    }

    static func billpocketUser(_ row: Row) throws -> BillpocketUser {
        let state: String = row["state"]
        return BillpocketUser(id: row["id"], name: row["name"], state: BillpocketUser.State(rawValue: state) ?? .invalidated,
                              msiMinimums: decodePlans(row["msi"]), createdAt: row["created_at"], updatedAt: row["updated_at"])
    }

    static func deviceToken(_ db: Database, id: Int64) throws -> BillpocketDeviceToken {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM billpocket_device_token WHERE id = ?", arguments: [id]) else {
            throw LedgerError.invalid(field: "deviceToken", rule: "no device token \(id)")
        }
        return deviceToken(row)
    }

    static func deviceToken(_ row: Row) -> BillpocketDeviceToken {
        BillpocketDeviceToken(id: row["id"], userID: row["user_id"], alias: row["alias"], device: row["device"],
                              createdAt: row["created_at"], boundAt: row["bound_at"])
    }

    /// Plans are stored as `3:30000,6:60000`: readable in the sqlite3 shell, and sorted.
    static func encodePlans(_ plans: [Int: Int64]) -> String {
        plans.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }

    static func decodePlans(_ text: String) -> [Int: Int64] {
        var plans: [Int: Int64] = [:]
        for item in text.split(separator: ",") {
            let parts = item.split(separator: ":")
            if parts.count == 2, let months = Int(parts[0]), let minimum = Int64(parts[1]) { plans[months] = minimum }
        }
        return plans
    }

    static func validatePlans(_ plans: [Int: Int64]) throws {
        for (months, minimum) in plans {
            guard [3, 6, 9, 12].contains(months) else {
                throw LedgerError.invalid(field: "msi", rule: "plans are 3, 6, 9 or 12 months, got \(months)")
            }
            guard minimum >= 0 else {
                throw LedgerError.invalid(field: "msi", rule: "the \(months)-month minimum must not be negative, got \(minimum)")
            }
        }
    }
}

extension Schema {
    /// Billpocket users (their token hashed), retired token hashes (so a rotated or invalidated
    /// token gets its own error), device tokens, and which user each terminal works for.
    static let v2 = """
        CREATE TABLE billpocket_user (
            id         INTEGER PRIMARY KEY,
            name       TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
            token_hash TEXT UNIQUE CHECK (token_hash IS NULL OR length(token_hash) = 64),
            state      TEXT NOT NULL CHECK (state IN ('active', 'invalidated')),
            msi        TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            CHECK ((state = 'active') = (token_hash IS NOT NULL))
        );
        CREATE TABLE billpocket_retired_token (
            token_hash TEXT PRIMARY KEY NOT NULL CHECK (length(token_hash) = 64),
            user_id    INTEGER NOT NULL REFERENCES billpocket_user(id),
            reason     TEXT NOT NULL CHECK (reason IN ('rotated', 'invalidated')),
            retired_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE billpocket_device_token (
            id         INTEGER PRIMARY KEY,
            user_id    INTEGER NOT NULL REFERENCES billpocket_user(id),
            token_hash TEXT NOT NULL UNIQUE CHECK (length(token_hash) = 64),
            alias      TEXT,
            device     TEXT,
            created_at INTEGER NOT NULL,
            bound_at   INTEGER,
            CHECK ((device IS NULL) = (bound_at IS NULL))
        );
        CREATE TABLE billpocket_terminal (
            terminal_id   INTEGER PRIMARY KEY REFERENCES terminal(id),
            user_id       INTEGER NOT NULL REFERENCES billpocket_user(id),
            configured_at INTEGER NOT NULL
        );
        CREATE INDEX txn_billpocket_transactionid ON txn(json_extract(extra, '$.transactionid')) WHERE provider = 'billpocket';
        """
}
