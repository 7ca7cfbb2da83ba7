/// How the Billpocket front counts and cuts text.
///
/// The document's limits are column sizes ("String (256 chars max)", "varchar(40)"): a database
/// column counts code points, so a length here is the number of Unicode scalars. `é` sent
/// precomposed is 1, sent as `e` and a combining accent it is 2; an emoji is 1. Cutting never
/// splits a Character (a grapheme cluster), so a cut text can be a little shorter than the limit.
enum BillpocketText {
    /// The length the document's limits are about: Unicode scalars.
    static func length<S: StringProtocol>(_ text: S) -> Int {
        text.unicodeScalars.count
    }

    /// The longest prefix of `text` made of whole Characters with at most `limit` scalars.
    static func truncated(_ text: String, to limit: Int) -> String {
        guard length(text) > limit else { return text }
        var out = ""
        var used = 0
        for character in text {
            let n = character.unicodeScalars.count
            guard used + n <= limit else { break }
            out.append(character)
            used += n
        }
        return out
    }

    /// `<field>: <rule>` within `BillpocketResult.statusInfoLimit`. The rules are written to fit
    /// with every field the document names; only an unknown parameter's name (any length) can be
    /// too long, and then the name is cut and marked with `…`, so the rule always survives whole.
    static func statusInfo(field: String, rule: String) -> String {
        let limit = BillpocketResult.statusInfoLimit
        let full = field + ": " + rule
        guard length(full) > limit else { return full }
        let room = limit - length(rule) - 3
        guard room > 0 else { return truncated(full, to: limit) }
        return truncated(field, to: room) + "…: " + rule
    }

    /// A value quoted for a long error message: cut to 40 characters, control characters escaped.
    static func shown<S: StringProtocol>(_ text: S) -> String {
        let cut = text.count > 40 ? String(text.prefix(40)) + "…" : String(text)
        return cut.debugDescription
    }
}

/// One field that broke one rule, in two lengths: `statusInfo` fits Billpocket's `statusinfo`
/// (varchar(40)) and names the field and the rule in a few words (`amount: max 2 decimals`);
/// `rule` explains the same at length, for the API's answers and the logs.
public struct BillpocketFieldError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field as the document spells it (`userToken`, `devicetoken`, `urlScheme`, …), or `url`
    /// for the URL as a whole and `scheme` for its `billpocket://` prefix.
    public let field: String
    /// The rule, in words a POS developer reads without the source.
    public let rule: String
    /// `<field>: <short rule>`, at most 40 characters.
    public let statusInfo: String

    /// Makes an error; `shortRule` is what follows `<field>: ` in `statusInfo`.
    public init(field: String, shortRule: String, rule: String) {
        self.field = field
        self.rule = rule
        self.statusInfo = BillpocketText.statusInfo(field: field, rule: shortRule)
    }

    /// `<field>: <rule>`.
    public var description: String { "\(field): \(rule)" }
}
