import EMV
import Terminal

/// Who sends a terminal's messages and which transaction they belong to: what ISO 8583 carries
/// beside the card's data.
public struct MessageContext: Sendable, Equatable {
    /// Field 41, 8 characters.
    public var terminalID: String
    /// Field 42, 15 characters.
    public var merchantID: String
    /// Field 11.
    public var stan: STAN
    /// Field 37, 12 characters.
    public var rrn: String
    /// When the message is sent, UTC: field 7 (transmission date and time).
    public var date: UTCDateParts
    /// The terminal's offset from UTC at `date`, in seconds: fields 12 and 13 are its local time
    /// and date (ISO 8583:1987 "time, local transaction").
    public var localOffsetSeconds: Int

    public init(terminalID: String, merchantID: String, stan: STAN, rrn: String, date: UTCDateParts, localOffsetSeconds: Int = 0) {
        self.terminalID = terminalID
        self.merchantID = merchantID
        self.stan = stan
        self.rrn = rrn
        self.date = date
        self.localOffsetSeconds = localOffsetSeconds
    }

    /// `date` on the terminal's clock.
    public var localDate: UTCDateParts {
        localOffsetSeconds == 0 ? date : UTCDateParts(secondsSince1970: date.secondsSince1970 + Int64(localOffsetSeconds))
    }
}

/// The messages a terminal sends and how it reads the answers (ISO 8583:1987).
public enum TerminalMessages {
    /// The ICC data field 55 carries in a request, in this order.
    public static let requestTags: [EMVTag] = [
        0x82, 0x84, 0x95, 0x9A, 0x9C, 0x5F2A, 0x9F02, 0x9F03, 0x9F09, 0x9F10, 0x9F1A, 0x9F1E, 0x9F26, 0x9F27, 0x9F33,
        0x9F34, 0x9F35, 0x9F36, 0x9F37, 0x9F41,
    ]

    static func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    static func digits(_ n: Int, _ width: Int) -> String {
        let t = String(n)
        return String(repeating: "0", count: max(0, width - t.count)) + t
    }

    /// Field 7 (MMDDhhmmss), 12 (hhmmss) and 13 (MMDD) of `d`.
    static func dateFields(_ c: MessageContext, into m: inout ISOMessage) {
        let d = c.date, local = c.localDate
        m[7] = two(d.month) + two(d.day) + two(d.hour) + two(d.minute) + two(d.second)
        m[12] = two(local.hour) + two(local.minute) + two(local.second)
        m[13] = two(local.month) + two(local.day)
    }

    /// A 0100 (pre-authorisation) or 0200 (sale, refund) for `request`.
    public static func authorisation(_ request: AuthorisationRequest, _ c: MessageContext) -> ISOMessage {
        var m = ISOMessage(mti: request.kind == .preAuthorisation ? "0100" : "0200")
        let tags = request.cryptogramData?.tags ?? [:]
        m[2] = request.pan
        m[3] = request.kind == .refund ? "200000" : "000000"
        m[4] = digits(request.amount, 12)
        dateFields(c, into: &m)
        m[11] = c.stan.description
        if let expiry = tags[0x5F24], expiry.count == 3 { m[14] = String(Hex.encode(expiry).prefix(4)) }
        // Field 22: the entry mode, then 1: the terminal can take a PIN.
        m[22] = (request.posEntryMode ?? "05") + "1"
        if let psn = tags[0x5F34], psn.count == 1 { m[23] = "0" + Hex.encode(psn) }
        m[25] = "00"
        if let track2 = request.track2, track2.count <= 37 {
            m[35] = track2
            // A swiped card's expiry comes from its track: YYMM after the separator.
            if m[14] == nil, let separator = track2.firstIndex(of: "="), track2[track2.index(after: separator)...].count >= 4 {
                m[14] = String(track2[track2.index(after: separator)...].prefix(4))
            }
        } else if let track2 = tags[0x57] {
            let t = String(Hex.encode(track2).map { $0 == "D" ? "=" : $0 }.filter { $0 != "F" })
            if !t.isEmpty, t.count <= 37 { m[35] = t }
        }
        m[37] = c.rrn
        m[41] = c.terminalID
        m[42] = c.merchantID
        m[49] = digits(request.currency, 3)
        if let block = request.pinBlock { m.fields[52] = .bytes(block) }
        if let arqc = request.arqc {
            var icc = tags
            icc[0x84] = icc[0x84] ?? (icc[0x4F] ?? request.aid)
            icc[0x9F26] = arqc
            icc[0x9F27] = icc[0x9F27] ?? [0x80]
            // The terminal's application version (the card's 9F08 when the terminal has none of its
            // own) and its IFD serial number, the terminal ID.
            icc[0x9F09] = icc[0x9F09] ?? icc[0x9F08]
            icc[0x9F1E] = icc[0x9F1E] ?? Array(c.terminalID.utf8.prefix(8))
            if let iad = request.cryptogramData?.issuerApplicationData { icc[0x9F10] = iad }
            icc[0x9F41] = icc[0x9F41] ?? ((try? Hex.decode(digits(c.stan.value, 8))) ?? [])
            var field55: [UInt8] = []
            for tag in requestTags { if let v = icc[tag] { field55 += TLV(tag, v).encoded() } }
            m.fields[55] = .bytes(field55)
        }
        return m
    }

    /// A 0400 reversal (or a 0420 reversal advice) of `original`: its fields, its response code when
    /// there was one, and field 90 naming it.
    public static func reversal(of original: ISOMessage, advice: Bool, answer: ISOMessage?, _ c: MessageContext) -> ISOMessage {
        var m = ISOMessage(mti: advice ? "0420" : "0400")
        for n in [2, 3, 4, 14, 22, 23, 25, 37, 41, 42, 49] { m.fields[n] = original.fields[n] }
        dateFields(c, into: &m)
        m[11] = c.stan.description
        if let code = answer?[38] { m[38] = code }
        // 39 in a reversal: why it is sent (ISO 8583 leaves it to the network; 17 customer cancellation
        // and 68 response received too late are the common ones, 06 otherwise).
        m[39] = answer?[39] == nil ? "68" : "06"
        if let icc = original.bytes(55) { m.fields[55] = .bytes(icc) }
        m[90] = original.mti + (original[11] ?? "000000") + (original[7] ?? "0000000000") + String(repeating: "0", count: 22)
        return m
    }

    /// A 0220 completion advice for a capture of `original` (a pre-authorisation the host
    /// approved with `answer`): the original's card and terminal fields, the captured amount, the
    /// capture's own STAN and times, the original's RRN and authorisation code, and field 90.
    public static func completion(of original: ISOMessage, answer: ISOMessage, amount: Int, _ c: MessageContext) -> ISOMessage {
        var m = ISOMessage(mti: "0220")
        for n in [2, 3, 14, 22, 23, 25, 37, 41, 42, 49, 55] { m.fields[n] = original.fields[n] }
        m[4] = digits(amount, 12)
        dateFields(c, into: &m)
        m[11] = c.stan.description
        m[38] = answer[38]
        m[39] = "00"
        m[90] = original.mti + (original[11] ?? "000000") + (original[7] ?? "0000000000") + String(repeating: "0", count: 22)
        return m
    }

    /// An 0800 network management request: an echo test (field 70: 301), or a sign-on (001).
    public static func echo(_ c: MessageContext, signOn: Bool = false) -> ISOMessage {
        var m = ISOMessage(mti: "0800")
        m[7] = two(c.date.month) + two(c.date.day) + two(c.date.hour) + two(c.date.minute) + two(c.date.second)
        m[11] = c.stan.description
        m[41] = c.terminalID
        m[70] = signOn ? "001" : "301"
        return m
    }

    /// Reads an answer to `request`: it must be the request's response MTI with its STAN, and
    /// carry field 39. Response codes a terminal does not know decline generically.
    public static func response(_ answer: ISOMessage, to request: ISOMessage) throws(ISO8583Error) -> AuthorisationResponse {
        let expected = responseMTI(request.mti)
        guard answer.mti == expected else {
            throw ISO8583Error(part: "MTI", reason: "answer \(answer.mti) to a \(request.mti): expected \(expected)")
        }
        guard answer[11] == request[11] else {
            throw ISO8583Error(part: "field 11 (System Trace Audit Number)",
                               reason: "answer carries STAN \(answer[11] ?? "none"), the request \(request[11] ?? "none")")
        }
        guard let code = answer[39], code.utf8.count == 2 else {
            throw ISO8583Error(part: "field 39 (Response Code)", reason: "missing from the answer")
        }
        var issuerData: [UInt8]? = nil
        var scripts: [[UInt8]] = []
        if let icc = answer.bytes(55) {
            let items: [TLV]
            do { items = try TLV.parse(icc) } catch {
                throw ISO8583Error(part: "field 55 (ICC Data)", reason: "not BER-TLV: \(error)")
            }
            for item in items {
                switch item.tag.value {
                case 0x91:
                    guard (8...16).contains(item.value.count) else {
                        throw ISO8583Error(part: "field 55 (ICC Data)", reason: "tag 91 of \(item.value.count) bytes: 8 to 16 expected")
                    }
                    issuerData = item.value
                case 0x71, 0x72:
                    scripts.append(item.encoded())
                default:
                    break
                }
            }
        }
        let response = ResponseCode(code)
        let known = ResponseCode.isKnownHostCode(code)
        let authCode = known && response.isApproval ? (answer[38]?.trimmingCharacters(in: " ")).flatMap { $0.isEmpty ? nil : $0 } : nil
        return AuthorisationResponse(
            responseCode: known ? response : "05", authorisationCode: authCode, issuerAuthenticationData: issuerData,
            issuerScripts: scripts, rule: "iso8583",
            message: known ? response.meaning : "the host answered response code \(code), which the terminal does not know: declined",
            delayMilliseconds: 0)
    }

    /// The response MTI of a request: 0100 → 0110, 0420 → 0430, and a repeat's the original's
    /// (0401 → 0410).
    public static func responseMTI(_ mti: String) -> String {
        var u = Array(mti.utf8)
        guard u.count == 4 else { return mti }
        u[2] = u[2] | 0x01
        u[3] = UInt8(ascii: "0")
        return String(decoding: u, as: UTF8.self)
    }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s.removeFirst() }
        while s.last == set { s.removeLast() }
        return String(s)
    }
}
