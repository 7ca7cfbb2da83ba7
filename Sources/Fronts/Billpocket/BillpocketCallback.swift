/// How the callbacks read where the evidence of what the real app sends is split
/// (docs/billpocket.md): `statusinfo`'s language and the instalment plan's name. The defaults
/// are the document's reading.
public struct BillpocketCallbackStyle: Sendable, Equatable {
    /// `statusinfo`'s language.
    public enum Language: String, Sendable, CaseIterable {
        /// English: the vendor's development environment's decline texts (the default).
        case en
        /// Spanish, as a callback seen from a production app ("La transacción fue cancelada").
        case es
    }

    /// The name an approval's instalment plan goes under.
    public enum Installments: String, Sendable, CaseIterable {
        /// `msi`: the document's Response Parameters table (the default).
        case msi
        /// `payments`: what the vendor's Sender sample reads, and Kushki's app-to-app webhook.
        case payments
        /// Both, `msi` first: for receivers of either kind.
        case both
    }

    public var language: Language = .en
    public var installments: Installments = .msi

    public init(language: Language = .en, installments: Installments = .msi) {
        self.language = language
        self.installments = installments
    }
}

/// The result of a Billpocket request: every value the callback can carry. Which fields a
/// callback shows is `BillpocketCallback`'s business (the document's Response Parameters table).
public struct BillpocketResult: Sendable, Equatable {
    /// `result`.
    public enum Status: String, Sendable, Equatable, CaseIterable {
        /// Approved.
        case aprobada
        /// Declined by the issuer (or the card).
        case rechazada
        /// Anything else went wrong.
        case error
    }

    /// The most characters `statusinfo` holds (varchar(40)); longer texts are cut.
    public static let statusInfoLimit = 40

    /// `result`.
    public var result: Status
    /// `statusinfo`: "" on approval, the issuer's message on a decline, what went wrong on an
    /// error. Rendered cut to 40 characters.
    public var statusInfo: String
    /// `amount`, cents, tip excluded.
    public var amount: Int?
    /// `tip`, cents; rendered only when set.
    public var tip: Int?
    /// `reference`, echoed; rendered only when set and not empty.
    public var reference: String?
    /// `transactionid`: the transaction's id, 16 characters, made by the caller.
    public var transactionId: String?
    /// `msi`: the months without interest; rendered only for a plan (3, 6, 9, 12), not for 0.
    public var msi: Int?
    /// `authorization`: the issuer's authorisation code, 6 characters.
    public var authorization: String?
    /// `creditcard`: the card's last 4 digits (`BillpocketFormat.creditCard(pan:)`).
    public var creditCard: String?
    /// `cardtype`: VISA, MASTERCARD, CARNET or AMERICAN EXPRESS (`BillpocketFormat.cardType(brand:)`).
    public var cardType: String?
    /// `email`, echoed; rendered only when set and not empty.
    public var email: String?
    /// `phone`, echoed; rendered only when set and not empty.
    public var phone: String?
    /// `arqc`: the ARQC, 16 hex digits (`BillpocketFormat.hex`); rendered only when set.
    public var arqc: String?
    /// `aid`: the application's AID in hex; rendered only when set.
    public var aid: String?
    /// `applabel`: the application label; rendered only when set.
    public var appLabel: String?
    /// `url`: the voucher's id, for `BillpocketVoucher`, made by the caller.
    public var url: String?
    /// `identifier`, echoed from the request.
    public var identifier: String?
    /// `bank`: the card's issuing bank.
    public var bank: String?
    /// `accountType`.
    public var accountType: BillpocketAccountType?

    /// Makes a result; every field but the first two defaults to nil.
    public init(result: Status, statusInfo: String = "", amount: Int? = nil, tip: Int? = nil, reference: String? = nil,
                transactionId: String? = nil, msi: Int? = nil, authorization: String? = nil, creditCard: String? = nil,
                cardType: String? = nil, email: String? = nil, phone: String? = nil, arqc: String? = nil, aid: String? = nil,
                appLabel: String? = nil, url: String? = nil, identifier: String? = nil, bank: String? = nil,
                accountType: BillpocketAccountType? = nil) {
        self.result = result
        self.statusInfo = statusInfo
        self.amount = amount
        self.tip = tip
        self.reference = reference
        self.transactionId = transactionId
        self.msi = msi
        self.authorization = authorization
        self.creditCard = creditCard
        self.cardType = cardType
        self.email = email
        self.phone = phone
        self.arqc = arqc
        self.aid = aid
        self.appLabel = appLabel
        self.url = url
        self.identifier = identifier
        self.bank = bank
        self.accountType = accountType
    }

    /// An approved sale: the request's amount, tip (when above 0), reference, msi (when a plan),
    /// email, phone and identifier, with what the transaction gave.
    public init(approving sale: BillpocketSale, identifier: String, transactionId: String, authorization: String,
                creditCard: String, cardType: String, url: String, bank: String, accountType: BillpocketAccountType,
                arqc: String? = nil, aid: String? = nil, appLabel: String? = nil) {
        self.init(result: .aprobada, amount: sale.amount, tip: sale.tip > 0 ? sale.tip : nil, reference: sale.reference,
                  transactionId: transactionId, msi: sale.msi > 0 ? sale.msi : nil, authorization: authorization,
                  creditCard: creditCard, cardType: cardType, email: sale.email, phone: sale.phone, arqc: arqc, aid: aid,
                  appLabel: appLabel, url: url, identifier: identifier, bank: bank, accountType: accountType)
    }

    /// A declined or failed request: `failure`'s result and statusinfo (in `language`), the
    /// request's identifier.
    public init(failing request: BillpocketRequest, with failure: BillpocketFailure, language: BillpocketCallbackStyle.Language = .en) {
        self.init(result: failure.result, statusInfo: failure.statusInfo(language), identifier: request.identifier)
    }

    /// The `result=error` answer to a request that broke a rule (send it only when
    /// `error.urlScheme` is set): its statusinfo, and the identifier when a valid one was sent.
    public init(rejecting error: BillpocketRequestError) {
        self.init(result: .error, statusInfo: error.statusInfo, identifier: error.identifier)
    }
}

/// Renders the callback URL the app opens at the end of a transaction.
///
/// Fields, in the order of the document's Response Parameters table (docs/billpocket.md):
/// - `aprobada`: `result, statusinfo, amount, tip, reference, transactionid, msi, authorization,
///   creditcard, cardtype, email, phone, arqc, aid, applabel, url, identifier, bank, accountType`.
///   The fields the table marks Mandatory are always there (empty when unknown); the Optional
///   ones (`tip, reference, msi, email, phone, arqc, aid, applabel`) only when set.
/// - `rechazada` and `error`: `result, statusinfo, identifier`, the only fields the table marks
///   for them, whatever else the result holds.
public enum BillpocketCallback {
    /// The callback URL.
    ///
    /// For an app scheme it is `<scheme>://result=…&…`, the parameters where a host would be, as
    /// the document's example (`myapp://result=aprobada&statusinfo=&amount=100.00&…`). For a
    /// webhook it is the URL with `?result=…` appended, or `&result=…` when it already has a
    /// query (nothing between when it ends with `?` or `&`), so the webhook's server reads the
    /// fields as an ordinary query.
    ///
    /// Every value is percent-encoded from its UTF-8 bytes, upper-case hex, a space as `%20`: kept
    /// as they are are RFC 3986's unreserved characters and `(`, `)`, `/`, `@`, which the
    /// document's example leaves alone; `&`, `=`, `#`, `%`, `+`, `?` and everything else are
    /// escaped, so a value cannot add a field, end the parameters or be read differently by a
    /// receiver that turns `+` into a space.
    public static func url(urlScheme: BillpocketURLScheme, result: BillpocketResult,
                           installments: BillpocketCallbackStyle.Installments = .msi) -> String {
        let query = fields(result, installments: installments).map { $0.name + "=" + encode($0.value) }.joined(separator: "&")
        switch urlScheme {
        case .app(let name):
            return name + "://" + query
        case .webhook(let url):
            let separator: String
            if let question = url.firstIndex(of: "?") {
                let existing = url[url.index(after: question)...]
                separator = existing.isEmpty || existing.hasSuffix("&") ? "" : "&"
            } else {
                separator = "?"
            }
            return url + separator + query
        }
    }

    /// The callback's fields in order, unencoded, for the API's JSON and for traces.
    public static func fields(_ result: BillpocketResult,
                              installments: BillpocketCallbackStyle.Installments = .msi) -> [(name: String, value: String)] {
        let statusInfo = BillpocketText.truncated(result.statusInfo, to: BillpocketResult.statusInfoLimit)
        guard result.result == .aprobada else {
            return [("result", result.result.rawValue), ("statusinfo", statusInfo), ("identifier", result.identifier ?? "")]
        }
        var out: [(name: String, value: String)] = [("result", result.result.rawValue), ("statusinfo", statusInfo)]
        func mandatory(_ name: String, _ value: String?) { out.append((name, value ?? "")) }
        func optional(_ name: String, _ value: String?) {
            if let value, !value.isEmpty { out.append((name, value)) }
        }
        mandatory("amount", result.amount.map(BillpocketFormat.amount(cents:)))
        optional("tip", result.tip.map(BillpocketFormat.amount(cents:)))
        optional("reference", result.reference)
        mandatory("transactionid", result.transactionId)
        let plan = result.msi.flatMap { $0 > 0 ? String($0) : nil }
        if installments != .payments { optional("msi", plan) }
        if installments != .msi { optional("payments", plan) }
        mandatory("authorization", result.authorization)
        mandatory("creditcard", result.creditCard)
        mandatory("cardtype", result.cardType)
        optional("email", result.email)
        optional("phone", result.phone)
        optional("arqc", result.arqc)
        optional("aid", result.aid)
        optional("applabel", result.appLabel)
        mandatory("url", result.url)
        mandatory("identifier", result.identifier)
        mandatory("bank", result.bank)
        mandatory("accountType", result.accountType?.rawValue)
        return out
    }

    /// Bytes a value keeps as they are: RFC 3986's unreserved characters, and the four the
    /// document's example shows unescaped in `reference`: `(`, `)`, `/`, `@`. None of them
    /// separates the fields for a receiver that splits on `&` and `=` (the document's), nor for
    /// URLComponents reading a webhook's query.
    static func isKept(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
             UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "/"), UInt8(ascii: "@"):
            true
        default:
            false
        }
    }

    static func encode(_ value: String) -> String {
        PercentEncoding.encode(value, keeping: isKept)
    }
}

extension BillpocketRequestError {
    /// The `result=error` callback that answers this error, as Viva's `error.callback` is used:
    /// nil when no valid `urlScheme` was found, and then the daemon answers with an HTTP 400.
    public var callbackURL: String? {
        urlScheme.map { BillpocketCallback.url(urlScheme: $0, result: BillpocketResult(rejecting: self)) }
    }
}
