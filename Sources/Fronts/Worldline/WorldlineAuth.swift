import Crypto
import Foundation

/// The Server API's request signature, `Authorization: GCS v1HMAC:{apiKeyId}:{signature}`: base64
/// HMAC-SHA256 under the secret API key of
///
///     METHOD \n Content-Type \n Date \n [x-gcs-name:value \n …] path?query \n
///
/// with the `X-GCS-*` headers lower-cased and sorted by name, and each value unfolded (a line
/// break and the blanks after it become one space) and trimmed, as the official SDKs sign.
public enum WorldlineAuth {
    /// The scheme word and version the platform's SDKs send.
    public static let hmacPrefix = "GCS v1HMAC:"
    public static let clientPrefix = "GCS v1Client:"
    /// How far a request's `Date` may be from the platform's clock.
    public static let maximumSkewSeconds = 15 * 60

    /// The text the signature is computed over.
    public static func stringToSign(method: String, contentType: String?, date: String, gcsHeaders: [(name: String, value: String)],
                                    pathAndQuery: String) -> String {
        var text = method.uppercased() + "\n" + (contentType ?? "") + "\n" + date + "\n"
        let headers = gcsHeaders
            .map { (name: $0.name.lowercased(), value: canonical($0.value)) }
            .filter { $0.name.hasPrefix("x-gcs-") }
            .sorted { $0.name < $1.name }
        for header in headers { text += header.name + ":" + header.value + "\n" }
        return text + pathAndQuery + "\n"
    }

    /// Base64 HMAC-SHA256 of `text` under `secret`.
    public static func signature(_ text: String, secret: String) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: Array(secret.utf8)))).base64EncodedString()
    }

    /// A webhook's `X-GCS-Signature`: base64 HMAC-SHA256 of the raw body under the webhook secret.
    public static func webhookSignature(_ body: String, secret: String) -> String { signature(body, secret: secret) }

    /// Compares two signatures in time that does not depend on where they differ.
    public static func matches(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in x.indices { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// The key id and signature of a v1HMAC `Authorization` value, or nil when it is not one.
    public static func parseHMAC(_ authorization: String) -> (keyID: String, signature: String)? {
        guard authorization.hasPrefix(hmacPrefix) else { return nil }
        let rest = authorization.dropFirst(hmacPrefix.count)
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        let keyID = String(rest[..<colon]), signature = String(rest[rest.index(after: colon)...])
        guard !keyID.isEmpty, !signature.isEmpty else { return nil }
        return (keyID, signature)
    }

    /// The client session id of a v1Client `Authorization` value.
    public static func parseClient(_ authorization: String) -> String? {
        guard authorization.hasPrefix(clientPrefix) else { return nil }
        let id = String(authorization.dropFirst(clientPrefix.count)).trimmingCharacters(in: .whitespaces)
        return id.isEmpty ? nil : id
    }

    /// An HTTP date (RFC 9110's IMF-fixdate, `Tue, 24 Nov 2026 12:00:00 GMT`, as the SDKs send;
    /// a one-digit day is taken too) as seconds since 1970.
    ///
    /// Read by hand rather than with `DateFormatter`: swift-corelibs-foundation's leaks two
    /// allocations at every `date(from:)` (the worldline fuzz target's leak check found it), and
    /// every signed request reads one.
    public static func parseDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              ["Mon,", "Tue,", "Wed,", "Thu,", "Fri,", "Sat,", "Sun,"].contains(parts[0]),
              (1...2).contains(parts[1].count), let day = Int(parts[1]), parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
              let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].firstIndex(of: String(parts[2])),
              parts[3].count == 4, parts[3].allSatisfy({ $0.isASCII && $0.isNumber }), let year = Int(parts[3]), year >= 1970 else { return nil }
        let time = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard time.count == 3, time.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let h = Int(time[0]), let m = Int(time[1]), let sec = Int(time[2]), h < 24, m < 60, sec < 61 else { return nil }
        let m1 = month + 1
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...lengths[month]).contains(day) else { return nil }
        // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
        let y = m1 <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (m1 + (m1 > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Int64(days) * 86_400 + Int64(h * 3600 + m * 60 + sec)
    }

    static func canonical(_ value: String) -> String {
        var out = ""
        var iterator = value.unicodeScalars.makeIterator()
        var pendingBreak = false
        while let c = iterator.next() {
            if c == "\r" { continue }
            if c == "\n" { pendingBreak = true; continue }
            if pendingBreak {
                if c == " " || c == "\t" { continue }
                out += " "
                pendingBreak = false
            }
            out.unicodeScalars.append(c)
        }
        if pendingBreak { out += " " }
        return out.trimmingCharacters(in: .whitespaces)
    }
}
