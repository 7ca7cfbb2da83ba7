/// JSON written field by field, for the replies the API sends with every sale.
///
/// `JSONEncoder` spent more instructions on a sale's reply (an `OpenResult` of some fifty values)
/// than the ledger's commit did: each value passes through boxes, containers and generic
/// dispatch. The hot replies write themselves with this instead; everything else keeps
/// `JSONEncoder`. The output means the same as `JSONEncoder`'s with `.withoutEscapingSlashes`
/// (keys in declaration order, nil optionals left out), which `JSONTextTests` checks by decoding
/// both.
struct JSONText {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Writes `{`, the fields `body` writes, and `}`.
    mutating func object(_ body: (inout JSONText) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        let outer = needsComma
        needsComma = false
        body(&self)
        needsComma = outer
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func key(_ name: StaticString) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A string field; none when `value` is nil.
    mutating func field(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        string(value)
    }

    /// An integer field; none when `value` is nil.
    mutating func field<I: BinaryInteger>(_ name: StaticString, _ value: I?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func field(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
    }

    /// An object field written by `body`.
    mutating func field(_ name: StaticString, object body: (inout JSONText) -> Void) {
        key(name)
        object(body)
    }

    /// An array field of objects, each written by `element`; none when `values` is nil.
    mutating func field<T>(_ name: StaticString, array values: [T]?, _ element: (inout JSONText, T) -> Void) {
        guard let values else { return }
        key(name)
        bytes.append(UInt8(ascii: "["))
        var first = true
        for value in values {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            object { element(&$0, value) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A top-level array of objects, each written by `element`.
    mutating func array<T>(_ values: [T], _ element: (inout JSONText, T) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            object { element(&$0, value) }
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// An array field of strings.
    mutating func field(_ name: StaticString, strings values: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, … or `\u00XX`;
    /// everything else as its UTF-8, `/` included.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "f"))
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension OpenResult {
    /// The reply's JSON (see `JSONText`).
    var jsonBytes: [UInt8] {
        var out = JSONText()
        out.object { o in
            o.field("callback", callback)
            o.field("fields", array: fields) { f, field in
                f.field("name", field.name)
                f.field("value", field.value)
            }
            o.field("status", status)
            o.field("message", message)
            if let transaction { o.field("transaction") { transaction.write(to: &$0) } }
            o.field("replayed", replayed)
        }
        return out.bytes
    }
}

extension TransactionView {
    /// Writes the transaction's fields, in declaration order.
    func write(to o: inout JSONText) {
        o.field("id", id)
        o.field("transactionId", transactionId)
        o.field("terminal", terminal)
        o.field("tid", tid)
        o.field("provider", provider)
        o.field("action", action)
        o.field("status", status)
        o.field("amount", amount)
        o.field("tipAmount", tipAmount)
        o.field("currency", currency)
        o.field("clientReference", clientReference)
        o.field("stan", stan)
        o.field("rrn", rrn)
        o.field("authorisationCode", authorisationCode)
        o.field("responseCode", responseCode)
        o.field("message", message)
        o.field("maskedPAN", maskedPAN)
        o.field("brand", brand)
        o.field("aid", aid)
        o.field("applicationLabel", applicationLabel)
        o.field("cardholderName", cardholderName)
        o.field("arqc", arqc)
        o.field("atc", atc)
        o.field("tvr", tvr)
        o.field("cvm", cvm)
        o.field("entryMode", entryMode)
        o.field("installments", installments)
        o.field("originalId", originalId)
        o.field("createdAt", createdAt)
        o.field("completedAt", completedAt)
        if let oda {
            o.field("oda", object: { r in
                r.field("method", oda.method.rawValue)
                r.field("result", oda.result.rawValue)
                r.field("reason", oda.reason)
                r.field("rid", oda.rid)
                r.field("caIndex", oda.caIndex)
                r.field("caKey", oda.caKey)
                r.field("issuerIdentifier", oda.issuerIdentifier)
                r.field("issuerCertificateSerial", oda.issuerCertificateSerial)
                r.field("issuerCertificateExpiry", oda.issuerCertificateExpiry)
                r.field("issuerKeyBits", oda.issuerKeyBits)
                r.field("iccCertificateSerial", oda.iccCertificateSerial)
                r.field("iccCertificateExpiry", oda.iccCertificateExpiry)
                r.field("iccKeyBits", oda.iccKeyBits)
                r.field("dataAuthenticationCode", oda.dataAuthenticationCode)
                r.field("dynamicNumber", oda.dynamicNumber)
                r.field("failedCheck", oda.failedCheck)
                r.field("failure", oda.failure)
            })
        }
        if let entry {
            o.field("entry", object: { r in
                r.field("interface", entry.interface.rawValue)
                r.field("posEntryMode", entry.posEntryMode)
                r.field("kernel", entry.kernel)
                r.field("path", strings: entry.path)
                r.field("outcome", entry.outcome)
                r.field("ttq", entry.ttq)
                r.field("ctq", entry.ctq)
                r.field("cvm", entry.cvm)
                if let limits = entry.limits {
                    r.field("limits", object: { l in
                        l.field("aid", limits.aid)
                        l.field("transactionLimit", limits.transactionLimit)
                        l.field("floorLimit", limits.floorLimit)
                        l.field("cvmRequiredLimit", limits.cvmRequiredLimit)
                        l.field("floorLimitExceeded", limits.floorLimitExceeded)
                        l.field("cvmRequired", limits.cvmRequired)
                    })
                }
            })
        }
        o.field("trace", array: trace) { t, entry in
            t.field("command", entry.command)
            t.field("response", entry.response)
            t.field("name", entry.name)
        }
        o.field("callbacks", array: callbacks) { c, entry in
            c.field("id", entry.id)
            c.field("kind", entry.kind)
            c.field("target", entry.target)
            c.field("payload", entry.payload)
            c.field("status", entry.status)
            c.field("attempts", entry.attempts)
            c.field("lastError", entry.lastError)
        }
    }
}
