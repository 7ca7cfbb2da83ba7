import EMV

/// One query parameter of a request, as received and percent-decoded once.
public struct VivaParameter: Sendable, Hashable, CustomStringConvertible {
    /// The parameter's name, case as sent (names are case-sensitive, as for the app).
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

/// A request the Viva Wallet Card Terminal app accepts: `vivapayclient://pay/v1?callback=…&action=…`.
/// `parse(_:)` applies every rule of docs/viva.md; a value of this type is a valid request.
public struct VivaRequest: Sendable, Equatable {
    /// Where the result goes: a URI with a scheme (`mycallbackscheme://result`) or a bare scheme
    /// name (`interapp-callback`, what the vendor's sample sends), exactly as received after decoding.
    public var callback: String
    /// Deprecated by Viva: any value, including none, is accepted and ignored.
    public var merchantKey: String?
    /// The calling app's identifier; informative only.
    public var appId: String?
    /// What to do, with the action's own parameters.
    public var command: VivaCommand
    /// Every query item as received (decoded once), in order, for the ledger and traces; it includes
    /// the parameters cardbench does not use (`show_receipt`, `ISV_amount`, …).
    public var parameters: [VivaParameter]

    /// Makes a request from parts; `parse(_:)` is the way to get one from a URL.
    public init(callback: String, merchantKey: String? = nil, appId: String? = nil, command: VivaCommand,
                parameters: [VivaParameter] = []) {
        self.callback = callback
        self.merchantKey = merchantKey
        self.appId = appId
        self.command = command
        self.parameters = parameters
    }

    /// The value of the parameter named `name` (case-sensitive), if it was sent.
    public func parameter(_ name: String) -> String? {
        parameters.first { $0.name == name }?.value
    }

    /// The largest amount accepted, in cents: 12 digits, the size of ISO 8583 field 4 and of EMV's
    /// Amount, Authorised (9F02), so every accepted amount reaches the card and the host unchanged.
    public static let maximumAmount = 999_999_999_999

    /// The longest `clientTransactionId` accepted, in characters: Viva stores it as the merchant
    /// reference (`merchantTrns` in its payment API), which holds up to 2048 characters.
    public static let maximumClientTransactionIdLength = 2048

    /// The largest `preferredInstallments` accepted. No acquirer offers more than a few dozen
    /// instalments; 999 leaves room to test the document's "above the maximum: prompt" branch.
    public static let maximumPreferredInstallments = 999

    /// Parses and checks a request URL.
    ///
    /// The URL must be `vivapayclient://pay/v1` (scheme and host in any case, path exactly `/v1`)
    /// with a query; no fragment. Query items are split on `&` and at the first `=`, then
    /// percent-decoded exactly once, as URLComponents does: `+` stays `+`. Characters RFC 3986 does
    /// not allow in a query (a space, `"`, `<`, non-ASCII…) must arrive percent-encoded. Empty items
    /// (`&&`) are skipped; a name may appear only once; unknown names are kept in `parameters` and
    /// otherwise ignored. An empty value is the same as leaving an optional parameter out.
    ///
    /// - Throws: a `VivaRequestError` naming the field and the rule it broke; its `callback` is set
    ///   as soon as a valid callback was found, so the caller can answer with a failed callback.
    public static func parse(_ url: String) throws(VivaRequestError) -> VivaRequest {
        var parser = Parser()
        return try parser.parse(url)
    }
}

/// What a request asks the app to do.
public enum VivaCommand: Sendable, Equatable {
    /// `action=sale`.
    case sale(VivaSale)
    /// `action=pre_auth`: a pre-authorisation, with the fields of a sale.
    case preAuth(VivaSale)
    /// `action=capture_pre_auth`: completes a pre-authorisation.
    case capturePreAuth(VivaCapture)
    /// `action=cancel`: cancels (refunds) one of the presented card's recent transactions.
    case cancel(VivaCancel)
    /// `action=abort`: aborts the transaction in progress.
    case abort
    /// `action=batch`: opens or closes a batch.
    case batch(VivaBatch)
    /// `action=transactionDetails`: the result of an earlier transaction, found by its client id.
    case transactionDetails(clientTransactionId: String)

    /// The action (`pre_auth`, `transactionDetails`, …).
    public var action: VivaAction {
        switch self {
        case .sale: .sale
        case .preAuth: .preAuth
        case .capturePreAuth: .capturePreAuth
        case .cancel: .cancel
        case .abort: .abort
        case .batch: .batch
        case .transactionDetails: .transactionDetails
        }
    }
}

/// The actions the app knows, by their names in `action=` (case-sensitive).
public enum VivaAction: String, CaseIterable, Sendable, CustomStringConvertible {
    case sale
    case preAuth = "pre_auth"
    case capturePreAuth = "capture_pre_auth"
    case cancel
    case abort
    case batch
    case transactionDetails

    public var description: String { rawValue }
}

/// The fields of a sale or a pre-authorisation.
public struct VivaSale: Sendable, Equatable {
    /// Cents, 1 ... `VivaRequest.maximumAmount`; the tip is part of it.
    public var amount: Int
    /// Cents of `amount` that are tip, 0 ... amount.
    public var tipAmount: Int
    /// The merchant's reference, echoed in the callback; at most 2048 characters.
    public var clientTransactionId: String?
    /// Whether the cardholder may pay in instalments.
    public var withInstallments: Bool
    /// The instalments wanted, 0 ... 999; what happens with it is `VivaInstallments.decide`'s call.
    public var preferredInstallments: Int?

    /// Makes a sale.
    public init(amount: Int, tipAmount: Int = 0, clientTransactionId: String? = nil, withInstallments: Bool = false,
                preferredInstallments: Int? = nil) {
        self.amount = amount
        self.tipAmount = tipAmount
        self.clientTransactionId = clientTransactionId
        self.withInstallments = withInstallments
        self.preferredInstallments = preferredInstallments
    }
}

/// The fields of `capture_pre_auth`, in the parameters the vendor's Android sample sends for it
/// (the same as for `cancel`): `referenceNumber` and `amount`.
public struct VivaCapture: Sendable, Equatable {
    /// The pre-authorisation's STAN, 6 digits ("60646" arrives as "060646").
    public var referenceNumber: String
    /// Cents to capture; nil captures the pre-authorised amount.
    public var amount: Int?

    /// Makes a capture.
    public init(referenceNumber: String, amount: Int? = nil) {
        self.referenceNumber = referenceNumber
        self.amount = amount
    }
}

/// The fields of `cancel`.
public struct VivaCancel: Sendable, Equatable {
    /// The STAN of the transaction to cancel, 6 digits; nil lets the operator pick one of the
    /// presented card's last 3 transactions.
    public var referenceNumber: String?
    /// Cents to refund; nil refunds the whole transaction.
    public var amount: Int?
    /// The transaction's 16-digit order code, when the sender knows it.
    public var orderCode: String?
    /// The first 10 digits of the order code.
    public var shortOrderCode: String?
    /// Start of the period to search, as sent (the format is undocumented; kept, not interpreted).
    public var txnDateFrom: String?
    /// End of the period to search, as sent.
    public var txnDateTo: String?

    /// Makes a cancel.
    public init(referenceNumber: String? = nil, amount: Int? = nil, orderCode: String? = nil, shortOrderCode: String? = nil,
                txnDateFrom: String? = nil, txnDateTo: String? = nil) {
        self.referenceNumber = referenceNumber
        self.amount = amount
        self.orderCode = orderCode
        self.shortOrderCode = shortOrderCode
        self.txnDateFrom = txnDateFrom
        self.txnDateTo = txnDateTo
    }
}

/// What a `batch` request does.
public enum VivaBatchCommand: String, Sendable, Equatable, CaseIterable {
    /// `command=open`.
    case open
    /// `command=close`.
    case close
}

/// The fields of `batch`.
public struct VivaBatch: Sendable, Equatable {
    /// Open or close.
    public var command: VivaBatchCommand
    /// The batch's name, as sent.
    public var batchName: String?
    /// The batch's identifier (the sample sends a UUID), as sent.
    public var batchId: String?

    /// Makes a batch request.
    public init(command: VivaBatchCommand, batchName: String? = nil, batchId: String? = nil) {
        self.command = command
        self.batchName = batchName
        self.batchId = batchId
    }
}

/// A request that broke a rule: the field, the rule, and what is known for answering it.
public struct VivaRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request's callback, once a valid one was found: the caller then answers with a
    /// `status=failed` callback. Nil when the URL did not get that far (wrong scheme, no callback,
    /// a callback that is not a URI), and then there is nobody to call back.
    public let callback: String?
    /// The `action` value as sent (even one cardbench does not know), when there was one.
    public let action: String?
    /// The parameter that broke a rule, or "url" (the text as a whole) or "scheme"
    /// (`vivapayclient://pay/v1`: scheme, host and version, as the document's table names it).
    public let field: String
    /// The rule, in words a POS developer reads without the source.
    public let rule: String

    /// Makes an error.
    public init(callback: String? = nil, action: String? = nil, field: String, rule: String) {
        self.callback = callback
        self.action = action
        self.field = field
        self.rule = rule
    }

    /// `<field>: <rule>`.
    public var description: String { "\(field): \(rule)" }
}

// MARK: - Parsing

extension VivaRequest {
    /// One parse: the callback and the action are remembered as soon as they are known, so every
    /// error thrown after that carries them.
    struct Parser {
        var callback: String? = nil
        var action: String? = nil
        var items: [VivaParameter] = []

        func fail(_ field: String, _ rule: String) -> VivaRequestError {
            VivaRequestError(callback: callback, action: action, field: field, rule: rule)
        }

        mutating func parse(_ url: String) throws(VivaRequestError) -> VivaRequest {
            guard !url.isEmpty else { throw fail("url", "must not be empty") }
            let query = try splitURL(url)
            try decodeItems(query)

            let callback = try findCallback()
            self.callback = callback
            try refuseDuplicates()

            guard let action = value("action") else {
                throw fail("action", "is required; one of \(Self.actionList)")
            }
            self.action = action
            let command = try command(for: action)
            return VivaRequest(callback: callback, merchantKey: items.first { $0.name == "merchantKey" }?.value,
                               appId: items.first { $0.name == "appId" }?.value, command: command, parameters: items)
        }

        static let actionList = VivaAction.allCases.map(\.rawValue).joined(separator: ", ")

        /// Parameters that carry an identifier the app itself issued, made of digits only by their
        /// own rules: a 16-digit order code can pass the Luhn check under a card brand's IIN
        /// (RRNs of days 200–299 of 2026 start with 62, UnionPay's IIN) without being a card number.
        static let numericIdentifiers: Set<String> = ["orderCode", "shortOrderCode"]

        // MARK: URL shape

        /// Checks `vivapayclient://pay/v1` and returns the raw query (without `?`).
        func splitURL(_ url: String) throws(VivaRequestError) -> Substring {
            let beforeQuery = url.firstIndex(of: "?").map { url[..<$0] } ?? url[...]
            // A '#' before any '?' ends the base too; it is refused below with the query's rules.
            let base = beforeQuery.firstIndex(of: "#").map { beforeQuery[..<$0] } ?? beforeQuery
            var scheme: Substring = ""
            var host: Substring = ""
            var path: Substring = ""
            if let schemeEnd = base.firstRange(of: "://") {
                scheme = base[..<schemeEnd.lowerBound]
                let rest = base[schemeEnd.upperBound...]
                host = rest.firstIndex(of: "/").map { rest[..<$0] } ?? rest
                path = rest[host.endIndex...]
            }
            guard ASCII.lowercased(scheme) == "vivapayclient", ASCII.lowercased(host) == "pay", path == "/v1" else {
                throw fail("scheme", "must be vivapayclient://pay/v1 (scheme, host and version); got \(Self.shown(base))")
            }
            guard base.endIndex < url.endIndex else { return "" }
            if url[base.endIndex] == "#" {
                throw fail("url", "must not have a fragment ('#'); a '#' inside a value must be sent as %23")
            }
            return url[url.index(after: base.endIndex)...]
        }

        /// The query's `&`-separated items, split at their first `=`, empty items left out.
        static func itemsByCharacters(_ text: Substring) -> [(name: Substring, value: Substring)] {
            text.split(separator: "&", omittingEmptySubsequences: true).map { piece in
                if let eq = piece.firstIndex(of: "=") { return (piece[..<eq], piece[piece.index(after: eq)...]) }
                return (piece, piece[piece.endIndex...])
            }
        }

        /// `itemsByCharacters` on the bytes of ASCII text.
        static func itemsByBytes(_ text: Substring) -> [(name: Substring, value: Substring)] {
            var raw: [(name: Substring, value: Substring)] = []
            let utf8 = text.utf8
            var start = utf8.startIndex, eq: String.Index?
            var i = start
            func piece(_ end: String.Index) {
                guard start < end else { return }
                if let eq {
                    raw.append((text[start..<eq], text[utf8.index(after: eq)..<end]))
                } else {
                    raw.append((text[start..<end], text[end..<end]))
                }
            }
            while i < utf8.endIndex {
                switch utf8[i] {
                case UInt8(ascii: "&"):
                    piece(i)
                    start = utf8.index(after: i)
                    eq = nil
                case UInt8(ascii: "=") where eq == nil:
                    eq = i
                default:
                    break
                }
                i = utf8.index(after: i)
            }
            piece(utf8.endIndex)
            return raw
        }

        /// Splits the query into decoded items; refuses a fragment, naming the item it cut short.
        mutating func decodeItems(_ query: Substring) throws(VivaRequestError) {
            let hash = query.firstIndex(of: "#")
            let text = hash.map { query[..<$0] } ?? query
            // ASCII (every well-formed request) is split on its bytes, one byte being one
            // character: the same pieces as by characters, for a fraction of the cost.
            let raw = text.utf8.allSatisfy({ $0 < 0x80 }) ? Self.itemsByBytes(text) : Self.itemsByCharacters(text)
            // The callback first: a valid one lets every later error be answered.
            let names = raw.map { item in Result { () throws(PercentEncoding.DecodingProblem) in try PercentEncoding.decode(item.name) } }
            let callbackItems = raw.indices.filter { (try? names[$0].get()) == "callback" }
            if callbackItems.count == 1, let value = try? PercentEncoding.decode(raw[callbackItems[0]].value),
               Self.callbackProblem(value) == nil {
                callback = value
            }
            // The action too, so a failed callback can carry it and the action's structure.
            let actionItems = raw.indices.filter { (try? names[$0].get()) == "action" }
            if actionItems.count == 1, let value = try? PercentEncoding.decode(raw[actionItems[0]].value), !value.isEmpty {
                action = value
            }
            if hash != nil {
                // The item the '#' cut short is the last one, unless the query ended with '&'.
                let cut = text.last == "&" ? nil : raw.last.flatMap { try? PercentEncoding.decode($0.name) }
                throw fail(cut ?? "url", "contains '#', which ends the query and drops what follows; send '#' as %23")
            }
            for (item, decodedName) in zip(raw, names) {
                let name: String
                switch decodedName {
                case .success(let n): name = n
                case .failure(let problem): throw fail("url", "parameter name \(Self.shown(item.name)): \(problem.rule)")
                }
                guard !name.isEmpty else {
                    throw fail("url", "a parameter has an empty name (\(Self.shown(item.value)) follows '=')")
                }
                let value: String
                do { value = try PercentEncoding.decode(item.value) } catch { throw fail(name, error.rule) }
                if let problem = TextRules.problem(name) { throw fail("url", "a parameter name \(problem)") }
                if let problem = TextRules.problem(value, panLike: !Self.numericIdentifiers.contains(name)) { throw fail(name, problem) }
                items.append(VivaParameter(name: name, value: value))
            }
        }

        // MARK: Callback

        /// The request's callback, checked.
        func findCallback() throws(VivaRequestError) -> String {
            let found = items.filter { $0.name == "callback" }
            guard found.count <= 1 else {
                throw fail("callback", "must appear once; it appears \(found.count) times")
            }
            guard let value = found.first?.value, !value.isEmpty else {
                throw fail("callback", "is required: the URI the result is sent to, e.g. mycallbackscheme://result")
            }
            if let problem = Self.callbackProblem(value) { throw fail("callback", problem) }
            return value
        }

        /// Why `value` cannot be a callback, or nil when it can: it must be a URI with a scheme or a
        /// bare scheme name, made of URI characters, without a fragment (the result would land in it).
        static func callbackProblem(_ value: String) -> String? {
            if value.isEmpty { return "is required: the URI the result is sent to, e.g. mycallbackscheme://result" }
            if value.utf8.contains(UInt8(ascii: "#")) {
                return "must not contain '#': the result fields would land in the fragment"
            }
            // The callback is stored with the transaction and delivered: a card number in it,
            // even percent-encoded, would be too.
            if PAN.looksLikeItHoldsAPAN(value) || (try? PercentEncoding.decode(value[...])).map(PAN.looksLikeItHoldsAPAN) == true {
                return TextRules.panRule
            }
            let bytes = Array(value.utf8)
            let authority = PercentEncoding.authorityRange(bytes)
            for (i, byte) in bytes.enumerated() {
                if byte == UInt8(ascii: "%") {
                    let hex = Array("0123456789ABCDEFabcdef".utf8)
                    guard i + 2 < bytes.count, hex.contains(bytes[i + 1]), hex.contains(bytes[i + 2]) else {
                        return "must be a URI: '%' must start a %XX escape"
                    }
                } else if !PercentEncoding.isURICharacter(bytes, at: i, authority: authority) {
                    return "must be a URI: characters such as spaces must be percent-encoded inside it"
                }
            }
            if let problem = PercentEncoding.portProblem(bytes, authority: authority) { return problem }
            let schemeEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
            let scheme = bytes[..<schemeEnd]
            guard let first = scheme.first, isLetter(first),
                  scheme.allSatisfy({ isLetter($0) || isDigit($0) || [UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ".")].contains($0) })
            else {
                return "must be a URI with a scheme (mycallbackscheme://result) or a bare scheme name (interapp-callback)"
            }
            return nil
        }

        static func isLetter(_ b: UInt8) -> Bool {
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
        }

        static func isDigit(_ b: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) }

        func refuseDuplicates() throws(VivaRequestError) {
            var seen: [String: Int] = [:]
            for item in items { seen[item.name, default: 0] += 1 }
            // Report the first repeated name in the order sent, so the message is stable.
            if let repeated = items.first(where: { seen[$0.name]! > 1 }) {
                throw fail(repeated.name, "must appear once; it appears \(seen[repeated.name]!) times (which one the app would use is undefined)")
            }
        }

        // MARK: Actions

        /// A parameter's value; nil when absent or empty (an empty value is the same as none).
        func value(_ name: String) -> String? {
            guard let v = items.first(where: { $0.name == name })?.value, !v.isEmpty else { return nil }
            return v
        }

        func command(for action: String) throws(VivaRequestError) -> VivaCommand {
            switch VivaAction(rawValue: action) {
            case .sale: return .sale(try sale(preAuth: false))
            case .preAuth: return .preAuth(try sale(preAuth: true))
            case .capturePreAuth:
                guard let reference = try referenceNumber() else {
                    throw fail("referenceNumber", "is required for capture_pre_auth: the pre-authorisation's STAN (1 to 6 digits)")
                }
                return .capturePreAuth(VivaCapture(referenceNumber: reference, amount: try amount(required: false)))
            case .cancel:
                return .cancel(VivaCancel(referenceNumber: try referenceNumber(), amount: try amount(required: false),
                                          orderCode: try digits("orderCode", atMost: 16), shortOrderCode: try digits("shortOrderCode", atMost: 10),
                                          txnDateFrom: value("txnDateFrom"), txnDateTo: value("txnDateTo")))
            case .abort:
                return .abort
            case .batch:
                guard let raw = value("command") else { throw fail("command", "is required for batch: open or close") }
                guard let command = VivaBatchCommand(rawValue: raw) else {
                    throw fail("command", "must be open or close; got \(Self.shown(raw))")
                }
                return .batch(VivaBatch(command: command, batchName: value("batchName"), batchId: value("batchId")))
            case .transactionDetails:
                guard let id = try clientTransactionId() else {
                    throw fail("clientTransactionId", "is required for transactionDetails: the id of the transaction to look up")
                }
                return .transactionDetails(clientTransactionId: id)
            case nil:
                let known = VivaAction.allCases.map(\.rawValue).first { $0.lowercased() == action.lowercased() }
                throw fail("action", "must be one of \(Self.actionList) (case-sensitive)"
                           + (known.map { "; did you mean \($0)?" } ?? "; got \(Self.shown(action))"))
            }
        }

        func sale(preAuth: Bool) throws(VivaRequestError) -> VivaSale {
            let id = try clientTransactionId()
            let amount = try amount(required: true)!
            var tip = 0
            if let raw = value("tipAmount") {
                guard let t = Self.wholeNumber(raw, maxDigits: 12) else {
                    throw fail("tipAmount", "must be a whole number of cents, 0 or more; got \(Self.shown(raw))")
                }
                guard t <= amount else {
                    throw fail("tipAmount", "must not exceed amount (\(amount)): the tip is part of the amount; got \(t)")
                }
                tip = t
            }
            var withInstallments = false
            if let raw = value("withInstallments") {
                switch ASCII.lowercased(raw) {
                case "true": withInstallments = true
                case "false": withInstallments = false
                default: throw fail("withInstallments", "must be true or false; got \(Self.shown(raw))")
                }
            }
            var preferred: Int? = nil
            if let raw = value("preferredInstallments") {
                guard let p = Self.wholeNumber(raw, maxDigits: 3), p <= VivaRequest.maximumPreferredInstallments else {
                    throw fail("preferredInstallments",
                               "must be a whole number of instalments from 0 to \(VivaRequest.maximumPreferredInstallments); got \(Self.shown(raw))")
                }
                preferred = p
            }
            // The vendor's sample app refuses these before sending; the app is built on the same rule.
            if tip > 0, preAuth {
                throw fail("tipAmount", "must be 0 for a pre_auth: a pre-authorisation takes no tip")
            }
            if tip > 0, withInstallments {
                throw fail("tipAmount", "must be 0 when withInstallments is true: a sale in instalments takes no tip")
            }
            return VivaSale(amount: amount, tipAmount: tip, clientTransactionId: id, withInstallments: withInstallments,
                            preferredInstallments: preferred)
        }

        func amount(required: Bool) throws(VivaRequestError) -> Int? {
            guard let raw = value("amount") else {
                if required { throw fail("amount", "is required: a whole number of cents greater than 0, e.g. 1200 for 12.00") }
                return nil
            }
            guard let cents = Self.wholeNumber(raw, maxDigits: 12), cents > 0 else {
                let tooLarge = raw.utf8.allSatisfy { Self.isDigit($0) } && raw.contains { $0 != "0" }
                throw fail("amount", tooLarge
                           ? "must be at most \(VivaRequest.maximumAmount) cents (12 digits); got \(Self.shown(raw))"
                           : "must be a whole number of cents greater than 0, e.g. 1200 for 12.00; got \(Self.shown(raw))")
            }
            return cents
        }

        func clientTransactionId() throws(VivaRequestError) -> String? {
            guard let id = value("clientTransactionId") else { return nil }
            guard id.count <= VivaRequest.maximumClientTransactionIdLength else {
                throw fail("clientTransactionId",
                           "must be at most \(VivaRequest.maximumClientTransactionIdLength) characters (Viva's merchant reference); got \(id.count)")
            }
            return id
        }

        /// A STAN: 1–6 digits, not all zero, normalised to 6 digits.
        func referenceNumber() throws(VivaRequestError) -> String? {
            guard let raw = value("referenceNumber") else { return nil }
            guard raw.utf8.count <= 6, let n = Self.wholeNumber(raw, maxDigits: 6), n > 0 else {
                throw fail("referenceNumber", "must be a STAN: 1 to 6 digits, 000001-999999; got \(Self.shown(raw))")
            }
            let text = String(n)
            return String(repeating: "0", count: 6 - text.count) + text
        }

        func digits(_ name: String, atMost count: Int) throws(VivaRequestError) -> String? {
            guard let raw = value(name) else { return nil }
            guard raw.utf8.count <= count, raw.utf8.allSatisfy({ Self.isDigit($0) }) else {
                throw fail(name, "must be 1 to \(count) digits; got \(Self.shown(raw))")
            }
            return raw
        }

        /// ASCII digits only (no sign, point or spaces), leading zeros allowed, at most `maxDigits`
        /// significant digits, so the value always fits an Int.
        static func wholeNumber(_ text: String, maxDigits: Int) -> Int? {
            guard !text.isEmpty, text.utf8.allSatisfy({ isDigit($0) }) else { return nil }
            let significant = text.utf8.drop { $0 == UInt8(ascii: "0") }
            guard significant.count <= maxDigits else { return nil }
            return significant.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }

        /// A value quoted for an error message, cut to 40 characters, control characters escaped.
        static func shown<S: StringProtocol>(_ text: S) -> String {
            let cut = text.count > 40 ? String(text.prefix(40)) + "…" : String(text)
            return cut.debugDescription
        }
    }
}
