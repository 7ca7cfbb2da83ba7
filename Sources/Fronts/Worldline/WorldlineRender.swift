import EMV
import Foundation
import LedgerModel
import Terminal

/// The platform's statuses: the code and category each status is reported with, and what may
/// be done next (docs/worldline.md has the table and its sources).
public enum WorldlineStatus {
    /// A payment's `statusOutput`.
    public struct Output: Sendable, Equatable {
        public let statusCode: Int
        public let statusCategory: String
        public let isAuthorized: Bool
        public let isCancellable: Bool
        public let isRefundable: Bool
    }

    /// The status output of a payment in its current status.
    public static func output(_ p: WorldlinePayment) -> Output {
        // What is left to capture keeps the payment authorised and cancellable, whatever its
        // latest operation; what was captured and not refunded keeps it refundable.
        let open = p.capturable > 0
        let refundable = p.refundedAmount < p.capturedAmount
        return switch p.status {
        case .redirected: Output(statusCode: 46, statusCategory: "PENDING_PAYMENT", isAuthorized: false, isCancellable: true, isRefundable: false)
        case .pendingCapture: Output(statusCode: 5, statusCategory: "PENDING_MERCHANT", isAuthorized: true, isCancellable: true, isRefundable: false)
        // 91 "payment processing" and 81 "refund pending": queued until they settle.
        case .captureRequested:
            Output(statusCode: 91, statusCategory: "PENDING_CONNECT_OR_3RD_PARTY", isAuthorized: open, isCancellable: open, isRefundable: refundable)
        // While a refund waits, captures and cancels wait for it (WorldlineLifecycle).
        case .refundRequested:
            Output(statusCode: 81, statusCategory: "PENDING_CONNECT_OR_3RD_PARTY", isAuthorized: false, isCancellable: false, isRefundable: refundable)
        case .captured:
            Output(statusCode: 9, statusCategory: "COMPLETED", isAuthorized: open, isCancellable: open, isRefundable: refundable)
        case .refunded: Output(statusCode: 8, statusCategory: "REFUNDED", isAuthorized: false, isCancellable: false, isRefundable: false)
        // 1: cancelled by the customer (a challenge never completed); 61: part of the
        // authorisation cancelled, the rest still capturable; 6: all of what was left released.
        case .cancelled where p.transactionID == nil:
            Output(statusCode: 1, statusCategory: "UNSUCCESSFUL", isAuthorized: false, isCancellable: false, isRefundable: false)
        case .cancelled where open:
            Output(statusCode: 61, statusCategory: "PENDING_MERCHANT", isAuthorized: true, isCancellable: true, isRefundable: refundable)
        case .cancelled:
            Output(statusCode: 6, statusCategory: p.capturedAmount > 0 ? "COMPLETED" : "UNSUCCESSFUL", isAuthorized: false, isCancellable: false,
                   isRefundable: refundable)
        default: Output(statusCode: 2, statusCategory: "UNSUCCESSFUL", isAuthorized: false, isCancellable: false, isRefundable: false)
        }
    }

    /// An operation's status code and category: 91 and 81 while it waits to settle.
    public static func operationOutput(_ o: WorldlineOperation) -> (code: Int, category: String) {
        switch o.status {
        case .captureRequested: (91, "PENDING_CONNECT_OR_3RD_PARTY")
        case .captured: (9, "COMPLETED")
        case .refundRequested: (81, "PENDING_CONNECT_OR_3RD_PARTY")
        case .refunded: (8, "REFUNDED")
        case .cancelled: (6, "UNSUCCESSFUL")
        default: (2, "UNSUCCESSFUL")
        }
    }

    /// The platform's product id for a card brand (its `paymentProductId`).
    public static func productID(_ brand: CardBrand?) -> Int {
        switch brand {
        case .visa: 1
        case .americanExpress: 2
        case .mastercard: 3
        case .maestro: 117
        case .jcb: 125
        case .discover: 128
        case .unionPay: 56
        case .carnet, nil: 1
        }
    }

    /// A host decline as the platform's error: its code, id and message.
    public static func declineError(responseCode: String?, message: String?) -> WorldlineError {
        // The two forms recorded from the platform: an acquirer's refusal (30511001
        // EXTERNAL_ACQUIRER_ERROR, IO_ERROR) and a card the platform refuses (30331001
        // INVALID_CARD); the others follow their pattern with the ISO response code inside.
        let (code, id, category): (String, String, String) = switch responseCode ?? "" {
        case "N7", "14", "54": ("30331001", "INVALID_CARD", "PAYMENT_PLATFORM_ERROR")
        case "3DS": ("30171001", "AUTHENTICATION_FAILURE", "PAYMENT_PLATFORM_ERROR")
        default: ("30511001", "EXTERNAL_ACQUIRER_ERROR", "IO_ERROR")
        }
        let detail = responseCode.map { $0 == "3DS" ? "" : " (response code \($0))" } ?? ""
        return WorldlineError(httpStatus: 402, errorCode: code, id: id, category: category,
                              message: (message ?? "the payment was declined") + detail, retriable: false)
    }
}

/// Renders the platform's JSON bodies.
public enum WorldlineRender {
    /// `SessionResponse`.
    public static func sessionText(sessionID: String, customerID: String, clientAPIURL: String, assetURL: String,
                                   invalidTokens: [String] = []) -> String {
        text(["clientSessionId": sessionID, "customerId": customerID, "clientApiUrl": clientAPIURL, "assetUrl": assetURL,
              "invalidTokens": invalidTokens])
    }

    /// A new payment's answer: `CreatePaymentResponse`, or for a rejected payment the platform's
    /// error with its `paymentResult` (`errorID` names the error).
    public static func createdText(_ p: WorldlinePayment, redirectURL: String?, errorID: String) -> String {
        guard p.status == .rejected else { return text(created(p, redirectURL: redirectURL)) }
        return text(error(WorldlineStatus.declineError(responseCode: p.responseCode, message: p.message), errorID: errorID,
                          extra: ["paymentResult": created(p, redirectURL: nil)]))
    }

    /// `PaymentResponse`.
    public static func paymentOnlyText(_ p: WorldlinePayment) -> String { text(payment(p)) }

    /// `{captures: [CaptureResponse]}`.
    public static func capturesText(_ p: WorldlinePayment) -> String {
        text(["captures": p.operations.filter { $0.kind == .capture }.map { capture($0, p) }])
    }

    /// `{refunds: [RefundResponse]}`.
    public static func refundsText(_ p: WorldlinePayment) -> String {
        text(["refunds": p.operations.filter { $0.kind == .refund }.map { refund($0, p) }])
    }

    /// `CaptureResponse`.
    public static func captureText(_ o: WorldlineOperation, _ p: WorldlinePayment) -> String { text(capture(o, p)) }

    /// `RefundResponse`.
    public static func refundText(_ o: WorldlineOperation, _ p: WorldlinePayment) -> String { text(refund(o, p)) }

    /// A webhook's body: `{apiVersion, id, created, merchantId, type, payment | refund}`.
    public static func webhookText(type: String, id: String, created: String, merchantID: String, payment p: WorldlinePayment?,
                                   refund r: (WorldlineOperation, WorldlinePayment)?) -> String {
        var body: [String: Any] = ["apiVersion": "v1", "id": id, "created": created, "merchantId": merchantID, "type": type]
        if let p { body["payment"] = payment(p) }
        if let (operation, p) = r { body["refund"] = refund(operation, p) }
        return text(body)
    }

    /// What a hosted checkout's page pays with, typed: the card typed in or the saved card's token.
    public enum CheckoutSource: Sendable {
        case card(number: String, expiryDate: String, cvv: String?, cardholderName: String?)
        case token(String)
    }

    /// The `createPayment` body a hosted checkout's page sends for its checkout, so the page's
    /// payment goes through the same reader and checks as a merchant server's.
    public static func checkoutPaymentBody(amount: Int64, currency: String, merchantReference: String?, authorizationMode: String,
                                           returnPage: String, source: CheckoutSource, tokenize: Bool, recurring: Bool) -> [UInt8] {
        var input: [String: Any] = ["authorizationMode": authorizationMode, "threeDSecure": ["redirectionData": ["returnUrl": returnPage]]]
        switch source {
        case .token(let token): input["token"] = token
        case .card(let number, let expiry, let cvv, let name):
            var card: [String: Any] = ["cardNumber": number, "expiryDate": expiry]
            if let cvv { card["cvv"] = cvv }
            if let name { card["cardholderName"] = name }
            input["card"] = card
            if tokenize || recurring { input["tokenize"] = true }
        }
        if recurring { input["recurring"] = ["recurringPaymentSequenceIndicator": "first"] }
        var order: [String: Any] = ["amountOfMoney": money(amount, currency)]
        if let merchantReference { order["references"] = ["merchantReference": merchantReference] }
        return Array(text(["order": order, "cardPaymentMethodSpecificInput": input]).utf8)
    }

    /// `CreateHostedCheckoutResponse`.
    public static func hostedCheckoutCreatedText(_ c: WorldlineHostedCheckout, redirectURL: String, invalidTokens: [String]) -> String {
        var body: [String: Any] = ["hostedCheckoutId": c.id, "RETURNMAC": c.returnMAC, "redirectUrl": redirectURL,
                                   "partialRedirectUrl": partialURL(redirectURL), "invalidTokens": invalidTokens]
        if let r = c.merchantReference { body["merchantReference"] = r }
        return text(body)
    }

    /// `GetHostedCheckoutResponse`: its status and, once a payment was made, the latest one.
    public static func hostedCheckoutText(_ c: WorldlineHostedCheckout, payment p: WorldlinePayment?) -> String {
        var body: [String: Any] = ["status": c.status.rawValue]
        if let p {
            let category = switch p.status {
            case .rejected: "REJECTED"
            case .cancelled where p.transactionID == nil: "REJECTED"
            case .redirected, .created: "STATUS_UNKNOWN"
            default: "SUCCESSFUL"
            }
            body["createdPaymentOutput"] = ["payment": payment(p), "paymentStatusCategory": category]
        }
        return text(body)
    }

    /// `CreateHostedTokenizationResponse`.
    public static func hostedTokenizationCreatedText(_ s: WorldlineHostedTokenization, url: String, invalidTokens: [String]) -> String {
        text(["hostedTokenizationId": s.id, "hostedTokenizationUrl": url, "partialRedirectUrl": partialURL(url),
              "invalidTokens": invalidTokens, "expiredCardTokens": [String]()])
    }

    /// `GetHostedTokenizationResponse`: the token the form made, once it was sent.
    public static func hostedTokenizationText(_ s: WorldlineHostedTokenization, token: WorldlineToken?) -> String {
        var body: [String: Any] = [:]
        if let token, let status = s.tokenStatus {
            body["token"] = (try? JSONSerialization.jsonObject(with: Data(tokenText(token).utf8))) ?? [:]
            body["tokenStatus"] = status
        }
        return text(body)
    }

    /// A redirect URL without its scheme, as the platform gives `partialRedirectUrl`.
    static func partialURL(_ url: String) -> String {
        guard let range = url.range(of: "://") else { return url }
        return String(url[range.upperBound...])
    }

    /// `CreatedTokenResponse`.
    public static func createdTokenText(_ t: WorldlineToken, status: WorldlineTokenStatus) -> String {
        text(["token": t.token, "tokenStatus": status.rawValue, "isNewToken": status == .created, "card": cardWithoutCVV(t)])
    }

    /// `TokenResponse`.
    public static func tokenText(_ t: WorldlineToken) -> String {
        text(["id": t.token, "paymentProductId": t.paymentProductID, "isTemporary": false,
              "card": ["alias": t.maskedCardNumber, "data": ["cardWithoutCvv": cardWithoutCVV(t)]]])
    }

    static func cardWithoutCVV(_ t: WorldlineToken) -> [String: Any] {
        var card: [String: Any] = ["cardNumber": t.maskedCardNumber, "expiryDate": t.expiryDate]
        if let name = t.cardholderName { card["cardholderName"] = name }
        return card
    }

    /// An error's body, as JSON text.
    public static func errorText(_ e: WorldlineError, errorID: String) -> String { text(error(e, errorID: errorID)) }

    /// A payment's `PaymentResponse` with what else a caller adds (the admin API's `returnUrl`), as JSON text.
    public static func paymentText(_ p: WorldlinePayment, adding extra: [String: String] = [:]) -> String {
        var body: [String: Any] = ["payment": payment(p)]
        for (k, v) in extra { body[k] = v }
        return text(body)
    }

    /// `PaymentDetailsResponse`, as JSON text.
    public static func detailsText(_ p: WorldlinePayment) -> String { text(details(p)) }

    /// JSON text of a body (keys sorted, slashes unescaped).
    public static func text(_ object: Any) -> String { PlatformJSON.text(object) }

    /// `ErrorResponse`, with `extra` top-level members (`paymentResult` of a decline).
    static func error(_ e: WorldlineError, errorID: String, extra: [String: Any] = [:]) -> [String: Any] {
        var item: [String: Any] = [
            "code": "9999", "errorCode": e.errorCode, "httpStatusCode": e.httpStatus, "id": e.id, "category": e.category, "message": e.message,
            "retriable": e.retriable,
        ]
        if let p = e.propertyName { item["propertyName"] = p }
        var body: [String: Any] = ["errorId": errorID, "errors": [item]]
        for (k, v) in extra { body[k] = v }
        return body
    }

    static func money(_ amount: Int64, _ currency: String) -> [String: Any] { ["amount": amount, "currencyCode": currency] }

    /// `PaymentResponse`.
    static func payment(_ p: WorldlinePayment) -> [String: Any] {
        let s = WorldlineStatus.output(p)
        var statusOutput: [String: Any] = [
            "statusCode": s.statusCode, "statusCategory": s.statusCategory, "isAuthorized": s.isAuthorized,
            "isCancellable": s.isCancellable, "isRefundable": s.isRefundable,
        ]
        if p.status == .rejected {
            let e = WorldlineStatus.declineError(responseCode: p.responseCode, message: p.message)
            statusOutput["errors"] = [["errorCode": e.errorCode, "id": e.id, "category": e.category, "message": e.message,
                                      "httpStatusCode": e.httpStatus, "retriable": false]]
        }
        var card: [String: Any] = [:]
        if let m = p.maskedCardNumber { card["cardNumber"] = m }
        if let e = p.expiryDate { card["expiryDate"] = e }
        if let b = p.bin { card["bin"] = b }
        var cardOutput: [String: Any] = ["paymentProductId": p.paymentProductID, "card": card]
        if let a = p.authorisationCode { cardOutput["authorisationCode"] = a }
        if let t = p.token { cardOutput["token"] = t }
        if let s = p.schemeTransactionID {
            cardOutput["schemeTransactionId"] = s
            cardOutput["schemeReferenceData"] = s
        }
        if let i = p.initialSchemeTransactionID { cardOutput["initialSchemeTransactionId"] = i }
        if let t = p.threeDSecure {
            cardOutput["threeDSecureResults"] = ["authenticationStatus": t.hasSuffix("-failed") ? "N" : "Y",
                                                 "flow": t.hasPrefix("frictionless") ? "frictionless" : "challenge"]
        }
        cardOutput["fraudResults"] = ["fraudServiceResult": "no-advice", "cvvResult": p.status == .rejected && p.responseCode == "N7" ? "N" : "M"]
        var references: [String: Any] = [:]
        if let r = p.merchantReference { references["merchantReference"] = r }
        var output: [String: Any] = ["amountOfMoney": money(p.amount, p.currency), "references": references]
        if p.paymentMethod == "redirect" {
            var redirect: [String: Any] = ["paymentProductId": p.paymentProductID, "fraudResults": ["fraudServiceResult": "no-advice"]]
            if let a = p.authorisationCode { redirect["authorisationCode"] = a }
            output["paymentMethod"] = "redirect"
            output["redirectPaymentMethodSpecificOutput"] = redirect
        } else if p.paymentMethod == "mobile" {
            // A wallet's payment: the device PAN masked, as the platform shows it.
            var mobile: [String: Any] = ["paymentProductId": p.paymentProductID, "network": p.network ?? "",
                                         "paymentData": ["dpan": p.maskedCardNumber ?? "", "expiryDate": p.expiryDate ?? ""],
                                         "fraudResults": ["fraudServiceResult": "no-advice"]]
            if let a = p.authorisationCode { mobile["authorisationCode"] = a }
            output["paymentMethod"] = "mobile"
            output["mobilePaymentMethodSpecificOutput"] = mobile
        } else {
            output["paymentMethod"] = "card"
            output["cardPaymentMethodSpecificOutput"] = cardOutput
        }
        if p.capturedAmount > 0 { output["acquiredAmount"] = money(p.capturedAmount - p.refundedAmount, p.currency) }
        return ["id": p.id, "status": p.status.rawValue, "statusOutput": statusOutput, "paymentOutput": output]
    }

    /// `CreatePaymentResponse`; `redirectURL` when a 3-D Secure challenge waits.
    static func created(_ p: WorldlinePayment, redirectURL: String?) -> [String: Any] {
        var creation: [String: Any] = ["isNewToken": p.isNewToken ?? false, "tokenizationSucceeded": p.isNewToken != nil]
        if p.isNewToken != nil, let t = p.token { creation["token"] = t }
        var body: [String: Any] = ["creationOutput": creation, "payment": payment(p)]
        if let redirectURL {
            body["merchantAction"] = ["actionType": "REDIRECT",
                                      "redirectData": ["redirectURL": redirectURL, "RETURNMAC": p.returnMAC ?? ""]]
        }
        return body
    }

    /// `PaymentDetailsResponse`: the payment and its operations.
    static func details(_ p: WorldlinePayment) -> [String: Any] {
        var body = payment(p)
        // The SDKs read the list as "Operations", capital O.
        body["Operations"] = p.operations.map { operation($0, p) }
        return body
    }

    /// One of `Operations` in the payment's details.
    static func operation(_ o: WorldlineOperation, _ p: WorldlinePayment) -> [String: Any] {
        let (code, category) = WorldlineStatus.operationOutput(o)
        return ["id": o.id, "status": o.status.rawValue, "statusOutput": ["statusCode": code, "statusCategory": category],
                "amountOfMoney": money(o.amount, p.currency)]
    }

    /// `CaptureResponse`.
    static func capture(_ o: WorldlineOperation, _ p: WorldlinePayment) -> [String: Any] {
        let (code, category) = WorldlineStatus.operationOutput(o)
        return ["id": o.id, "status": o.status.rawValue, "statusOutput": ["statusCode": code, "statusCategory": category, "isCancellable": false, "isRefundable": true],
         "captureOutput": ["amountOfMoney": money(o.amount, p.currency), "paymentMethod": "card",
                           "references": o.merchantReference.map { ["merchantReference": $0] } ?? [:]]]
    }

    /// `RefundResponse`.
    static func refund(_ o: WorldlineOperation, _ p: WorldlinePayment) -> [String: Any] {
        let (code, category) = WorldlineStatus.operationOutput(o)
        return ["id": o.id, "status": o.status.rawValue,
                "statusOutput": ["statusCode": code, "statusCategory": category, "isCancellable": false],
                "refundOutput": ["amountOfMoney": money(o.amount, p.currency), "paymentMethod": "card",
                                 "references": o.merchantReference.map { ["merchantReference": $0] } ?? [:]]]
    }
}
