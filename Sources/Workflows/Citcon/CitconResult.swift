import LedgerModel

/// What a Citcon call produced, typed: the daemon answers it (HTTP 200, the platform's success
/// envelope) with the body `CitconRender` makes. No HTTP and no untyped JSON leave the workflows.
public enum CitconResult: Sendable {
    case accessToken(token: String, type: String, expiry: Int64, permission: [String])
    /// A charge created or confirmed; `client` the app client whose content it carries.
    case charge(CitconCharge, client: String?)
    case inquiry(CitconCharge)
    case operation(CitconOperation, CitconCharge)
    /// The SDK's `CPayResult` for `requestOrder`.
    case sdkResult(CitconCharge)
}

