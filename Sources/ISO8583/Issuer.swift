import EMV
import Terminal

/// How cardbench's emulated issuer reads the messages an external terminal sends it, and answers.
public enum IssuerMessages {
    /// What a 0100 or 0200 asks the issuer. `now` gives the year field 7 lacks.
    public static func authorisationRequest(_ m: ISOMessage, now: UTCDateParts) throws(ISO8583Error) -> AuthorisationRequest {
        func missing(_ n: Int, _ name: String) -> ISO8583Error {
            ISO8583Error(field: n, name: name, reason: "required in a \(m.mti)", isMissing: true)
        }
        var pan = m[2]
        if pan == nil, let track = m[35] { pan = String(track.prefix { $0 != "=" && $0 != "D" }) }
        guard let pan, (12...19).contains(pan.count) else {
            throw ISO8583Error(part: "field 2 (Primary Account Number (PAN))", reason: "required (or track 2 in field 35), 12 to 19 digits")
        }
        guard let amountText = m[4] else { throw missing(4, "Amount, Transaction") }
        guard let amount = Int(amountText) else {
            throw ISO8583Error(field: 4, name: "Amount, Transaction", reason: "must be 12 digits", isMissing: true)
        }
        guard amount > 0 else { throw ISO8583Error(field: 4, name: "Amount, Transaction", reason: "must be above zero") }
        guard let currencyText = m[49], let currency = Int(currencyText), currencyText.count == 3, currency > 0 else {
            throw ISO8583Error(part: "field 49 (Currency Code, Transaction)", reason: "required, 3 digits (ISO 4217 numeric)")
        }
        var tags: [EMVTag: [UInt8]] = [:]
        if let icc = m.bytes(55) {
            do { tags = try TLV.parse(icc).primitives() } catch {
                throw ISO8583Error(part: "field 55 (ICC Data)", reason: "not BER-TLV: \(error)")
            }
        }
        let kind: AuthorisationRequest.Kind = m.kind.messageClass == .authorisation ? .preAuthorisation : (m[3]?.hasPrefix("20") == true ? .refund : .purchase)
        let arqc = tags[0x9F26]
        let data = arqc.map { _ in CryptogramData(tags: tags, issuerApplicationData: tags[0x9F10]) }
        var date = now
        if let f7 = m[7], f7.count == 10, let month = Int(f7.prefix(2)), let day = Int(f7.dropFirst(2).prefix(2)),
           (1...12).contains(month), (1...31).contains(day) {
            // Field 7 has no year: this year's, or last year's for a December message read in January.
            let year = month > now.month + 6 ? now.year - 1 : now.year
            date = UTCDateParts(year: year, month: month, day: day, hour: Int(f7.dropFirst(4).prefix(2)) ?? 0,
                                minute: Int(f7.dropFirst(6).prefix(2)) ?? 0, second: Int(f7.suffix(2)) ?? 0)
        }
        var request = AuthorisationRequest(pan: pan, aid: tags[0x84] ?? tags[0x4F] ?? [], kind: kind, amount: amount, currency: currency,
                                           arqc: arqc, cryptogramData: data, pinBlock: m.bytes(52), date: date)
        if let entry = m[22] { request.posEntryMode = String(entry.prefix(2)) }
        if let expiry = m[14], expiry.count == 4, let yy = Int(expiry.prefix(2)), let mm = Int(expiry.suffix(2)), (1...12).contains(mm) {
            request.cardExpiry = (2000 + yy, mm)
        }
        return request
    }

    /// The response code of a request `authorisationRequest` refused: 13 (invalid amount) for an
    /// amount that is there but cannot be one, 30 (format error) for everything else, a missing
    /// field 4 included.
    public static func responseCode(refusing error: ISO8583Error) -> ResponseCode {
        error.field == 4 && !error.isMissing ? "13" : "30"
    }

    /// The fields an answer repeats from its request.
    static let echoed = [2, 3, 4, 7, 11, 12, 13, 22, 23, 25, 37, 41, 42, 49, 70, 90]

    /// The answer to `request` with response code `code`; the authorisation code and tag 91 from
    /// `response` when there is one.
    public static func answer(_ request: ISOMessage, code: ResponseCode, response: AuthorisationResponse? = nil) -> ISOMessage {
        var m = ISOMessage(mti: TerminalMessages.responseMTI(request.mti))
        for n in echoed { if let v = request.fields[n] { m.fields[n] = v } }
        m[39] = code.code
        if let auth = response?.authorisationCode { m[38] = auth }
        if let data = response?.issuerAuthenticationData { m.fields[55] = .bytes(TLV(0x91, data).encoded()) }
        return m
    }

    /// The original a 0400/0420 names in field 90: its STAN (digits 5–10).
    public static func originalSTAN(_ m: ISOMessage) -> String? {
        guard let f90 = m[90], f90.count >= 10 else { return m[11] }
        return String(f90.dropFirst(4).prefix(6))
    }
}
