import Foundation
import LedgerModel

/// Renders the platform's JSON bodies: the `{status, app, version, data}` envelope and what goes
/// in it.
public enum CitconRender {
    static let app = "citcon_upi", apiVersion = "v0.1.1"

    /// An access token's answer.
    public static func accessTokenText(token: String, type: String, expiry: Int64, permission: [String]) -> String {
        success(["access_token": token, "token_type": type, "expiry": expiry, "permission": permission])
    }

    /// A charge created or confirmed, with `client`'s content. `pageURL(kind, id)` is the wallet
    /// or challenge page of a charge.
    public static func chargeText(_ c: CitconCharge, client: String?, pageURL: (String, String) -> String) -> String {
        success(chargeData(c, client: client, pageURL: pageURL))
    }

    /// An inquiry's answer.
    public static func inquiryReplyText(_ c: CitconCharge) -> String { success(inquiryData(c)) }

    /// A capture's, cancel's or refund's answer.
    public static func operationText(_ o: CitconOperation, _ c: CitconCharge) -> String { success(operationData(o, c)) }

    /// The IPN of a charge's new status (or of a refund), signed with the merchant's key as the
    /// IPN guide says; `created` and `completed` are its ISO 8601 times.
    public static func ipnText(_ c: CitconCharge, refund: CitconOperation?, key: String, created: String, completed: String) -> String {
        let status: String
        if let operation = refund {
            // A chargeback's IPN carries its own status (opened, under_review, won, lost).
            status = operation.object == "chargeback" ? operation.status : "success"  // refund, vault
        } else {
            status = switch c.status {
            case .authorized: "authorized"
            case .succeeded: c.method == "card" || !c.operations.isEmpty ? "captured" : "success"
            case .canceled: "cancelled"
            default: "fail"
            }
        }
        let fields = "id,transaction_type,reference,amount,currency,status,time_completed,time_created,payment_method,amount_captured,amount_refunded"
        let amount = refund?.amount ?? c.amount
        let values: [String: String] = [
            "id": refund?.id ?? c.id, "transaction_type": refund.map { ["chargeback", "vault"].contains($0.object) ? $0.object : "refund" } ?? "charge", "reference": refund?.reference ?? c.reference,
            "amount": String(amount), "currency": c.currency, "status": status, "time_completed": completed, "time_created": created,
            "payment_method": c.method, "amount_captured": c.amountCaptured.map(String.init) ?? "",
            "amount_refunded": c.amountRefunded.map(String.init) ?? "", "fields": fields,
        ]
        var body: [String: Any] = values
        body["amount"] = amount
        if let v = c.amountCaptured { body["amount_captured"] = v }
        if let v = c.amountRefunded { body["amount_refunded"] = v }
        body["sign"] = CitconSign.sign(values, secret: key)
        return text(body)
    }

    /// A refusal in the platform's shape.
    public static func failureText(_ e: CitconError) -> String {
        var data: [String: Any] = ["code": e.code, "message": e.message]
        if let d = e.debug { data["debug"] = d }
        return text(["status": "fail", "app": app, "version": apiVersion, "data": data])
    }

    /// A charge's inquiry, as JSON text (the admin API's record of a charge).
    public static func inquiryText(_ c: CitconCharge) -> String { text(inquiryData(c)) }

    static func success(_ data: [String: Any]) -> String {
        text(["status": "success", "app": app, "version": apiVersion, "data": data])
    }

    static func text(_ object: Any) -> String { PlatformJSON.text(object) }

    /// The SDK's `CPayResult`: the charge, `charge_token: null`, and the document's client codes
    /// (0 success, -1 failure, -2 a WeChat Pay cancel, 6001 an Alipay cancel).
    public static func sdkResultText(_ charge: CitconCharge) -> String {
        var data = baseData(charge)
        data["charge_token"] = NSNull()
        data["payment"] = ["method": charge.method]
        // The documents' CPayResult: "If payment fails, timeAuthorized has no value".
        data["time_authorized"] = charge.timeAuthorized.map { $0 as Any } ?? NSNull()
        let (code, message): (String, String) = switch charge.status {
        case .succeeded, .authorized, .pending, .initiated: ("0", "Success.")
        case .canceled: (charge.method == "alipay" ? "6001" : "-2", "Cancellation.")
        default: ("-1", charge.message ?? "the payment failed (\(charge.status))")
        }
        data["code"] = code
        data["message"] = message
        return text(["status": code == "0" ? "success" : "fail", "app": app, "version": apiVersion, "data": data])
    }


    static func chargeData(_ c: CitconCharge, client: String?, pageURL: (String, String) -> String) -> [String: Any] {
        var data = baseData(c)
        data["charge_token"] = c.chargeToken
        var payment: [String: Any] = ["method": c.method]
        if c.status.isOpen {
            payment["client"] = [clientContent(c, client: client ?? "mobile_native", pageURL: pageURL)]
        }
        data["payment"] = payment
        return data
    }

    /// What an app gets to run the payment: a wallet's own parameter set, or a page to redirect to.
    static func clientContent(_ c: CitconCharge, client: String, pageURL: (String, String) -> String) -> [String: Any] {
        let content: String
        var format = "json"
        switch c.method {
        case "wechatpay":
            content = text(["appid": "wx" + String(c.id.prefix(16)), "partnerid": String(c.id.suffix(10)), "prepayid": "wx" + c.chargeToken,
                                 "package": "Sign=WXPay", "noncestr": String(c.chargeToken.prefix(32)), "timestamp": String(c.timeCreated / 1000),
                                 "sign": String(CitconSign.sign(["fields": "id", "id": c.id], secret: c.chargeToken).prefix(32)).uppercased()])
        case "alipay":
            content = text(["orderSpec": "partner=\"2088\(c.id.prefix(12))\"&out_trade_no=\"\(c.id)\"&total_fee=\"\(c.amount)\"&currency=\"\(c.currency)\"",
                                 "signedString": CitconSign.sign(["fields": "id", "id": c.id], secret: c.chargeToken)])
        case "upop":
            content = text(["tn": String(c.timeCreated) + String(c.id.prefix(8))])
        default:
            format = "redirect"
            content = pageURL(c.method == "card" ? "3ds" : "wallet", c.id)
        }
        return ["client": client, "format": format, "method": c.method, "content": content]
    }

    static func baseData(_ c: CitconCharge) -> [String: Any] {
        [
            "object": "charge", "id": c.id, "reference": c.reference, "amount": c.amount, "currency": c.currency, "country": c.country,
            "amount_captured": c.amountCaptured.map { $0 as Any } ?? NSNull(), "amount_refunded": c.amountRefunded.map { $0 as Any } ?? NSNull(),
            "time_created": c.timeCreated, "time_captured": c.timeCaptured.map { $0 as Any } ?? NSNull(), "auto_capture": c.autoCapture,
            "status": c.status.rawValue,
        ]
    }

    static func inquiryData(_ c: CitconCharge) -> [String: Any] {
        var data = baseData(c)
        data["time_canceled"] = c.timeCanceled.map { String($0) } ?? ""
        data["expiry"] = NSNull()
        data["payment"] = ["method": c.method, "token": c.vaultToken.map { $0 as Any } ?? NSNull(), "type": c.method == "card" ? "card" : "",
                           "data": ["pan": c.maskedPAN ?? "", "expiry": c.expiry ?? ""]] as [String: Any]
        data["exchange"] = ["amount": NSNull(), "currency": NSNull(), "rate": NSNull()]
        func list(_ object: String) -> [String: Any] {
            ["data": c.operations.filter { $0.object == object }.map { operationData($0, c) }]
        }
        data["captures"] = list("capture")
        data["refunds"] = list("refund")
        data["chargebacks"] = list("chargeback")
        return data
    }

    static func operationData(_ o: CitconOperation, _ c: CitconCharge) -> [String: Any] {
        ["object": o.object, "id": o.id, "reference": o.reference, "amount": o.amount, "currency": c.currency, "status": o.status,
         "time_created": o.timeCreated, "transaction_id": c.id]
    }
}
