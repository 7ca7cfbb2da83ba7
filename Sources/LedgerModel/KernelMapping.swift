import EMV
import Foundation
import Terminal

extension Completion {
    /// What the ledger records of a kernel outcome: the card's and the host's fields, hex where EMV
    /// is binary; the full PAN is handed over only to be hashed.
    public init(_ outcome: TransactionOutcome, completedAt: Int64) {
        self.init(status: outcome.decision == .approved ? .approved : .declined, responseCode: outcome.responseCode.code,
                  message: outcome.hostMessage, authorisationCode: outcome.authorisationCode, maskedPAN: outcome.maskedPAN,
                  pan: outcome.pan, brand: outcome.brand?.displayName, aid: outcome.aid.isEmpty ? nil : Hex.encode(outcome.aid),
                  applicationLabel: outcome.aid.isEmpty ? nil : outcome.applicationLabel, cardholderName: outcome.cardholderName,
                  arqc: outcome.arqc.map(Hex.encode), atc: outcome.atc.map(Hex.encode), tvr: Hex.encode(outcome.tvr.bytes),
                  cvm: outcome.cvm.map { "\($0)" }, entryMode: outcome.entryMode, completedAt: completedAt,
                  reversal: outcome.reversal != nil, oda: outcome.entry.interface == .magstripe ? nil : Self.json(outcome.oda))
        var entry = outcome.entry
        entry.tsi = Hex.encode(outcome.tsi.bytes)
        entry.cvmResults = Hex.encode(outcome.cvmResults.bytes)
        cardEntry = Self.json(entry)
    }

    /// A report as the ledger's JSON columns hold it (keys sorted, so rows compare).
    static func json<T: Encodable>(_ report: T) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(report)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A transaction that ended without an outcome; `reversal` when the host's approval was taken back.
    public init(_ failure: TransactionFailure, completedAt: Int64) {
        self.init(status: .failed, message: failure.description, maskedPAN: failure.maskedPAN, pan: failure.pan,
                  brand: failure.pan.flatMap { CardBrand.detect(pan: $0)?.displayName }, aid: failure.aid.map(Hex.encode),
                  tvr: failure.tvr.map { Hex.encode($0.bytes) }, entryMode: Self.entryMode(failure.entry), completedAt: completedAt,
                  reversal: failure.reversal != nil,
                  oda: failure.oda.flatMap(Self.json))
        cardEntry = failure.entry.flatMap(Self.json)
    }

    /// The ledger's `entryMode` word for how a card was read: chip, contactless, magstripe, fallback.
    static func entryMode(_ entry: EntryReport?) -> EntryMode {
        switch entry?.interface {
        case .contactless?: .contactless
        case .magstripe?: entry?.posEntryMode == "80" ? .fallback : .magstripe
        default: .chip
        }
    }
}
