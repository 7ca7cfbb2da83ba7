/// An ISO/IEC 7816-3 Answer-To-Reset, parsed and checked.
///
/// The parser is strict about structure (TS, the Y-bit chain, K historical bytes, TCK and the
/// 33-byte limit) because a malformed ATR usually means a wiring, clock or UART-setting fault
/// on the bench, which is exactly what an engineer wants reported. It is lenient about values:
/// RFU codes in TA1 and friends are reported, not rejected, so that odd cards can still be analysed.
public struct ATR: Sendable, Hashable, Encodable {
    /// The bit convention announced by TS.
    public enum Convention: String, Sendable, Encodable {
        /// TS = 3B: high level is logic 1, least significant bit first.
        case direct
        /// TS = 3F: low level is logic 1, most significant bit first.
        case inverse
    }

    /// The interface bytes of one group i (TAi, TBi, TCi, TDi); absent bytes are nil.
    public struct InterfaceBytes: Sendable, Hashable, Encodable {
        /// TAi.
        public var ta: UInt8?
        /// TBi.
        public var tb: UInt8?
        /// TCi.
        public var tc: UInt8?
        /// TDi: high nibble is Y(i+1), low nibble the protocol T.
        public var td: UInt8?

        /// Makes a group; every byte defaults to absent.
        public init(ta: UInt8? = nil, tb: UInt8? = nil, tc: UInt8? = nil, td: UInt8? = nil) {
            self.ta = ta
            self.tb = tb
            self.tc = tc
            self.td = td
        }

        /// True when the group carries none of TA, TB, TC, TD.
        public var isEmpty: Bool { ta == nil && tb == nil && tc == nil && td == nil }

        private enum CodingKeys: String, CodingKey { case ta, tb, tc, td }

        /// Encodes present bytes as two-digit uppercase hex and leaves absent ones out.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(ta.map { Hex.encode([$0]) }, forKey: .ta)
            try c.encodeIfPresent(tb.map { Hex.encode([$0]) }, forKey: .tb)
            try c.encodeIfPresent(tc.map { Hex.encode([$0]) }, forKey: .tc)
            try c.encodeIfPresent(td.map { Hex.encode([$0]) }, forKey: .td)
        }
    }

    /// The specific-mode byte TA2: the card is fixed to one protocol rather than negotiating via PPS.
    public struct SpecificMode: Sendable, Hashable, Encodable {
        /// The protocol T the card runs in specific mode (TA2 b4..b1).
        public let `protocol`: Int
        /// Whether the card can switch to negotiable mode after a warm reset (TA2 b8 = 0).
        public let canChange: Bool
        /// Whether Fi/Di are implicit rather than taken from TA1 (TA2 b5 = 1).
        public let implicitParameters: Bool

        /// Makes a specific-mode description.
        public init(protocol: Int, canChange: Bool, implicitParameters: Bool) {
            self.protocol = `protocol`
            self.canChange = canChange
            self.implicitParameters = implicitParameters
        }
    }

    /// ISO 7816-3 allows TS plus at most 32 further characters.
    public static let maximumLength = 33

    /// The ATR as decoded in direct convention (so TS is 3B or 3F).
    public let bytes: [UInt8]
    /// The convention announced by TS.
    public let convention: Convention
    /// The format byte: Y1 in the high nibble, K (number of historical bytes) in the low one.
    public let t0: UInt8
    /// One entry per interface-byte group; index 0 holds TA1/TB1/TC1/TD1.
    /// Group 1 is always present; group i+1 is present exactly when TDi is, even if Y(i+1) = 0.
    public let interfaceGroups: [InterfaceBytes]
    /// The K historical bytes.
    public let historicalBytes: [UInt8]
    /// The check byte; present exactly when some TDi indicates a protocol other than T=0.
    public let tck: UInt8?
    /// The transmission protocols offered, in order of appearance and without repeats.
    /// T=0 alone when TD1 is absent. T=15 is not listed: it qualifies global interface
    /// bytes and is not a protocol a terminal can select.
    public let protocols: [Int]

    // MARK: - Parsing

    /// Parses and validates an ATR.
    ///
    /// Accepts TS = 3B (direct) and 3F (inverse, already decoded). TS = 03 is what an
    /// inverse-convention card looks like through a UART set for direct convention; such
    /// input is converted byte by byte (bit order reversed, bits complemented) first.
    /// - Throws: `EMVError` with field "ATR" for a bad TS, a truncated or overlong ATR,
    ///   a missing TCK, a TCK mismatch, or bytes after the end of the ATR.
    public static func parse(_ raw: [UInt8]) throws(EMVError) -> ATR {
        guard let ts = raw.first else {
            throw error("must not be empty: at least TS and T0 are required")
        }
        let bytes: [UInt8]
        let convention: Convention
        switch ts {
        case 0x3B:
            bytes = raw
            convention = .direct
        case 0x3F:
            bytes = raw
            convention = .inverse
        case 0x03:
            bytes = raw.map(fromInverseLine)
            convention = .inverse
        default:
            throw error("TS must be 3B (direct) or 3F (inverse), got \(hex(ts))")
        }
        guard bytes.count <= maximumLength else {
            throw error("must be at most \(maximumLength) bytes (TS + 32), got \(bytes.count)")
        }
        guard bytes.count >= 2 else {
            throw error("truncated: T0 missing after TS")
        }

        let t0 = bytes[1]
        let k = Int(t0 & 0x0F)
        var index = 2
        var groups: [InterfaceBytes] = []
        var offered: [Int] = []
        var tckRequired = false
        var y = t0 >> 4
        var group = 1

        // Each TD consumes a byte, so the 33-byte limit bounds this loop.
        while true {
            var g = InterfaceBytes()
            for (bit, name) in [(UInt8(0x1), "TA"), (0x2, "TB"), (0x4, "TC"), (0x8, "TD")] where y & bit != 0 {
                guard index < bytes.count else {
                    throw error("truncated: \(name)\(group) is announced by Y\(group)=\(hexNibble(y)) but the ATR ends after \(bytes.count) bytes")
                }
                let value = bytes[index]
                index += 1
                switch bit {
                case 0x1: g.ta = value
                case 0x2: g.tb = value
                case 0x4: g.tc = value
                default: g.td = value
                }
            }
            groups.append(g)
            guard let td = g.td else { break }
            let t = Int(td & 0x0F)
            if t != 0 { tckRequired = true }
            if t != 15 && !offered.contains(t) { offered.append(t) }
            y = td >> 4
            group += 1
        }
        if groups[0].td == nil { offered = [0] }
        // TD1 may name only T=15 (invalid, but seen); the default offer T=0 then still applies.
        if offered.isEmpty { offered = [0] }

        let historicalEnd = index + k
        guard historicalEnd <= bytes.count else {
            throw error("truncated: T0 announces K=\(k) historical bytes but only \(bytes.count - index) follow the interface bytes")
        }
        let historical = Array(bytes[index..<historicalEnd])
        index = historicalEnd

        var tck: UInt8? = nil
        if tckRequired {
            guard index < bytes.count else {
                throw error("TCK missing: it is required because \(indicatedBesidesT0(groups)) is indicated")
            }
            let got = bytes[index]
            let expected = bytes[1..<index].reduce(0, ^)
            guard expected == got else {
                throw error("TCK mismatch: expected \(hex(expected)), got \(hex(got))")
            }
            tck = got
            index += 1
        }
        if index < bytes.count {
            let extra = bytes.count - index
            let trailing = spaced(bytes[index...])
            if tckRequired {
                throw error("\(extra) unexpected byte\(extra == 1 ? "" : "s") after TCK: \(trailing)")
            }
            throw error("\(extra) unexpected byte\(extra == 1 ? "" : "s") after the \(k) historical bytes: \(trailing) (no TCK is allowed when only T=0 is indicated)")
        }

        return ATR(bytes: bytes, convention: convention, t0: t0, interfaceGroups: groups,
                   historicalBytes: historical, tck: tck, protocols: offered)
    }

    private init(bytes: [UInt8], convention: Convention, t0: UInt8, interfaceGroups: [InterfaceBytes],
                 historicalBytes: [UInt8], tck: UInt8?, protocols: [Int]) {
        self.bytes = bytes
        self.convention = convention
        self.t0 = t0
        self.interfaceGroups = interfaceGroups
        self.historicalBytes = historicalBytes
        self.tck = tck
        self.protocols = protocols
    }

    // MARK: - Global parameters

    /// TA1, when present.
    public var ta1: UInt8? { interfaceGroups.first?.ta }

    /// Clock-rate conversion factor Fi (ISO 7816-3 table 7). 372 when TA1 is absent;
    /// nil when TA1 codes an RFU value.
    public var fi: Int? { Self.fiTable[Int((ta1 ?? 0x11) >> 4)] }

    /// Baud-rate adjustment factor Di (ISO 7816-3 table 8). 1 when TA1 is absent;
    /// nil when TA1 codes an RFU value.
    public var di: Int? { Self.diTable[Int((ta1 ?? 0x11) & 0x0F)] }

    /// Maximum clock frequency in MHz paired with Fi in table 7 (5 when TA1 is absent); nil for RFU.
    public var fMax: Double? { Self.fMaxTable[Int((ta1 ?? 0x11) >> 4)] }

    /// Extra guard time N from TC1 (0 when absent). 255 means minimum guard time, not 255 etu.
    public var extraGuardTime: Int { Int(interfaceGroups[0].tc ?? 0) }

    /// The T=0 waiting integer WI from TC2 (10 when absent).
    public var waitingIntegerWI: Int {
        Int((interfaceGroups.count > 1 ? interfaceGroups[1].tc : nil) ?? 10)
    }

    /// The specific mode announced by TA2; nil when TA2 is absent (the card negotiates).
    public var specificMode: SpecificMode? {
        guard interfaceGroups.count > 1, let ta2 = interfaceGroups[1].ta else { return nil }
        return SpecificMode(protocol: Int(ta2 & 0x0F), canChange: ta2 & 0x80 == 0,
                            implicitParameters: ta2 & 0x10 != 0)
    }

    // MARK: - T=1 parameters

    /// The first group i > 2 following a TD(i-1) that indicates `protocolT` and carrying the byte.
    private func firstSpecific(_ protocolT: UInt8, _ byte: KeyPath<InterfaceBytes, UInt8?>) -> UInt8? {
        guard interfaceGroups.count > 2 else { return nil }
        for i in 2..<interfaceGroups.count {
            // Groups 1 and 2 are global or T=0 specific whatever TD1 says, hence i > 2.
            guard let td = interfaceGroups[i - 1].td, td & 0x0F == protocolT else { continue }
            if let value = interfaceGroups[i][keyPath: byte] { return value }
        }
        return nil
    }

    /// T=1 information field size of the card, from the first TA for T=1 (32 when absent).
    public var ifsc: Int { Int(firstSpecific(1, \.ta) ?? 32) }

    /// T=1 block waiting integer, from the high nibble of the first TB for T=1 (4 when absent).
    public var bwi: Int { Int((firstSpecific(1, \.tb) ?? 0x4D) >> 4) }

    /// T=1 character waiting integer, from the low nibble of the first TB for T=1 (13 when absent).
    public var cwi: Int { Int((firstSpecific(1, \.tb) ?? 0x4D) & 0x0F) }

    /// T=1 error detection code from bit 1 of the first TC for T=1: "LRC" (default) or "CRC".
    public var checksumMode: String { (firstSpecific(1, \.tc) ?? 0) & 0x01 == 0 ? "LRC" : "CRC" }

    // MARK: - Tables

    private static let fiTable: [Int?] = [372, 372, 558, 744, 1116, 1488, 1860, nil,
                                          nil, 512, 768, 1024, 1536, 2048, nil, nil]
    private static let fMaxTable: [Double?] = [4, 5, 6, 8, 12, 16, 20, nil,
                                               nil, 5, 7.5, 10, 15, 20, nil, nil]
    private static let diTable: [Int?] = [nil, 1, 2, 4, 8, 16, 32, 64,
                                          12, 20, nil, nil, nil, nil, nil, nil]

    // MARK: - Summary

    /// Human-readable lines describing each byte, for `cardbench emv atr <hex>`.
    public var summary: [String] {
        var lines: [String] = []
        lines.append("TS = \(Self.hex(bytes[0])): \(convention) convention")

        let y1 = t0 >> 4
        let k = Int(t0 & 0x0F)
        let y1Text = y1 == 0 ? "no interface bytes in group 1" : "\(Self.present(y1, group: 1)) present"
        lines.append("T0 = \(Self.hex(t0)): Y1=\(Self.hexNibble(y1)) (\(y1Text)), K=\(k) historical byte\(k == 1 ? "" : "s")")

        for (offset, g) in interfaceGroups.enumerated() {
            let i = offset + 1
            let qualifier = offset >= 1 ? interfaceGroups[offset - 1].td.map { $0 & 0x0F } : nil
            if let ta = g.ta { lines.append("TA\(i) = \(Self.hex(ta)): \(describeTA(ta, group: i, protocolT: qualifier))") }
            if let tb = g.tb { lines.append("TB\(i) = \(Self.hex(tb)): \(describeTB(tb, group: i, protocolT: qualifier))") }
            if let tc = g.tc { lines.append("TC\(i) = \(Self.hex(tc)): \(describeTC(tc, group: i, protocolT: qualifier))") }
            if let td = g.td {
                let next = td >> 4
                let nextText = next == 0
                    ? "no further interface bytes"
                    : "\(Self.present(next, group: i + 1)) present"
                let t = td & 0x0F
                let tText = t == 15 ? "T=15 (global interface bytes follow)" : "protocol T=\(t)"
                lines.append("TD\(i) = \(Self.hex(td)): Y\(i + 1)=\(Self.hexNibble(next)) (\(nextText)), \(tText)")
            }
        }

        if historicalBytes.isEmpty {
            lines.append("Historical bytes: none")
        } else {
            lines.append("Historical bytes: \(Self.spaced(historicalBytes[...]))")
            lines.append("Category indicator = \(Self.hex(historicalBytes[0])): \(Self.category(historicalBytes[0]))")
        }

        if let tck {
            lines.append("TCK = \(Self.hex(tck)): correct")
        } else {
            lines.append("TCK: absent (only T=0 is indicated)")
        }
        lines.append("Protocols: " + protocols.map { "T=\($0)" }.joined(separator: ", "))
        if protocols.contains(1) {
            lines.append("T=1 parameters: IFSC=\(ifsc), BWI=\(bwi), CWI=\(cwi), error detection \(checksumMode)")
        }
        return lines
    }

    private func describeTA(_ v: UInt8, group: Int, protocolT: UInt8?) -> String {
        switch group {
        case 1:
            let fiText = Self.fiTable[Int(v >> 4)].map { "Fi=\($0)" } ?? "Fi=RFU"
            let diText = Self.diTable[Int(v & 0x0F)].map { "Di=\($0)" } ?? "Di=RFU"
            let fMaxText = Self.fMaxTable[Int(v >> 4)].map { "f max \(Self.megahertz($0)) MHz" } ?? "f max RFU"
            return "\(fiText) \(diText) (\(fMaxText))"
        case 2:
            let change = v & 0x80 == 0 ? "can change to negotiable mode" : "unable to change"
            let params = v & 0x10 == 0 ? "Fi/Di from TA1" : "implicit Fi/Di"
            return "specific mode T=\(v & 0x0F), \(change), \(params)"
        default:
            switch protocolT {
            case 1:
                let rfu = v == 0x00 || v == 0xFF ? " (RFU)" : ""
                return "T=1 IFSC=\(v)\(rfu)"
            case 15:
                let clock = ["clock stop not supported", "clock stop in state L", "clock stop in state H",
                             "clock stop: no preference"][Int(v >> 6)]
                var classes: [String] = []
                if v & 0x01 != 0 { classes.append("A (5 V)") }
                if v & 0x02 != 0 { classes.append("B (3 V)") }
                if v & 0x04 != 0 { classes.append("C (1.8 V)") }
                let classText = classes.isEmpty ? "no class indicated" : "classes " + classes.joined(separator: ", ")
                return "\(clock), \(classText)"
            default:
                return "specific to T=\(protocolT.map(String.init) ?? "?")"
            }
        }
    }

    private func describeTB(_ v: UInt8, group: Int, protocolT: UInt8?) -> String {
        switch group {
        case 1:
            if v == 0 { return "VPP not connected" }
            return "programming voltage II=\((v >> 5) & 0x03) PI1=\(v & 0x1F) (deprecated; ignored)"
        case 2:
            return "programming voltage PI2=\(v) (deprecated; ignored)"
        default:
            switch protocolT {
            case 1: return "T=1 BWI=\(v >> 4) CWI=\(v & 0x0F)"
            case 15: return "SPU (standard or proprietary use) = \(Self.hex(v))"
            default: return "specific to T=\(protocolT.map(String.init) ?? "?")"
            }
        }
    }

    private func describeTC(_ v: UInt8, group: Int, protocolT: UInt8?) -> String {
        switch group {
        case 1:
            if v == 0xFF { return "N=255 (minimum guard time: 12 etu for T=0, 11 etu for T=1)" }
            return "extra guard time N=\(v) etu"
        case 2:
            return v == 0 ? "T=0 waiting integer WI=0 (RFU)" : "T=0 waiting integer WI=\(v)"
        default:
            switch protocolT {
            case 1: return "T=1 error detection \(v & 0x01 == 0 ? "LRC" : "CRC")"
            default: return "specific to T=\(protocolT.map(String.init) ?? "?")"
            }
        }
    }

    // MARK: - Helpers

    private static func error(_ rule: String) -> EMVError { EMVError(field: "ATR", rule: rule) }

    private static func hex(_ b: UInt8) -> String { Hex.encode([b]) }

    private static func hexNibble(_ n: UInt8) -> String { String(n, radix: 16, uppercase: true) }

    private static func spaced(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { hex($0) }.joined(separator: " ")
    }

    /// Names the interface bytes that a Y nibble announces, e.g. "TB1, TC1".
    private static func present(_ y: UInt8, group: Int) -> String {
        [(UInt8(0x1), "TA"), (0x2, "TB"), (0x4, "TC"), (0x8, "TD")]
            .filter { y & $0.0 != 0 }
            .map { "\($0.1)\(group)" }
            .joined(separator: ", ")
    }

    /// Lists the TD protocols that make TCK mandatory, e.g. "T=1, T=15".
    private static func indicatedBesidesT0(_ groups: [InterfaceBytes]) -> String {
        var seen: [UInt8] = []
        for td in groups.compactMap(\.td) where td & 0x0F != 0 && !seen.contains(td & 0x0F) {
            seen.append(td & 0x0F)
        }
        return seen.map { "T=\($0)" }.joined(separator: ", ")
    }

    private static func megahertz(_ v: Double) -> String {
        v == v.rounded() ? String(Int(v)) : String(v)
    }

    private static func category(_ b: UInt8) -> String {
        switch b {
        case 0x00: return "compact-TLV objects, status indicator in the last three bytes"
        case 0x10: return "DIR data reference follows"
        case 0x80: return "compact-TLV objects, optional status indicator"
        case 0x81...0x8F: return "RFU"
        default: return "proprietary format"
        }
    }

    /// Undoes inverse convention as seen through a direct-convention UART: the line levels are
    /// complemented and the bits arrive most-significant first.
    static func fromInverseLine(_ b: UInt8) -> UInt8 {
        var reversed: UInt8 = 0
        for bit in 0..<8 where b & (1 << bit) != 0 {
            reversed |= 0x80 >> bit
        }
        return ~reversed
    }

    // MARK: - Encodable

    private enum CodingKeys: String, CodingKey {
        case bytes, convention, t0, interfaceGroups, historicalBytes, tck, protocols
        case fi, di, fMax, extraGuardTime, waitingIntegerWI, specificMode, t1
    }

    private enum T1Keys: String, CodingKey { case ifsc, bwi, cwi, checksumMode }

    /// Encodes byte fields as uppercase hex strings and adds the derived parameters;
    /// T=1 parameters appear under "t1" only when T=1 is offered.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Hex.encode(bytes), forKey: .bytes)
        try c.encode(convention, forKey: .convention)
        try c.encode(Self.hex(t0), forKey: .t0)
        try c.encode(interfaceGroups, forKey: .interfaceGroups)
        try c.encode(Hex.encode(historicalBytes), forKey: .historicalBytes)
        try c.encodeIfPresent(tck.map { Self.hex($0) }, forKey: .tck)
        try c.encode(protocols, forKey: .protocols)
        try c.encodeIfPresent(fi, forKey: .fi)
        try c.encodeIfPresent(di, forKey: .di)
        try c.encodeIfPresent(fMax, forKey: .fMax)
        try c.encode(extraGuardTime, forKey: .extraGuardTime)
        try c.encode(waitingIntegerWI, forKey: .waitingIntegerWI)
        try c.encodeIfPresent(specificMode, forKey: .specificMode)
        if protocols.contains(1) {
            var t1 = c.nestedContainer(keyedBy: T1Keys.self, forKey: .t1)
            try t1.encode(ifsc, forKey: .ifsc)
            try t1.encode(bwi, forKey: .bwi)
            try t1.encode(cwi, forKey: .cwi)
            try t1.encode(checksumMode, forKey: .checksumMode)
        }
    }
}
