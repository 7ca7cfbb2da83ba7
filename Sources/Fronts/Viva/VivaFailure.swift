import Terminal

/// Why a Viva request ended with `status=failed`, and the `message` the callback carries.
///
/// Messages come in two forms. Where the real app's wording is known it is used verbatim: the
/// document's "Transaction declined by host." and the field's `(-N) NAME` codes (`(-4) USER_CANCEL`,
/// `(-57) Aborted`). Everywhere else cardbench writes a short sentence ending in a period, in the
/// document's style, and invents no `(-N)` numbers a POS might mistake for the app's. The table is
/// in docs/viva.md.
public enum VivaFailure: Sendable, Equatable {
    /// The host declined. With a response code the message adds it and its meaning:
    /// "Transaction declined by host. (51) Insufficient funds"; without, it is the document's
    /// "Transaction declined by host." exactly.
    case declinedByHost(ResponseCode?)
    /// The card declined: an AAC at the first GENERATE AC (Z1), or at the second after the host
    /// approved (the approval is reversed).
    case declinedByCard
    /// The host could not be reached and the terminal declined offline (Z3).
    case hostUnavailable
    /// The card left the reader before the transaction finished.
    case cardRemoved
    /// The reader failed (serial error, lost connection).
    case readerError
    /// The card answered with an error or with data the kernel cannot use.
    case cardError
    /// The card has no application this terminal supports.
    case cardNotSupported
    /// The card's PIN try counter ran out.
    case pinTriesExceeded
    /// The cardholder cancelled on the keypad: at the PIN, at any prompt, or by choosing not to
    /// continue without instalments. The field's `(-4) USER_CANCEL`.
    case userCancel
    /// The cardholder did not answer a prompt in time.
    case promptTimeout
    /// An `abort` request ended the transaction. The field's `(-57) Aborted`.
    case aborted
    /// Another transaction is in progress on this terminal.
    case terminalBusy
    /// The request broke a rule (`VivaRequestError`'s field and rule).
    case badRequest(field: String, rule: String)
    /// No transaction matches the reference (cancel, capture_pre_auth, transactionDetails).
    case transactionNotFound
    /// The transaction to cancel is already cancelled.
    case alreadyCancelled
    /// The transaction to cancel or capture was declined or failed: there is nothing to undo.
    case notApproved
    /// The presented card has no recent transactions to cancel.
    case noTransactionsForCard
    /// The amount to refund or capture is more than the transaction's.
    case amountTooHigh
    /// The pre-authorisation was already captured.
    case alreadyCaptured
    /// `abort` arrived with no transaction in progress.
    case noTransactionInProgress
    /// `batch` `open` while a batch is open.
    case batchAlreadyOpen
    /// `batch` `close` with no open batch (or none with that name or id).
    case noOpenBatch
    /// transactionDetails of a transaction still running (or interrupted and not yet recovered).
    case transactionInProgress
    /// transactionDetails of a transaction that ended without an answer from the host: the card
    /// left, the reader failed, a prompt timed out, it was cancelled or aborted.
    case transactionFailed

    /// The failure for a request error.
    public init(_ error: VivaRequestError) {
        self = .badRequest(field: error.field, rule: error.rule)
    }

    /// The failure for a kernel error: a transaction that ended without an outcome from the card.
    public init(_ error: KernelError) {
        switch error {
        case .cardRemoved: self = .cardRemoved
        case .readerError: self = .readerError
        case .promptTimeout: self = .promptTimeout
        case .cancelled: self = .userCancel
        case .aborted: self = .aborted
        case .noApplication: self = .cardNotSupported
        // A contactless "end application", or a card presented again and again without an end.
        case .cardError, .invalidCardData, .endApplication, .presentAgain: self = .cardError
        }
    }

    /// The failure for a declined outcome, nil for an approved one.
    public init?(_ outcome: TransactionOutcome) {
        guard outcome.decision == .declined else { return nil }
        self = Self.declined(responseCode: outcome.responseCode, reversed: outcome.reversal != nil)
    }

    /// The failure for a decline with `responseCode`: Z1 is the card's own decline, Z3 the
    /// terminal's when the host is unreachable, anything else the host's. `reversed` says the host
    /// approved and the card then declined (the kernel reports 05 or Z3 then), which is the card's doing.
    public static func declined(responseCode: ResponseCode, reversed: Bool) -> VivaFailure {
        switch Decline(responseCode: responseCode, reversed: reversed) {
        case .byCard: .declinedByCard
        case .hostUnavailable: .hostUnavailable
        case .byHost(let code): .declinedByHost(code)
        }
    }

    /// The callback's `message`.
    public var message: String {
        switch self {
        case .declinedByHost(nil): "Transaction declined by host."
        case .declinedByHost(let code?): "Transaction declined by host. (\(code.code)) \(code.meaning)"
        case .declinedByCard: "Transaction declined by card."
        case .hostUnavailable: "Host unavailable. Transaction declined."
        case .cardRemoved: "Card removed."
        case .readerError: "Card reader error."
        case .cardError: "Card error."
        case .cardNotSupported: "Card not supported."
        case .pinTriesExceeded: "PIN tries exceeded."
        case .userCancel: "(-4) USER_CANCEL"
        case .promptTimeout: "Timeout. No answer from the cardholder."
        case .aborted: "(-57) Aborted"
        case .terminalBusy: "Terminal busy. Another transaction is in progress."
        case .badRequest(let field, let rule): "Invalid request. \(field): \(rule)"
        case .transactionNotFound: "Transaction not found."
        case .alreadyCancelled: "Transaction already cancelled."
        case .notApproved: "Transaction was not approved."
        case .noTransactionsForCard: "No transactions found for this card."
        case .amountTooHigh: "Amount exceeds the transaction's amount."
        case .alreadyCaptured: "Pre-authorisation already captured."
        case .noTransactionInProgress: "No transaction in progress."
        case .batchAlreadyOpen: "A batch is already open."
        case .noOpenBatch: "No open batch."
        case .transactionInProgress: "Transaction in progress."
        case .transactionFailed: "Transaction failed."
        }
    }
}
