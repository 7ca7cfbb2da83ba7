import Terminal

/// The apps cardbench stands in for. Each front parses and checks the URL its app receives and
/// renders the callback URL the app would send back; it knows nothing of APDUs or sockets.
public enum Fronts {}

/// Who declined a transaction, which every front reports in its own words.
public enum Decline: Sendable, Equatable {
    /// The card: an AAC (Z1), or a decline at the second GENERATE AC after the host approved
    /// (the approval was reversed).
    case byCard
    /// Nobody: the host could not be reached and the terminal declined offline (Z3).
    case hostUnavailable
    /// The issuer, with its response code.
    case byHost(ResponseCode)

    /// Classifies a decline by its response code; `reversed` says the host approved and the card
    /// then declined (the kernel reports 05 or Z3 then), which is the card's doing.
    public init(responseCode: ResponseCode, reversed: Bool) {
        if reversed {
            self = .byCard
            return
        }
        switch responseCode.code {
        case "Z1": self = .byCard
        case "Z3": self = .hostUnavailable
        default: self = .byHost(responseCode)
        }
    }
}
