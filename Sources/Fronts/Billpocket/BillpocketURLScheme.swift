import EMV

/// Where a Billpocket result goes: the request's `urlScheme`, "App or web hook prefix to be
/// called at the end of any transaction" (at most 50 characters).
public enum BillpocketURLScheme: Sendable, Hashable, CustomStringConvertible {
    /// A native app's URL scheme name, as registered in its Info.plist: `myapp`, the vendor
    /// sample's `Sender`. The result goes to `myapp://result=aprobada&…`.
    case app(String)
    /// An `http` or `https` URL: the result goes to it with `?result=aprobada&…` appended (`&…`
    /// when it already has a query).
    case webhook(String)

    /// The longest `urlScheme` accepted, in characters (the document's "String (50 chars max)").
    public static let maximumLength = 50

    /// The value as sent.
    public var description: String {
        switch self {
        case .app(let name): name
        case .webhook(let url): url
        }
    }

    /// Checks a decoded `urlScheme` value.
    ///
    /// An app scheme is an RFC 3986 scheme name, `letter *(letter / digit / + / - / .)`, without
    /// `:` or `://`: the app appends `://` itself, so `myapp://` would call `myapp://://result=…`.
    /// A webhook is `http://` or `https://` (any case) with a host, made of URI characters
    /// (`%XX` escapes allowed, no space), without a fragment: the result fields would land in it.
    ///
    /// - Throws: a `BillpocketFieldError` for field `urlScheme`.
    public static func parse(_ value: String) throws(BillpocketFieldError) -> BillpocketURLScheme {
        guard !value.isEmpty else {
            throw fail("required", "is required: the app's URL scheme name (myapp) or an http(s) webhook URL")
        }
        let length = BillpocketText.length(value)
        guard length <= maximumLength else {
            throw fail("max \(maximumLength) characters", "must be at most \(maximumLength) characters; got \(length)")
        }
        let bytes = Array(value.utf8)
        if let first = bytes.first, isLetter(first), bytes.allSatisfy({ isLetter($0) || isDigit($0) || "+-.".utf8.contains($0) }) {
            return .app(value)
        }
        let lower = ASCII.lowercased(value)
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            let schemeOnly = value.firstRange(of: "://").map { String(value[..<$0.lowerBound]) }
            throw fail("app scheme or http(s) URL", "must be an app's URL scheme name such as myapp"
                       + (schemeOnly.map { " (send \(BillpocketText.shown($0)), without '://')" } ?? "")
                       + ", or an http:// or https:// webhook URL; got \(BillpocketText.shown(value))")
        }
        let rest = lower.drop { $0 != ":" }.dropFirst(3)
        let host = rest.prefix { $0 != "/" && $0 != "?" }
        guard !host.isEmpty else { throw fail("webhook URL needs a host", "must name a host after '://'") }
        if PAN.looksLikeItHoldsAPAN(value) || (try? PercentEncoding.decode(value[...])).map(PAN.looksLikeItHoldsAPAN) == true {
            throw fail("card number in webhook URL", TextRules.panRule)
        }
        if bytes.contains(UInt8(ascii: "#")) {
            throw fail("webhook URL with '#'", "must not contain '#': the result fields would land in the fragment")
        }
        let authority = PercentEncoding.authorityRange(bytes)
        for (i, byte) in bytes.enumerated() {
            if byte == UInt8(ascii: "%") {
                let hex = Array("0123456789ABCDEFabcdef".utf8)
                guard i + 2 < bytes.count, hex.contains(bytes[i + 1]), hex.contains(bytes[i + 2]) else {
                    throw fail("bad %-escape in webhook URL", "must be a URL: '%' must start a %XX escape")
                }
            } else if !PercentEncoding.isURICharacter(bytes, at: i, authority: authority) {
                throw fail("webhook URL not encoded", "must be a URL: characters such as spaces must be percent-encoded inside it")
            }
        }
        if let problem = PercentEncoding.portProblem(bytes, authority: authority) { throw fail("bad port in webhook URL", problem) }
        return .webhook(value)
    }

    private static func fail(_ short: String, _ rule: String) -> BillpocketFieldError {
        BillpocketFieldError(field: "urlScheme", shortRule: short, rule: rule)
    }

    static func isLetter(_ b: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
    }

    static func isDigit(_ b: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) }
}
