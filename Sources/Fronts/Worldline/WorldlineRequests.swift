import EMV
import Foundation

/// Card data of a card-not-present payment, from the request or its encrypted input. Held in
/// memory for the authorisation only: the ledger gets the masked number and the keyed hash.
public struct WorldlineCard: Sendable {
    public let pan: String
    /// MMYY.
    public let expiryDate: String
    public let cvv: String?
    public let cardholderName: String?

    public var brand: CardBrand? { CardBrand.detect(pan: pan) }
    /// (year, month) of the expiry date, in this century.
    public var expiry: (year: Int, month: Int) {
        (2000 + Int(expiryDate.suffix(2))!, Int(expiryDate.prefix(2))!)
    }
    /// As the platform shows it: every digit but the last four replaced by `*`.
    public var masked: String { String(repeating: "*", count: pan.count - 4) + pan.suffix(4) }
    public var bin: String { String(pan.prefix(6)) }

    /// Checks the values as the platform does, naming each property under `path`.
    public init(pan rawPAN: String, expiryDate: String, cvv: String?, cardholderName: String?, path: String) throws(WorldlineError) {
        let pan = rawPAN.filter { $0 != " " }
        // The platform's own test numbers are its to judge, check digit or not (4321456998744563,
        // the SDKs' declined card, fails the Luhn check and is a decline there, not a 400).
        if WorldlineTestCards.table[pan] == nil {
            do throws(EMVError) { try CardFieldValidation.cardNumber(pan) } catch {
                throw .invalid("\(path)cardNumber", error.rule)
            }
        }
        let e = Array(expiryDate.utf8)
        guard e.count == 4, e.allSatisfy({ (0x30...0x39).contains($0) }), let month = Int(expiryDate.prefix(2)), (1...12).contains(month) else {
            throw .invalid("\(path)expiryDate", "must be MMYY with a month 01–12")
        }
        if let cvv {
            do throws(EMVError) { try CardFieldValidation.cvv(cvv, brand: CardBrand.detect(pan: pan)) } catch {
                throw .invalid("\(path)cvv", error.rule)
            }
        }
        if let cardholderName, cardholderName.count > 51 {
            throw .invalid("\(path)cardholderName", "must be at most 51 characters")
        }
        self.pan = pan
        self.expiryDate = expiryDate
        self.cvv = cvv
        self.cardholderName = cardholderName
    }
}

/// `POST /v2/{merchantId}/payments`, the parts the platform acts on.
public struct WorldlineCreatePayment: Sendable {
    /// What an approval does: `SALE` captures at once, the others wait for a capture.
    public enum AuthorizationMode: String, Sendable, CaseIterable {
        case sale = "SALE", finalAuthorization = "FINAL_AUTHORIZATION", preAuthorization = "PRE_AUTHORIZATION"
    }

    /// The 3-D Secure part of a request: where the customer returns, and whether to skip it.
    public struct ThreeDSecure: Sendable {
        public var returnURL: String?
        public var skipAuthentication: Bool
        public var challengeIndicator: String?
    }

    /// Who starts a payment on a stored card (`unscheduledCardOnFileRequestor`).
    public enum CardOnFileRequestor: String, Sendable, CaseIterable {
        case cardholderInitiated, merchantInitiated
    }

    /// Where a payment is in its card-on-file series (`unscheduledCardOnFileSequenceIndicator`).
    public enum CardOnFileSequence: String, Sendable, CaseIterable {
        case first, subsequent
    }

    /// Where a payment is in its recurring series (`recurring.recurringPaymentSequenceIndicator`).
    public enum RecurringSequence: String, Sendable, CaseIterable {
        case first, recurring
    }

    public let amount: Int64
    /// ISO 4217 alphabetic.
    public let currency: String
    public let currencyNumeric: Int
    public let authorizationMode: AuthorizationMode
    public let merchantReference: String?
    public let paymentProductID: Int?
    /// A plain card (server-side tests), or nil when `encryptedCustomerInput` or `token` carries it.
    public let card: WorldlineCard?
    public let encryptedCustomerInput: String?
    public let threeDSecure: ThreeDS?
    public typealias ThreeDS = ThreeDSecure
    /// A card-on-file token to pay with (`cardPaymentMethodSpecificInput.token`).
    public var token: String? = nil
    /// A hosted tokenization session whose form made the token to pay with.
    public var hostedTokenizationID: String? = nil
    /// A mobile wallet's payment (`mobilePaymentMethodSpecificInput`).
    public var mobile: Mobile? = nil
    /// A redirect method's payment (`redirectPaymentMethodSpecificInput`): PayPal (840) or iDEAL (809).
    public var redirect: Redirect? = nil

    /// `redirectPaymentMethodSpecificInput`: the product, where the consumer returns, and whether
    /// the approval waits for a capture (`requiresApproval`, PayPal only).
    public struct Redirect: Sendable {
        public let productID: Int
        public let returnURL: String
        public let requiresApproval: Bool
        /// The products a redirect payment may use, and their names.
        public static let products: [Int: String] = [840: "PayPal", 809: "iDEAL"]
    }

    /// `mobilePaymentMethodSpecificInput`: Apple Pay (302) or Google Pay (320), with the wallet's
    /// payment data decrypted by the merchant, or encrypted for the platform.
    public struct Mobile: Sendable {
        public let productID: Int
        public let decrypted: WalletData?
        public let encrypted: String?
    }

    /// A wallet's payment data: the device PAN, its expiry, the network token cryptogram and the ECI.
    public struct WalletData: Sendable {
        public let card: WorldlineCard
        public let cryptogram: [UInt8]
        public let eci: String

        /// Reads `decryptedPaymentData` (or the same members inside `encryptedPaymentData`), naming each property under `path`.
        public static func parse(_ d: WorldlineJSON, path: String) throws(WorldlineError) -> WalletData {
            let card = try WorldlineCard(pan: d.requiredString("dpan", maxLength: 19), expiryDate: d.requiredString("expiryDate", maxLength: 4), cvv: nil,
                                         cardholderName: d.string("cardholderName", maxLength: 51), path: path)
            let text = try d.requiredString("cryptogram", maxLength: 64)
            guard let bytes = Data(base64Encoded: text), bytes.count == NetworkTokenCryptogram.length else {
                throw .invalid(path + "cryptogram", "must be the network token cryptogram in base64 (\(NetworkTokenCryptogram.length) bytes)")
            }
            let eci = try d.requiredString("eci", maxLength: 2)
            guard eci.count == 2, eci.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw .invalid(path + "eci", "must be two digits (05, 07, …)") }
            return WalletData(card: card, cryptogram: Array(bytes), eci: eci)
        }
    }
    /// Store the card as a token when the payment is approved.
    public var tokenize = false
    public var cardOnFileRequestor: CardOnFileRequestor? = nil
    public var cardOnFileSequence: CardOnFileSequence? = nil
    public var recurring: RecurringSequence? = nil
    /// The first payment's scheme id, when the merchant keeps it rather than the token.
    public var initialSchemeTransactionID: String? = nil

    /// A payment the merchant starts without the cardholder (a later card-on-file or recurring
    /// payment): no CVV, no 3-D Secure, and a first payment it follows.
    public var isMerchantInitiated: Bool { cardOnFileRequestor == .merchantInitiated || recurring == .recurring }

    /// A payment that begins a series: its scheme id is what the later ones refer to.
    public var beginsSeries: Bool { cardOnFileSequence == .first || recurring == .first }

    /// The card-on-file words kept with the payment (`merchantInitiated/subsequent`, `recurring/first`).
    public var cardOnFile: String? {
        if let recurring { return "recurring/" + recurring.rawValue }
        guard cardOnFileRequestor != nil || cardOnFileSequence != nil else { return nil }
        return (cardOnFileRequestor ?? .cardholderInitiated).rawValue + "/" + (cardOnFileSequence ?? .subsequent).rawValue
    }

    /// Reads a payment request, naming the property of anything missing or wrong.
    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineCreatePayment {
        guard let order = try json.object("order") else { throw .missing("order") }
        guard let money = try order.object("amountOfMoney") else { throw .missing("order.amountOfMoney") }
        guard let amount = try money.int("amount", in: 1...999_999_999_999) else { throw .missing("order.amountOfMoney.amount") }
        let (currency, numeric) = try Self.currency(money.requiredString("currencyCode", maxLength: 3), property: "order.amountOfMoney.currencyCode")
        let reference = try order.object("references")?.string("merchantReference", maxLength: 50)
        let encrypted = try json.string("encryptedCustomerInput", maxLength: 16 << 10)
        let input = try json.object("cardPaymentMethodSpecificInput")
        var mode = AuthorizationMode.finalAuthorization
        if let text = try input?.string("authorizationMode") {
            guard let m = AuthorizationMode(rawValue: text) else {
                throw .invalid("cardPaymentMethodSpecificInput.authorizationMode", "must be SALE, FINAL_AUTHORIZATION or PRE_AUTHORIZATION, got \(shownValue(text, 40))")
            }
            mode = m
        }
        let product = try input?.int("paymentProductId", in: 1...99_999).map(Int.init)
        var card: WorldlineCard? = nil
        if let c = try input?.object("card") {
            let path = "cardPaymentMethodSpecificInput.card."
            card = try WorldlineCard(pan: c.requiredString("cardNumber", maxLength: 23), expiryDate: c.requiredString("expiryDate", maxLength: 4),
                                     cvv: c.string("cvv", maxLength: 4), cardholderName: c.string("cardholderName", maxLength: 51), path: path)
        }
        let token = try input?.string("token", maxLength: 40)
        let hosted = try json.string("hostedTokenizationId", maxLength: 64)
        var mobile: Mobile? = nil
        if let m = try json.object("mobilePaymentMethodSpecificInput") {
            let mp = "mobilePaymentMethodSpecificInput."
            guard let product = try m.int("paymentProductId", in: 1...99_999) else { throw .missing(mp + "paymentProductId") }
            guard product == 302 || product == 320 else { throw .invalid(mp + "paymentProductId", "must be 302 (Apple Pay) or 320 (Google Pay), got \(product)") }
            let decrypted = try m.object("decryptedPaymentData").map { d throws(WorldlineError) in try WalletData.parse(d, path: mp + "decryptedPaymentData.") }
            let sealed = try m.string("encryptedPaymentData", maxLength: 16 << 10)
            guard (decrypted == nil) != (sealed == nil) else {
                throw decrypted == nil ? .missing(mp + "decryptedPaymentData") : .invalid(mp + "encryptedPaymentData", "give either decryptedPaymentData or encryptedPaymentData, not both")
            }
            if let text = try m.string("authorizationMode") {
                guard let mm = AuthorizationMode(rawValue: text) else {
                    throw .invalid(mp + "authorizationMode", "must be SALE, FINAL_AUTHORIZATION or PRE_AUTHORIZATION, got \(shownValue(text, 40))")
                }
                mode = mm
            }
            mobile = Mobile(productID: Int(product), decrypted: decrypted, encrypted: sealed)
        }
        var redirect: Redirect? = nil
        if let r = try json.object("redirectPaymentMethodSpecificInput") {
            let rp = "redirectPaymentMethodSpecificInput."
            guard let product = try r.int("paymentProductId", in: 1...99_999) else { throw .missing(rp + "paymentProductId") }
            guard Redirect.products[Int(product)] != nil else {
                throw .invalid(rp + "paymentProductId", "must be 840 (PayPal) or 809 (iDEAL), the redirect methods this platform emulates; got \(product)")
            }
            guard let returnURL = try r.object("redirectionData")?.string("returnUrl", maxLength: 512) else { throw .missing(rp + "redirectionData.returnUrl") }
            try checkURL(returnURL, property: rp + "redirectionData.returnUrl")
            if product == 809, let c = try order.object("amountOfMoney")?.string("currencyCode", maxLength: 3), c != "EUR" {
                throw .invalid("order.amountOfMoney.currencyCode", "iDEAL pays in EUR only, got \(shownValue(c, 8))")
            }
            let approval = try r.bool("requiresApproval") ?? false
            if approval, product == 809 { throw .invalid(rp + "requiresApproval", "iDEAL payments are captured at once; only PayPal can wait for approval") }
            redirect = Redirect(productID: Int(product), returnURL: returnURL, requiresApproval: approval)
            mode = approval ? .finalAuthorization : .sale
        }
        let sources = [card != nil, encrypted != nil, token != nil, hosted != nil, mobile != nil, redirect != nil].filter { $0 }.count
        guard sources == 1 else {
            throw sources == 0
                ? .missing("encryptedCustomerInput")
                : .invalid(redirect != nil ? "redirectPaymentMethodSpecificInput" : mobile != nil ? "mobilePaymentMethodSpecificInput" : hosted != nil ? "hostedTokenizationId" : token != nil ? "cardPaymentMethodSpecificInput.token" : "encryptedCustomerInput",
                           "give one of encryptedCustomerInput, hostedTokenizationId, mobilePaymentMethodSpecificInput, redirectPaymentMethodSpecificInput, cardPaymentMethodSpecificInput.card and cardPaymentMethodSpecificInput.token")
        }
        var threeDS: ThreeDSecure? = nil
        if let t = try input?.object("threeDSecure") {
            let nested = try t.object("redirectionData")?.string("returnUrl", maxLength: 512)
            var returnURL = nested
            if returnURL == nil { returnURL = try input?.string("returnUrl", maxLength: 512) }
            if let returnURL { try Self.checkURL(returnURL, property: "cardPaymentMethodSpecificInput.threeDSecure.redirectionData.returnUrl") }
            threeDS = ThreeDSecure(returnURL: returnURL, skipAuthentication: try t.bool("skipAuthentication") ?? false,
                                   challengeIndicator: try t.string("challengeIndicator", maxLength: 40))
        } else if let returnURL = try input?.string("returnUrl", maxLength: 512) {
            try Self.checkURL(returnURL, property: "cardPaymentMethodSpecificInput.returnUrl")
            threeDS = ThreeDSecure(returnURL: returnURL, skipAuthentication: false, challengeIndicator: nil)
        }
        var request = WorldlineCreatePayment(amount: amount, currency: currency, currencyNumeric: numeric, authorizationMode: mode,
                                             merchantReference: reference, paymentProductID: product, card: card, encryptedCustomerInput: encrypted,
                                             threeDSecure: threeDS)
        request.token = token
        request.hostedTokenizationID = hosted
        request.mobile = mobile
        request.redirect = redirect
        try request.readCardOnFile(input)
        return request
    }

    /// The card-on-file and recurring part of `cardPaymentMethodSpecificInput`, each value
    /// checked and the combinations a series allows.
    mutating func readCardOnFile(_ input: WorldlineJSON?) throws(WorldlineError) {
        guard let input else { return }
        let p = "cardPaymentMethodSpecificInput."
        func value<E: RawRepresentable & CaseIterable>(_ json: WorldlineJSON, _ key: String, _ path: String) throws(WorldlineError) -> E?
            where E.RawValue == String {
            guard let text = try json.string(key, maxLength: 40) else { return nil }
            guard let v = E(rawValue: text) else {
                throw .invalid(path, "must be \(E.allCases.map(\.rawValue).joined(separator: " or ")), got \(shownValue(text, 40))")
            }
            return v
        }
        tokenize = try input.bool("tokenize") ?? false
        cardOnFileRequestor = try value(input, "unscheduledCardOnFileRequestor", p + "unscheduledCardOnFileRequestor")
        cardOnFileSequence = try value(input, "unscheduledCardOnFileSequenceIndicator", p + "unscheduledCardOnFileSequenceIndicator")
        if let r = try input.object("recurring") {
            recurring = try value(r, "recurringPaymentSequenceIndicator", p + "recurring.recurringPaymentSequenceIndicator")
        }
        if recurring == nil, try input.bool("isRecurring") == true { recurring = .first }
        initialSchemeTransactionID = try input.string("initialSchemeTransactionId", maxLength: 32)
        if recurring != nil, cardOnFileRequestor != nil || cardOnFileSequence != nil {
            throw .invalid(p + "recurring", "a payment is recurring or unscheduled card on file, not both")
        }
        if cardOnFileRequestor == .merchantInitiated, cardOnFileSequence == .first {
            throw .invalid(p + "unscheduledCardOnFileSequenceIndicator",
                           "a merchant-initiated payment is never the first of its series: the cardholder starts it (cardholderInitiated, first)")
        }
        if isMerchantInitiated, card?.cvv != nil {
            throw .invalid(p + "card.cvv", "a merchant-initiated payment is made without the cardholder, so without a CVV")
        }
    }

    static func checkURL(_ text: String, property: String) throws(WorldlineError) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw .invalid(property, "must be an absolute http(s) URL")
        }
    }

    /// The ISO 4217 number of an alphabetic code this platform knows.
    public static func currency(_ code: String, property: String) throws(WorldlineError) -> (String, Int) {
        guard let n = ISO4217.numbers[code] else {
            throw .invalid(property, "must be an ISO 4217 code this platform knows (\(ISO4217.numbers.keys.sorted().joined(separator: ", "))), got \(shownValue(code, 8))")
        }
        return (code, n)
    }
}

/// `POST …/payments/{id}/capture`: an amount (what is left to capture when absent, and then
/// final), and whether it closes the payment to more captures (`isFinal`, false by default as the
/// SDKs document it; capturing all that is left is final too).
public struct WorldlineCapture: Sendable {
    public let amount: Int64?
    public let isFinal: Bool
    public let merchantReference: String?

    /// Reads a capture body (empty: capture all).
    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineCapture {
        WorldlineCapture(amount: try json.int("amount", in: 1...999_999_999_999), isFinal: try json.bool("isFinal") ?? false,
                         merchantReference: try json.object("references")?.string("merchantReference", maxLength: 50))
    }
}

/// `POST …/payments/{id}/cancel`: `amountOfMoney` to release part of what is left to capture
/// (all of it when absent), and `isFinal`.
public struct WorldlineCancel: Sendable {
    public let amount: Int64?
    public let currency: String?
    public let isFinal: Bool

    /// Reads a cancel body (empty: cancel all that is left).
    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineCancel {
        let (amount, currency) = try WorldlineRefundRequest.money(json)
        return WorldlineCancel(amount: amount, currency: currency, isFinal: try json.bool("isFinal") ?? false)
    }
}

/// The platform's test card numbers cardbench treats as the platform does (docs/worldline.md has
/// the table with each one's source). A number not in it goes to the bench's issuer, whose
/// profiles and tables decide.
public enum WorldlineTestCards {
    /// What 3-D Secure does with a card when the request asks for it (a `returnUrl`).
    public enum ThreeDS: Sendable { case frictionless, challenge, authenticationFails }

    public struct Entry: Sendable {
        public let threeDS: ThreeDS
        /// The platform's decline (ISO response code and message) instead of the issuer's answer.
        public let decline: (code: String, message: String)?
    }

    public static let table: [String: Entry] = [
        // Direct's 3-D Secure test cards (Visa and Mastercard frictionless and challenge).
        "4330264936344675": Entry(threeDS: .frictionless, decline: nil),
        "4874970686672022": Entry(threeDS: .challenge, decline: nil),
        "5137009801943438": Entry(threeDS: .frictionless, decline: nil),
        "5130257474533310": Entry(threeDS: .challenge, decline: nil),
        "5168645305790452": Entry(threeDS: .frictionless, decline: ("05", "declined by the issuer (the platform's declined test card)")),
        "5144144373781246": Entry(threeDS: .challenge, decline: ("05", "declined by the issuer (the platform's declined test card)")),
        // The 3DSv2 test cases: frictionless, and authentication that fails or is rejected.
        "4012000033330026": Entry(threeDS: .frictionless, decline: nil),
        "5200000091444270": Entry(threeDS: .frictionless, decline: nil),
        "371449635398431": Entry(threeDS: .frictionless, decline: nil),
        "4012001775445550": Entry(threeDS: .authenticationFails, decline: nil),
        "4012003360932265": Entry(threeDS: .authenticationFails, decline: nil),
        // The SDKs' integration tests' declined card (it fails the Luhn check).
        "4321456998744563": Entry(threeDS: .frictionless, decline: ("14", "invalid card number (the platform's declined test card)")),
    ]
}

/// `POST …/payments/{id}/refund`: an amount (what is left to refund when absent).
public struct WorldlineRefundRequest: Sendable {
    public let amount: Int64?
    public let currency: String?
    public let merchantReference: String?

    /// Reads a refund body (empty: refund what is left).
    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineRefundRequest {
        let (amount, currency) = try money(json)
        return WorldlineRefundRequest(amount: amount, currency: currency,
                                      merchantReference: try json.object("references")?.string("merchantReference", maxLength: 50))
    }
}

extension WorldlineRefundRequest {
    /// An operation's optional `amountOfMoney`: its amount and currency, each checked.
    static func money(_ json: WorldlineJSON) throws(WorldlineError) -> (amount: Int64?, currency: String?) {
        guard let money = try json.object("amountOfMoney") else { return (nil, nil) }
        let amount = try money.int("amount", in: 1...999_999_999_999)
        let currency = try money.string("currencyCode", maxLength: 3)
        if let currency { _ = try WorldlineCreatePayment.currency(currency, property: "amountOfMoney.currencyCode") }
        return (amount, currency)
    }
}

/// The decrypted `encryptedCustomerInput`: `{clientSessionId, nonce, paymentProductId, tokenize,
/// accountOnFileId, paymentValues[{key, value}], collectedDeviceInformation}`.
public struct WorldlineCustomerInput: Sendable {
    public let clientSessionID: String
    public let nonce: String
    public let paymentProductID: Int?
    /// The card typed in, or nil when an account on file (`accountOnFileID`) pays.
    public let card: WorldlineCard?
    /// The token of the account on file the customer picked.
    public let accountOnFileID: String?
    /// The customer asked for the card to be stored.
    public let tokenize: Bool
    /// A CVV typed for an account on file.
    public let cvv: String?

    public static func parse(_ plaintext: [UInt8]) throws(WorldlineError) -> WorldlineCustomerInput {
        let json: WorldlineJSON
        do throws(WorldlineError) { json = try WorldlineJSON.parseCardData(plaintext) } catch {
            throw .invalid("encryptedCustomerInput", "its payload is not a JSON object")
        }
        let p = "encryptedCustomerInput."
        guard let session = try json.string("clientSessionId", maxLength: 64) else { throw .missing(p + "clientSessionId") }
        guard let nonce = try json.string("nonce", maxLength: 128), !nonce.isEmpty else { throw .missing(p + "nonce") }
        let product = try json.int("paymentProductId", in: 1...99_999).map(Int.init)
        let tokenize = try json.bool("tokenize") ?? false
        let accountOnFile = try json.string("accountOnFileId", maxLength: 64)
        guard let values = try json.array("paymentValues") else { throw .missing(p + "paymentValues") }
        var fields: [String: String] = [:]
        for v in values {
            fields[try v.requiredString("key", maxLength: 64)] = try v.requiredString("value", maxLength: 64)
        }
        if let accountOnFile, !accountOnFile.isEmpty, fields["cardNumber"] == nil {
            // The account on file gives the card; the customer may have typed its CVV. A card
            // number typed as well wins: it is what the customer entered last.
            if let cvv = fields["cvv"], !(3...4).contains(cvv.count) || !cvv.allSatisfy({ $0.isASCII && $0.isNumber }) {
                throw .invalid(p + "paymentValues.cvv", "must be 3 or 4 digits")
            }
            return WorldlineCustomerInput(clientSessionID: session, nonce: nonce, paymentProductID: product, card: nil,
                                          accountOnFileID: accountOnFile, tokenize: false, cvv: fields["cvv"])
        }
        guard let number = fields["cardNumber"] else { throw .missing(p + "paymentValues.cardNumber") }
        guard let expiry = fields["expiryDate"] else { throw .missing(p + "paymentValues.expiryDate") }
        // The SDKs send the expiry as MMYY with the mask's '/' removed; take "MM/YY" too.
        let card = try WorldlineCard(pan: number, expiryDate: expiry.replacingOccurrences(of: "/", with: ""), cvv: fields["cvv"],
                                     cardholderName: fields["cardholderName"], path: p + "paymentValues.")
        return WorldlineCustomerInput(clientSessionID: session, nonce: nonce, paymentProductID: product, card: card, accountOnFileID: nil,
                                      tokenize: tokenize, cvv: nil)
    }
}

/// `POST /v2/{merchantId}/tokens`: a card to store, plain (`card.data.card`) or typed into the
/// Client SDK (`encryptedCustomerInput`), and its product.
public struct WorldlineCreateToken: Sendable {
    public let card: WorldlineCard?
    public let encryptedCustomerInput: String?
    public let paymentProductID: Int?

    /// Reads a token request, naming the property of anything missing or wrong.
    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineCreateToken {
        let encrypted = try json.string("encryptedCustomerInput", maxLength: 16 << 10)
        let product = try json.int("paymentProductId", in: 1...99_999).map(Int.init)
        var card: WorldlineCard? = nil
        if let c = try json.object("card")?.object("data")?.object("card") {
            card = try WorldlineCard(pan: c.requiredString("cardNumber", maxLength: 23), expiryDate: c.requiredString("expiryDate", maxLength: 4),
                                     cvv: nil, cardholderName: c.string("cardholderName", maxLength: 51), path: "card.data.card.")
        }
        guard (card == nil) != (encrypted == nil) else {
            throw card == nil ? .missing("card.data.card") : .invalid("encryptedCustomerInput", "give either card or encryptedCustomerInput, not both")
        }
        return WorldlineCreateToken(card: card, encryptedCustomerInput: encrypted, paymentProductID: product)
    }
}

/// `POST /v2/{merchantId}/hostedcheckouts`, the parts the platform acts on: the order, the
/// page's settings (`hostedCheckoutSpecificInput`) and the card input the payment will have.
public struct WorldlineHostedCheckoutRequest: Sendable {
    public let amount: Int64
    public let currency: String
    public let merchantReference: String?
    public let returnURL: String?
    public let locale: String?
    public let variant: String?
    public let showResultPage: Bool
    /// The merchant's tokens, offered as saved cards (the platform takes them comma-separated).
    public let tokens: [String]
    public let isRecurring: Bool
    /// Card products the page may offer; empty for every one.
    public let restrictTo: [Int]
    public let exclude: [Int]
    public let authorizationMode: WorldlineCreatePayment.AuthorizationMode
    public let tokenize: Bool
    public let sessionTimeoutMinutes: Int
    public let allowedAttempts: Int

    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineHostedCheckoutRequest {
        guard let order = try json.object("order") else { throw .missing("order") }
        guard let money = try order.object("amountOfMoney") else { throw .missing("order.amountOfMoney") }
        guard let amount = try money.int("amount", in: 1...999_999_999_999) else { throw .missing("order.amountOfMoney.amount") }
        let (currency, _) = try WorldlineCreatePayment.currency(money.requiredString("currencyCode", maxLength: 3), property: "order.amountOfMoney.currencyCode")
        let reference = try order.object("references")?.string("merchantReference", maxLength: 50)
        let h = try json.object("hostedCheckoutSpecificInput")
        let p = "hostedCheckoutSpecificInput."
        let returnURL = try h?.string("returnUrl", maxLength: 512)
        if let returnURL { try WorldlineCreatePayment.checkURL(returnURL, property: p + "returnUrl") }
        let locale = try h?.string("locale", maxLength: 10)
        if let locale, locale.wholeMatch(of: /[a-z]{2}_[A-Z]{2}/) == nil {
            throw .invalid(p + "locale", "must be a language and a country, as en_GB, got \(shownValue(locale, 10))")
        }
        let variant = try h?.string("variant", maxLength: 50)
        let tokenText = try h?.string("tokens", maxLength: 1000) ?? ""
        let tokens = tokenText.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard tokens.count <= 10 else { throw .invalid(p + "tokens", "at most 10 tokens, got \(tokens.count)") }
        func products(_ filter: WorldlineJSON?) throws(WorldlineError) -> [Int] {
            guard let filter else { return [] }
            return try filter.ints("products", in: 1...99_999)?.map { Int($0) } ?? []
        }
        let filters = try h?.object("paymentProductFilters")
        let restrictTo = try products(try filters?.object("restrictTo")), exclude = try products(try filters?.object("exclude"))
        for id in restrictTo + exclude where WorldlineProducts.product(id, assetURL: "") == nil {
            throw .invalid(p + "paymentProductFilters", "\(id) is not a payment product this platform offers")
        }
        let card = try json.object("cardPaymentMethodSpecificInput")
        var mode = WorldlineCreatePayment.AuthorizationMode.finalAuthorization
        if let text = try card?.string("authorizationMode") {
            guard let m = WorldlineCreatePayment.AuthorizationMode(rawValue: text) else {
                throw .invalid("cardPaymentMethodSpecificInput.authorizationMode", "must be SALE, FINAL_AUTHORIZATION or PRE_AUTHORIZATION, got \(shownValue(text, 40))")
            }
            mode = m
        }
        let timeout = try h?.int("sessionTimeout", in: 1...1440).map(Int.init) ?? 180
        let attempts = try h?.int("allowedNumberOfPaymentAttempts", in: 1...10).map(Int.init) ?? 10
        return WorldlineHostedCheckoutRequest(amount: amount, currency: currency, merchantReference: reference, returnURL: returnURL, locale: locale,
                                              variant: variant, showResultPage: try h?.bool("showResultPage") ?? true, tokens: tokens,
                                              isRecurring: try h?.bool("isRecurring") ?? false, restrictTo: restrictTo, exclude: exclude,
                                              authorizationMode: mode, tokenize: try card?.bool("tokenize") ?? false,
                                              sessionTimeoutMinutes: timeout, allowedAttempts: attempts)
    }

    /// The card products the page offers: every one, less the filters'.
    public var offeredProducts: [Int] {
        WorldlineProducts.offeredIDs.filter { (restrictTo.isEmpty || restrictTo.contains($0)) && !exclude.contains($0) }
    }
}

/// `POST /v2/{merchantId}/hostedtokenizations`: the form's settings.
public struct WorldlineHostedTokenizationRequest: Sendable {
    public let locale: String?
    public let variant: String?
    public let tokens: [String]
    public let restrictTo: [Int]
    public let exclude: [Int]

    public static func parse(_ json: WorldlineJSON) throws(WorldlineError) -> WorldlineHostedTokenizationRequest {
        let locale = try json.string("locale", maxLength: 10)
        if let locale, locale.wholeMatch(of: /[a-z]{2}_[A-Z]{2}/) == nil {
            throw .invalid("locale", "must be a language and a country, as en_GB, got \(shownValue(locale, 10))")
        }
        let tokens = (try json.string("tokens", maxLength: 1000) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard tokens.count <= 10 else { throw .invalid("tokens", "at most 10 tokens, got \(tokens.count)") }
        let filters = try json.object("paymentProductFilters")
        let restrictTo = try filters?.object("restrictTo")?.ints("products", in: 1...99_999)?.map { Int($0) } ?? []
        let exclude = try filters?.object("exclude")?.ints("products", in: 1...99_999)?.map { Int($0) } ?? []
        for id in restrictTo + exclude where WorldlineProducts.product(id, assetURL: "") == nil {
            throw .invalid("paymentProductFilters", "\(id) is not a payment product this platform offers")
        }
        return WorldlineHostedTokenizationRequest(locale: locale, variant: try json.string("variant", maxLength: 50), tokens: tokens,
                                                  restrictTo: restrictTo, exclude: exclude)
    }

    /// The card products the form takes.
    public var offeredProducts: [Int] {
        WorldlineProducts.offeredIDs.filter { (restrictTo.isEmpty || restrictTo.contains($0)) && !exclude.contains($0) }
    }
}
