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

    /// An RFC 1123 date (`Tue, 24 Nov 2026 12:00:00 GMT`) as seconds since 1970.
    public static func parseDate(_ text: String) -> Int64? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEE, d MMM yyyy HH:mm:ss zzz"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970) }
        }
        return nil
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
