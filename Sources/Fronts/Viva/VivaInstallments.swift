/// What the terminal does about instalments once the card is known.
public enum VivaInstallmentsDecision: Sendable, Equatable {
    /// The sale was not offered in instalments (`withInstallments=false`): pay at once.
    case none
    /// Pay in this many instalments, without asking (always within 2 ... the card's maximum).
    case use(Int)
    /// Ask the cardholder on the keypad for a number in `range` (2 ... the card's maximum).
    case prompt(range: ClosedRange<Int>)
    /// The card offers no instalments: ask the cardholder whether to continue with a single
    /// payment or abort (an abort ends the sale as `VivaFailure.userCancel`).
    case askContinueWithout
}

/// The document's instalment rules, as a pure decision.
public enum VivaInstallments {
    /// Decides from the request and the card.
    ///
    /// - `withInstallments` false: `.none`, whatever else was sent.
    /// - The card does not support instalments, or allows fewer than 2: `.askContinueWithout`.
    /// - `preferred` within 2 ... `cardMaximum`: `.use(preferred)`, no prompt.
    /// - `preferred` nil, 0, 1 or above `cardMaximum`: `.prompt(2 ... cardMaximum)`. The document
    ///   names 0 and "above the maximum"; 1 is no instalment plan at all (the vendor's sample never
    ///   sends it with `withInstallments=true`), so it is outside the allowed range and prompts too.
    public static func decide(withInstallments: Bool, preferred: Int?, cardSupports: Bool,
                              cardMaximum: Int) -> VivaInstallmentsDecision {
        guard withInstallments else { return .none }
        guard cardSupports, cardMaximum >= 2 else { return .askContinueWithout }
        if let preferred, (2...cardMaximum).contains(preferred) { return .use(preferred) }
        return .prompt(range: 2...cardMaximum)
    }
}
