import EMV
import Foundation

/// An error as the Citcon platform answers it: a non-2xx HTTP status and
/// `{"status":"fail","app":"citcon_upi","version":"v0.1.1","data":{"code","message","debug"}}`.
/// Codes from Citcon's Android SDK document: 4000 bad request, 4010 unauthorised, 4100
/// duplicate request, 4103 not found, 5100 internal error; 4208 partial refund not possible.
public struct CitconError: Error, Sendable, Equatable, CustomStringConvertible {
    public var httpStatus: Int
    public var code: String
    public var message: String
    /// What exactly was wrong (the field), as the platform's `debug`.
    public var debug: String?

    public init(httpStatus: Int, code: String, message: String, debug: String? = nil) {
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
        self.debug = debug
    }

    public var description: String { "\(httpStatus) \(code): \(message)\(debug.map { " (\($0))" } ?? "")" }

    /// 4000: a missing or bad field, named.
    public static func badRequest(_ field: String, _ rule: String) -> CitconError {
        CitconError(httpStatus: 400, code: "4000", message: "bad request: \(field) \(rule)", debug: field)
    }

    /// 4010 (HTTP 401).
    public static func unauthorised(_ message: String) -> CitconError { CitconError(httpStatus: 401, code: "4010", message: message) }

    /// 4100: the merchant already has a transaction with this reference.
    public static func duplicate(_ reference: String) -> CitconError {
        CitconError(httpStatus: 400, code: "4100", message: "duplicate request", debug: "reference \(shownValue(reference, 64)) was used before")
    }

    /// 4103 (HTTP 404).
    public static func notFound(_ message: String) -> CitconError { CitconError(httpStatus: 404, code: "4103", message: message) }

    /// 5100 (HTTP 500).
    public static func internalError(_ message: String) -> CitconError { CitconError(httpStatus: 500, code: "5100", message: message) }

    /// A Worldline-style property error from the shared JSON reader, as Citcon's 4000.
    public init(_ e: WorldlineError) {
        self = e.propertyName.map { .badRequest($0, e.rule ?? e.message) }
            ?? CitconError(httpStatus: 400, code: "4000", message: "bad request: \(e.message)")
    }
}

/// The payment methods: cards go to the issuer; the rest are simulated wallets.
public enum CitconMethod {
    /// Methods in both document versions (the vendor demo's list; UnionPay is `upop`). PayPal
    /// and Venmo are in both: the 2.1.0 document's version table has 1.0.0 add "card, PayPal and
    /// Venmo", its synchronous example pays with `paypal`, and its app configuration lists them.
    public static let common: Set<String> = [
        "card", "paypal", "venmo", "wechatpay", "alipay", "upop", "toss", "alipay_hk", "alipay+", "gcash", "kakaopay", "dana", "lpay", "lgpay", "samsungpay",
        "banktransfer", "grabpay", "atome", "shopeepay", "netspay", "paynow", "ubp", "bpi", "paymaya", "rabbit_line_pay", "tng",
        "truemoney", "billease", "cashalo",
    ]
    /// Added by SDK 2.2.0 (its release notes' Cash App; "Add PayPal payment" there is PayPal's
    /// own checkout flow, the method itself is older).
    public static let added220: Set<String> = ["cashapppay"]

    /// The methods of a document version ("2.1.0" or "2.2.0").
    public static func offered(version: String) -> Set<String> { version == "2.1.0" ? common : common.union(added220) }

    /// Wallets whose approval completes the payment (their auto_capture is "invalid", per the document).
    public static let capturesAtOnce: Set<String> = ["wechatpay", "alipay", "upop", "alipay_hk", "alipay+"]
}

/// `POST /v1/charges`, the parts the platform acts on.
public struct CitconChargeRequest: Sendable {
    public let reference: String
    public let amount: Int64
    public let currency: String
    public let country: String
    public let autoCapture: Bool
    public let note: String?
    /// nil: a pending charge the app completes (`POST /v1/charges/{charge_token}`).
    public let method: String?
    public let clients: [String]
    /// A card's data (number, expiry MM/YY, CVV), for the issuer only.
    public let card: (pan: String, expiry: String, cvv: String?)?
    public let request3DS: Bool
    /// Vault the card on approval (`payment.requestToken`), for `consumerReference`.
    public var requestToken = false
    /// Pay with a vaulted card (`payment.token`).
    public var vaultToken: String? = nil
    /// `consumer.reference`: whose vault.
    public var consumerReference: String? = nil
    /// ipn, success, fail, cancel, mobile (the old `*_url` names, at top level or in `transaction`, are taken too).
    public var urls: [String: String]

    /// The same charge paid with `card` (a vaulted card's, opened for this authorisation).
    public func withCard(_ card: (pan: String, expiry: String, cvv: String?)) -> CitconChargeRequest {
        var r = CitconChargeRequest(reference: reference, amount: amount, currency: currency, country: country, autoCapture: autoCapture, note: note,
                                    method: method, clients: clients, card: card, request3DS: request3DS, urls: urls)
        r.requestToken = requestToken
        r.vaultToken = vaultToken
        r.consumerReference = consumerReference
        return r
    }

    /// Reads a charge, naming the field of anything missing or wrong.
    public static func parse(_ body: [UInt8], version: String) throws(CitconError) -> CitconChargeRequest {
        do throws(WorldlineError) {
            let json = try WorldlineJSON.parse(body)
            guard let t = try json.object("transaction") else { throw WorldlineError.missing("transaction") }
            let reference = try t.requiredString("reference", maxLength: 128)
            guard !reference.isEmpty else { throw WorldlineError.invalid("transaction.reference", "must not be empty") }
            guard let amount = try t.int("amount", in: 1...999_999_999_999) else { throw WorldlineError.missing("transaction.amount") }
            let currency = try t.requiredString("currency", maxLength: 3)
            guard currency.count == 3, currency.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
                throw WorldlineError.invalid("transaction.currency", "must be an ISO 4217 code in upper case")
            }
            guard ISO4217.numbers[currency] != nil else {
                throw WorldlineError.invalid("transaction.currency", "\(shownValue(currency, 3)) is not a currency this platform takes (\(ISO4217.numbers.keys.sorted().joined(separator: ", ")))")
            }
            // "country String Required" in CPayTransaction, in both document versions.
            guard let country = try t.string("country", maxLength: 2) else { throw WorldlineError.missing("transaction.country") }
            guard country.count == 2, country.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
                throw WorldlineError.invalid("transaction.country", "must be an ISO 3166 alpha-2 code in upper case")
            }
            let payment = try json.object("payment")
            var method = try payment?.string("method", maxLength: 32)
            if let m = method {
                method = m.lowercased()
                guard CitconMethod.offered(version: version).contains(method!) else {
                    throw WorldlineError.invalid("payment.method", "\(shownValue(m, 32)) is not a method of the UPI SDK \(version)")
                }
            }
            var clients: [String] = []
            if let list = payment?.object["client"] as? [Any] {
                clients = list.compactMap { $0 as? String }
            }
            var card: (String, String, String?)? = nil
            if let data = try payment?.object("data"), method == "card" {
                let pan = try data.requiredString("pan", maxLength: 23).filter { $0 != " " }
                do throws(EMVError) { try CardFieldValidation.cardNumber(pan) } catch {
                    throw WorldlineError.invalid("payment.data.pan", error.rule)
                }
                let expiry = try data.requiredString("expiry", maxLength: 5)
                let e = Array(expiry)
                guard e.count == 5, e[2] == "/", let mm = Int(String(e[0..<2])), (1...12).contains(mm), Int(String(e[3..<5])) != nil else {
                    throw WorldlineError.invalid("payment.data.expiry", "must be MM/YY")
                }
                card = (pan, expiry, try data.string("cvv", maxLength: 4))
            }
            let requestToken = try payment?.bool("requestToken") ?? false
            let vaultToken = try payment?.string("token", maxLength: 64).flatMap { $0.isEmpty ? nil : $0 }
            let consumerReference = try json.object("consumer")?.string("reference", maxLength: 128).flatMap { $0.isEmpty ? nil : $0 }
            if requestToken || vaultToken != nil {
                guard method == "card" else { throw WorldlineError.invalid(requestToken ? "payment.requestToken" : "payment.token", "the vault here takes cards") }
                guard consumerReference != nil else { throw WorldlineError.missing("consumer.reference") }
            }
            if requestToken, vaultToken != nil { throw WorldlineError.invalid("payment.token", "a vaulted card is vaulted already: requestToken goes with a card's data") }
            if vaultToken != nil, card != nil { throw WorldlineError.invalid("payment.token", "give either payment.token or the card's payment.data.pan, not both") }
            if method == "card", card == nil, vaultToken == nil { throw WorldlineError.missing("payment.data") }
            var urls: [String: String] = [:]
            let u = try json.object("urls")
            for key in ["ipn", "success", "fail", "cancel", "mobile"] {
                var value = try u?.string(key, maxLength: 512)
                if value == nil { value = try u?.string(key + "_url", maxLength: 512) }
                if value == nil { value = try t.string(key + "_url", maxLength: 512) }
                if let value, !value.isEmpty {
                    guard let url = URL(string: value), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil || key == "mobile" else {
                        throw WorldlineError.invalid("urls.\(key)", "must be an absolute http(s) URL")
                    }
                    urls[key] = value
                }
            }
            var request = CitconChargeRequest(reference: reference, amount: amount, currency: currency, country: country,
                                              autoCapture: try t.bool("auto_capture") ?? false, note: try t.string("note", maxLength: 256),
                                              method: method, clients: clients, card: card,
                                              request3DS: try payment?.bool("request_3ds") ?? false, urls: urls)
            request.requestToken = requestToken
            request.vaultToken = vaultToken
            request.consumerReference = consumerReference
            return request
        } catch {
            throw CitconError(error)
        }
    }
}

/// `POST /v1/captures`, `/v1/refunds`, `/v1/cancels`: `{transaction_id, amount, reference, note}`.
public struct CitconOperationRequest: Sendable {
    public let transactionID: String
    public let amount: Int64?
    public let reference: String?

    /// Reads an operation body.
    public static func parse(_ body: [UInt8]) throws(CitconError) -> CitconOperationRequest {
        do throws(WorldlineError) {
            let json = try WorldlineJSON.parse(body)
            return CitconOperationRequest(transactionID: try json.requiredString("transaction_id", maxLength: 64),
                                          amount: try json.int("amount", in: 1...999_999_999_999),
                                          reference: try json.string("reference", maxLength: 128))
        } catch {
            throw CitconError(error)
        }
    }
}
