import EMV
import Foundation

/// Field rules shared by the ledger's operations. Messages never quote a PAN.
package enum Validate {
    package static func tid(_ tid: String) throws {
        guard tid.utf8.count == 8, tid.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw LedgerError.invalid(field: "tid", rule: "must be 8 digits, got \"\(tid)\"")
        }
    }

    package static func terminalName(_ name: String) throws {
        // Every begin checks its terminal's name: bytes, not a set of characters built each time.
        func allowed(_ b: UInt8) -> Bool {
            (b | 0x20) &- UInt8(ascii: "a") < 26 || b &- UInt8(ascii: "0") < 10 || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
        guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy(allowed) else {
            throw LedgerError.invalid(field: "name", rule: "must be 1–64 letters, digits, '.', '_' or '-', got \"\(name)\"")
        }
    }

    package static func pan(_ pan: String, field: String = "pan") throws {
        guard (12...19).contains(pan.utf8.count), pan.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw LedgerError.invalid(field: field, rule: "must be 12–19 digits (got \(pan.utf8.count) characters)")
        }
    }

    /// At most the first 8 and the last 4 digits may show (PCI DSS 3.4.1), so a masked PAN has at
    /// most 12 digits and at least one masked position.
    package static func maskedPAN(_ masked: String) throws {
        let digits = masked.filter(\.isASCIIDigit).count
        let masks = masked.filter { "*Xx#•".contains($0) }.count
        guard digits <= 12, masks >= 1, masked.count <= 19 + 4 else {
            throw LedgerError.invalid(field: "maskedPAN", rule: "must show at most the first 8 and last 4 digits, the rest masked with '*'")
        }
    }

    /// The kernel masks traces and fronts render masked URLs; this is the ledger refusing to be
    /// the place a mistake upstream turns into a stored PAN.
    package static func noPAN(_ pan: String?, in text: String?, field: @autoclosure () -> String) throws {
        guard let pan, let text, containsBytes(text, pan) else { return }
        throw LedgerError.invalid(field: field(), rule: "contains the full PAN; only masked card data may be stored")
    }

    /// A byte search: `String.contains` goes through Foundation's locale-aware search, which
    /// showed in the daemon's profile for a check that only ever looks for ASCII digits.
    package static func containsBytes(_ text: String, _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard let first = n.first else { return true }
        var t = text
        return t.withUTF8 { h in
            guard h.count >= n.count else { return false }
            var i = 0
            let last = h.count - n.count
            while i <= last {
                if h[i] == first {
                    var j = 1
                    while j < n.count && h[i + j] == n[j] { j += 1 }
                    if j == n.count { return true }
                }
                i += 1
            }
            return false
        }
    }

    package static func hex(_ value: String?, field: String, bytes: ClosedRange<Int>) throws {
        guard let value else { return }
        guard value.utf8.count % 2 == 0, value.utf8.allSatisfy(isHexDigit), bytes.contains(value.utf8.count / 2) else {
            let size = bytes.lowerBound == bytes.upperBound ? "\(bytes.lowerBound)" : "\(bytes.lowerBound)–\(bytes.upperBound)"
            throw LedgerError.invalid(field: field, rule: "must be \(size) bytes of hex, got \"\(value.prefix(80))\"")
        }
    }

    /// Trace hex as the kernel redacts it: PAN digits and PIN blocks appear as '*'.
    /// `field` is built only for the error: a sale checks some 30 trace fields.
    package static func maskedHex(_ value: String, field: @autoclosure () -> String, bytes: ClosedRange<Int>) throws {
        var text = value
        // On the contiguous bytes: a sale checks some 30 trace fields.
        let wellFormed = text.withUTF8 { utf8 in
            for b in utf8 where !(isHexDigit(b) || b == UInt8(ascii: "*")) { return false }
            return true
        }
        guard value.utf8.count % 2 == 0, wellFormed, bytes.contains(value.utf8.count / 2) else {
            let size = "\(bytes.lowerBound)–\(bytes.upperBound)"
            throw LedgerError.invalid(field: field(), rule: "must be \(size) bytes of hex ('*' where masked), got \"\(value.prefix(80))\"")
        }
    }

    package static func text(_ value: String?, field: String, maxLength: Int) throws {
        guard let value else { return }
        guard !value.isEmpty, value.count <= maxLength else {
            throw LedgerError.invalid(field: field, rule: "must be 1–\(maxLength) characters when given, got \(value.count)")
        }
        if let found = ControlCharacters.first(in: value) {
            throw LedgerError.invalid(field: field, rule: "must not contain control characters; found \(ControlCharacters.describe(found))")
        }
        // The fronts refuse such text first, with their own words; this keeps a card number out
        // of the ledger whatever the way in, and before the host is asked (begin runs first).
        if PAN.looksLikeItHoldsAPAN(value) {
            throw LedgerError.invalid(field: field, rule: "must not hold a card number; only masked card data may be stored")
        }
    }

    /// GRDB binds a Swift string to SQLite as C text (length -1), which ends at the first NUL: a
    /// value holding one would be stored, or looked up, cut short, and so match another. Every
    /// text the ledger stores or searches by passes here first.
    package static func noNUL(_ value: String?, field: String) throws {
        guard let value, value.utf8.contains(0) else { return }
        throw LedgerError.invalid(field: field, rule: "must not contain NUL (U+0000)")
    }

    package static func jsonObject(_ value: String?, field: String) throws {
        guard let value else { return }
        guard (try? JSONSerialization.jsonObject(with: Data(value.utf8))) is [String: Any] else {
            throw LedgerError.invalid(field: field, rule: "must be a JSON object")
        }
    }

    package static func jsonArray(_ value: String, field: String) throws {
        guard (try? JSONSerialization.jsonObject(with: Data(value.utf8))) is [Any] else {
            throw LedgerError.invalid(field: field, rule: "must be a JSON array")
        }
    }

    package static func isHexDigit(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x46).contains(c) || (0x61...0x66).contains(c)
    }

    package static func lowerHex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Character {
    package var isASCIIDigit: Bool { isASCII && isWholeNumber }
}
