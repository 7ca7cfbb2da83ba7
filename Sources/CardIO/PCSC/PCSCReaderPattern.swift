import Foundation

/// Which PC/SC reader a terminal uses: `pcsc:<pattern>` in the configuration.
///
/// pcscd names a reader `<name>[ [interface]][ (serial)] XX YY`, where XX numbers the readers of
/// one driver in plug order and YY is the slot; both change when readers are plugged in another
/// order, so they are cut off before matching. What is left is matched as a substring, ignoring
/// case (`Virtual PCD`, `OMNIKEY 3x21`, `(80000F3A)` for one reader's USB serial number), or, when
/// the pattern is written `/…/`, as a regular expression (Swift regex syntax; `(?i)` for case).
/// A pattern that matches the whole name instead (`Virtual PCD 00 01`) picks one slot of a
/// reader whose slots differ in nothing else, at the price of depending on the plug order.
public struct PCSCReaderPattern: Sendable, Equatable, CustomStringConvertible {
    /// The pattern as written after `pcsc:`.
    public let text: String
    private let isRegex: Bool

    /// Parses the text after `pcsc:`.
    /// - Throws: the rule broken, as a sentence: empty, or a `/…/` that is not a regular expression.
    public init(parsing text: String) throws(PatternError) {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw PatternError(rule: "pcsc:<pattern> needs a reader name or part of one (see `cardbench pcsc list`), got nothing")
        }
        self.text = text
        isRegex = text.count >= 2 && text.hasPrefix("/") && text.hasSuffix("/")
        if isRegex {
            do { _ = try Regex(String(text.dropFirst().dropLast())) } catch {
                throw PatternError(rule: "pcsc:/…/ must be a regular expression: \(error)")
            }
        }
    }

    /// A pattern that could not be parsed.
    public struct PatternError: Error, Equatable, Sendable {
        public let rule: String
    }

    public var description: String { "pcsc:\(text)" }

    /// `name` without pcscd's trailing ` XX YY` (two upper-case hex pairs), when it has them.
    public static func baseName(_ name: String) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count >= 6 else { return name }
        let tail = bytes.suffix(6)
        let isHex = { (b: UInt8) in (0x30...0x39).contains(b) || (0x41...0x46).contains(b) }
        let t = Array(tail)
        guard t[0] == 0x20, isHex(t[1]), isHex(t[2]), t[3] == 0x20, isHex(t[4]), isHex(t[5]) else { return name }
        return String(decoding: bytes.dropLast(6), as: UTF8.self)
    }

    /// Whether the reader pcscd calls `name` is this pattern's.
    public func matches(_ name: String) -> Bool {
        let base = Self.baseName(name)
        if isRegex {
            guard let regex = try? Regex(String(text.dropFirst().dropLast())) else { return false }
            return base.contains(regex) || name.wholeMatch(of: regex) != nil
        }
        return base.range(of: text, options: .caseInsensitive) != nil || name.caseInsensitiveCompare(text) == .orderedSame
    }

    /// The readers among `names` this pattern matches, in pcscd's order (the first is used).
    public func select(from names: [String]) -> [String] {
        names.filter(matches)
    }
}
