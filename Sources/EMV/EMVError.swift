/// An error raised by pure EMV code: it names the offending field and the rule it broke,
/// so a caller can print it as one line (`field: rule`) without further context.
public struct EMVError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The input that was wrong: an argument name, a tag, or a structure ("ATR", "TLV").
    public let field: String
    /// The rule the input broke, in words a payments engineer reads without the source.
    public let rule: String

    /// Makes an error for `field` that broke `rule`.
    public init(field: String, rule: String) {
        self.field = field
        self.rule = rule
    }

    public var description: String { "\(field): \(rule)" }
}
