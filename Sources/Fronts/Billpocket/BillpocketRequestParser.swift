import EMV

/// One parse of a Billpocket request URL. The `urlScheme`, `identifier` and `transaction` are
/// found before any rule is checked, so every error thrown carries whichever of them are valid.
struct BillpocketRequestParser {
    var urlScheme: BillpocketURLScheme? = nil
    var identifier: String? = nil
    var transaction: String? = nil
    /// Decoded items: the name as sent, its key (the document's spelling for a known parameter,
    /// the lower-cased name for an unknown one) and the value.
    var items: [(name: String, key: String, value: String)] = []

    /// The document's parameters by lower-cased name, with the legacy and sample aliases.
    static let keys: [String: String] = [
        "transaction": "transaction",
        "usertoken": "userToken", "pin": "userToken",
        "devicetoken": "devicetoken",
        "amount": "amount", "tip": "tip",
        "msi": "msi", "payments": "msi",
        "reference": "reference", "email": "email", "phone": "phone",
        "identifier": "identifier", "urlscheme": "urlScheme",
        "showphotobutton": "showPhotoButton", "mandatoryphoto": "mandatoryPhoto", "comesfromqr": "comesFromQR",
        "transactionid": "transactionId",
    ]

    /// The parameters the document's table marks N/A for each transaction, in the table's order.
    /// `urlScheme` is N/A for a refund there too, but a refund must be answered somewhere, so it
    /// is accepted (docs/billpocket.md).
    static let notApplicable: [String: [String]] = [
        BillpocketTransaction.venta: ["transactionId"],
        BillpocketTransaction.devolucion: ["amount", "tip", "msi", "reference", "email", "phone", "showPhotoButton",
                                           "mandatoryPhoto", "comesFromQR"],
    ]

    static func key(_ name: String) -> String {
        let lower = ASCII.lowercased(name)
        return keys[lower] ?? lower
    }

    func fail(_ field: String, _ short: String, _ rule: String) -> BillpocketRequestError {
        fail(BillpocketFieldError(field: field, shortRule: short, rule: rule))
    }

    func fail(_ error: BillpocketFieldError) -> BillpocketRequestError {
        BillpocketRequestError(error, urlScheme: urlScheme, identifier: identifier, transaction: transaction)
    }

    mutating func parse(_ url: String) throws(BillpocketRequestError) -> BillpocketRequest {
        guard !url.isEmpty else { throw fail("url", "empty", "must not be empty") }
        let (parameterText, form) = try split(url)
        try decodeItems(parameterText)
        try refuseDuplicates()

        var scheme: BillpocketURLScheme? = nil
        if let raw = value("urlScheme") {
            do { scheme = try BillpocketURLScheme.parse(raw) } catch { throw fail(error) }
        }
        guard let transaction = value("transaction") else {
            throw fail("transaction", "required", "is required: venta (sale) or devolucion (refund)")
        }
        guard BillpocketTransaction.all.contains(transaction) else {
            let known = BillpocketTransaction.all.first { $0 == transaction.lowercased() }
            throw fail("transaction", "venta or devolucion", "must be venta or devolucion (lower case)"
                       + (known.map { "; did you mean \($0)?" } ?? "; got \(BillpocketText.shown(transaction))"))
        }
        // The document marks these N/A, not forbidden, and the vendor's own sample sends every
        // field on every request: they are ignored (and the record says so), not refused.
        let ignored = Self.notApplicable[transaction]!.filter { value($0) != nil }
        if transaction == BillpocketTransaction.venta, scheme == nil {
            throw fail("urlScheme", "required", "is required for venta: the app's URL scheme name (myapp) or an http(s) webhook URL")
        }

        let userToken = try parseUserToken()
        let deviceToken = try parseDeviceToken()
        let command: BillpocketCommand
        let identifier: String
        if transaction == BillpocketTransaction.venta {
            let amount = try parseAmount("amount", required: true)!
            guard amount > 0 else {
                throw fail("amount", "must be greater than 0", "must be greater than 0.00; got \(BillpocketText.shown(value("amount")!))")
            }
            let tip = try parseAmount("tip", required: false) ?? 0
            guard amount + tip <= BillpocketFormat.maximumAmount else {
                throw fail("tip", "amount + tip too large",
                           "amount plus tip must be at most \(BillpocketFormat.amount(cents: BillpocketFormat.maximumAmount)) (12 digits, what the card and the host take)")
            }
            let msi = try parseMSI()
            let reference = try text("reference", atMost: BillpocketRequest.maximumTextLength)
            let email = try parseEmail()
            let phone = try parsePhone()
            identifier = try requiredIdentifier()
            command = .venta(BillpocketSale(amount: amount, tip: tip, msi: msi, reference: reference, email: email, phone: phone,
                                            showPhotoButton: try boolean("showPhotoButton"),
                                            mandatoryPhoto: try boolean("mandatoryPhoto"),
                                            comesFromQR: try boolean("comesFromQR")))
        } else {
            identifier = try requiredIdentifier()
            guard let id = try text("transactionId", atMost: BillpocketRequest.maximumTransactionIdLength) else {
                throw fail("transactionId", "required", "is required for devolucion: the transactionid of the sale to refund")
            }
            command = .devolucion(BillpocketRefund(transactionId: id))
        }
        var request = BillpocketRequest(command: command, userToken: userToken, deviceToken: deviceToken, identifier: identifier,
                                        urlScheme: scheme, form: form,
                                        parameters: items.map { BillpocketParameter(name: $0.name, value: $0.value) })
        request.ignored = ignored
        return request
    }

    // MARK: URL shape

    /// Checks `billpocket://` and returns the parameter text (fragment included, refused later
    /// once the item it cut short is known) and the form it came in.
    func split(_ url: String) throws(BillpocketRequestError) -> (Substring, BillpocketURLForm) {
        guard let separator = url.firstRange(of: "://"),
              ASCII.lowercased(url[..<separator.lowerBound]) == "billpocket" else {
            let shown = url.firstRange(of: "://").map { String(url[..<$0.upperBound]) } ?? String(url.prefix(20))
            throw fail("scheme", "must be billpocket://",
                       "the URL must start with billpocket:// (the scheme in any case), then the parameters; got \(BillpocketText.shown(shown))")
        }
        let rest = url[separator.upperBound...]
        let beforeFragment = rest.firstIndex(of: "#").map { rest[..<$0] } ?? rest
        if let question = beforeFragment.firstIndex(of: "?"), !beforeFragment[..<question].contains("=") {
            return (rest[rest.index(after: question)...], .query)
        }
        return (rest, .afterScheme)
    }

    /// Splits the parameter text into decoded items. The urlScheme, identifier and transaction are
    /// picked out first, so that every error from here on can be answered.
    mutating func decodeItems(_ text: Substring) throws(BillpocketRequestError) {
        let hash = text.firstIndex(of: "#")
        let body = hash.map { text[..<$0] } ?? text
        var raw: [(name: Substring, value: Substring)] = []
        for piece in body.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = piece.firstIndex(of: "=") {
                raw.append((piece[..<eq], piece[piece.index(after: eq)...]))
            } else {
                raw.append((piece, piece[piece.endIndex...]))
            }
        }
        let keys = raw.map { item in (try? PercentEncoding.decode(item.name)).map(Self.key) }
        func single(_ key: String) -> String? {
            let found = raw.indices.filter { keys[$0] == key }
            guard found.count == 1, let value = try? PercentEncoding.decode(raw[found[0]].value), !value.isEmpty else { return nil }
            return value
        }
        urlScheme = single("urlScheme").flatMap { try? BillpocketURLScheme.parse($0) }
        identifier = single("identifier").flatMap {
            BillpocketText.length($0) <= BillpocketRequest.maximumTextLength && TextRules.problem($0) == nil ? $0 : nil
        }
        transaction = single("transaction")

        if hash != nil {
            // The item the '#' cut short is the last one, unless the text ended with '&'.
            let cut = body.last == "&" || body.isEmpty ? nil : raw.last.flatMap { try? PercentEncoding.decode($0.name) }
            let field = cut.map { Self.keys[ASCII.lowercased($0)] ?? $0 } ?? "url"
            throw fail(field, "send '#' as %23", "contains '#', which ends the URL's parameters and drops what follows; send '#' as %23")
        }
        for item in raw {
            let name: String
            do { name = try PercentEncoding.decode(item.name) } catch {
                throw fail("url", "bad parameter name", "parameter name \(BillpocketText.shown(item.name)): \(error.rule)")
            }
            guard !name.isEmpty else {
                throw fail("url", "empty parameter name", "a parameter has an empty name (\(BillpocketText.shown(item.value)) follows '=')")
            }
            let key = Self.key(name)
            let field = Self.keys[ASCII.lowercased(name)] ?? name
            let value: String
            do {
                value = try PercentEncoding.decode(item.value)
            } catch {
                let short = switch error {
                case .unencoded: "must be percent-encoded"
                case .badEscape: "bad %-escape"
                case .notUTF8: "not UTF-8"
                }
                throw fail(field, short, error.rule)
            }
            if let problem = TextRules.problem(name) { throw fail("url", "bad parameter name", "a parameter name \(problem)") }
            // transactionId is the sale's 16-digit id as cardbench issued it, never card-number
            // shaped; the tokens are random credentials, only ever hashed, never stored or echoed.
            // (A transactionId a venta sends is ignored, not read as an id: it is scanned like any text.)
            let exempt = key == "transactionId" ? transaction == BillpocketTransaction.devolucion : ["userToken", "devicetoken"].contains(key)
            if let problem = TextRules.problem(value, panLike: !exempt) {
                throw fail(field, ControlCharacters.first(in: value) != nil ? "no control characters" : "no card numbers", problem)
            }
            items.append((name, key, value))
        }
    }

    func refuseDuplicates() throws(BillpocketRequestError) {
        var names: [String: [String]] = [:]
        for item in items { names[item.key, default: []].append(item.name) }
        // The first repeated parameter in the order sent, so the message is stable.
        if let repeated = items.first(where: { names[$0.key]!.count > 1 }) {
            let sent = names[repeated.key]!
            let field = Self.keys[ASCII.lowercased(repeated.name)] ?? repeated.name
            throw fail(field, "sent \(sent.count) times", "must appear once, under any of its names; it appears \(sent.count) times ("
                       + sent.joined(separator: ", ") + "), and which one the app would use is undefined")
        }
    }

    // MARK: Fields

    /// A parameter's value by key; nil when absent or empty (an empty value is the same as none).
    func value(_ key: String) -> String? {
        guard let v = items.first(where: { $0.key == key })?.value, !v.isEmpty else { return nil }
        return v
    }

    func text(_ field: String, atMost limit: Int) throws(BillpocketRequestError) -> String? {
        guard let v = value(field) else { return nil }
        let length = BillpocketText.length(v)
        guard length <= limit else {
            throw fail(field, "max \(limit) characters", "must be at most \(limit) characters; got \(length)")
        }
        return v
    }

    func parseUserToken() throws(BillpocketRequestError) -> String {
        guard let token = try text("userToken", atMost: BillpocketRequest.maximumUserTokenLength) else {
            throw fail("userToken", "required", "is required (as userToken, usertoken or the legacy pin): the user's token")
        }
        return token
    }

    func parseDeviceToken() throws(BillpocketRequestError) -> String? {
        guard let token = value("devicetoken") else { return nil }
        let lengths = BillpocketRequest.deviceTokenLengths
        let length = BillpocketText.length(token)
        guard lengths.contains(length) else {
            throw fail("devicetoken", "\(lengths.lowerBound)-\(lengths.upperBound) characters",
                       "must be \(lengths.lowerBound) to \(lengths.upperBound) characters; got \(length)")
        }
        return token
    }

    func requiredIdentifier() throws(BillpocketRequestError) -> String {
        guard let id = try text("identifier", atMost: BillpocketRequest.maximumTextLength) else {
            throw fail("identifier", "required", "is required: your app's id for this operation, echoed in the callback")
        }
        return id
    }

    func parseAmount(_ field: String, required: Bool) throws(BillpocketRequestError) -> Int? {
        guard let raw = value(field) else {
            if required { throw fail(field, "required", "is required: the amount without tip, e.g. 100.00") }
            return nil
        }
        switch BillpocketFormat.cents(raw) {
        case .success(let cents):
            return cents
        case .failure(.notDecimal):
            throw fail(field, "must be a decimal number",
                       "must be a decimal number with a point and at most 2 decimals, e.g. 100.00, 100.5 or 100; got \(BillpocketText.shown(raw))")
        case .failure(.tooManyDecimals):
            throw fail(field, "max 2 decimals", "must have at most 2 decimals, e.g. 100.00; got \(BillpocketText.shown(raw))")
        case .failure(.tooLarge):
            throw fail(field, "too large", "must be at most \(BillpocketFormat.amount(cents: BillpocketFormat.maximumAmount)) (12 digits of cents, what the card and the host take); got \(BillpocketText.shown(raw))")
        }
    }

    func parseMSI() throws(BillpocketRequestError) -> Int {
        guard let raw = value("msi") else { return 0 }
        guard let months = BillpocketMSI.plans.first(where: { String($0) == raw }) else {
            throw fail("msi", "must be 0, 3, 6, 9 or 12",
                       "must be 0 (one payment), 3, 6, 9 or 12 months without interest; got \(BillpocketText.shown(raw))")
        }
        return months
    }

    func parseEmail() throws(BillpocketRequestError) -> String? {
        guard let email = try text("email", atMost: BillpocketRequest.maximumTextLength) else { return nil }
        let at = email.lastIndex(of: "@")
        let valid = at.map { $0 != email.startIndex && email.index(after: $0) != email.endIndex } ?? false
        guard valid, !email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) else {
            throw fail("email", "not an email address", "must look like name@domain, without spaces; got \(BillpocketText.shown(email))")
        }
        return email
    }

    func parsePhone() throws(BillpocketRequestError) -> String? {
        guard let phone = try text("phone", atMost: BillpocketRequest.maximumPhoneLength) else { return nil }
        let allowed = Array("0123456789+-() ".utf8)
        guard phone.utf8.allSatisfy({ allowed.contains($0) }), phone.utf8.contains(where: BillpocketFormat.isDigit) else {
            throw fail("phone", "digits, spaces, + - ( ) only",
                       "must be a phone number: digits, with +, -, (, ) and spaces allowed; got \(BillpocketText.shown(phone))")
        }
        return phone
    }

    /// `true`/`false` in any case, or `1`/`0`; absent or empty is false (the document's default).
    func boolean(_ field: String) throws(BillpocketRequestError) -> Bool {
        guard let raw = value(field) else { return false }
        switch ASCII.lowercased(raw) {
        case "true", "1": return true
        case "false", "0": return false
        default: throw fail(field, "must be true or false", "must be true or false (1 or 0 are accepted too); got \(BillpocketText.shown(raw))")
        }
    }
}
