import Foundation

/// The digital voucher (receipt) of an approved Billpocket transaction, the one the callback's
/// `url` names, rendered as plain text for the API to serve.
///
/// It reads like the slip of a Mexican card terminal: Spanish labels, 40 columns (an 80 mm
/// thermal printer's width in its usual font), the local date and time in Mexico City, amounts as
/// `$1,234.56`, the card as its brand and last 4 digits. Values a sender chose (`reference`, the
/// merchant's name) cannot add lines or reorder text: control characters, line and paragraph
/// separators and bidirectional overrides in them print as U+FFFD.
public struct BillpocketVoucher: Sendable, Equatable {
    /// The transaction the voucher is for.
    public enum Kind: Sendable, Equatable {
        /// A sale: "VENTA".
        case venta
        /// A refund: "DEVOLUCIÓN".
        case devolucion
    }

    /// Sale or refund.
    public var kind: Kind
    /// The merchant's name, printed under the header when set.
    public var merchantName: String?
    /// The merchant's id ("Afiliación", the acquirer's merchant number).
    public var merchantId: String
    /// The terminal's id.
    public var terminalId: String
    /// When the transaction was authorised; printed in Mexico City time.
    public var date: Date
    /// Cents, tip excluded.
    public var amount: Int
    /// Cents of tip; the tip and total lines are printed only when above 0.
    public var tip: Int
    /// Months without interest; printed only for a plan (above 0).
    public var msi: Int
    /// VISA, MASTERCARD, CARNET or AMERICAN EXPRESS.
    public var cardType: String
    /// The card's last 4 digits.
    public var creditCard: String
    /// The issuer's authorisation code.
    public var authorization: String
    /// The application's AID in hex, when known.
    public var aid: String?
    /// The application label, when known.
    public var appLabel: String?
    /// The ARQC in hex, when known.
    public var arqc: String?
    /// The customer's reference, when sent.
    public var reference: String?
    /// The transaction's `transactionid`.
    public var transactionId: String

    /// The voucher's width in characters.
    public static let width = 40

    /// Makes a voucher.
    public init(kind: Kind = .venta, merchantName: String? = nil, merchantId: String, terminalId: String, date: Date,
                amount: Int, tip: Int = 0, msi: Int = 0, cardType: String, creditCard: String, authorization: String,
                aid: String? = nil, appLabel: String? = nil, arqc: String? = nil, reference: String? = nil,
                transactionId: String) {
        self.kind = kind
        self.merchantName = merchantName
        self.merchantId = merchantId
        self.terminalId = terminalId
        self.date = date
        self.amount = amount
        self.tip = tip
        self.msi = msi
        self.cardType = cardType
        self.creditCard = creditCard
        self.authorization = authorization
        self.aid = aid
        self.appLabel = appLabel
        self.arqc = arqc
        self.reference = reference
        self.transactionId = transactionId
    }

    /// The voucher as text: lines of at most ``width`` characters, each ending in a newline.
    public func render() -> String {
        var lines: [String] = []
        lines.append(Self.centered("BILLPOCKET"))
        if let merchantName, !merchantName.isEmpty {
            lines += Self.wrapped(Self.printable(merchantName), indent: 0).map(Self.centered)
        }
        lines.append("")
        lines += Self.pair("Afiliación", merchantId)
        lines += Self.pair("Terminal", terminalId)
        lines += Self.pair("Fecha (CDMX)", Self.localDate(date))
        lines.append("")
        lines.append(Self.centered(kind == .venta ? "VENTA" : "DEVOLUCIÓN"))
        lines.append("")
        lines += Self.pair("Importe", BillpocketFormat.money(cents: amount))
        if tip > 0 {
            lines += Self.pair("Propina", BillpocketFormat.money(cents: tip))
            lines += Self.pair("Total", BillpocketFormat.money(cents: amount + tip))
        }
        if msi > 0 {
            lines.append("\(msi) MESES SIN INTERESES")
        }
        lines.append("")
        lines += Self.pair("Tarjeta", cardType + " **** " + creditCard)
        lines += Self.pair("Autorización", authorization)
        if let aid { lines += Self.pair("AID", aid) }
        if let appLabel { lines += Self.pair("Aplicación", appLabel) }
        if let arqc { lines += Self.pair("ARQC", arqc) }
        lines += Self.pair("Transacción", transactionId)
        if let reference, !reference.isEmpty {
            lines.append("Referencia")
            lines += Self.wrapped(Self.printable(reference), indent: 2)
        }
        lines.append("")
        lines.append(Self.centered("APROBADA"))
        return lines.map { $0 + "\n" }.joined()
    }

    // MARK: Layout

    /// `label` at the left and `value` at the right of one line; when both do not fit, the label
    /// on its own line and the value wrapped under it, indented.
    static func pair(_ label: String, _ value: String) -> [String] {
        let value = printable(value)
        let gap = width - label.count - value.count
        if gap >= 1 { return [label + String(repeating: " ", count: gap) + value] }
        return [label] + wrapped(value, indent: 2)
    }

    /// `text` centred in ``width`` (left-padded only; no trailing spaces).
    static func centered(_ text: String) -> String {
        let pad = max(0, (width - text.count) / 2)
        return String(repeating: " ", count: pad) + text
    }

    /// `text` broken into lines of at most ``width`` characters, each starting with `indent`
    /// spaces: at spaces where possible, inside a word only when it is longer than a line.
    static func wrapped(_ text: String, indent: Int) -> [String] {
        let room = width - indent
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            var word = Substring(word)
            if !current.isEmpty, current.count + 1 + word.count <= room {
                current += " " + word
                continue
            }
            if !current.isEmpty { lines.append(current) }
            current = ""
            while word.count > room {
                lines.append(String(word.prefix(room)))
                word = word.dropFirst(room)
            }
            current = String(word)
        }
        if !current.isEmpty { lines.append(current) }
        let margin = String(repeating: " ", count: indent)
        return lines.map { margin + $0 }
    }

    /// `text` with every character that could break or reorder the layout replaced by U+FFFD:
    /// controls (tabs and newlines included), line and paragraph separators, bidirectional
    /// embeddings, overrides and isolates.
    static func printable(_ text: String) -> String {
        String(text.map { character -> Character in
            let unsafe = character.unicodeScalars.contains { scalar in
                switch scalar.properties.generalCategory {
                case .control, .lineSeparator, .paragraphSeparator: return true
                default: return (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
                }
            }
            return unsafe ? "\u{FFFD}" : character
        })
    }

    /// `dd/MM/yyyy HH:mm:ss` in Mexico City time, from the time zone database.
    static func localDate(_ date: Date) -> String {
        let c = BillpocketRefundWindow.calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ n: Int?) -> String { let n = n ?? 0; return n < 10 ? "0\(n)" : "\(n)" }
        return two(c.day) + "/" + two(c.month) + "/" + String(c.year ?? 0) + " " + two(c.hour) + ":" + two(c.minute) + ":" + two(c.second)
    }
}
