import EMV

/// One field of a message as a person reads it, with card data masked and PIN data withheld.
public struct DescribedField: Sendable, Codable, Equatable {
    public let field: Int
    public let name: String
    public let value: String
    /// Field 55's TLV items, named (card numbers and track data masked).
    public let tlv: [DescribedTag]?

    public init(field: Int, name: String, value: String, tlv: [DescribedTag]? = nil) {
        self.field = field
        self.name = name
        self.value = value
        self.tlv = tlv
    }
}

/// One TLV item of field 55.
public struct DescribedTag: Sendable, Codable, Equatable {
    public let tag: String
    public let name: String
    public let value: String

    public init(tag: String, name: String, value: String) {
        self.tag = tag
        self.name = name
        self.value = value
    }
}

/// A message as the trace keeps it: nothing in it can rebuild a card number, a track or a PIN.
public struct DescribedMessage: Sendable, Codable, Equatable {
    /// "out" (sent by cardbench) or "in" (received).
    public let direction: String
    public let mti: String
    /// What the MTI means: "financial request".
    public let meaning: String
    public let fields: [DescribedField]
}

extension ISOMessage {
    /// What the message type means (ISO 8583:1987's classes and functions).
    public static func meaning(of mti: String) -> String { MTI(mti).meaning }

    /// The message field by field, named by `packager`, safe to store and show: the PAN masked
    /// (first 6, last 4), tracks reduced to the masked PAN, the PIN block and MACs withheld.
    public func described(direction: String, packager: Packager) -> DescribedMessage {
        var out: [DescribedField] = []
        for n in fields.keys.sorted() {
            let spec = packager.field(n)
            let value = fields[n]!
            var tlv: [DescribedTag]? = nil
            let shown: String
            switch n {
            case 2, 34:
                shown = value.text.map(PAN.masked) ?? "(withheld)"
            case 35:
                shown = value.text.map { t in
                    let pan = String(t.prefix { $0 != "=" && $0 != "D" })
                    return PAN.masked(pan) + (t.count > pan.count ? "=(withheld)" : "")
                } ?? "(withheld)"
            case 36, 45:
                shown = "(track data withheld)"
            case 52:
                shown = "(PIN block withheld)"
            case 53, 64, 96, 128:
                shown = "(security data withheld)"
            case 55:
                let bytes = value.bytes ?? []
                if let items = try? TLV.parse(bytes) {
                    tlv = Self.describe(items)
                    shown = "\(bytes.count) bytes of ICC data"
                } else {
                    shown = "\(bytes.count) bytes, not BER-TLV"
                }
            default:
                shown = value.description
            }
            out.append(DescribedField(field: n, name: spec.name, value: shown, tlv: tlv))
        }
        // The card number wherever else a peer put it (a private field, an unknown tag): masked too.
        let pan = fields[2]?.text ?? fields[35]?.text.map { String($0.prefix { $0 != "=" && $0 != "D" }) }
        if let pan, pan.count >= 12 {
            out = out.map { f in
                DescribedField(field: f.field, name: f.name, value: TraceRedaction.masking(pan: pan, in: f.value),
                               tlv: f.tlv?.map { DescribedTag(tag: $0.tag, name: $0.name, value: TraceRedaction.masking(pan: pan, in: $0.value)) })
            }
        }
        // And any other card number in a field's text (`acct 4012888888881881` in field 48): the
        // card number scan every surface applies. ICC data is shown as hex and left alone.
        out = out.map { f in
            f.tlv != nil ? f : DescribedField(field: f.field, name: f.name, value: PAN.maskingLikelyPANs(in: f.value), tlv: nil)
        }
        return DescribedMessage(direction: direction, mti: mti, meaning: Self.meaning(of: mti), fields: out)
    }

    /// The TLV items, depth first; the card number and track data masked.
    static func describe(_ items: [TLV]) -> [DescribedTag] {
        var out: [DescribedTag] = []
        for item in items {
            let tag = item.tag.description
            let name = item.tag.name ?? "unknown"
            switch item.tag.value {
            case 0x5A:
                out.append(DescribedTag(tag: tag, name: name, value: PAN.masked(Hex.encode(item.value).filter { $0 != "F" })))
            case 0x57, 0x56, 0x9F6B, 0x9F1F, 0x9F20, 0x99:
                out.append(DescribedTag(tag: tag, name: name, value: "(withheld)"))
            default:
                if item.children.isEmpty || item.tag == 0x86 {
                    out.append(DescribedTag(tag: tag, name: name, value: Hex.encode(item.value)))
                } else {
                    out.append(DescribedTag(tag: tag, name: name, value: "\(item.value.count) bytes"))
                    out += describe(item.children)
                }
            }
        }
        return out
    }
}
