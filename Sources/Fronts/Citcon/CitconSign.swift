import Crypto
import Foundation

/// The `sign` of a Citcon IPN (Citcon's guide "How to verify UPI IPN signature"): the keys the
/// notification's `fields` lists, plus `fields` itself, sorted alphabetically, joined as
/// `key=value` with `&` — neither keys nor values URL-encoded, an empty value kept as `key=` —
/// then `&secret=<merchant secret>` appended; SHA-256 of that, in lower-case hex.
public enum CitconSign {
    /// The text that is hashed, for `values` (every field of the notification, `fields` among
    /// them, as sent).
    public static func signedText(_ values: [String: String], secret: String) -> String {
        let listed = (values["fields"] ?? "").split(separator: ",", omittingEmptySubsequences: true).map(String.init)
        let keys = Set(listed + ["fields"]).sorted()
        return keys.map { "\($0)=\(values[$0] ?? "")" }.joined(separator: "&") + "&secret=" + secret
    }

    /// The notification's `sign`.
    public static func sign(_ values: [String: String], secret: String) -> String {
        SHA256.hash(data: Array(signedText(values, secret: secret).utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
