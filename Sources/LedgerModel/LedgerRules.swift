import EMV
import Foundation
import Terminal

/// What the ledger takes: the rules every record passes before it is written, whoever writes
/// it. Pure: the GRDB ledger calls them, and so may anything that wants to know before it asks.
public enum LedgerRules {
    /// The rule a Citcon capture, cancel or refund breaks when its `reference` was used before by
    /// the merchant's operations.
    public static let citconReferenceUsed = "was used before by this merchant: each capture, cancel and refund needs its own"

    public static func validate(_ new: NewTransaction) throws {
        try Validate.terminalName(new.terminal)
        guard new.amount > 0 else {
            throw LedgerError.invalid(field: "amount", rule: "must be more than 0 minor units, got \(new.amount)")
        }
        guard (0...new.amount).contains(new.tipAmount) else {
            throw LedgerError.invalid(field: "tipAmount", rule: "must be 0 to amount (\(new.amount)), got \(new.tipAmount)")
        }
        guard (1...999).contains(new.currency) else {
            throw LedgerError.invalid(field: "currency", rule: "must be a numeric ISO 4217 code, 1–999, got \(new.currency)")
        }
        if let installments = new.installments, !(1...99).contains(installments) {
            throw LedgerError.invalid(field: "installments", rule: "must be 1–99 when given, got \(installments)")
        }
        // Viva's merchant reference holds 2048 characters (docs/viva.md); the ledger takes what the fronts do.
        try Validate.text(new.clientReference, field: "clientReference", maxLength: 2048)
        try Validate.noNUL(new.extra, field: "extra")
        try Validate.jsonObject(new.extra, field: "extra")
        guard new.createdAt >= 0 else {
            throw LedgerError.invalid(field: "createdAt", rule: "must be microseconds since 1970, got \(new.createdAt)")
        }
        if new.action.needsOriginal, new.originalID == nil {
            throw LedgerError.invalid(field: "originalID", rule: "a \(new.action.rawValue) needs the transaction it acts on")
        }
        if !new.action.needsOriginal, new.originalID != nil {
            throw LedgerError.invalid(field: "originalID", rule: "a \(new.action.rawValue) acts on no earlier transaction")
        }
        if let pan = new.pan {
            try Validate.pan(pan)
            try Validate.noPAN(pan, in: new.extra, field: "extra")
            try Validate.noPAN(pan, in: new.clientReference, field: "clientReference")
        }
    }

    public static func validate(_ result: Completion, trace: [TraceEntry], outbox: [OutboxMessage]) throws {
        let finals: Set<TransactionStatus> = [.approved, .declined, .failed, .cancelled]
        guard finals.contains(result.status) else {
            throw LedgerError.invalid(field: "status", rule: "a completion is approved, declined, failed or cancelled, not \(result.status.rawValue)")
        }
        if let code = result.responseCode, !(code.utf8.count == 2 && code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })) {
            throw LedgerError.invalid(field: "responseCode", rule: "must be 2 letters or digits, got \"\(code)\"")
        }
        if let code = result.authorisationCode, code.isEmpty || code.count > 6 {
            throw LedgerError.invalid(field: "authorisationCode", rule: "must be 1–6 characters, got \"\(code)\"")
        }
        if let masked = result.maskedPAN { try Validate.maskedPAN(masked) }
        try Validate.hex(result.aid, field: "aid", bytes: 5...16)
        try Validate.hex(result.arqc, field: "arqc", bytes: 8...8)
        try Validate.hex(result.atc, field: "atc", bytes: 2...2)
        try Validate.hex(result.tvr, field: "tvr", bytes: 5...5)
        // That `oda`, `cardEntry` and each host message's `fields` are JSON of their shape is
        // checked by the ledger in the write itself (`Ledger.checkJSON`, SQLite's JSON reader):
        // reading them again with JSONSerialization cost an ISO 8583 authorisation a quarter of its CPU.
        try Validate.noNUL(result.oda, field: "oda")
        try Validate.noNUL(result.cardEntry, field: "cardEntry")
        guard result.completedAt >= 0 else {
            throw LedgerError.invalid(field: "completedAt", rule: "must be microseconds since 1970, got \(result.completedAt)")
        }
        for (i, entry) in trace.enumerated() {
            try Validate.maskedHex(entry.command, field: "trace[\(i)].command", bytes: 1...65_544)
            try Validate.maskedHex(entry.response, field: "trace[\(i)].response", bytes: 0...65_538)
        }
        for (i, m) in result.hostMessages.enumerated() {
            guard m.mti.count == 4, m.mti.allSatisfy(\.isASCIIDigit) else {
                throw LedgerError.invalid(field: "hostMessages[\(i)].mti", rule: "must be 4 digits, got \"\(m.mti)\"")
            }
            try Validate.noNUL(m.fields, field: "hostMessages[\(i)].fields")
        }
        for (i, message) in outbox.enumerated() {
            guard !message.target.isEmpty else {
                throw LedgerError.invalid(field: "outbox[\(i)].target", rule: "must not be empty")
            }
            try Validate.noNUL(message.target, field: "outbox[\(i)].target")
            try Validate.noNUL(message.payload, field: "outbox[\(i)].payload")
        }
        // A card's brand by its display name (`VISA`), as every writer and reader keeps it: a
        // scheme's code name (`visa`) would be a brand no reader finds.
        if let brand = result.brand, let scheme = CardBrand(rawValue: brand), brand != scheme.displayName {
            throw LedgerError.invalid(field: "brand", rule: "a card's brand is written by its display name (\(scheme.displayName)), not \"\(brand)\"")
        }
        let storedTexts: [(String?, String)] = [
            (result.message, "message"), (result.cardholderName, "cardholderName"), (result.applicationLabel, "applicationLabel"),
            (result.cvm, "cvm"), (result.entryMode?.rawValue, "entryMode"), (result.authorisationCode, "authorisationCode"),
        ]
        for (text, field) in storedTexts { try Validate.noNUL(text, field: field) }
        guard let pan = result.pan else { return }
        try Validate.pan(pan)
        let texts: [(String?, String)] = [
            (result.maskedPAN, "maskedPAN"), (result.message, "message"), (result.cardholderName, "cardholderName"),
            (result.applicationLabel, "applicationLabel"), (result.cvm, "cvm"), (result.entryMode?.rawValue, "entryMode"), (result.oda, "oda"),
            (result.cardEntry, "cardEntry"),
        ]
        for (text, field) in texts { try Validate.noPAN(pan, in: text, field: field) }
        for (i, entry) in trace.enumerated() {
            try Validate.noPAN(pan, in: entry.command, field: "trace[\(i)].command")
            try Validate.noPAN(pan, in: entry.response, field: "trace[\(i)].response")
        }
        for (i, m) in result.hostMessages.enumerated() {
            try Validate.noPAN(pan, in: m.fields, field: "hostMessages[\(i)].fields")
        }
        for (i, message) in outbox.enumerated() {
            try Validate.noPAN(pan, in: message.target, field: "outbox[\(i)].target")
            try Validate.noPAN(pan, in: message.payload, field: "outbox[\(i)].payload")
        }
    }
}
