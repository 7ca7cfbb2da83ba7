#if canImport(Glibc)
import Glibc
#endif
/// What traces may show: APDUs in hex with PINs withheld and PANs masked, so a trace can be
/// printed, logged or stored (cardbench never keeps a full PAN or any PIN data).
public enum TraceRedaction {
    /// A C-APDU in hex; VERIFY (INS 20) keeps its header but its PIN block is withheld.
    public static func command(_ bytes: [UInt8]) -> String {
        guard bytes.count > 5, bytes[1] == 0x20 else { return Hex.encode(bytes) }
        return Hex.encode(bytes.prefix(5)) + String(repeating: "*", count: (bytes.count - 5) * 2)
    }

    /// Hex with every run of the PAN's digits masked to first 6 and last 4. Tags 5A and 57
    /// hold the PAN in BCD, which is the same characters in hex, so this finds them wherever
    /// they sit.
    public static func masking(pan: String, in hex: String) -> String {
        guard pan.utf8.count >= 12, let first = pan.utf8.first, hex.utf8.contains(first) else { return hex }
        return hex.replacingAll(pan, with: { PAN.masked(pan) })
    }
}

extension String {
    /// `replacement` is only worked out when `target` occurs: most APDUs hold no PAN.
    fileprivate func replacingAll(_ target: String, with replacement: () -> String) -> String {
        // Every APDU of a trace passes here: look in place first, and copy only when it occurs.
        var haystack = self, pattern = target
        let found = haystack.withUTF8 { text in
            pattern.withUTF8 { needle -> Bool in
                guard let head = needle.first, text.count >= needle.count else { return false }
                var i = 0
                let last = text.count - needle.count
                while i <= last {
                    if text[i] == head, memcmp(text.baseAddress! + i, needle.baseAddress!, needle.count) == 0 { return true }
                    i += 1
                }
                return false
            }
        }
        guard found else { return self }
        let text = Array(utf8), needle = Array(target.utf8)
        func occurs(at i: Int) -> Bool {
            guard text[i] == needle[0], i + needle.count <= text.count else { return false }
            for k in 1..<needle.count where text[i + k] != needle[k] { return false }
            return true
        }
        guard let first = (0...(text.count - needle.count)).first(where: occurs) else { return self }
        let substitute = Array(replacement().utf8)
        var out = Array(text[..<first])
        out.reserveCapacity(text.count)
        var i = first
        while i < text.count {
            if occurs(at: i) {
                out += substitute
                i += needle.count
            } else {
                out.append(text[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
