/// Renderings of parsed TLV for people (an indented tree) and programs (JSON-ready values).
extension TLV {
    /// The value as text when the dictionary says it is alphanumeric and every byte is printable.
    public var text: String? {
        guard let format = TagDictionary.info(tag.value)?.format, [.a, .an, .ans].contains(format),
              !value.isEmpty, value.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// Indented tree lines: `9F02 Amount, Authorised (Numeric) [6]: 000000001000`.
    public func treeLines(indent: Int = 0) -> [String] {
        let pad = String(repeating: "  ", count: indent)
        let name = tag.name.map { " \($0)" } ?? ""
        if tag.isConstructed {
            return ["\(pad)\(tag)\(name) [\(value.count)]"] + children.flatMap { $0.treeLines(indent: indent + 1) }
        }
        let shown = text.map { "\(Hex.encode(value)) \"\($0)\"" } ?? Hex.encode(value)
        return ["\(pad)\(tag)\(name) [\(value.count)]: \(shown)"]
    }

    /// A JSON-ready description: tag, name, length, value hex, text, children.
    public var jsonObject: TLVJSON {
        TLVJSON(tag: tag.description, name: tag.name, length: value.count,
                value: tag.isConstructed ? nil : Hex.encode(value), text: text,
                children: tag.isConstructed ? children.map(\.jsonObject) : nil)
    }
}

/// The JSON shape of one TLV node, as `cardbench emv tlv --json` prints it.
public struct TLVJSON: Codable, Sendable, Equatable {
    public let tag: String
    public let name: String?
    public let length: Int
    public let value: String?
    public let text: String?
    public let children: [TLVJSON]?
}
