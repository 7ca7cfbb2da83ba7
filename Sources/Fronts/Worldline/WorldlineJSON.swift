import EMV
import Foundation

/// An error as the platform answers it: `{errorId, errors: [{errorCode, httpStatusCode, id,
/// category, propertyName, message, retriable}]}` with the HTTP status of its first error. The
/// official SDKs turn the status into their exceptions (400 validation, 401/403 authorisation,
/// 402 declined, 404 reference, 409 idempotence or reference, 5xx platform).
public struct WorldlineError: Error, Sendable, Equatable, CustomStringConvertible {
    public var httpStatus: Int
    public var errorCode: String
    public var id: String
    public var category: String
    public var propertyName: String?
    public var message: String
    public var retriable: Bool
    /// The rule a property broke, without the property's name (`message` has both): for a
    /// platform that words its errors otherwise (Citcon's `debug`).
    public var rule: String?

    public init(httpStatus: Int, errorCode: String, id: String, category: String = "PAYMENT_PLATFORM_ERROR",
                propertyName: String? = nil, message: String, retriable: Bool = false) {
        self.httpStatus = httpStatus
        self.errorCode = errorCode
        self.id = id
        self.category = category
        self.propertyName = propertyName
        self.message = message
        self.retriable = retriable
    }

    public var description: String {
        "\(httpStatus) \(id)\(propertyName.map { " (\($0))" } ?? ""): \(message)" + (propertyName == nil ? rule.map { " (\($0))" } ?? "" : "")
    }

    /// A required property is missing.
    public static func missing(_ property: String) -> WorldlineError {
        WorldlineError(httpStatus: 400, errorCode: "20000000", id: "PARAMETER_NOT_FOUND_IN_REQUEST", propertyName: property,
                       message: "\(property) is required")
    }

    /// A property's value breaks a rule.
    public static func invalid(_ property: String, _ rule: String) -> WorldlineError {
        var e = WorldlineError(httpStatus: 400, errorCode: "21000020", id: "INVALID_VALUE", propertyName: property, message: "\(property): \(rule)")
        e.rule = rule
        return e
    }

    /// A body that is not JSON, not an object, or too large.
    public static func badBody(_ message: String) -> WorldlineError {
        WorldlineError(httpStatus: 400, errorCode: "21000120", id: "INVALID_REQUEST_BODY", message: message)
    }

    /// 401: no valid signature or session.
    public static func unauthorised(_ message: String) -> WorldlineError {
        WorldlineError(httpStatus: 401, errorCode: "9002", id: "MISSING_OR_INVALID_AUTHORIZATION", category: "DIRECT_PLATFORM_ERROR",
                       message: message)
    }

    /// 403: a valid key or session acting outside its merchant or customer.
    public static func forbidden(_ message: String) -> WorldlineError {
        WorldlineError(httpStatus: 403, errorCode: "9007", id: "ACCESS_TO_MERCHANT_NOT_ALLOWED", category: "DIRECT_PLATFORM_ERROR",
                       message: message)
    }

    /// 404 with the platform's id for what was not found (`UNKNOWN_PAYMENT_ID`, …).
    public static func notFound(_ id: String, _ message: String) -> WorldlineError {
        WorldlineError(httpStatus: 404, errorCode: "1002", id: id, message: message)
    }

    /// The payment is not in a state where the operation is allowed (or not for that amount).
    /// The message is the id, as the platform fills it (the SDKs' tests compare the two); the
    /// rule is kept in `rule` for the log.
    public static func wrongStatus(_ rule: String) -> WorldlineError {
        var e = WorldlineError(httpStatus: 400, errorCode: "50001127", id: "ACTION_NOT_ALLOWED_ON_TRANSACTION", category: "DIRECT_PLATFORM_ERROR",
                               message: "ACTION_NOT_ALLOWED_ON_TRANSACTION")
        e.rule = rule
        return e
    }

    /// 409 `30001002`: the SDKs' `IdempotenceException`.
    public static func idempotenceInProgress(_ key: String) -> WorldlineError {
        WorldlineError(httpStatus: 409, errorCode: "30001002", id: "DUPLICATE_REQUEST_IN_PROGRESS",
                       message: "a request with idempotence key \(shownValue(key, 64)) is still being processed", retriable: true)
    }

    /// 500: the platform failed (a retry may succeed).
    public static func internalError(_ message: String) -> WorldlineError {
        WorldlineError(httpStatus: 500, errorCode: "9999", id: "UNKNOWN_SERVER_ERROR", category: "IO_ERROR", message: message, retriable: true)
    }
}

/// Reads a request body the way the platform does, naming each property by its path
/// (`order.amountOfMoney.amount`) when it is missing or wrong. It takes the Objective-C SDK's
/// habits too: numbers sent as strings (`"1000"`) and booleans as strings (`"true"`).
public struct WorldlineJSON: @unchecked Sendable {
    let object: [String: Any]
    let path: String

    /// Parses a body: a JSON object of at most `maximumBytes`, read by the one JSON reader every
    /// listener uses (`JSONBody`: a duplicate key, a NUL, too deep a nesting or text after the
    /// value is refused, so no two readers of a body can disagree about it), with every text in
    /// it scanned for card numbers before anything is done with it.
    /// - Parameter cardNumberAt: the properties that carry a card number by their definition
    ///   (`cardNumberProperties`); a card number anywhere else — a reference, a URL, a note, a
    ///   key — is refused naming its property (`TextRules.panRule`).
    public static func parse(_ body: [UInt8], maximumBytes: Int = 64 << 10,
                             cardNumberAt: Set<String> = cardNumberProperties) throws(WorldlineError) -> WorldlineJSON {
        guard body.count <= maximumBytes else { throw .badBody("the body is \(body.count) bytes; at most \(maximumBytes) are accepted") }
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return WorldlineJSON(object: [:], path: "") }
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: Data(body)) } catch {
            throw .badBody("the body is not valid JSON")
        }
        guard let object = parsed as? [String: Any] else { throw .badBody("the body must be a JSON object") }
        // Well-formed: now what JSONSerialization lets through and the one reader refuses.
        do throws(JSONBody.Problem) { try JSONBody.check(body) } catch {
            let property = error.path == "body" ? nil : String(error.path.dropFirst("body.".count))
            // The path is made of the body's own keys: one that holds a card number is masked.
            if let property { throw .invalid(shownValue(property, 200), error.rule) }
            throw .badBody("the body \(error.rule)")
        }
        try scanForCardNumbers(object, path: "", allowed: cardNumberAt)
        return WorldlineJSON(object: object, path: "")
    }

    /// The properties of the platforms' requests that carry a card number by their definition:
    /// a Worldline payment's card and a Citcon charge's card data.
    public static let cardNumberProperties: Set<String> = ["cardPaymentMethodSpecificInput.card.cardNumber", "payment.data.pan",
                                                            "card.data.card.cardNumber", "mobilePaymentMethodSpecificInput.decryptedPaymentData.dpan"]

    /// Parses a body whose every value is read by its own rules (an encrypted customer input,
    /// which is all card data), with the same reader as `parse` and no card number scan.
    public static func parseCardData(_ body: [UInt8]) throws(WorldlineError) -> WorldlineJSON {
        do throws(JSONBody.Problem) { try JSONBody.check(body) } catch { throw .badBody("the body \(error.rule)") }
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(body)), let object = parsed as? [String: Any] else {
            throw .badBody("the body must be a JSON object")
        }
        return WorldlineJSON(object: object, path: "")
    }

    /// Refuses a card number in any key, string or whole number of `value` outside `allowed`.
    static func scanForCardNumbers(_ value: Any, path: String, allowed: Set<String>) throws(WorldlineError) {
        if let object = value as? [String: Any] {
            for (key, child) in object {
                let childPath = path.isEmpty ? key : "\(path).\(key)"
                if PAN.looksLikeItHoldsAPAN(key) { throw .invalid(shownValue(childPath, 100), TextRules.panRule) }
                try scanForCardNumbers(child, path: childPath, allowed: allowed)
            }
        } else if let array = value as? [Any] {
            for (i, child) in array.enumerated() { try scanForCardNumbers(child, path: "\(path)[\(i)]", allowed: allowed) }
        } else if !allowed.contains(path) {
            let text: String? = if let s = value as? String { s } else if let n = value as? NSNumber, !isBool(n) { n.stringValue } else { nil }
            if let text, PAN.looksLikeItHoldsAPAN(text) { throw .invalid(path, TextRules.panRule) }
        }
    }

    /// A reader of `object`, whose properties are named under `path`.
    public init(object: [String: Any], path: String) {
        self.object = object
        self.path = path
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// Whether `key` is present and not null.
    public func has(_ key: String) -> Bool { object[key] != nil && !(object[key] is NSNull) }

    /// The object at `key`, nil when absent.
    public func object(_ key: String) throws(WorldlineError) -> WorldlineJSON? {
        guard has(key) else { return nil }
        guard let child = object[key] as? [String: Any] else { throw .invalid(name(key), "must be an object") }
        return WorldlineJSON(object: child, path: name(key))
    }

    /// The array of objects at `key`, nil when absent.
    public func array(_ key: String) throws(WorldlineError) -> [WorldlineJSON]? {
        guard has(key) else { return nil }
        guard let items = object[key] as? [Any] else { throw .invalid(name(key), "must be an array") }
        var out: [WorldlineJSON] = []
        for (i, item) in items.enumerated() {
            guard let o = item as? [String: Any] else { throw .invalid("\(name(key))[\(i)]", "must be an object") }
            out.append(WorldlineJSON(object: o, path: "\(name(key))[\(i)]"))
        }
        return out
    }

    /// The array of integers at `key` (numbers, or digits as the Objective-C SDK sends them), nil when absent.
    public func ints(_ key: String, in range: ClosedRange<Int64>) throws(WorldlineError) -> [Int64]? {
        guard has(key) else { return nil }
        guard let items = object[key] as? [Any] else { throw .invalid(name(key), "must be an array") }
        var out: [Int64] = []
        for (i, item) in items.enumerated() {
            let n: Int64? = (item as? NSNumber).flatMap { Self.isBool($0) ? nil : Int64(exactly: $0.doubleValue) } ?? (item as? String).flatMap { Int64($0) }
            guard let n, range.contains(n) else { throw .invalid("\(name(key))[\(i)]", "must be a whole number in \(range.lowerBound)…\(range.upperBound)") }
            out.append(n)
        }
        return out
    }

    /// The array of strings at `key`, nil when absent, each at most `maxLength`.
    public func strings(_ key: String, maxLength: Int = 1000) throws(WorldlineError) -> [String]? {
        guard has(key) else { return nil }
        guard let items = object[key] as? [Any] else { throw .invalid(name(key), "must be an array") }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            guard let s = item as? String, s.count <= maxLength, !s.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
                throw .invalid("\(name(key))[\(i)]", "must be a string of at most \(maxLength) characters")
            }
            out.append(s)
        }
        return out
    }

    /// The string at `key` (a number is taken as its text), nil when absent; no control characters.
    public func string(_ key: String, maxLength: Int = 1000) throws(WorldlineError) -> String? {
        guard has(key) else { return nil }
        let value: String
        if let s = object[key] as? String {
            value = s
        } else if let n = object[key] as? NSNumber, !Self.isBool(n) {
            // Ids sent as numbers (the Objective-C SDK's accountOnFileId).
            value = n.stringValue
        } else {
            throw .invalid(name(key), "must be a string")
        }
        guard value.count <= maxLength else { throw .invalid(name(key), "must be at most \(maxLength) characters, got \(value.count)") }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalid(name(key), "must not contain control characters")
        }
        return value
    }

    /// The string at `key`; absent is `PARAMETER_NOT_FOUND_IN_REQUEST`.
    public func requiredString(_ key: String, maxLength: Int = 1000) throws(WorldlineError) -> String {
        guard let value = try string(key, maxLength: maxLength) else { throw .missing(name(key)) }
        return value
    }

    /// The whole number at `key` (or a string of digits), within `range`; nil when absent.
    public func int(_ key: String, in range: ClosedRange<Int64> = 0...Int64.max) throws(WorldlineError) -> Int64? {
        guard has(key) else { return nil }
        let value: Int64
        if let n = object[key] as? NSNumber, !Self.isBool(n) {
            let d = n.doubleValue
            guard d.rounded() == d, abs(d) < 9e15 else { throw .invalid(name(key), "must be a whole number") }
            value = n.int64Value
        } else if let s = object[key] as? String, !s.isEmpty, s.utf8.count <= 18, s.utf8.allSatisfy({ (0x30...0x39).contains($0) }) || (s.hasPrefix("-") && s.dropFirst().utf8.allSatisfy({ (0x30...0x39).contains($0) }) && s.count > 1) {
            value = Int64(s)!
        } else {
            throw .invalid(name(key), "must be a whole number")
        }
        guard range.contains(value) else { throw .invalid(name(key), "must be between \(range.lowerBound) and \(range.upperBound), got \(shownValue(String(value), 20))") }
        return value
    }

    /// The boolean at `key` (or "true"/"false"), nil when absent.
    public func bool(_ key: String) throws(WorldlineError) -> Bool? {
        guard has(key) else { return nil }
        if let n = object[key] as? NSNumber, Self.isBool(n) { return n.boolValue }
        if let b = object[key] as? Bool { return b }
        if let s = object[key] as? String, s == "true" || s == "false" { return s == "true" }
        throw .invalid(name(key), "must be true or false")
    }

    static func isBool(_ n: NSNumber) -> Bool {
        // swift-corelibs-foundation gives booleans as NSNumber of type 'c' (Darwin: CFBoolean).
        String(cString: n.objCType) == "c"
    }
}

/// A value of the request, as an error message may repeat it: cut to `maximum` characters, with
/// anything that looks like a card number masked. Error answers are kept (an idempotent
/// request's answer is stored), and nothing stored may hold a full PAN.
public func shownValue<S: StringProtocol>(_ value: S, _ maximum: Int) -> String {
    PAN.maskingLikelyPANs(in: String(value.prefix(maximum)))
}
