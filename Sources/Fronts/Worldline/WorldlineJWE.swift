import Crypto
import CryptoExtras
import Foundation

/// `encryptedCustomerInput` as the platform's client SDKs make it: a JWE in compact
/// serialisation, `{"alg":"RSA-OAEP","enc":"A256CBC-HS512","kid":…}` (RFC 7516, RFC 7518 §5.2.5):
/// a 64-byte content key under RSA-OAEP with SHA-1, whose first half is the HMAC-SHA-512 key and
/// second half the AES-256-CBC key; the tag is the first 32 bytes of the HMAC over the protected
/// header's base64url text, the IV, the ciphertext and the header text's length in bits.
public enum WorldlineJWE {
    /// Why a JWE could not be opened; each names what is wrong with it.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// A decrypted input: the key it was made for and its plaintext.
    public struct Opened: Sendable {
        public let keyID: String
        public let plaintext: [UInt8]
    }

    /// Seals `plaintext` for the platform's public key `keyID`, as the client SDKs do (a fresh
    /// content key and IV each time): the bench's own encrypted wallet data uses it.
    public static func encrypt(_ plaintext: [UInt8], keyID: String, publicKeyDER: [UInt8]) throws -> String {
        let key = try _RSA.Encryption.PublicKey(derRepresentation: publicKeyDER)
        let header = base64URLEncode(Array(#"{"alg":"RSA-OAEP","enc":"A256CBC-HS512","kid":"\#(keyID)"}"#.utf8))
        let cek = SymmetricKey(size: SymmetricKeySize(bitCount: 512)).withUnsafeBytes { Array($0) }
        let iv = SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) }
        let wrapped = Array(try key.encrypt(cek, padding: .PKCS1_OAEP))
        let ciphertext = Array(try AES._CBC.encrypt(plaintext, using: SymmetricKey(data: cek[32..<64]), iv: try AES._CBC.IV(ivBytes: iv)))
        let aad = Array(header.utf8)
        var input = aad + iv + ciphertext
        let bits = UInt64(aad.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let tag = Array(HMAC<SHA512>.authenticationCode(for: input, using: SymmetricKey(data: cek[0..<32])).prefix(32))
        return [header, base64URLEncode(wrapped), base64URLEncode(iv), base64URLEncode(ciphertext), base64URLEncode(tag)].joined(separator: ".")
    }

    /// Opens `compact` with the private key its header's `kid` names (`privateKey(kid)` gives nil for a key the platform does not have).
    public static func decrypt(_ compact: String, privateKey: (String) -> _RSA.Encryption.PrivateKey?) throws(Failure) -> Opened {
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5 else { throw Failure(reason: "is not a JWE in compact serialisation (5 parts separated by '.', got \(parts.count))") }
        guard let headerBytes = base64URL(parts[0]),
              let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any] else {
            throw Failure(reason: "its protected header is not base64url JSON")
        }
        guard header["alg"] as? String == "RSA-OAEP" else { throw Failure(reason: "alg must be RSA-OAEP, got \(header["alg"].map { shownValue("\($0)", 40) } ?? "none")") }
        guard header["enc"] as? String == "A256CBC-HS512" else { throw Failure(reason: "enc must be A256CBC-HS512, got \(header["enc"].map { shownValue("\($0)", 40) } ?? "none")") }
        guard let kid = header["kid"] as? String, !kid.isEmpty else { throw Failure(reason: "its header has no kid (the key id of crypto/publickey)") }
        guard let key = privateKey(kid) else { throw Failure(reason: "kid \(shownValue(kid, 64)) is not a key of this platform") }
        guard let wrapped = base64URL(parts[1]), let iv = base64URL(parts[2]), let ciphertext = base64URL(parts[3]), let tag = base64URL(parts[4]) else {
            throw Failure(reason: "a part is not base64url")
        }
        guard iv.count == 16 else { throw Failure(reason: "the IV must be 16 bytes, got \(iv.count)") }
        guard tag.count == 32 else { throw Failure(reason: "the authentication tag must be 32 bytes, got \(tag.count)") }
        guard !ciphertext.isEmpty, ciphertext.count % 16 == 0 else { throw Failure(reason: "the ciphertext is not whole AES blocks") }
        let contentKey: [UInt8]
        do { contentKey = Array(try key.decrypt(wrapped, padding: .PKCS1_OAEP)) } catch {
            throw Failure(reason: "its content key does not decrypt with key \(shownValue(kid, 64)) (RSA-OAEP)")
        }
        guard contentKey.count == 64 else { throw Failure(reason: "the content key must be 64 bytes for A256CBC-HS512, got \(contentKey.count)") }
        let aad = Array(parts[0].utf8)
        var macInput = aad + iv + ciphertext
        let bits = UInt64(aad.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { macInput.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let mac = Array(HMAC<SHA512>.authenticationCode(for: macInput, using: SymmetricKey(data: contentKey[0..<32])))
        var difference: UInt8 = 0
        for i in 0..<32 { difference |= mac[i] ^ tag[i] }
        guard difference == 0 else { throw Failure(reason: "its authentication tag does not verify (the input was altered or made for another key)") }
        do {
            let plaintext = try AES._CBC.decrypt(ciphertext, using: SymmetricKey(data: contentKey[32..<64]), iv: try AES._CBC.IV(ivBytes: iv))
            return Opened(keyID: kid, plaintext: Array(plaintext))
        } catch {
            throw Failure(reason: "its ciphertext does not decrypt (AES-256-CBC padding)")
        }
    }

    /// base64url without padding (RFC 7515 §2), or nil.
    public static func base64URL(_ text: String) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        // Only the alphabet: Foundation's decoder would skip nothing else, but be explicit.
        guard s.utf8.allSatisfy({ $0 == 0x2B || $0 == 0x2F || $0 == 0x3D || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else { return nil }
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map(Array.init)
    }

    /// base64url without padding.
    public static func base64URLEncode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
