import Foundation
import Terminal

/// Applies the emulated host's simulated latency on the bench clock (real, or virtual on a manual clock), and gives up after `timeout` as a
/// terminal does: the transaction goes on as "unable to go online", and an approval that arrives
/// too late is reversed at the host so the issuer's state stays right.
public struct TimedHost: AuthorisationHost {
    let host: EmulatedHost
    let timeout: Duration
    /// The host queue one-shot outcomes come from: the terminal's name.
    let queue: String
    /// The front's scripted declines by amount.
    let amountTable: AmountTable
    /// The amount the table is read with, when not the request's total (Billpocket: tip excluded).
    let tableAmount: Int?
    /// Cards the issuer has no account for are approved (card-not-present sandboxes).
    let approveUnknownCards: Bool
    /// Where the latency and the timeout are waited (virtual on a manual clock).
    let clock: any Clock

    /// Wraps `host`; answers later than `timeout` count as no answer.
    public init(_ host: EmulatedHost, timeout: Duration, queue: String = "", amountTable: AmountTable? = nil, tableAmount: Int? = nil,
                approveUnknownCards: Bool = false, clock: any Clock = SystemClock()) {
        self.clock = clock
        self.approveUnknownCards = approveUnknownCards
        self.host = host
        self.timeout = timeout
        self.queue = queue
        self.amountTable = amountTable ?? host.amountTable
        self.tableAmount = tableAmount
    }

    public func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse {
        let answer = try host.authorise(request, queue: queue, amountTable: amountTable, tableAmount: tableAmount,
                                        approveUnknownCards: approveUnknownCards)
        let delay = Duration.milliseconds(answer.delayMilliseconds)
        if delay > timeout {
            clock.sleep(for: timeout)
            host.reverse(request, approval: answer)
            throw .unavailable(reason: "no answer from the host in \(timeout)")
        }
        if answer.delayMilliseconds > 0 { clock.sleep(for: delay) }
        return answer
    }

    public func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse) { host.reverse(request, approval: approval) }
}

extension AmountTable {
    /// The word a configuration uses for the table (`stripe-cents`).
    public var option: String {
        switch self {
        case .none: "none"
        case .billpocket: "billpocket"
        case .stripeCents: "stripe-cents"
        case .worldline: "worldline"
        }
    }

    /// The command-line spelling: none, billpocket, stripe-cents, worldline.
    public init?(option: String) {
        switch option {
        case "none": self = .none
        case "billpocket": self = .billpocket
        case "stripe-cents": self = .stripeCents
        case "worldline": self = .worldline
        default: return nil
        }
    }
}
