import EMV

extension ISO7816 {
    /// The T=1 error detection code, chosen by bit 1 of the first TC for T=1 (TC3).
    public enum EDC: String, Sendable, Hashable {
        /// One byte, the XOR of the prologue and information field (the default, and EMV's only choice).
        case lrc
        /// Two bytes of the CRC of ISO/IEC 13239: polynomial x¹⁶ + x¹² + x⁵ + 1 processed least
        /// significant bit first, preset FFFF, no final XOR, sent high byte first — what
        /// pcsc-lite's CCID driver computes.
        case crc

        /// The EDC the ATR announces.
        public init(atr: ATR) {
            self = atr.checksumMode == "CRC" ? .crc : .lrc
        }

        /// Bytes the code takes at the end of a block.
        public var size: Int { self == .lrc ? 1 : 2 }

        /// The code of `bytes` (NAD, PCB, LEN and INF).
        public func compute(_ bytes: [UInt8]) -> [UInt8] {
            switch self {
            case .lrc:
                return [bytes.reduce(0, ^)]
            case .crc:
                var crc: UInt16 = 0xFFFF
                for byte in bytes {
                    crc ^= UInt16(byte)
                    for _ in 0..<8 {
                        crc = crc & 1 != 0 ? (crc >> 1) ^ 0x8408 : crc >> 1
                    }
                }
                return [UInt8(crc >> 8), UInt8(crc & 0xFF)]
            }
        }
    }
}

/// One T=1 block (ISO 7816-3 §11.3): NAD, PCB, LEN, INF; the EDC is added when it is encoded.
struct T1Block: Equatable, CustomStringConvertible {
    enum SupervisoryType: UInt8 {
        case resynch = 0x00, ifs = 0x01, abort = 0x02, wtx = 0x03
    }

    enum Kind: Equatable {
        /// I(N(S), M).
        case information(sequence: UInt8, more: Bool)
        /// R(N(R)); `error` 0 acknowledges, 1 reports an EDC or parity error, 2 another error.
        case receiveReady(sequence: UInt8, error: UInt8)
        /// S(type request) or S(type response).
        case supervisory(SupervisoryType, response: Bool)
    }

    var nad: UInt8 = 0
    var pcb: UInt8
    var info: [UInt8]

    init(pcb: UInt8, info: [UInt8] = [], nad: UInt8 = 0) {
        self.nad = nad
        self.pcb = pcb
        self.info = info
    }

    static func information(sequence: UInt8, more: Bool, _ info: [UInt8]) -> T1Block {
        T1Block(pcb: sequence << 6 | (more ? 0x20 : 0), info: info)
    }

    static func receiveReady(sequence: UInt8, error: UInt8 = 0) -> T1Block {
        T1Block(pcb: 0x80 | sequence << 4 | error)
    }

    static func supervisory(_ type: SupervisoryType, response: Bool, _ info: [UInt8] = []) -> T1Block {
        T1Block(pcb: 0xC0 | (response ? 0x20 : 0) | type.rawValue, info: info)
    }

    /// What the PCB says, or nil when it codes nothing valid (RFU S-block types, R-block error
    /// codes other than 0–2, b6 set in an R-block).
    var kind: Kind? {
        switch pcb & 0xC0 {
        case 0x80:
            guard pcb & 0x20 == 0, pcb & 0x0F <= 2 else { return nil }
            return .receiveReady(sequence: pcb >> 4 & 1, error: pcb & 0x0F)
        case 0xC0:
            guard let type = SupervisoryType(rawValue: pcb & 0x1F) else { return nil }
            return .supervisory(type, response: pcb & 0x20 != 0)
        default:
            return .information(sequence: pcb >> 6 & 1, more: pcb & 0x20 != 0)
        }
    }

    func encoded(_ edc: ISO7816.EDC) -> [UInt8] {
        let body = [nad, pcb, UInt8(info.count)] + info
        return body + edc.compute(body)
    }

    var description: String {
        let inf = info.isEmpty ? "" : " " + Hex.encode(info)
        switch kind {
        case .information(let sequence, let more)?: return "I(\(sequence),\(more ? "M" : "-"))\(inf)"
        case .receiveReady(let sequence, let error)?: return "R(\(sequence)\(error == 0 ? "" : error == 1 ? ",EDC" : ",other"))"
        case .supervisory(let type, let response)?: return "S(\(type) \(response ? "response" : "request"))\(inf)"
        case nil: return "PCB \(Hex.encode([pcb]))\(inf)"
        }
    }

    /// The outcome of waiting for a block.
    enum Received {
        case block(T1Block)
        /// Nothing came within the block waiting time.
        case silence
        /// Something came but not a valid block; `code` is the R-block error to answer with
        /// (1: EDC or parity, 2: other).
        case invalid(code: UInt8, reason: String)
    }

    /// Reads one block: the first character within `blockWaitingTime`, each further one within
    /// `characterWaitingTime`. After anything invalid the line is drained until it stays quiet
    /// for a character waiting time, so the next block starts clean.
    static func receive(from line: GuardedLine, edc: ISO7816.EDC, maximumInfo: Int,
                        blockWaitingTime: Duration, characterWaitingTime: Duration) throws(CardIOError) -> Received {
        var bytes: [UInt8] = []
        func read(_ within: Duration) throws(CardIOError) -> UInt8? {
            do {
                let byte = try line.read(within: within)
                bytes.append(byte)
                return byte
            } catch .timeout {
                return nil
            } catch .protocolError {
                // A line may report a character received with a parity error this way.
                bytes.append(0)
                return nil
            }
        }
        func invalid(_ code: UInt8, _ reason: String) throws(CardIOError) -> Received {
            try drain(line, characterWaitingTime: characterWaitingTime)
            return .invalid(code: code, reason: reason)
        }

        guard let nad = try read(blockWaitingTime) else {
            if bytes.isEmpty { return .silence }
            return try invalid(1, "parity error in NAD")
        }
        guard let pcb = try read(characterWaitingTime), let len = try read(characterWaitingTime) else {
            return try invalid(2, "block cut short after \(Hex.encode(bytes)) (character waiting time exceeded or parity error)")
        }
        guard len != 0xFF else {
            return try invalid(2, "LEN FF is reserved")
        }
        for _ in 0..<(Int(len) + edc.size) {
            guard try read(characterWaitingTime) != nil else {
                return try invalid(1, "block cut short after \(Hex.encode(bytes)) (character waiting time exceeded or parity error)")
            }
        }
        let bodyCount = 3 + Int(len)
        guard edc.compute(Array(bytes[..<bodyCount])) == Array(bytes[bodyCount...]) else {
            return try invalid(1, "wrong \(edc == .lrc ? "LRC" : "CRC") in \(Hex.encode(bytes))")
        }
        guard nad == 0 else {
            return try invalid(2, "NAD must be 00, got \(Hex.encode([nad]))")
        }
        let block = T1Block(pcb: pcb, info: Array(bytes[3..<bodyCount]), nad: nad)
        switch block.kind {
        case nil:
            return try invalid(2, "PCB \(Hex.encode([pcb])) codes no block")
        case .information?:
            guard Int(len) <= maximumInfo else {
                return try invalid(2, "an I-block of \(len) bytes exceeds the information field size \(maximumInfo)")
            }
        case .receiveReady?:
            guard len == 0 else { return try invalid(2, "an R-block carries no information field, LEN is \(len)") }
        case .supervisory(let type, _)?:
            let expected = type == .ifs || type == .wtx ? 1 : 0
            guard Int(len) == expected else {
                return try invalid(2, "S(\(type)) carries \(expected) byte\(expected == 1 ? "" : "s"), LEN is \(len)")
            }
        }
        return .block(block)
    }

    /// Reads until the card has been quiet for a character waiting time (at most 300 bytes, the
    /// longest block plus margin), then drops whatever the line still buffers.
    private static func drain(_ line: GuardedLine, characterWaitingTime: Duration) throws(CardIOError) {
        for _ in 0..<300 {
            do {
                _ = try line.read(within: characterWaitingTime)
            } catch .timeout {
                break
            } catch .protocolError {
                continue
            }
        }
        line.discardInput()
    }
}
