import EMV
import Testing
@testable import ISO8583
import Terminal

/// The messages a terminal sends and how it reads answers; how the issuer reads requests.
@Suite struct MessagesTests {
    static let context = MessageContext(terminalID: "10000001", merchantID: "CARDBENCH000001", stan: STAN(42)!, rrn: "533009000042",
                                        date: UTCDateParts(year: 2026, month: 11, day: 25, hour: 9, minute: 30, second: 15))

    static func chipSale(kind: AuthorisationRequest.Kind = .purchase) -> AuthorisationRequest {
        var tags: [EMVTag: [UInt8]] = [0x82: [0x39, 0x00], 0x95: [0, 0, 0, 0x80, 0], 0x9A: [0x26, 0x11, 0x25], 0x9C: [0],
                                       0x5F2A: [0x09, 0x78], 0x9F02: [0, 0, 0, 0, 0x10, 0x50], 0x9F03: [0, 0, 0, 0, 0, 0],
                                       0x9F1A: [0x03, 0x00], 0x9F36: [0, 7], 0x9F37: [1, 2, 3, 4], 0x5F24: [0x28, 0x12, 0x31],
                                       0x5F34: [0x01], 0x57: [0x47, 0x61, 0x73, 0x90, 0x01, 0x01, 0x00, 0x10, 0xD2, 0x81, 0x22, 0x01, 0x0F],
                                       0x9F33: [0xE0, 0xE8, 0xC8], 0x9F35: [0x22], 0x9F34: [0x42, 0x03, 0x00], 0x9F08: [0x00, 0x8C]]
        tags[0x4F] = [0xA0, 0, 0, 0, 3, 0x10, 0x10]
        let data = CryptogramData(tags: tags, issuerApplicationData: [0x06, 0x01, 0x0A, 0x03, 0xA0, 0x00, 0x00])
        var r = AuthorisationRequest(pan: "4761739001010010", aid: [0xA0, 0, 0, 0, 3, 0x10, 0x10], kind: kind, amount: 1050, currency: 978,
                                     arqc: [1, 2, 3, 4, 5, 6, 7, 8], cryptogramData: data, pinBlock: [9, 9, 9, 9, 9, 9, 9, 9],
                                     date: context.date)
        r.posEntryMode = "05"
        return r
    }

    @Test func aChipSaleCarriesEveryField() throws {
        let m = TerminalMessages.authorisation(Self.chipSale(), Self.context)
        #expect(m.mti == "0200")
        #expect(m[2] == "4761739001010010" && m[3] == "000000" && m[4] == "000000001050")
        #expect(m[7] == "1125093015" && m[11] == "000042" && m[12] == "093015" && m[13] == "1125" && m[14] == "2812")
        #expect(m[22] == "051" && m[23] == "001" && m[25] == "00" && m[35] == "4761739001010010=28122010")
        #expect(m[37] == "533009000042" && m[41] == "10000001" && m[42] == "CARDBENCH000001" && m[49] == "978")
        #expect(m.bytes(52) == [9, 9, 9, 9, 9, 9, 9, 9])
        let icc = try TLV.parse(try #require(m.bytes(55)))
        #expect(icc.map(\.tag) == [0x82, 0x84, 0x95, 0x9A, 0x9C, 0x5F2A, 0x9F02, 0x9F03, 0x9F09, 0x9F10, 0x9F1A, 0x9F1E, 0x9F26, 0x9F27, 0x9F33,
                                   0x9F34, 0x9F35, 0x9F36, 0x9F37, 0x9F41])
        #expect(icc.first { $0.tag == 0x9F26 }?.value == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(icc.first { $0.tag == 0x9F1E }?.value == Array("10000001".utf8))
        #expect(icc.first { $0.tag == 0x9F41 }?.value == [0, 0, 0, 0x42])
        // Every packager writes it.
        for p in Packager.all { #expect(try p.unpack(p.pack(m)) == m) }
        #expect(TerminalMessages.authorisation(Self.chipSale(kind: .preAuthorisation), Self.context).mti == "0100")
        #expect(TerminalMessages.authorisation(Self.chipSale(kind: .refund), Self.context)[3] == "200000")
    }

    @Test func aSwipeCarriesItsTrack() {
        var r = AuthorisationRequest(pan: "4761739001010010", aid: [], amount: 500, currency: 484, arqc: nil, cryptogramData: nil,
                                     date: Self.context.date)
        r.posEntryMode = "90"
        r.track2 = "4761739001010010=28122011234"
        let m = TerminalMessages.authorisation(r, Self.context)
        #expect(m[22] == "901" && m[35] == "4761739001010010=28122011234" && m[14] == "2812")
        #expect(m.fields[55] == nil && m.fields[52] == nil)
    }

    @Test func answersAreRead() throws {
        let request = TerminalMessages.authorisation(Self.chipSale(), Self.context)
        var answer = ISOMessage(mti: "0210")
        answer[11] = "000042"
        answer[39] = "00"
        answer[38] = "A1B2C3"
        let script = TLV(0x72, children: [TLV(0x9F18, [0, 0, 0, 1]), TLV(0x86, [0x84, 0x1E, 0, 0, 0])]).encoded()
        answer.fields[55] = .bytes(TLV(0x91, [1, 2, 3, 4, 5, 6, 7, 8, 0x30, 0x30]).encoded() + script)
        let r = try TerminalMessages.response(answer, to: request)
        #expect(r.responseCode == "00" && r.authorisationCode == "A1B2C3" && r.issuerAuthenticationData == [1, 2, 3, 4, 5, 6, 7, 8, 0x30, 0x30])
        #expect(r.issuerScripts == [script])
        // A code the terminal does not know declines generically; so does one of the terminal's own.
        for code in ["Q7", "Y1"] {
            answer[39] = code
            let d = try TerminalMessages.response(answer, to: request)
            #expect(d.responseCode == "05" && d.authorisationCode == nil && d.message.contains(code))
        }
        answer[39] = "51"
        #expect(try TerminalMessages.response(answer, to: request).responseCode == "51")
        // Not this request's answer.
        answer[11] = "000043"
        #expect(throws: ISO8583Error.self) { try TerminalMessages.response(answer, to: request) }
        answer[11] = "000042"
        answer.mti = "0110"
        #expect(throws: ISO8583Error(part: "MTI", reason: "answer 0110 to a 0200: expected 0210")) { try TerminalMessages.response(answer, to: request) }
        answer.mti = "0210"
        answer[39] = nil
        #expect(throws: ISO8583Error(part: "field 39 (Response Code)", reason: "missing from the answer")) { try TerminalMessages.response(answer, to: request) }
        answer[39] = "00"
        answer.fields[55] = .bytes([0x91, 0x09, 1])
        #expect(throws: ISO8583Error.self) { try TerminalMessages.response(answer, to: request) }
    }

    @Test func reversalsNameTheirOriginal() {
        let request = TerminalMessages.authorisation(Self.chipSale(), Self.context)
        var answer = ISOMessage(mti: "0210")
        answer[38] = "A1B2C3"
        answer[39] = "00"
        let advice = TerminalMessages.reversal(of: request, advice: true, answer: answer, Self.context)
        #expect(advice.mti == "0420" && advice[38] == "A1B2C3" && advice[39] == "06" && advice[11] == "000042")
        #expect(advice[90] == "0200" + "000042" + "1125093015" + String(repeating: "0", count: 22))
        #expect(advice.fields[52] == nil && advice.fields[35] == nil, "no PIN block and no track in a reversal")
        let timeout = TerminalMessages.reversal(of: request, advice: false, answer: nil, Self.context)
        #expect(timeout.mti == "0400" && timeout[39] == "68" && timeout[38] == nil)
        #expect(TerminalMessages.responseMTI("0401") == "0410" && TerminalMessages.responseMTI("0421") == "0430")
        // A capture's completion advice: the captured amount, its own STAN, the original named.
        var capture = Self.context
        capture.stan = STAN(43)!
        let completion = TerminalMessages.completion(of: request, answer: answer, amount: 800, capture)
        #expect(completion.mti == "0220" && completion[4] == "000000000800" && completion[11] == "000043" && completion[38] == "A1B2C3")
        #expect(completion[2] == request[2] && completion[37] == request[37] && completion.fields[52] == nil)
        #expect(completion[90] == "0200" + "000042" + "1125093015" + String(repeating: "0", count: 22))
        #expect(TerminalMessages.responseMTI("0221") == "0230")
        #expect(TerminalMessages.echo(Self.context)[70] == "301")
        #expect(TerminalMessages.echo(Self.context, signOn: true)[70] == "001")
    }

    @Test("fields 12 and 13 are the terminal's local time and date, field 7 stays UTC; UTC parts and seconds convert both ways")
    func localTime() throws {
        var c = Self.context
        // 03:04:05 UTC on 1 January is 21:04:05 on 31 December the year before in UTC-6.
        c.date = UTCDateParts(year: 2027, month: 1, day: 1, hour: 3, minute: 4, second: 5)
        c.localOffsetSeconds = -6 * 3600
        let request = AuthorisationRequest(pan: "4761739001010010", aid: [], kind: .purchase, amount: 100, currency: 484, arqc: nil,
                                           cryptogramData: nil, pinBlock: nil, date: c.date)
        for m in [TerminalMessages.authorisation(request, c), TerminalMessages.reversal(of: TerminalMessages.authorisation(request, c), advice: false, answer: nil, c)] {
            #expect(m[7] == "0101030405")
            #expect(m[12] == "210405" && m[13] == "1231", "\(m.fields)")
        }
        c.localOffsetSeconds = 0
        #expect(TerminalMessages.authorisation(request, c)[12] == "030405")
        for t: Int64 in [0, 86_399, 951_782_400, 1_798_761_845, 4_102_444_800, -1] {
            #expect(UTCDateParts(secondsSince1970: t).secondsSince1970 == t)
        }
    }

    @Test func theIssuerReadsWhatATerminalSends() throws {
        let sent = TerminalMessages.authorisation(Self.chipSale(), Self.context)
        let read = try IssuerMessages.authorisationRequest(sent, now: Self.context.date)
        #expect(read.pan == "4761739001010010" && read.amount == 1050 && read.currency == 978 && read.kind == .purchase)
        #expect(read.arqc == [1, 2, 3, 4, 5, 6, 7, 8] && read.pinBlock == [9, 9, 9, 9, 9, 9, 9, 9] && read.posEntryMode == "05")
        #expect(read.cryptogramData?.tags[0x9F36] == [0, 7] && read.cardExpiry! == (2028, 12))
        #expect(read.date == Self.context.date)
        var missing = sent
        missing[49] = nil
        #expect(throws: ISO8583Error(part: "field 49 (Currency Code, Transaction)", reason: "required, 3 digits (ISO 4217 numeric)")) {
            try IssuerMessages.authorisationRequest(missing, now: Self.context.date)
        }
        missing = sent
        missing[2] = nil
        #expect(try IssuerMessages.authorisationRequest(missing, now: Self.context.date).pan == "4761739001010010", "the PAN from track 2")
        missing[35] = nil
        #expect(throws: ISO8583Error.self) { try IssuerMessages.authorisationRequest(missing, now: Self.context.date) }
        let answer = IssuerMessages.answer(sent, code: "00", response: AuthorisationResponse(
            responseCode: "00", authorisationCode: "123456", issuerAuthenticationData: [1, 2, 3, 4, 5, 6, 7, 8, 0x30, 0x30], rule: "approve",
            message: "Approved", delayMilliseconds: 0))
        #expect(answer.mti == "0210" && answer[39] == "00" && answer[38] == "123456" && answer[11] == "000042" && answer[41] == "10000001")
        #expect(answer.bytes(55) == TLV(0x91, [1, 2, 3, 4, 5, 6, 7, 8, 0x30, 0x30]).encoded())
        #expect(answer.fields[52] == nil && answer.fields[35] == nil)
        var reversal = TerminalMessages.reversal(of: sent, advice: false, answer: nil, Self.context)
        #expect(IssuerMessages.originalSTAN(reversal) == "000042")
        reversal[90] = nil
        #expect(IssuerMessages.originalSTAN(reversal) == "000042", "field 11 when there is no 90")
    }
}
