import LedgerModel
import Terminal

/// An external host a terminal authorises against (ISO 8583) instead of the emulated issuer. The
/// daemon makes one per terminal configured with `host: iso8583://…`.
public protocol UpstreamLink: Sendable {
    /// A host for one transaction on `terminal`: the kernel asks it for authorisations and
    /// reversals, and it keeps the messages it exchanged for the ledger.
    func session(terminal: any TerminalSession, stan: STAN, rrn: String, date: UTCDateParts) -> any UpstreamSession

    /// Tells the host about a transaction acting on `original` without a card, recorded as STAN
    /// `stan`: a capture (0220 completion for `amount`), a cancel or refund (0400 reversal of the
    /// approval). Returns the messages exchanged; none when the link no longer holds the original
    /// (approved before the daemon started: the card data it needs is kept in memory only).
    func actOn(_ action: TransactionAction, original: StoredTransaction, amount: Int64, terminal: any TerminalSession, stan: STAN,
               date: UTCDateParts) -> [HostMessageEntry]
}

/// One transaction's conversation with an external host.
public protocol UpstreamSession: AuthorisationHost, AnyObject, Sendable {
    /// The messages exchanged so far, described and masked, in order.
    var messages: [HostMessageEntry] { get }
    /// Takes back the host's approval of this transaction (a 0420): the ledger could not record
    /// it, and nothing may stay authorised that is not recorded. Whether the host acknowledged it;
    /// false when there was no approval to take back.
    func takeBackApproval() -> Bool
}
