/// The result of a Viva request: every value the callback can carry, already formatted (see
/// `VivaFormat`). Which fields a callback shows, and in which order, is `VivaCallback`'s business;
/// a nil value in a field the action's structure has is rendered empty (`rrn=`), a nil value in an
/// optional field is left out.
public struct VivaResult: Sendable, Equatable {
    /// `success` or `failed`.
    public enum Status: String, Sendable {
        /// The request did what it asked.
        case success
        /// It did not; `message` says why.
        case failed
    }

    /// `status`.
    public var status: Status
    /// `message`: `VivaFormat.successMessage` or a `VivaFailure`'s message.
    public var message: String
    /// `action`: the request's action.
    public var action: Action

    /// The action a callback echoes: one the app knows, or, for a refused request, whatever it
    /// sent ("" when it sent none).
    public enum Action: Sendable, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
        case known(VivaAction)
        case asSent(String)

        public init(_ text: String) { self = VivaAction(rawValue: text).map(Action.known) ?? .asSent(text) }
        public init(stringLiteral text: String) { self.init(text) }

        public var description: String {
            switch self {
            case .known(let action): action.rawValue
            case .asSent(let text): text
            }
        }
    }
    /// `clientTransactionId`: the request's, echoed.
    public var clientTransactionId: String?
    /// `amount`, cents.
    public var amount: Int?
    /// `tipAmount`, cents.
    public var tipAmount: Int?
    /// `verificationMethod`: "CHIP-PIN", … (`VivaFormat.verificationMethod`).
    public var verificationMethod: String?
    /// `rrn`: 12 digits, Y DDD HH + STAN.
    public var rrn: String?
    /// `cardType`: "VISA", … (`VivaFormat.cardType`).
    public var cardType: String?
    /// `accountNumber`: the PAN already masked, first 6 and last 4 (`PAN.masked`).
    public var accountNumber: String?
    /// `referenceNumber`: the STAN, 6 digits. Rendered empty on failure whatever it holds, as the document says.
    public var referenceNumber: String?
    /// `authorisationCode`: the host's, 6 characters. Rendered empty on failure whatever it holds.
    public var authorisationCode: String?
    /// `tid`: the terminal's 8-digit TID.
    public var tid: String?
    /// `orderCode`: 16 digits (`VivaFormat.orderCode`).
    public var orderCode: String?
    /// `installments`: the number of instalments of a sale paid in instalments; nil for one paid
    /// at once, and then the field is left out, as the field's callbacks do.
    public var installments: Int?
    /// `transactionDate`, already formatted (`VivaFormat.transactionDate`).
    public var transactionDate: String?
    /// `transactionId`: a UUID, made by the caller. Left out of failed results, as in the document.
    public var transactionId: String?

    /// `command` of a `batch` result: "open" or "close".
    public var batchCommand: String?
    /// `batchName` of a `batch` result.
    public var batchName: String?
    /// `batchId` of a `batch` result.
    public var batchId: String?

    /// `aid`, hex (field extra; rendered after the document's fields, only when set).
    public var aid: String?
    /// `shortOrderCode`: the order code's first 10 digits (field extra, only when set).
    public var shortOrderCode: String?
    /// `transactionType` (field extra, only when set).
    public var transactionType: String?
    /// `entryMode` (field extra, only when set).
    public var entryMode: String?
    /// `currency` (field extra, only when set).
    public var currency: String?
    /// `cardholderName` (field extra, only when set).
    public var cardholderName: String?

    /// Makes a result; every field but the first three defaults to nil.
    public init(status: Status, message: String, action: Action, clientTransactionId: String? = nil, amount: Int? = nil,
                tipAmount: Int? = nil, verificationMethod: String? = nil, rrn: String? = nil, cardType: String? = nil,
                accountNumber: String? = nil, referenceNumber: String? = nil, authorisationCode: String? = nil,
                tid: String? = nil, orderCode: String? = nil, installments: Int? = nil, transactionDate: String? = nil,
                transactionId: String? = nil, batchCommand: String? = nil, batchName: String? = nil, batchId: String? = nil,
                aid: String? = nil, shortOrderCode: String? = nil, transactionType: String? = nil, entryMode: String? = nil,
                currency: String? = nil, cardholderName: String? = nil) {
        self.status = status
        self.message = message
        self.action = action
        self.clientTransactionId = clientTransactionId
        self.amount = amount
        self.tipAmount = tipAmount
        self.verificationMethod = verificationMethod
        self.rrn = rrn
        self.cardType = cardType
        self.accountNumber = accountNumber
        self.referenceNumber = referenceNumber
        self.authorisationCode = authorisationCode
        self.tid = tid
        self.orderCode = orderCode
        self.installments = installments
        self.transactionDate = transactionDate
        self.transactionId = transactionId
        self.batchCommand = batchCommand
        self.batchName = batchName
        self.batchId = batchId
        self.aid = aid
        self.shortOrderCode = shortOrderCode
        self.transactionType = transactionType
        self.entryMode = entryMode
        self.currency = currency
        self.cardholderName = cardholderName
    }

    /// A failed result that echoes what `request` said (its action, client transaction id,
    /// amounts and batch fields); the caller adds what it learnt (tid, date, card fields).
    public init(failing request: VivaRequest, with failure: VivaFailure) {
        self.init(status: .failed, message: failure.message, action: .known(request.command.action))
        switch request.command {
        case .sale(let sale), .preAuth(let sale):
            clientTransactionId = sale.clientTransactionId
            amount = sale.amount
            tipAmount = sale.tipAmount
        case .capturePreAuth(let capture):
            amount = capture.amount
        case .cancel(let cancel):
            amount = cancel.amount
        case .batch(let batch):
            batchCommand = batch.command.rawValue
            batchName = batch.batchName
            batchId = batch.batchId
        case .transactionDetails(let id):
            clientTransactionId = id
        case .abort:
            break
        }
    }

    /// The failed result for a request that broke a rule (send it only when `error.callback` is
    /// set): the action as sent and the message naming the field and the rule.
    public init(rejecting error: VivaRequestError) {
        self.init(status: .failed, message: VivaFailure(error).message, action: Action(error.action ?? ""))
    }
}

/// Renders the callback URL the app sends back.
///
/// The fields and their order per action (docs/viva.md has the table):
/// - `sale`, `pre_auth`, `capture_pre_auth`, `transactionDetails`: the document's sale response,
///   `status, message, action, clientTransactionId, amount, tipAmount, verificationMethod, rrn,
///   cardType, accountNumber, referenceNumber, authorisationCode, tid, orderCode, installments,
///   transactionDate, transactionId`; `installments` only when set; on failure `referenceNumber` and
///   `authorisationCode` are empty and `installments` and `transactionId` are left out, exactly as in
///   the document's failed example.
/// - `cancel`: `status, message, action, amount, cardType, accountNumber, tid, transactionDate,
///   transactionId`; `transactionId` left out on failure, as in the document's failed example.
/// - `batch`: `status, message, action, command, batchName, batchId`.
/// - `abort`, and a request whose action is missing or unknown: `status, message, action`.
/// Then, for every action, the field extras that are set, in the order `aid, shortOrderCode,
/// transactionType, entryMode, currency, cardholderName`, after the document's fields so its order
/// is untouched.
public enum VivaCallback {
    /// The callback URL: `callback`, then `?` (or `&` when `callback` already has a query), then
    /// the fields. Each value is percent-encoded: RFC 3986 unreserved characters and `*`, `:`, `+`
    /// are kept (the document's examples show `******` and `+03:00` as they are), everything else
    /// is `%XX` of its UTF-8 bytes, a space `%20`, never `+`; so a value holding `x&status=success#f`
    /// cannot add a field or a fragment. A bare scheme name (`interapp-callback`) gets `://`, so the
    /// URL opens the app registered for that scheme: `interapp-callback://?status=…`.
    public static func url(callback: String, result: VivaResult) -> String {
        var base = callback
        if !callback.contains(":") { base += "://" }
        let separator: String
        if let question = base.firstIndex(of: "?") {
            let query = base[base.index(after: question)...]
            separator = query.isEmpty || query.hasSuffix("&") ? "" : "&"
        } else {
            separator = "?"
        }
        let query = fields(result).map { PercentEncoding.encodeValue($0.name) + "=" + PercentEncoding.encodeValue($0.value) }
        return base + separator + query.joined(separator: "&")
    }

    /// The callback's fields in order, unencoded, for the API's JSON and for traces.
    public static func fields(_ result: VivaResult) -> [(name: String, value: String)] {
        let failed = result.status == .failed
        var out: [(name: String, value: String)] = [
            ("status", result.status.rawValue), ("message", result.message), ("action", result.action.description),
        ]
        func add(_ name: String, _ value: String?) { out.append((name, value ?? "")) }
        func add(_ name: String, _ value: Int?) { out.append((name, value.map { String($0) } ?? "")) }

        switch Shape(action: result.action) {
        case .sale:
            add("clientTransactionId", result.clientTransactionId)
            add("amount", result.amount)
            add("tipAmount", result.tipAmount)
            add("verificationMethod", result.verificationMethod)
            add("rrn", result.rrn)
            add("cardType", result.cardType)
            add("accountNumber", result.accountNumber)
            add("referenceNumber", failed ? nil : result.referenceNumber)
            add("authorisationCode", failed ? nil : result.authorisationCode)
            add("tid", result.tid)
            add("orderCode", result.orderCode)
            if !failed, let installments = result.installments { add("installments", installments) }
            add("transactionDate", result.transactionDate)
            if !failed { add("transactionId", result.transactionId) }
        case .cancel:
            add("amount", result.amount)
            add("cardType", result.cardType)
            add("accountNumber", result.accountNumber)
            add("tid", result.tid)
            add("transactionDate", result.transactionDate)
            if !failed { add("transactionId", result.transactionId) }
        case .batch:
            add("command", result.batchCommand)
            add("batchName", result.batchName)
            add("batchId", result.batchId)
        case .bare:
            break
        }
        let extras: [(String, String?)] = [
            ("aid", result.aid), ("shortOrderCode", result.shortOrderCode), ("transactionType", result.transactionType),
            ("entryMode", result.entryMode), ("currency", result.currency), ("cardholderName", result.cardholderName),
        ]
        for case let (name, value?) in extras { out.append((name, value)) }
        return out
    }

    /// Which of the document's response structures an action answers with.
    private enum Shape {
        case sale, cancel, batch, bare

        init(action: VivaResult.Action) {
            switch action {
            case .known(.sale), .known(.preAuth), .known(.capturePreAuth), .known(.transactionDetails): self = .sale
            case .known(.cancel): self = .cancel
            case .known(.batch): self = .batch
            case .known(.abort), .asSent: self = .bare
            }
        }
    }
}
