import LedgerModel

// The GRDB ledger is the store of every workflow (LedgerModel's protocols).
extension Ledger: TransactionStore {}
extension Ledger: WorldlineStore {}
extension Ledger: CitconStore {}
