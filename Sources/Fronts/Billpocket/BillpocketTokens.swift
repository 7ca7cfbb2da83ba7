/// The formats of the tokens cardbench issues for its Billpocket users and devices, made from
/// random bytes the caller draws (the daemon, from the system's CSPRNG) and checked by shape.
/// Storing them, hashed, and their alive/dead states are the daemon's business.
///
/// Every character takes whole bits of the random bytes, with an alphabet whose size is a power
/// of two, so each symbol is exactly equally likely: no modulo bias, no rejection loop, and a
/// fixed number of bytes per token.
public enum BillpocketTokens {
    // MARK: User tokens

    /// A user token's length: 64 characters, the document's varchar(64).
    public static let userTokenLength = 64
    /// The random bytes a user token takes: 32 (256 bits), two hex digits each.
    public static let userTokenRandomByteCount = 32
    /// The user token's alphabet: lower-case hex. 256 bits need no denser alphabet at 64
    /// characters, and hex survives every channel a token travels (URLs unencoded, shells, YAML,
    /// a command line, where a token starting with `-` would read as an option).
    public static let userTokenAlphabet = "0123456789abcdef"

    /// A user token from 32 random bytes: each byte's high then low 4 bits, as lower-case hex.
    public static func userToken(randomBytes: [UInt8]) -> String {
        precondition(randomBytes.count == userTokenRandomByteCount, "a user token takes \(userTokenRandomByteCount) random bytes")
        let alphabet = Array(userTokenAlphabet.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(userTokenLength)
        for byte in randomBytes {
            out.append(alphabet[Int(byte >> 4)])
            out.append(alphabet[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Checks that `token` is a user token's shape: 64 lower-case hex digits.
    ///
    /// - Throws: a `BillpocketFieldError` for field `userToken`.
    public static func validateUserToken(_ token: String) throws(BillpocketFieldError) {
        let length = BillpocketText.length(token)
        guard length == userTokenLength else {
            throw BillpocketFieldError(field: "userToken", shortRule: "must be 64 characters",
                                       rule: "must be \(userTokenLength) characters (lower-case hex); got \(length)")
        }
        let alphabet = Array(userTokenAlphabet.utf8)
        guard token.utf8.allSatisfy({ alphabet.contains($0) }) else {
            throw BillpocketFieldError(field: "userToken", shortRule: "must be lower-case hex",
                                       rule: "must be lower-case hex digits (0-9, a-f); got \(BillpocketText.shown(token))")
        }
    }

    // MARK: Device tokens

    /// A device token's length: 10 characters, within the document's 8 to 12; 50 bits.
    public static let deviceTokenLength = 10
    /// The random bytes a device token takes: one per character, of which the low 5 bits count.
    public static let deviceTokenRandomByteCount = 10
    /// The device token's alphabet: Crockford's base 32, digits and upper-case letters without
    /// I, L, O and U, so a token read off a screen and typed in has no look-alikes.
    public static let deviceTokenAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

    /// A device token from 10 random bytes: each byte's low 5 bits pick a character (256 is a
    /// multiple of 32, so every character is equally likely).
    public static func deviceToken(randomBytes: [UInt8]) -> String {
        precondition(randomBytes.count == deviceTokenRandomByteCount, "a device token takes \(deviceTokenRandomByteCount) random bytes")
        let alphabet = Array(deviceTokenAlphabet.utf8)
        return String(decoding: randomBytes.map { alphabet[Int($0 & 0x1F)] }, as: UTF8.self)
    }

    /// Checks that `token` is a device token's shape: 10 characters of ``deviceTokenAlphabet``.
    ///
    /// - Throws: a `BillpocketFieldError` for field `devicetoken`.
    public static func validateDeviceToken(_ token: String) throws(BillpocketFieldError) {
        let length = BillpocketText.length(token)
        guard length == deviceTokenLength else {
            throw BillpocketFieldError(field: "devicetoken", shortRule: "must be \(deviceTokenLength) characters",
                                       rule: "must be \(deviceTokenLength) characters of \(deviceTokenAlphabet); got \(length)")
        }
        let alphabet = Array(deviceTokenAlphabet.utf8)
        guard token.utf8.allSatisfy({ alphabet.contains($0) }) else {
            throw BillpocketFieldError(field: "devicetoken", shortRule: "letters/digits, no I L O U",
                                       rule: "must be digits and upper-case letters other than I, L, O and U (Crockford's base 32); got \(BillpocketText.shown(token))")
        }
    }
}
