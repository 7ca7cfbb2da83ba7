/// A recorded APDU trace made readable: each command named and described, each response's TLV
/// tree with tag names, the status words in words, the bit strings (TVR, TSI, CVM Results, CVR)
/// explained and the cryptograms picked out. Works on the redacted hex the ledger keeps: a
/// masked PAN digit (`*`) stays masked in every value shown, and a withheld PIN block stays withheld.
public enum TraceDecoding {
    /// One exchange of a trace, as recorded.
    public struct Exchange: Sendable {
        public let command: String
        public let response: String
        public init(command: String, response: String) {
            self.command = command
            self.response = response
        }
    }

    /// What the terminal recorded besides the trace, in hex (any may be missing).
    public struct TerminalData: Sendable {
        public var tvr: String?
        public var tsi: String?
        public var cvmResults: String?
        public var aid: String?
        public var responseCode: String?
        /// The card profile the issuer's account of the card came from, when known.
        public var profile: String?
        public init(tvr: String? = nil, tsi: String? = nil, cvmResults: String? = nil, aid: String? = nil, responseCode: String? = nil) {
            self.tvr = tvr
            self.tsi = tsi
            self.cvmResults = cvmResults
            self.aid = aid
            self.responseCode = responseCode
        }
    }

    public static func decode(_ trace: [Exchange], _ terminal: TerminalData) -> DecodedTrace {
        var steps: [DecodedStep] = []
        var primitives: [UInt32: Redacted] = [:]
        var cryptograms = CryptogramSummary()
        var generateACs = 0
        for (i, e) in trace.enumerated() {
            let command = Redacted(e.command)
            let response = Redacted(e.response)
            // A command whose Lc does not fit is still named by its header.
            let header = command.bytes.count >= 4 ? Array(command.bytes.prefix(4)) : nil
            let apdu = (try? CommandAPDU(bytes: command.bytes)) ?? header.flatMap { try? CommandAPDU(bytes: $0) }
            let name = apdu?.instructionName ?? "?"
            let data = apdu.flatMap { $0.data.isEmpty ? nil : command.slice(5, $0.data.count) }
            let body = response.bytes.count >= 2 ? response.slice(0, response.bytes.count - 2) : Redacted("")
            let swText = response.bytes.count >= 2 ? response.slice(response.bytes.count - 2, 2) : nil
            let sw = swText.flatMap { $0.isMasked ? nil : StatusWord($0.bytes[0], $0.bytes[1]) }
            let detail = header.map { describe(name: name, header: $0, data: data) } ?? ""
            var commandTLV: [TLVJSON]? = nil
            if let data, name == "GET PROCESSING OPTIONS" || name == "SELECT" && data.bytes.first == 0x4F {
                commandTLV = tree(data)
            }
            let tlv = body.bytes.isEmpty ? nil : tree(body)
            if tlv != nil { collect(body, into: &primitives) }
            // GET PROCESSING OPTIONS in format 1 (tag 80) gives the AIP and the AFL untagged.
            if name == "GET PROCESSING OPTIONS", let top = try? TLV.parse(body.bytes).first, top.tag.value == 0x80, top.value.count >= 2,
               let at = place([top], in: body, from: 0).first?.value {
                primitives[0x82] = body.slice(at, 2)
            }
            if name == "GENERATE AC" {
                generateACs += 1
                // The second GENERATE AC carries the host's answer where CDOL2 asks for it.
                if generateACs > 1, let data, let cdol2 = primitives[0x8D].flatMap({ try? DOL.parse($0.bytes) }) {
                    let values = split(data, by: cdol2)
                    if let iad = values[0x91], iad.bytes.contains(where: { $0 != 0 }) { cryptograms.issuerAuthenticationData = iad.hex }
                    if let arc = values[0x8A] { cryptograms.authorisationResponseCode = arc.textValue ?? arc.hex }
                }
                let fields = generateACFields(body)
                if generateACs == 1 {
                    cryptograms.firstCryptogram = fields.ac?.hex
                    cryptograms.firstCID = fields.cid.map(cidMeaning)
                    cryptograms.atc = fields.atc?.hex
                    if let iad = fields.iad { cryptograms.issuerApplicationData = iad.hex }
                } else {
                    cryptograms.secondCryptogram = fields.ac?.hex
                    cryptograms.secondCID = fields.cid.map(cidMeaning)
                }
            }
            if name == "EXTERNAL AUTHENTICATE", let data { cryptograms.issuerAuthenticationData = data.hex }
            steps.append(DecodedStep(index: i + 1, name: name, detail: detail, command: e.command, response: e.response,
                                     status: swText?.hex ?? "",
                                     statusMeaning: sw?.meaning ?? (swText == nil ? "no status word" : "withheld"), commandData: commandTLV, tlv: tlv))
        }
        var bits: [ExplainedBits] = []
        if let tvr = terminal.tvr, let v = try? TVR(hex: tvr) { bits.append(ExplainedBits(field: "TVR", tag: "95", hex: tvr, set: v.setBitNames, note: nil)) }
        if let tsi = terminal.tsi, let v = try? TSI(hex: tsi) { bits.append(ExplainedBits(field: "TSI", tag: "9B", hex: tsi, set: v.setBitNames, note: nil)) }
        if let cvm = terminal.cvmResults, let b = try? Hex.decode(cvm), b.count == 3 {
            bits.append(ExplainedBits(field: "CVM Results", tag: "9F34", hex: cvm, set: cvmResultsMeaning(b), note: nil))
        }
        let aip = primitives[0x82]?.bytes
        if let aip, aip.count == 2, let v = try? AIP(bytes: aip) {
            bits.append(ExplainedBits(field: "AIP", tag: "82", hex: Hex.encode(aip), set: v.setBitNames, note: nil))
        }
        let aid = terminal.aid ?? primitives[0x84]?.hex ?? primitives[0x4F]?.hex
        if let hex = cryptograms.issuerApplicationData, let iad = try? Hex.decode(hex) {
            let (cvn, cvr) = cvnAndCVR(iad: iad, aid: aid)
            cryptograms.cvn = cvn?.description
            if let cvr { bits.append(cvr) }
        }
        if let data = cryptograms.issuerAuthenticationData, let bytes = try? Hex.decode(data), bytes.count >= 8 {
            cryptograms.arpc = Hex.encode(Array(bytes.prefix(8)))
        }
        cryptograms.verdict = verdict(cryptograms, responseCode: terminal.responseCode, profile: terminal.profile)
        return DecodedTrace(steps: steps, bits: bits, cryptograms: cryptograms.firstCryptogram == nil ? nil : cryptograms)
    }

    // MARK: Pieces

    /// Hex that may hold `*` for masked or withheld digits: the bytes with those nibbles as 0,
    /// and the text, so what is shown of any part keeps its masks.
    struct Redacted {
        let text: [UInt8]
        let bytes: [UInt8]
        /// Hex digits and `*` only (spaces skipped); anything else is not a recorded APDU and
        /// decodes to nothing.
        init(_ hex: String) {
            var t = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") })
            if !t.allSatisfy({ Hex.nibble($0) != nil || $0 == UInt8(ascii: "*") }) { t = [] }
            if t.count % 2 == 1 { t.removeLast() }
            text = t
            var out: [UInt8] = []
            out.reserveCapacity(t.count / 2)
            var i = 0
            while i + 1 < t.count {
                out.append(Self.nibble(t[i]) << 4 | Self.nibble(t[i + 1]))
                i += 2
            }
            bytes = out
        }
        init(text: [UInt8], bytes: [UInt8]) {
            self.text = text
            self.bytes = bytes
        }
        static func nibble(_ c: UInt8) -> UInt8 { Hex.nibble(c) ?? 0 }
        var hex: String { String(decoding: text, as: UTF8.self).uppercased() }
        var isMasked: Bool { text.contains(UInt8(ascii: "*")) }
        /// The value as text, when printable and not masked.
        var textValue: String? {
            guard !isMasked, !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        func slice(_ offset: Int, _ count: Int) -> Redacted {
            let o = max(0, min(offset, bytes.count)), c = max(0, min(count, bytes.count - o))
            return Redacted(text: Array(text[(2 * o)..<(2 * (o + c))]), bytes: Array(bytes[o..<(o + c)]))
        }
    }

    /// A TLV tree in the JSON shape `cardbench emv tlv --json` prints, values keeping their masks.
    static func tree(_ data: Redacted) -> [TLVJSON]? {
        guard let nodes = try? TLV.parse(data.bytes), !nodes.isEmpty else { return nil }
        return place(nodes, in: data, from: 0).map { json($0.node, data, at: $0.value) }
    }

    /// Where each of `nodes` (parsed from `data` starting at `start`) has its value: found by
    /// reading the headers as the parser did (padding bytes 00/FF skipped, long-form lengths kept),
    /// so a value is always shown from the recorded text, masks and all.
    static func place(_ nodes: [TLV], in data: Redacted, from start: Int) -> [(node: TLV, value: Int)] {
        let b = data.bytes
        var o = start
        var out: [(node: TLV, value: Int)] = []
        for node in nodes {
            while o < b.count, b[o] == 0x00 || b[o] == 0xFF { o += 1 }
            guard o < b.count else { break }
            var tagLength = 1
            if b[o] & 0x1F == 0x1F {
                while o + tagLength < b.count, b[o + tagLength] & 0x80 != 0 { tagLength += 1 }
                tagLength += 1
            }
            guard o + tagLength < b.count else { break }
            let first = b[o + tagLength]
            let lengthLength = first < 0x80 ? 1 : 1 + Int(first & 0x7F)
            let value = o + tagLength + lengthLength
            out.append((node, value))
            o = value + node.value.count
        }
        return out
    }

    /// One node, its value read from `data` at `offset` (so a masked digit stays `*`).
    static func json(_ node: TLV, _ data: Redacted, at offset: Int) -> TLVJSON {
        let value = data.slice(offset, node.value.count)
        let children = node.tag.isConstructed ? place(node.children, in: data, from: offset).map { json($0.node, data, at: $0.value) } : nil
        // The tag's text rendering (alphanumeric formats, printable bytes), unless digits are masked.
        return TLVJSON(tag: node.tag.description, name: node.tag.name, length: node.value.count,
                       value: node.tag.isConstructed ? nil : value.hex, text: value.isMasked ? nil : node.text, children: children)
    }

    /// Every primitive of a response, by tag (the first of each), with its redacted value.
    static func collect(_ data: Redacted, into out: inout [UInt32: Redacted]) {
        guard let nodes = try? TLV.parse(data.bytes) else { return }
        func walk(_ placed: [(node: TLV, value: Int)]) {
            for (node, value) in placed {
                if node.tag.isConstructed {
                    walk(place(node.children, in: data, from: value))
                } else if out[node.tag.value] == nil {
                    out[node.tag.value] = data.slice(value, node.value.count)
                }
            }
        }
        walk(place(nodes, in: data, from: 0))
    }

    /// CDOL-ordered command data split by tag.
    static func split(_ data: Redacted, by dol: DOL) -> [UInt32: Redacted] {
        var out: [UInt32: Redacted] = [:]
        var offset = 0
        for entry in dol.entries {
            guard offset + entry.length <= data.bytes.count else { break }
            out[entry.tag.value] = data.slice(offset, entry.length)
            offset += entry.length
        }
        return out
    }

    /// A GENERATE AC answer's CID, ATC, cryptogram and IAD, in format 1 (tag 80) or 2 (tag 77).
    static func generateACFields(_ body: Redacted) -> (cid: UInt8?, atc: Redacted?, ac: Redacted?, iad: Redacted?) {
        guard let nodes = try? TLV.parse(body.bytes), let top = nodes.first else { return (nil, nil, nil, nil) }
        if top.tag.value == 0x80, let at = place([top], in: body, from: 0).first?.value {
            let v = body.slice(at, top.value.count)
            guard v.bytes.count >= 11 else { return (nil, nil, nil, nil) }
            return (v.bytes[0], v.slice(1, 2), v.slice(3, 8), v.bytes.count > 11 ? v.slice(11, v.bytes.count - 11) : nil)
        }
        var p: [UInt32: Redacted] = [:]
        collect(body, into: &p)
        return (p[0x9F27]?.bytes.first, p[0x9F36], p[0x9F26], p[0x9F10])
    }

    static func cidMeaning(_ cid: UInt8) -> String {
        let type = switch cid & 0xC0 {
        case 0x00: "AAC (declined)"
        case 0x40: "TC (approved offline)"
        case 0x80: "ARQC (go online)"
        default: "reserved"
        }
        return Hex.encode([cid]) + " " + type + (cid & 0x08 != 0 ? ", advice required" : "")
    }

    /// The CVN and the CVR of an IAD, by the application's scheme (the RID of its AID).
    static func cvnAndCVR(iad: [UInt8], aid: String?) -> (CVN?, ExplainedBits?) {
        let rid = aid.map { String($0.uppercased().prefix(10)) }
        if rid == "A000000003", iad.count >= 7 {
            // The CVN byte is the number in binary: 0A is CVN 10, 12 is CVN 18.
            let cvn = CVN(rawValue: Int(iad[2])).flatMap { $0.isVisa ? $0 : nil }
            let cvr = VisaCVR(uncheckedBytes: Array(iad[3..<7]))
            var set = cvr.setBitNames
            set.insert("First GENERATE AC: \(cvr.firstGenerateAC), second: \(cvr.secondGenerateAC)", at: 0)
            return (cvn, ExplainedBits(field: "CVR (Visa)", tag: "9F10", hex: Hex.encode(cvr.bytes), set: set, note: "IAD bytes 4–7"))
        }
        if rid == "A000000004", iad.count >= 8 {
            let cvn = CVN(rawValue: Int(iad[1])).flatMap { $0.isVisa ? nil : $0 }
            let cvr = MastercardCVR(uncheckedBytes: Array(iad[2..<8]))
            return (cvn, ExplainedBits(field: "CVR (Mastercard)", tag: "9F10", hex: Hex.encode(cvr.bytes), set: cvr.setBitNames, note: "IAD bytes 3–8"))
        }
        return (nil, nil)
    }

    static func cvmResultsMeaning(_ b: [UInt8]) -> [String] {
        let method = CVMethod(code: b[0])
        let result = switch b[2] {
        case 0: "result unknown"
        case 1: "failed"
        case 2: "successful"
        default: "result " + Hex.encode([b[2]])
        }
        var out = ["Method: \(method)", "Condition: \(CVMCondition(code: b[1]))", "Result: \(result)"]
        if b[0] & 0x40 != 0 { out.append("Apply the next rule if this one fails") }
        return out
    }

    static func describe(name: String, header: [UInt8], data: Redacted?) -> String {
        let p1 = header[2], p2 = header[3]
        switch name {
        case "SELECT":
            guard let data else { return "" }
            if data.textValue == "2PAY.SYS.DDF01" { return "the PPSE (contactless directory)" }
            if data.textValue == "1PAY.SYS.DDF01" { return "the PSE (payment system directory)" }
            return "application \(data.hex)" + (p2 & 0x02 != 0 ? " (next occurrence)" : "")
        case "READ RECORD":
            return "record \(p1) of SFI \(p2 >> 3)"
        case "GENERATE AC":
            let type = switch p1 & 0xC0 {
            case 0x00: "AAC"
            case 0x40: "TC"
            case 0x80: "ARQC"
            default: "reserved"
            }
            return "asks for \(type)" + (p1 & 0x10 != 0 ? " with CDA" : "")
        case "GET DATA":
            let tag = UInt32(p1) << 8 | UInt32(p2)
            return "tag " + Hex.encode([p1, p2]) + (TagDictionary.name(tag).map { " (\($0))" } ?? "")
        case "VERIFY":
            return (p2 == 0x80 ? "plaintext PIN, " : p2 == 0x88 ? "enciphered PIN, " : "") + "PIN block withheld"
        case "INTERNAL AUTHENTICATE":
            return "dynamic data authentication"
        case "EXTERNAL AUTHENTICATE":
            return "issuer authentication data to the card"
        default:
            return ""
        }
    }

    static func verdict(_ c: CryptogramSummary, responseCode: String?, profile: String? = nil) -> String {
        guard c.firstCryptogram != nil else { return "" }
        let asked = c.firstCID?.contains("ARQC") == true
        if !asked { return c.firstCID?.contains("TC") == true ? "Approved offline by the card: no host check." : "Declined by the card at the first GENERATE AC." }
        if responseCode == "82" { return "The issuer rejected the ARQC (response 82): it does not verify under the card's keys." }
        if c.arpc != nil {
            let source = profile.map { "the issuer master key of the card's profile, \($0)" } ?? "the issuer master key of the card's profile"
            return "The issuer verified the ARQC with the card's application cryptogram keys (\(c.cvn ?? "its CVN"), derived from \(source)) and answered with the ARPC, which the card checked."
        }
        if let code = responseCode, !code.isEmpty { return "The issuer answered \(code) without issuer authentication data (it holds no keys for this card, or was not reached)." }
        return "The terminal could not go online."
    }
}

/// A decoded trace: the steps, the bit strings explained, the cryptograms.
public struct DecodedTrace: Codable, Sendable, Equatable {
    public let steps: [DecodedStep]
    public let bits: [ExplainedBits]
    public let cryptograms: CryptogramSummary?
}

/// One command and its answer, named, described and decoded.
public struct DecodedStep: Codable, Sendable, Equatable {
    public let index: Int
    public let name: String
    /// What the command asks, in words: `record 1 of SFI 2`, `asks for ARQC with CDA`.
    public let detail: String
    public let command: String
    public let response: String
    public let status: String
    public let statusMeaning: String
    /// The command data as TLV (GET PROCESSING OPTIONS' 83 template), when it is TLV.
    public let commandData: [TLVJSON]?
    /// The response data's TLV tree (nil when empty or not TLV).
    public let tlv: [TLVJSON]?
}

/// A bit string and the names of its set bits (or, for CVM Results, its three fields in words).
public struct ExplainedBits: Codable, Sendable, Equatable {
    public let field: String
    public let tag: String
    public let hex: String
    public let set: [String]
    public let note: String?
}

/// The application cryptograms of a card transaction and who checked them.
public struct CryptogramSummary: Codable, Sendable, Equatable {
    public var firstCryptogram: String?
    public var firstCID: String?
    public var atc: String?
    public var issuerApplicationData: String?
    public var cvn: String?
    /// Tag 91 as sent to the card: ARPC and ARC (method 1) or CSU (method 2).
    public var issuerAuthenticationData: String?
    public var arpc: String?
    public var authorisationResponseCode: String?
    public var secondCryptogram: String?
    public var secondCID: String?
    /// Who verified what, in words.
    public var verdict = ""
}
