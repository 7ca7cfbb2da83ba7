import Foundation
import Terminal

// The stores the workflows run against. `Ledger` (GRDB) conforms in its own module; tests may
// conform anything else. Nothing here does I/O.

/// The durable record a workflow reads and writes; `Ledger` is one.
public protocol TransactionStore: Sendable {
    func begin(_ new: NewTransaction) throws -> Started
    func complete(id: Int64, _ result: Completion, trace: [TraceEntry], outbox: [OutboxMessage]) throws -> StoredTransaction
    func transaction(id: Int64) throws -> StoredTransaction?
    func transaction(uuid: String) throws -> StoredTransaction?
    func transaction(terminal: String, stan: STAN) throws -> StoredTransaction?
    func transactions(provider: Provider, clientReference: String, limit: Int) throws -> [StoredTransaction]
    func transactions(originalID id: Int64) throws -> [StoredTransaction]
    func lastTransactions(terminal: String, pan: String, limit: Int, status: TransactionStatus, actions: Set<TransactionAction>,
                          provider: Provider?) throws -> [StoredTransaction]
    func outbox(transactionID: Int64) throws -> [OutboxEntry]
    func terminal(name: String) throws -> TerminalRecord?
    func openBatch(terminal name: String) throws -> TerminalRecord
    func closeBatch(terminal name: String) throws -> BatchTotals
    func configureBillpocket(terminal: String, userToken: String, deviceToken: String?, at now: Int64) throws -> BillpocketAccess
    func billpocketTransaction(transactionID id: String) throws -> StoredTransaction?
    func billpocketUsers() throws -> [BillpocketUser]
    func createBillpocketUser(name: String, token: String, msiMinimums: [Int: Int64], at now: Int64) throws -> BillpocketUser
    func rotateBillpocketUser(id: Int64, newToken: String, at now: Int64) throws -> BillpocketUser
    func invalidateBillpocketUser(id: Int64, at now: Int64) throws -> BillpocketUser
    func issueBillpocketDeviceToken(userID: Int64, alias: String?, token: String, at now: Int64) throws -> BillpocketDeviceToken
    func billpocketDeviceTokens(userID: Int64?) throws -> [BillpocketDeviceToken]
}

/// What the Worldline platform keeps beyond the transactions: merchants and keys, client
/// sessions, nonces, payments and idempotence keys. `Ledger` is one.
public protocol WorldlineStore: TransactionStore {
    func ensureWorldlineMerchant(_ merchantID: String, at now: Int64) throws -> WorldlineMerchant
    func worldlineMerchant(_ merchantID: String) throws -> WorldlineMerchant?
    func createWorldlineSession(sessionID: String, merchantID: String, customerID: String, at now: Int64, expiresAt: Int64) throws
    func worldlineSession(sessionID: String) throws -> WorldlineSession?
    func useWorldlineNonce(sessionID: String, nonce: String, at now: Int64) throws -> Bool
    func insertWorldlinePayment(_ payment: WorldlinePayment) throws -> WorldlinePayment
    func completeWorldlineAuthorisation(transactionID: Int64, _ result: Completion, payment: WorldlinePayment,
                                        outbox: (WorldlinePayment) -> [OutboxMessage]) throws -> (WorldlinePayment, StoredTransaction)
    func completeWorldlineOperation(transactionID: Int64?, _ result: Completion?, payment: WorldlinePayment, outbox: [OutboxMessage]) throws
    /// Records a payment whose requested operations settled, with the webhooks that say so, each
    /// under the ledger row of its operation, in one commit.
    func settleWorldlinePayment(_ payment: WorldlinePayment, outbox: [(transactionID: Int64, message: OutboxMessage)], at now: Int64) throws
    func worldlinePayment(id: String, merchantID: String) throws -> WorldlinePayment?
    func worldlinePayment(id: String) throws -> WorldlinePayment?
    /// Payments with a requested capture or refund due at `now` or before, the earliest first.
    func worldlinePaymentsDue(at now: Int64, limit: Int) throws -> [(merchantID: String, id: String)]
    /// Stores `card` as merchant `merchantID`'s token: its one live token for that card number
    /// when it has one (updated when the expiry date or name changed), else a new one.
    func storeWorldlineToken(merchantID: String, card: WorldlineVaultedCard, paymentProductID: Int, at now: Int64) throws
        -> (WorldlineToken, WorldlineTokenStatus)
    /// Merchant `merchantID`'s token `token` (deleted ones too) and its card; nil when the
    /// merchant has no such token.
    func worldlineToken(_ token: String, merchantID: String) throws -> (token: WorldlineToken, card: WorldlineVaultedCard)?
    /// Deletes a token: it pays no more. False when the merchant has no such live token.
    func deleteWorldlineToken(_ token: String, merchantID: String, at now: Int64) throws -> Bool
    /// Records the scheme id of a token's first card-on-file or recurring payment (kept once set).
    func setWorldlineTokenInitialScheme(_ token: String, merchantID: String, schemeTransactionID: String) throws
    /// The tokens a client session was created with (in the order given), to show as accounts on file.
    func worldlineSessionTokens(sessionID: String) throws -> [String]
    /// Records the tokens a client session may show.
    func setWorldlineSessionTokens(sessionID: String, tokens: [String]) throws
    /// Stores a new hosted checkout, giving it its id.
    func insertWorldlineHostedCheckout(_ checkout: WorldlineHostedCheckout) throws -> WorldlineHostedCheckout
    /// Records a hosted checkout's new state.
    func updateWorldlineHostedCheckout(_ checkout: WorldlineHostedCheckout) throws
    /// Hosted checkout `id` (of `merchantID` when given).
    func worldlineHostedCheckout(id: String, merchantID: String?) throws -> WorldlineHostedCheckout?
    /// Stores a new hosted tokenization session, giving it its id.
    func insertWorldlineHostedTokenization(_ session: WorldlineHostedTokenization) throws -> WorldlineHostedTokenization
    func updateWorldlineHostedTokenization(_ session: WorldlineHostedTokenization) throws
    /// Hosted tokenization `id` (of `merchantID` when given).
    func worldlineHostedTokenization(id: String, merchantID: String?) throws -> WorldlineHostedTokenization?
}

/// What the Citcon platform keeps beyond the transactions. `Ledger` is one.
public protocol CitconStore: TransactionStore {
    func citconMerchant(key: String) throws -> CitconMerchant?
    func citconMerchants() throws -> [CitconMerchant]
    func citconMerchantKey(_ merchantID: String) throws -> String?
    func storeCitconToken(_ token: String, merchantID: String, type: String, at now: Int64, expiresAt: Int64) throws
    func citconToken(_ token: String) throws -> (merchantID: String, type: String, expiresAt: Int64)?
    func insertCitconCharge(_ charge: CitconCharge) throws -> CitconCharge?
    func completeCitconCharge(transactionID: Int64?, _ result: Completion?, charge: CitconCharge, outbox: [OutboxMessage]) throws
    func citconCharge(id: String?, chargeToken: String?) throws -> CitconCharge?
    /// Whether the merchant has a capture, cancel or refund under `reference` (each is the
    /// merchant's once; the store refuses a second when it records it).
    func citconOperationReferenceUsed(merchantID: String, reference: String) throws -> Bool
    /// Records a charge's new state with notifications under rows it has already (a chargeback's
    /// IPNs, under the charge's own row), in one commit.
    func recordCitconChargeEvent(_ charge: CitconCharge, outbox: [(transactionID: Int64, message: OutboxMessage)]) throws
    /// Vaults a card for a merchant's consumer; the same card of the same consumer keeps its token.
    func storeCitconVaultCard(merchantID: String, consumer: String, pan: String, expiry: String, at now: Int64) throws -> (token: String, isNew: Bool)
    /// A vaulted card by its token: the card (for one authorisation) and its consumer.
    func citconVaultCard(token: String, merchantID: String) throws -> (pan: String, expiry: String, consumer: String)?
}
