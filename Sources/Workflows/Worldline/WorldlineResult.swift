import LedgerModel

/// What a Server API call produced, typed: the daemon answers it with the platform's status and
/// the body `WorldlineRender` makes. No HTTP and no untyped JSON leave the workflows.
public enum WorldlineResult: Sendable {
    case sessionCreated(sessionID: String, customerID: String, clientAPIURL: String, assetURL: String, invalidTokens: [String])
    /// A new payment: authorised, rejected, or waiting for its challenge (`redirectURL`).
    case paymentCreated(WorldlinePayment, redirectURL: String?)
    case payment(WorldlinePayment)
    case details(WorldlinePayment)
    case captures(WorldlinePayment)
    case refunds(WorldlinePayment)
    case captured(WorldlineOperation, WorldlinePayment)
    case cancelled(WorldlinePayment)
    case refunded(WorldlineOperation, WorldlinePayment)
    /// `POST …/tokens`: the merchant's token for the card, and whether it is new.
    case tokenCreated(WorldlineToken, WorldlineTokenStatus)
    case token(WorldlineToken)
    /// `DELETE …/tokens/{id}`: 204, no body.
    case tokenDeleted
    /// `POST …/hostedcheckouts`: the checkout, its page's URL and the tokens it does not know.
    case hostedCheckoutCreated(WorldlineHostedCheckout, redirectURL: String, invalidTokens: [String])
    /// `GET …/hostedcheckouts/{id}`, with its latest payment.
    case hostedCheckout(WorldlineHostedCheckout, WorldlinePayment?)
    case hostedTokenizationCreated(WorldlineHostedTokenization, url: String, invalidTokens: [String])
    /// `GET …/hostedtokenizations/{id}`, with the token its form made (nil until it was sent).
    case hostedTokenization(WorldlineHostedTokenization, WorldlineToken?)
}
