import Foundation

/// What the card-not-present platforms make alike: random ids and tokens in hex, and ISO 8601 times.
enum PlatformText {
    /// `bytes` random bytes as lower-case hex (ids, tokens, secrets).
    static func hex(_ bytes: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
    }

    /// `count` random decimal digits, the first not 0 (a scheme's transaction id).
    static func digits(_ count: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return String(Int.random(in: 1...9, using: &g)) + (1..<count).map { _ in String(Int.random(in: 0...9, using: &g)) }.joined()
    }

    /// `2021-08-14T09:47:43.000Z` for microseconds since 1970.
    static func isoTime(micros: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }
}

/// Random hex for the daemon's credentials (API keys, webhook secrets, merchant keys).
public enum RandomHex {
    public static func make(_ bytes: Int) -> String { PlatformText.hex(bytes) }
}
