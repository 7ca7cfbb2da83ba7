import EMV
import LedgerModel
import Foundation

/// The card payment products the platform offers, with the fields the client SDKs draw and
/// validate (`cardNumber`, `expiryDate`, `cvv`, `cardholderName`), and IIN lookups.
public enum WorldlineProducts {
    /// The brands offered, in display order, with their product ids.
    public static let offered: [(id: Int, brand: CardBrand, label: String)] = [
        (1, .visa, "VISA"), (3, .mastercard, "MasterCard"), (2, .americanExpress, "American Express"), (117, .maestro, "Maestro"),
        (125, .jcb, "JCB"), (128, .discover, "Discover"), (56, .unionPay, "UnionPay International"),
    ]

    /// The offered product with this id.
    public static func brand(ofProduct id: Int) -> (id: Int, brand: CardBrand, label: String)? { offered.first { $0.id == id } }

    /// A product as `GET products/{id}` gives it.
    public static func product(_ id: Int, assetURL: String) -> [String: Any]? {
        if let wallet = mobile.first(where: { $0.id == id }) {
            let hints: [String: Any] = ["displayOrder": offered.count + (id == 302 ? 0 : 1), "label": wallet.label,
                                        "logo": "\(assetURL)templates/master/global/css/img/ppimages/pp_logo_\(id)_v1.png"]
            var p: [String: Any] = ["id": id, "paymentMethod": "mobile", "paymentProductGroup": "Mobile", "allowsRecurring": false,
                                    "allowsTokenization": false, "usesRedirectionTo3rdParty": false, "displayHints": hints,
                                    "displayHintsList": [hints], "fields": [[String: Any]]()]
            // The networks the wallet may carry, in each SDK's words.
            if id == 302 { p["paymentProduct302SpecificData"] = ["networks": ["Visa", "MasterCard", "Amex", "Discover", "JCB"]] }
            if id == 320 { p["paymentProduct320SpecificData"] = ["gateway": "worldlinedirect", "networks": ["VISA", "MASTERCARD", "AMEX", "DISCOVER", "JCB"]] }
            return p
        }
        if let name = redirect.first(where: { $0.id == id })?.label {
            let hints: [String: Any] = ["displayOrder": offered.count + mobile.count + (id == 840 ? 0 : 1), "label": name,
                                        "logo": "\(assetURL)templates/master/global/css/img/ppimages/pp_logo_\(id)_v1.png"]
            return ["id": id, "paymentMethod": "redirect", "paymentProductGroup": name, "allowsRecurring": false, "allowsTokenization": false,
                    "usesRedirectionTo3rdParty": true, "displayHints": hints, "displayHintsList": [hints], "fields": [[String: Any]]()]
        }
        guard let (index, entry) = offered.enumerated().first(where: { $0.element.id == id }).map({ ($0.offset, $0.element) }) else { return nil }
        let hints: [String: Any] = ["displayOrder": index, "label": entry.label, "logo": "\(assetURL)templates/master/global/css/img/ppimages/pp_logo_\(id)_v1.png"]
        return [
            "id": id, "paymentMethod": "card", "paymentProductGroup": "Cards", "allowsRecurring": true, "allowsTokenization": true,
            "usesRedirectionTo3rdParty": false, "displayHints": hints, "displayHintsList": [hints], "fields": fields(entry.brand),
        ]
    }

    /// The mobile wallets the platform takes: Apple Pay and Google Pay, each carrying a card
    /// network's token (`mobilePaymentMethodSpecificInput`).
    public static let mobile: [(id: Int, label: String)] = [(302, "Apple Pay"), (320, "Google Pay")]

    /// The redirect methods the platform emulates: the payer answers on the method's page.
    public static let redirect: [(id: Int, label: String)] = [(840, "PayPal"), (809, "iDEAL")]

    /// The ids of the card products the platform offers, in its display order.
    public static var offeredIDs: [Int] { offered.map(\.id) }

    /// `GET products`: every card product (the bench offers them in every country and currency).
    public static func products(assetURL: String) -> [String: Any] {
        ["paymentProducts": offered.compactMap { product($0.id, assetURL: assetURL) } + mobile.compactMap { product($0.id, assetURL: assetURL) }
         + redirect.compactMap { product($0.id, assetURL: assetURL) }]
    }

    /// A token as the Client API shows an account on file: its id, product, read-only
    /// attributes (the masked number as `alias`, the expiry date, the name) and a label template.
    public static func accountOnFile(_ t: WorldlineToken, assetURL: String) -> [String: Any] {
        var attributes: [[String: Any]] = [["key": "alias", "value": t.maskedCardNumber, "status": "READ_ONLY"],
                                           ["key": "expiryDate", "value": t.expiryDate, "status": "READ_ONLY"]]
        if let name = t.cardholderName { attributes.append(["key": "cardholderName", "value": name, "status": "READ_ONLY"]) }
        return ["id": t.token, "paymentProductId": t.paymentProductID, "attributes": attributes,
                "displayHints": ["labelTemplate": [["attributeKey": "alias", "mask": NSNull()]],
                                 "logo": "\(assetURL)templates/master/global/css/img/ppimages/pp_logo_\(t.paymentProductID)_v1.png"]]
    }

    /// A products answer (or one product) with the accounts on file of its products added, as
    /// the Client API shows a session created with tokens.
    public static func adding(accountsOnFile tokens: [WorldlineToken], to body: [String: Any], assetURL: String) -> [String: Any] {
        guard !tokens.isEmpty else { return body }
        func add(_ product: [String: Any]) -> [String: Any] {
            var product = product
            let mine = tokens.filter { $0.paymentProductID == product["id"] as? Int }.map { accountOnFile($0, assetURL: assetURL) }
            if !mine.isEmpty { product["accountsOnFile"] = mine }
            return product
        }
        var body = body
        if let list = body["paymentProducts"] as? [[String: Any]] {
            body["paymentProducts"] = list.map(add)
            body["accountsOnFile"] = tokens.map { accountOnFile($0, assetURL: assetURL) }
            return body
        }
        return add(body)
    }

    /// `GET products/{id}/networks`.
    public static func networks(_ id: Int) -> [String: Any]? {
        guard let entry = brand(ofProduct: id) else { return nil }
        return ["networks": [entry.brand == .americanExpress ? "Amex" : entry.label.capitalized]]
    }

    /// The card-number mask of a brand: the document's 16+3 groups, Amex's 4-6-5.
    public static func cardNumberMask(_ brand: CardBrand) -> String {
        brand == .americanExpress ? "{{9999}} {{999999}} {{99999}}" : "{{9999}} {{9999}} {{9999}} {{9999}} {{999}}"
    }

    static func fields(_ brand: CardBrand) -> [[String: Any]] {
        let lengths = brand.panLengths
        func field(_ id: String, _ type: String, order: Int, label: String, mask: String?, placeholder: String, required: Bool,
                   obfuscate: Bool = false, validators: [String: Any], keyboard: String) -> [String: Any] {
            var hints: [String: Any] = ["displayOrder": order, "label": label, "placeholderLabel": placeholder, "obfuscate": obfuscate,
                                        "alwaysShow": false, "preferredInputType": keyboard, "formElement": ["type": "text"]]
            if let mask { hints["mask"] = mask }
            return ["id": id, "type": type, "displayHints": hints, "dataRestrictions": ["isRequired": required, "validators": validators]]
        }
        let cvv = brand.cvvLength
        return [
            field("cardNumber", "numericstring", order: 0, label: "Card number", mask: cardNumberMask(brand), placeholder: "**** **** **** ****",
                  required: true, validators: ["length": ["minLength": lengths.min()!, "maxLength": lengths.max()!], "luhn": [String: Any]()],
                  keyboard: "IntegerKeyboard"),
            field("expiryDate", "expirydate", order: 1, label: "Expiry date", mask: "{{99}}/{{99}}", placeholder: "MM/YY", required: true,
                  validators: ["expirationDate": [String: Any](), "regularExpression": ["regularExpression": "(?:0[1-9]|1[0-2])[0-9]{2}"]],
                  keyboard: "IntegerKeyboard"),
            field("cvv", "numericstring", order: 2, label: "CVV", mask: "{{" + String(repeating: "9", count: cvv) + "}}",
                  placeholder: String(repeating: "*", count: cvv), required: true, obfuscate: true,
                  validators: ["length": ["minLength": cvv, "maxLength": cvv]], keyboard: "IntegerKeyboard"),
            field("cardholderName", "string", order: 3, label: "Cardholder name", mask: nil, placeholder: "John Doe", required: false,
                  validators: ["length": ["minLength": 2, "maxLength": 51]], keyboard: "StringKeyboard"),
        ]
    }

    /// `services/getIINdetails` for `bin` (6 to 19 digits): the product, or nil when no brand issues it.
    public static func iinDetails(_ bin: String) throws(WorldlineError) -> [String: Any]? {
        let digits = Array(bin.utf8)
        guard (6...19).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw .invalid("bin", "must be the first 6 to 19 digits of a card number")
        }
        guard let brand = CardBrand.detect(pan: bin), let entry = offered.first(where: { $0.brand == brand }) else { return nil }
        let lengths = brand.panLengths
        return ["paymentProductId": entry.id, "countryCode": "BE", "isAllowedInContext": true, "cardScheme": scheme(brand),
                "cardType": brand == .maestro ? "Debit" : "Credit", "cardPanType": "pan", "panLengthMin": lengths.min()!,
                "panLengthMax": lengths.max()!, "panLuhnCheck": true]
    }

    /// The network name `getIINdetails` gives in `cardScheme` (the SDKs' list: AmericanExpress,
    /// Cup, DinersDiscover, Jcb, Mastercard, Visa, …).
    public static func scheme(_ brand: CardBrand) -> String {
        switch brand {
        case .visa: "Visa"
        case .mastercard, .maestro: "Mastercard"
        case .americanExpress: "AmericanExpress"
        case .jcb: "Jcb"
        case .discover: "DinersDiscover"
        case .unionPay: "Cup"
        case .carnet: "Carnet"
        }
    }

    /// `GET products`' query as the platform reads it: `countryCode` is required (ISO 3166
    /// alpha-2), `currencyCode` when given is ISO 4217.
    public static func checkProductsQuery(countryCode: String?, currencyCode: String?) throws(WorldlineError) {
        guard let country = countryCode, !country.isEmpty else { throw .missing("countryCode") }
        guard country.utf8.count == 2, country.allSatisfy({ $0.isASCII && $0.isLetter && $0.isUppercase }) else {
            throw .invalid("countryCode", "must be an ISO 3166-1 alpha-2 code in upper case, got \(shownValue(country, 8))")
        }
        if let currency = currencyCode { _ = try WorldlineCreatePayment.currency(currency, property: "currencyCode") }
    }
}
