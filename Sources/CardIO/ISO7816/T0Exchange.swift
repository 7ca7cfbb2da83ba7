import EMV

/// How T=0 carries a short C-APDU (ISO 7816-3 §12.2, EMV Book 1 §9.3.1 and Annex A), above the
/// exchange of one command TPDU: the case forms, GET RESPONSE after 61xx, the re-issue after
/// 6Cxx, and the case 4 warning rule.
///
/// Two readers run it. The serial reader sends each TPDU character by character (`T0Transport`).
/// A PC/SC reader hands the TPDU to pcscd, which does no APDU logic: the CCID driver and most
/// readers give back the card's answer as it is, 61xx and 6Cxx included, and character-level
/// readers refuse a case 4 TPDU that still carries Le. Readers that work at the APDU level may
/// already have fetched the data and answer data ‖ 9000; that needs nothing more here.
public enum T0Exchange {
    /// Sends one command TPDU (CLA INS P1 P2, P3, then `send` when P3 counts outgoing data, or up
    /// to `receive` bytes expected back) and returns the data received and SW1 SW2.
    public typealias TPDU = (_ header: [UInt8], _ p3: UInt8, _ send: [UInt8], _ receive: Int) throws(CardIOError) -> (data: [UInt8], sw: (UInt8, UInt8))

    /// The most data the GET RESPONSE loop gathers before deciding the card is babbling.
    public static let maximumResponse = 65_536

    /// Carries `command` over `tpdu` and returns data ‖ SW1 SW2.
    ///
    /// Case 1 goes as CLA INS P1 P2 00, case 2 with P3 = Le, cases 3 and 4 with P3 = Lc and no
    /// Le. 61xx is followed by GET RESPONSE (CLA 00, P3 = xx) until the card stops asking, the
    /// data gathered in order; 6Cxx after case 2 re-issues the command with P3 = xx once (keeping
    /// at most Le bytes, ISO 7816-4 Annex A); a case 4 command answered with a warning (62xx,
    /// 63xx, or 9xxx other than 9000) and no data gets GET RESPONSE with Le = 00 and returns its
    /// data with the warning (EMV Book 1 §9.3.1.4).
    /// - Throws: `.protocolError` when the card answers 61xx for more than `maximumResponse`
    ///   bytes; whatever `tpdu` throws.
    public static func exchange(_ command: CommandAPDU, reader: String, tpdu: TPDU) throws(CardIOError) -> [UInt8] {
        let header = [command.cla, command.ins, command.p1, command.p2]
        var data: [UInt8]
        var sw: (UInt8, UInt8)
        let isCase4 = !command.data.isEmpty && command.le != nil

        if command.data.isEmpty {
            let le = command.le ?? 0
            (data, sw) = try tpdu(header, UInt8(le & 0xFF), [], le)
            if let le = command.le, sw.0 == 0x6C {
                let la = sw.1 == 0 ? 256 : Int(sw.1)
                (data, sw) = try tpdu(header, sw.1, [], la)
                if data.count > le { data = Array(data.prefix(le)) }
            }
        } else {
            (data, sw) = try tpdu(header, UInt8(command.data.count), command.data, 0)
        }

        if sw.0 == 0x61 {
            let (more, last) = try getResponse(announced: sw.1, claimed: data.count, reader: reader, tpdu: tpdu)
            data += more
            sw = last
        } else if isCase4, data.isEmpty, isWarning(sw) {
            let warning = sw
            let (more, last) = try getResponse(announced: 0x00, claimed: 0, reader: reader, tpdu: tpdu)
            if last == (0x90, 0x00) {
                data = more
            }
            sw = warning
        }
        return data + [sw.0, sw.1]
    }

    /// `exchange` for a reader that takes a whole TPDU as bytes (PC/SC under T=0) and answers
    /// data ‖ SW1 SW2.
    /// - Throws: `.io` for a malformed or extended-length APDU (nothing is sent);
    ///   `.protocolError` for an answer without SW1 SW2; whatever `send` throws.
    public static func transmit(_ apdu: [UInt8], reader: String, send: ([UInt8]) throws(CardIOError) -> [UInt8]) throws(CardIOError) -> [UInt8] {
        let command: CommandAPDU
        do {
            command = try CommandAPDU(bytes: apdu)
        } catch {
            throw .io(reader: reader, detail: "T=0 carries short APDUs only: \(error.description); nothing was sent")
        }
        return try exchange(command, reader: reader) { (header, p3, outgoing, _) throws(CardIOError) in
            let answer = try send(header + [p3] + outgoing)
            guard answer.count >= 2 else {
                throw .protocolError(reader: reader, detail: "a \(answer.count)-byte answer to \(Hex.encode(header + [p3])) has no SW1 SW2")
            }
            return (Array(answer.dropLast(2)), (answer[answer.count - 2], answer[answer.count - 1]))
        }
    }

    /// 62xx, 63xx, or 9xxx other than 9000: the statuses after which an EMV case 4 command still
    /// has response data waiting.
    static func isWarning(_ sw: (UInt8, UInt8)) -> Bool {
        sw.0 == 0x62 || sw.0 == 0x63 || (sw.0 & 0xF0 == 0x90 && sw != (0x90, 0x00))
    }

    /// GET RESPONSE for `announced` bytes (00 = 256), again for as long as the card answers 61xx,
    /// re-issued once with the right P3 after 6Cxx. Returns the data gathered and the last status.
    private static func getResponse(announced: UInt8, claimed: Int, reader: String, tpdu: TPDU) throws(CardIOError) -> ([UInt8], (UInt8, UInt8)) {
        var gathered: [UInt8] = []
        var p3 = announced
        var reissued = false
        while true {
            let count = p3 == 0 ? 256 : Int(p3)
            let (data, sw) = try tpdu([0x00, 0xC0, 0x00, 0x00], p3, [], count)
            gathered += data
            guard claimed + gathered.count <= maximumResponse else {
                throw .protocolError(reader: reader, detail: "the card keeps answering 61xx: more than \(maximumResponse) bytes gathered by GET RESPONSE")
            }
            switch sw.0 {
            case 0x61:
                p3 = sw.1
                reissued = false
            case 0x6C where !reissued && data.isEmpty:
                p3 = sw.1
                reissued = true
            default:
                return (gathered, sw)
            }
        }
    }
}
