/// One parameter of a request, as received and percent-decoded once.
public struct BillpocketParameter: Sendable, Hashable, CustomStringConvertible {
    /// The parameter's name, case as sent.
    public var name: String
    /// The decoded value; "" for an empty value and for a bare name without `=`.
    public var value: String

    /// Makes a parameter.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// `name=value`, decoded, for logs.
    public var description: String { "\(name)=\(value)" }
}

/// Where the parameters sat in the URL.
public enum BillpocketURLForm: String, Sendable, Equatable {
    /// `billpocket://transaction=venta&…`: where a host would be, with no `?`, as the vendor's
    /// sample sender builds it.
    case afterScheme
    /// `billpocket://?transaction=venta&…` or `billpocket://anything?transaction=venta&…`: a query.
    case query
}

/// A request the Billpocket app accepts: `billpocket://transaction=venta&…`. `parse(_:)` applies
/// every rule of docs/billpocket.md; a value of this type is a valid request.
public struct BillpocketRequest: Sendable, Equatable {
    /// What to do, with the transaction's own parameters.
    public var command: BillpocketCommand
    /// The user's token (`userToken`, `usertoken` or the legacy `pin`), as sent: at most 64
    /// characters. Whether it is a token cardbench issued is `BillpocketTokens`' and the daemon's business.
    public var userToken: String
    /// The device token (`devicetoken`), 8 to 12 characters, when sent.
    public var deviceToken: String?
    /// The sender's own identifier, echoed in every callback; at most 256 characters.
    public var identifier: String
    /// Where the result goes. Always set for `venta`; for `devolucion`, which the document's table
    /// marks N/A, it is optional, and without it there is no callback (the daemon answers its API only).
    public var urlScheme: BillpocketURLScheme?
    /// Where the parameters sat in the URL.
    public var form: BillpocketURLForm
    /// Every parameter as received (decoded once), in order, unknown ones included, for the
    /// ledger and traces.
    public var parameters: [BillpocketParameter]
    /// Parameters sent with a value that this transaction does not use (N/A in the document's
    /// table: `amount`, `tip`, `msi`, `reference`, … on a `devolucion`), by the document's names;
    /// they are ignored, as the vendor's own sample app sends every field on every request.
    public var ignored: [String] = []

    /// Makes a request from parts; `parse(_:)` is the way to get one from a URL.
    public init(command: BillpocketCommand, userToken: String, deviceToken: String? = nil, identifier: String,
                urlScheme: BillpocketURLScheme?, form: BillpocketURLForm = .afterScheme, parameters: [BillpocketParameter] = []) {
        self.command = command
        self.userToken = userToken
        self.deviceToken = deviceToken
        self.identifier = identifier
        self.urlScheme = urlScheme
        self.form = form
        self.parameters = parameters
    }

    /// The value of the parameter named `name`, if it was sent; names compare without regard to
    /// case, as the parser reads them.
    public func parameter(_ name: String) -> String? {
        let lower = ASCII.lowercased(name)
        return parameters.first { ASCII.lowercased($0.name) == lower }?.value
    }

    /// The longest `reference`, `email` and `identifier`, in characters.
    public static let maximumTextLength = 256
    /// The longest `userToken`, in characters (varchar(64)).
    public static let maximumUserTokenLength = 64
    /// The lengths a `devicetoken` may have, in characters ("String (8-12 chars)").
    public static let deviceTokenLengths = 8...12
    /// The longest `phone`, in characters.
    public static let maximumPhoneLength = 14
    /// The longest `transactionId`, in characters (varchar(64)).
    public static let maximumTransactionIdLength = 64

    /// Parses and checks a request URL.
    ///
    /// The scheme is `billpocket` in any case, followed by `://`. The parameters follow directly
    /// (`billpocket://transaction=venta&…`, the vendor's form) or after a `?`
    /// (`billpocket://?transaction=…`, `billpocket://pay?transaction=…`): the text before the
    /// first `?` is a host to ignore when it holds no `=`, and otherwise is already the parameters
    /// (so a `?` inside a value of the vendor's form stays in the value). No fragment.
    /// Parameters are split on `&` and at the first `=`, then percent-decoded exactly once: `+`
    /// stays `+`, `%2520` is `%20`. Names are compared without regard to case (the vendor itself
    /// writes `userToken` and `usertoken`); `pin` is the legacy name of `userToken` and `payments`
    /// (the vendor sample's) of `msi`. Empty items are skipped; a parameter may appear once, under
    /// any of its names; unknown names are kept in `parameters` and otherwise ignored; an empty
    /// value is the same as leaving an optional parameter out.
    ///
    /// - Throws: a `BillpocketRequestError` naming the field and the rule it broke. Its
    ///   `urlScheme` and `identifier` are set whenever valid ones were sent, wherever they sit, so
    ///   the caller can answer with a `result=error` callback.
    public static func parse(_ url: String) throws(BillpocketRequestError) -> BillpocketRequest {
        var parser = BillpocketRequestParser()
        return try parser.parse(url)
    }
}

/// What a request asks the app to do.
public enum BillpocketCommand: Sendable, Equatable {
    /// `transaction=venta`: a sale.
    case venta(BillpocketSale)
    /// `transaction=devolucion`: a refund of an earlier sale.
    case devolucion(BillpocketRefund)

    /// The `transaction` value: "venta" or "devolucion".
    public var transaction: String {
        switch self {
        case .venta: BillpocketTransaction.venta
        case .devolucion: BillpocketTransaction.devolucion
        }
    }
}

/// The `transaction` values the app knows; case-sensitive.
public enum BillpocketTransaction {
    /// "venta" (sale).
    public static let venta = "venta"
    /// "devolucion" (refund).
    public static let devolucion = "devolucion"
    /// Both, in the order error messages list them.
    public static let all = [venta, devolucion]
}

/// Whether the app offers a photo of the sale and whether it insists on one.
public enum BillpocketPhoto: Sendable, Equatable {
    /// No photo button (`showPhotoButton` false or absent).
    case none
    /// A photo may be attached (`showPhotoButton=true`).
    case optional
    /// A photo must be attached (`showPhotoButton=true` and `mandatoryPhoto=true`).
    case mandatory
}

/// The fields of a `venta`.
public struct BillpocketSale: Sendable, Equatable {
    /// Cents, tip excluded, greater than 0.
    public var amount: Int
    /// Cents of tip, 0 or more; charged on top of `amount`.
    public var tip: Int
    /// Months without interest: 0 (one payment), 3, 6, 9 or 12. Whether this user may use the plan
    /// for this amount is `BillpocketMSI.check`'s call.
    public var msi: Int
    /// The customer's reference, echoed in the callback; at most 256 characters.
    public var reference: String?
    /// The customer's email; at most 256 characters.
    public var email: String?
    /// The customer's mobile number; at most 14 characters.
    public var phone: String?
    /// `showPhotoButton`.
    public var showPhotoButton: Bool
    /// `mandatoryPhoto` as sent; it only counts with `showPhotoButton` (see `photo`).
    public var mandatoryPhoto: Bool
    /// `comesFromQR`: the request URL was read from a QR code.
    public var comesFromQR: Bool

    /// Makes a sale.
    public init(amount: Int, tip: Int = 0, msi: Int = 0, reference: String? = nil, email: String? = nil, phone: String? = nil,
                showPhotoButton: Bool = false, mandatoryPhoto: Bool = false, comesFromQR: Bool = false) {
        self.amount = amount
        self.tip = tip
        self.msi = msi
        self.reference = reference
        self.email = email
        self.phone = phone
        self.showPhotoButton = showPhotoButton
        self.mandatoryPhoto = mandatoryPhoto
        self.comesFromQR = comesFromQR
    }

    /// What is charged to the card: amount plus tip, in cents.
    public var total: Int { amount + tip }

    /// The photo the app asks for: `mandatoryPhoto` is ignored unless `showPhotoButton` is true,
    /// as the document says.
    public var photo: BillpocketPhoto {
        guard showPhotoButton else { return .none }
        return mandatoryPhoto ? .mandatory : .optional
    }
}

/// The fields of a `devolucion`.
public struct BillpocketRefund: Sendable, Equatable {
    /// The sale's `transactionid`, as the sale's callback gave it; at most 64 characters.
    public var transactionId: String

    /// Makes a refund.
    public init(transactionId: String) {
        self.transactionId = transactionId
    }
}

/// A request that broke a rule: the field, the rule, and what is known for answering it.
public struct BillpocketRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request's `urlScheme`, once a valid one was found: the caller then answers with a
    /// `result=error` callback there. Nil when the URL did not get that far (wrong scheme, a
    /// missing, repeated or invalid `urlScheme`): there is nobody to call back, and the daemon
    /// answers with an HTTP 400 instead.
    public let urlScheme: BillpocketURLScheme?
    /// The request's `identifier`, once a valid one was found, for the callback to echo.
    public let identifier: String?
    /// The `transaction` value as sent (even one the app does not know), when there was one.
    public let transaction: String?
    /// The parameter that broke a rule (the document's spelling: `userToken`, `urlScheme`, …),
    /// or `url` (the text as a whole) or `scheme` (the `billpocket://` prefix).
    public let field: String
    /// The rule, at length, for the API's answer and the logs.
    public let rule: String
    /// The callback's `statusinfo`: `<field>: <short rule>`, at most 40 characters.
    public let statusInfo: String

    /// Makes an error from a field error and what is known of the request.
    public init(_ error: BillpocketFieldError, urlScheme: BillpocketURLScheme? = nil, identifier: String? = nil,
                transaction: String? = nil) {
        self.urlScheme = urlScheme
        self.identifier = identifier
        self.transaction = transaction
        self.field = error.field
        self.rule = error.rule
        self.statusInfo = error.statusInfo
    }

    /// `<field>: <rule>`.
    public var description: String { "\(field): \(rule)" }
}
