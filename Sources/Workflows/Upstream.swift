import Ledger
import Terminal

/// An external host a terminal authorises against (ISO 8583) instead of the emulated issuer. The
/// daemon makes one per terminal configured with `host: iso8583://…`.
public protocol UpstreamLink: Sendable {
    /// A host for one transaction on `terminal`: the kernel asks it for authorisations and
    /// reversals, and it keeps the messages it exchanged for the ledger.
    func session(terminal: any TerminalSession, stan: STAN, rrn: String, date: UTCDateParts) -> any UpstreamSession
}

/// One transaction's conversation with an external host.
public protocol UpstreamSession: AuthorisationHost, AnyObject {
    /// The messages exchanged so far, described and masked, in order.
    var messages: [HostMessageEntry] { get }
}
