import LedgerModel
import Foundation
import GRDB

/// The ledger's migrations. A migration, once shipped, never changes: a later change is a new
/// migration, so every existing file reaches the same schema.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-terminals-transactions-traces-outbox") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2-billpocket-users-tokens-devices") { db in
            try db.execute(sql: v2)
        }
        migrator.registerMigration("v3-stan-reservations") { db in
            try db.execute(sql: v3)
        }
        migrator.registerMigration("v4-platform-providers-worldline") { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5-citcon") { db in
            try db.execute(sql: v5)
        }
        migrator.registerMigration("v6-offline-data-authentication") { db in
            try db.execute(sql: v6)
        }
        migrator.registerMigration("v7-card-entry") { db in
            try db.execute(sql: v7)
        }
        migrator.registerMigration("v8-iso8583") { db in
            try rebuildTransactions(db) { create in
                create.replacingOccurrences(of: "'worldline', 'citcon'))", with: "'worldline', 'citcon', 'iso8583'))")
            }
            try db.execute(sql: v8)
        }
        migrator.registerMigration("v9-platform-operations") { db in
            try db.execute(sql: v9)
        }
        migrator.registerMigration("v10-worldline-tokens") { db in
            try db.execute(sql: v10)
        }
        migrator.registerMigration("v11-outbox-attempts") { db in
            try db.execute(sql: v11)
        }
        migrator.registerMigration("v12-worldline-hosted-checkouts") { db in
            try db.execute(sql: v12)
        }
        migrator.registerMigration("v13-worldline-hosted-tokenizations") { db in
            try db.execute(sql: v13)
        }
        migrator.registerMigration("v14-citcon-vault") { db in
            try db.execute(sql: v14)
        }
        return migrator
    }

    /// The card-not-present platforms: transactions of providers `worldline` and `citcon` (SQLite
    /// cannot change a CHECK, so the table is rebuilt as its documentation says: new table, copy,
    /// drop, rename, indexes), and the Worldline platform's own records — merchants and their
    /// API keys and webhook keys (secrets sealed, see `Ledger.seal`), the Client API's RSA keys,
    /// client sessions (stored by hash: a session id is a credential), the nonces encrypted
    /// customer input has used, payments (their platform state as JSON, beside the ledger rows
    /// of each authorisation, capture and refund) and idempotence keys.
    static let v4 = """
        CREATE TABLE txn_v4 (
            id                 INTEGER PRIMARY KEY,
            uuid               TEXT NOT NULL,
            terminal_id        INTEGER NOT NULL REFERENCES terminal(id),
            provider           TEXT NOT NULL CHECK (provider IN ('viva', 'billpocket', 'cli', 'worldline', 'citcon')),
            action             TEXT NOT NULL CHECK (action IN ('sale', 'pre_auth', 'capture', 'cancel', 'refund', 'reversal')),
            status             TEXT NOT NULL CHECK (status IN ('in_progress', 'approved', 'declined', 'failed', 'cancelled', 'refunded', 'reversed')),
            amount             INTEGER NOT NULL CHECK (amount > 0),
            tip_amount         INTEGER NOT NULL DEFAULT 0 CHECK (tip_amount BETWEEN 0 AND amount),
            currency           INTEGER NOT NULL CHECK (currency BETWEEN 1 AND 999),
            client_reference   TEXT,
            stan               INTEGER NOT NULL CHECK (stan BETWEEN 1 AND 999999),
            rrn                TEXT NOT NULL CHECK (length(rrn) = 12),
            authorisation_code TEXT,
            response_code      TEXT,
            message            TEXT,
            masked_pan         TEXT,
            pan_hash           TEXT,
            brand              TEXT,
            aid                TEXT,
            application_label  TEXT,
            cardholder_name    TEXT,
            arqc               TEXT,
            atc                TEXT,
            tvr                TEXT,
            cvm                TEXT,
            entry_mode         TEXT,
            installments       INTEGER,
            original_id        INTEGER REFERENCES txn(id),
            extra              TEXT CHECK (extra IS NULL OR json_valid(extra)),
            created_at         INTEGER NOT NULL,
            completed_at       INTEGER,
            CHECK ((status = 'in_progress') = (completed_at IS NULL))
        );
        INSERT INTO txn_v4 SELECT * FROM txn;
        DROP TABLE txn;
        ALTER TABLE txn_v4 RENAME TO txn;
        CREATE UNIQUE INDEX txn_uuid ON txn(uuid);
        -- STANs wrap after 999999, so (terminal, stan) is not unique: the rowid the index ends
        -- with gives "most recent first" without a sort.
        CREATE INDEX txn_stan ON txn(terminal_id, stan);
        CREATE INDEX txn_client_reference ON txn(provider, client_reference) WHERE client_reference IS NOT NULL;
        -- "This card's last 3 approved sales on this terminal": status sits before the rowid so
        -- the declines a test card collects on a bench are skipped by the index, not row by row.
        CREATE INDEX txn_card ON txn(terminal_id, pan_hash, status) WHERE pan_hash IS NOT NULL;
        CREATE INDEX txn_terminal ON txn(terminal_id);
        CREATE INDEX txn_original ON txn(original_id) WHERE original_id IS NOT NULL;
        -- Keyed on completed_at, not status: a partial index whose condition is on status makes
        -- SQLite re-prepare every query with "status = ?" at each new binding, to see whether the
        -- index applies (and GRDB re-analyses the statement each time).
        CREATE INDEX txn_in_progress ON txn(terminal_id) WHERE completed_at IS NULL;
        CREATE INDEX txn_billpocket_transactionid ON txn(json_extract(extra, '$.transactionid')) WHERE provider = 'billpocket';

        CREATE TABLE worldline_merchant (
            merchant_id    TEXT PRIMARY KEY NOT NULL,
            terminal_name  TEXT NOT NULL,
            webhook_url    TEXT,
            webhook_key_id TEXT,
            webhook_secret TEXT,
            created_at     INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE worldline_api_key (
            key_id      TEXT PRIMARY KEY NOT NULL,
            merchant_id TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            secret      TEXT NOT NULL,
            created_at  INTEGER NOT NULL,
            revoked_at  INTEGER
        ) WITHOUT ROWID;

        CREATE TABLE worldline_crypto_key (
            key_id      TEXT PRIMARY KEY NOT NULL,
            private_key TEXT NOT NULL,
            public_key  TEXT NOT NULL,
            created_at  INTEGER NOT NULL,
            retired_at  INTEGER
        ) WITHOUT ROWID;

        CREATE TABLE worldline_session (
            session_hash TEXT PRIMARY KEY NOT NULL,
            merchant_id  TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            customer_id  TEXT NOT NULL,
            created_at   INTEGER NOT NULL,
            expires_at   INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE worldline_nonce (
            session_hash TEXT NOT NULL,
            nonce        TEXT NOT NULL,
            used_at      INTEGER NOT NULL,
            PRIMARY KEY (session_hash, nonce)
        ) WITHOUT ROWID;

        CREATE TABLE worldline_payment (
            seq            INTEGER PRIMARY KEY,
            id             TEXT NOT NULL,
            merchant_id    TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            transaction_id INTEGER REFERENCES txn(id),
            state          TEXT NOT NULL CHECK (json_valid(state)),
            updated_at     INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX worldline_payment_id ON worldline_payment(id);

        CREATE TABLE worldline_idempotence (
            merchant_id  TEXT NOT NULL,
            key          TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            requested_at INTEGER NOT NULL,
            status       INTEGER,
            body         TEXT,
            PRIMARY KEY (merchant_id, key)
        ) WITHOUT ROWID;
        """

    /// The Citcon UPI platform: merchants (their key stored hashed, to authenticate, and sealed,
    /// since an IPN's `sign` is made with it), access tokens (hashed), and charges (their platform
    /// state as JSON beside the ledger rows of their authorisations, captures, cancels and refunds;
    /// a reference is unique per merchant, as the platform refuses a duplicate).
    static let v5 = """
        CREATE TABLE citcon_merchant (
            merchant_id   TEXT PRIMARY KEY NOT NULL,
            terminal_name TEXT NOT NULL,
            key_hash      TEXT NOT NULL,
            key_sealed    TEXT NOT NULL,
            created_at    INTEGER NOT NULL,
            rotated_at    INTEGER
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX citcon_merchant_key ON citcon_merchant(key_hash);

        CREATE TABLE citcon_token (
            token_hash  TEXT PRIMARY KEY NOT NULL,
            merchant_id TEXT NOT NULL REFERENCES citcon_merchant(merchant_id),
            token_type  TEXT NOT NULL CHECK (token_type IN ('client', 'server')),
            created_at  INTEGER NOT NULL,
            expires_at  INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE citcon_charge (
            seq            INTEGER PRIMARY KEY,
            id             TEXT NOT NULL UNIQUE,
            charge_token   TEXT NOT NULL UNIQUE,
            merchant_id    TEXT NOT NULL REFERENCES citcon_merchant(merchant_id),
            reference      TEXT NOT NULL,
            transaction_id INTEGER REFERENCES txn(id),
            state          TEXT NOT NULL CHECK (json_valid(state)),
            updated_at     INTEGER NOT NULL,
            UNIQUE (merchant_id, reference)
        );
        """

    /// What offline data authentication did in a card transaction (the kernel's ODA report as a
    /// JSON object: method, result, recovered certificate fields, the failed check).
    static let v6 = """
        ALTER TABLE txn ADD COLUMN oda TEXT CHECK (oda IS NULL OR json_valid(oda));
        """

    /// How the card was read (the kernel's entry report as a JSON object: interface, POS entry
    /// mode, contactless kernel and outcome, the path of presentations, the limits of a tap).
    static let v7 = """
        ALTER TABLE txn ADD COLUMN card_entry TEXT CHECK (card_entry IS NULL OR json_valid(card_entry));
        """

    /// The ISO 8583 messages of a transaction (the trace of its host link), described and masked.
    static let v8 = """
        CREATE TABLE host_message (
            transaction_id INTEGER NOT NULL REFERENCES txn(id),
            seq            INTEGER NOT NULL CHECK (seq >= 1),
            direction      TEXT NOT NULL CHECK (direction IN ('out', 'in')),
            mti            TEXT NOT NULL CHECK (length(mti) = 4),
            fields         TEXT NOT NULL CHECK (json_valid(fields)),
            PRIMARY KEY (transaction_id, seq)
        ) WITHOUT ROWID;
        """

    /// A Citcon merchant's capture, cancel and refund references, each used once (a reference
    /// used before is 4100 and nothing is done): filled from the charges already recorded. A
    /// Worldline payment's next settlement (a requested capture or refund), to find the due ones.
    static let v9 = """
        ALTER TABLE worldline_payment ADD COLUMN due_at INTEGER;
        CREATE INDEX worldline_payment_due ON worldline_payment(due_at) WHERE due_at IS NOT NULL;
        -- Payments recorded before: a capture or cancel then closed the payment (the rest was
        -- released at the issuer), which the new fields must say, or the rest would reopen.
        UPDATE worldline_payment SET state = json_set(state, '$.captureClosed', json('true'))
            WHERE json_extract(state, '$.status') IN ('CAPTURED', 'REFUNDED', 'CANCELLED', 'REJECTED');
        UPDATE worldline_payment
            SET state = json_set(state, '$.cancelledAmount', json_extract(state, '$.amount') - json_extract(state, '$.capturedAmount'))
            WHERE json_extract(state, '$.status') = 'CANCELLED' AND json_extract(state, '$.transactionID') IS NOT NULL;
        CREATE TABLE citcon_operation_reference (
            merchant_id  TEXT NOT NULL REFERENCES citcon_merchant(merchant_id),
            reference    TEXT NOT NULL,
            operation_id TEXT NOT NULL,
            PRIMARY KEY (merchant_id, reference)
        ) WITHOUT ROWID;
        INSERT OR IGNORE INTO citcon_operation_reference (merchant_id, reference, operation_id)
            SELECT c.merchant_id, json_extract(o.value, '$.reference'), json_extract(o.value, '$.id')
            FROM citcon_charge c, json_each(c.state, '$.operations') o
            WHERE coalesce(json_extract(o.value, '$.reference'), '') != '';
        """

    /// Worldline card-on-file tokens: found by the hash of the token (a token pays, so it is a
    /// credential), the merchant's one live token per card by the card's keyed hash; the card's
    /// number, expiry and name sealed with the token itself (`Ledger.seal`), so a payment made
    /// with a token can be authorised and the database alone gives neither away. A client
    /// session's tokens are kept sealed too, in the order the session was given them.
    static let v10 = """
        CREATE TABLE worldline_token (
            token_hash   TEXT PRIMARY KEY NOT NULL,
            merchant_id  TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            pan_hash     TEXT NOT NULL,
            sealed       TEXT NOT NULL,
            masked_pan   TEXT NOT NULL,
            bin          TEXT NOT NULL,
            product_id   INTEGER NOT NULL,
            expiry_date  TEXT NOT NULL CHECK (length(expiry_date) = 4),
            initial_scheme_transaction_id TEXT,
            created_at   INTEGER NOT NULL,
            updated_at   INTEGER NOT NULL,
            deleted_at   INTEGER
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX worldline_token_card ON worldline_token(merchant_id, pan_hash) WHERE deleted_at IS NULL;
        CREATE TABLE worldline_session_token (
            session_hash TEXT NOT NULL,
            position     INTEGER NOT NULL,
            sealed       TEXT NOT NULL,
            PRIMARY KEY (session_hash, position)
        ) WITHOUT ROWID;
        """

    /// Every attempt to deliver an outbox message, in order: when, what came of it (the endpoint's
    /// answer or why it failed), and whether someone asked for it (a resend) rather than the
    /// delivery loop. A message's `attempts` still counts the loop's tries only (its retry limit).
    static let v11 = """
        CREATE TABLE outbox_attempt (
            outbox_id INTEGER NOT NULL REFERENCES outbox(id),
            seq       INTEGER NOT NULL CHECK (seq >= 1),
            at        INTEGER NOT NULL,
            outcome   TEXT NOT NULL CHECK (outcome IN ('delivered', 'failed')),
            answer    TEXT NOT NULL,
            resend    INTEGER NOT NULL DEFAULT 0 CHECK (resend IN (0, 1)),
            PRIMARY KEY (outbox_id, seq)
        ) WITHOUT ROWID;
        """

    /// Worldline hosted checkouts: their state as JSON (the merchant's tokens in it sealed), the
    /// page reached by a token stored as its hash.
    static let v12 = """
        CREATE TABLE worldline_hosted_checkout (
            seq         INTEGER PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,
            merchant_id TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            state       TEXT NOT NULL CHECK (json_valid(state)),
            updated_at  INTEGER NOT NULL
        );
        """

    /// Worldline hosted tokenization sessions: their state as JSON, the token they made sealed.
    static let v13 = """
        CREATE TABLE worldline_hosted_tokenization (
            seq         INTEGER PRIMARY KEY,
            id          TEXT NOT NULL UNIQUE,
            merchant_id TEXT NOT NULL REFERENCES worldline_merchant(merchant_id),
            state       TEXT NOT NULL CHECK (json_valid(state)),
            updated_at  INTEGER NOT NULL
        );
        """

    /// Citcon's vault: a consumer's cards by the hash of their token, the card sealed, one per
    /// consumer and card (the card core's keyed hash).
    static let v14 = """
        CREATE TABLE citcon_vault (
            token_hash  TEXT PRIMARY KEY NOT NULL,
            merchant_id TEXT NOT NULL,
            consumer    TEXT NOT NULL,
            pan_hash    TEXT NOT NULL,
            sealed      TEXT NOT NULL,
            masked_pan  TEXT NOT NULL,
            created_at  INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX citcon_vault_card ON citcon_vault(merchant_id, consumer, pan_hash);
        """

    /// Rebuilds `txn` with its CREATE statement changed by `change` (SQLite cannot alter a CHECK):
    /// the statement as the database holds it now (with every column later migrations added), a
    /// new table, a copy, drop, rename, and the indexes as they were, as SQLite's documentation
    /// says to.
    static func rebuildTransactions(_ db: Database, _ change: (String) -> String) throws {
        guard let create = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'txn'"),
              let open = create.firstIndex(of: "(") else {
            throw LedgerError.invalid(field: "txn", rule: "the ledger has no transactions table to migrate")
        }
        let changed = change(create)
        guard changed != create else { throw LedgerError.invalid(field: "txn", rule: "the migration found nothing to change") }
        let indexes = try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'txn' AND sql IS NOT NULL")
        try db.execute(sql: "CREATE TABLE txn_new " + changed[changed.index(changed.startIndex, offsetBy: create.distance(from: create.startIndex, to: open))...])
        try db.execute(sql: "INSERT INTO txn_new SELECT * FROM txn; DROP TABLE txn; ALTER TABLE txn_new RENAME TO txn;")
        for index in indexes { try db.execute(sql: index) }
    }

    /// A terminal's STANs are reserved durably in blocks (see `Ledger.begin`): `stan_reserved`
    /// is the last STAN of the block, equal to `last_stan` when nothing is reserved ahead.
    static let v3 = """
        ALTER TABLE terminal ADD COLUMN stan_reserved INTEGER NOT NULL DEFAULT 0 CHECK (stan_reserved BETWEEN 0 AND 999999);
        UPDATE terminal SET stan_reserved = last_stan;
        """

    /// Enumerated values are checked by the database too, so a row written by a buggy or older
    /// build cannot hold a status the code cannot read back.
    static let v1 = """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE terminal (
            id           INTEGER PRIMARY KEY,
            name         TEXT NOT NULL,
            tid          TEXT NOT NULL CHECK (length(tid) = 8 AND tid NOT GLOB '*[^0-9]*'),
            last_stan    INTEGER NOT NULL DEFAULT 0 CHECK (last_stan BETWEEN 0 AND 999999),
            batch_number INTEGER NOT NULL DEFAULT 1 CHECK (batch_number >= 1),
            batch_open   INTEGER NOT NULL DEFAULT 1 CHECK (batch_open IN (0, 1)),
            batch_count  INTEGER NOT NULL DEFAULT 0,
            batch_amount INTEGER NOT NULL DEFAULT 0,
            created_at   INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX terminal_name ON terminal(name);

        CREATE TABLE txn (
            id                 INTEGER PRIMARY KEY,
            uuid               TEXT NOT NULL,
            terminal_id        INTEGER NOT NULL REFERENCES terminal(id),
            provider           TEXT NOT NULL CHECK (provider IN ('viva', 'billpocket', 'cli')),
            action             TEXT NOT NULL CHECK (action IN ('sale', 'pre_auth', 'capture', 'cancel', 'refund', 'reversal')),
            status             TEXT NOT NULL CHECK (status IN ('in_progress', 'approved', 'declined', 'failed', 'cancelled', 'refunded', 'reversed')),
            amount             INTEGER NOT NULL CHECK (amount > 0),
            tip_amount         INTEGER NOT NULL DEFAULT 0 CHECK (tip_amount BETWEEN 0 AND amount),
            currency           INTEGER NOT NULL CHECK (currency BETWEEN 1 AND 999),
            client_reference   TEXT,
            stan               INTEGER NOT NULL CHECK (stan BETWEEN 1 AND 999999),
            rrn                TEXT NOT NULL CHECK (length(rrn) = 12),
            authorisation_code TEXT,
            response_code      TEXT,
            message            TEXT,
            masked_pan         TEXT,
            pan_hash           TEXT,
            brand              TEXT,
            aid                TEXT,
            application_label  TEXT,
            cardholder_name    TEXT,
            arqc               TEXT,
            atc                TEXT,
            tvr                TEXT,
            cvm                TEXT,
            entry_mode         TEXT,
            installments       INTEGER,
            original_id        INTEGER REFERENCES txn(id),
            extra              TEXT CHECK (extra IS NULL OR json_valid(extra)),
            created_at         INTEGER NOT NULL,
            completed_at       INTEGER,
            CHECK ((status = 'in_progress') = (completed_at IS NULL))
        );
        CREATE UNIQUE INDEX txn_uuid ON txn(uuid);
        -- STANs wrap after 999999, so (terminal, stan) is not unique: the rowid the index ends
        -- with gives "most recent first" without a sort.
        CREATE INDEX txn_stan ON txn(terminal_id, stan);
        CREATE INDEX txn_client_reference ON txn(provider, client_reference) WHERE client_reference IS NOT NULL;
        -- "This card's last 3 approved sales on this terminal": status sits before the rowid so
        -- the declines a test card collects on a bench are skipped by the index, not row by row.
        CREATE INDEX txn_card ON txn(terminal_id, pan_hash, status) WHERE pan_hash IS NOT NULL;
        CREATE INDEX txn_terminal ON txn(terminal_id);
        CREATE INDEX txn_original ON txn(original_id) WHERE original_id IS NOT NULL;
        -- Keyed on completed_at, not status: a partial index whose condition is on status makes
        -- SQLite re-prepare every query with "status = ?" at each new binding, to see whether the
        -- index applies (and GRDB re-analyses the statement each time).
        CREATE INDEX txn_in_progress ON txn(terminal_id) WHERE completed_at IS NULL;

        CREATE TABLE trace (
            transaction_id INTEGER NOT NULL REFERENCES txn(id),
            seq            INTEGER NOT NULL CHECK (seq >= 1),
            command        TEXT NOT NULL,
            response       TEXT NOT NULL,
            PRIMARY KEY (transaction_id, seq)
        ) WITHOUT ROWID;

        CREATE TABLE outbox (
            id              INTEGER PRIMARY KEY,
            transaction_id  INTEGER NOT NULL REFERENCES txn(id),
            kind            TEXT NOT NULL CHECK (kind IN ('callback', 'webhook')),
            target          TEXT NOT NULL CHECK (length(target) > 0),
            payload         TEXT NOT NULL,
            status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
            attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
            next_attempt_at INTEGER NOT NULL,
            last_error      TEXT,
            created_at      INTEGER NOT NULL,
            delivered_at    INTEGER
        );
        CREATE INDEX outbox_pending ON outbox(status, next_attempt_at);
        CREATE INDEX outbox_transaction ON outbox(transaction_id);
        """
}
