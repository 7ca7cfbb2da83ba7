import CLibCrypto
/// The cryptogram versions cardbench computes, by their CVN numbers.
public enum CVN: Int, Sendable, CaseIterable, CustomStringConvertible, Codable {
    case visa10 = 10
    case visa18 = 18
    case visa22 = 22
    case mastercard16 = 16
    case mastercard17 = 17
    case mastercard20 = 20
    case mastercard21 = 21

    /// Looks a CVN up by number; anything else is an error naming the valid ones.
    public init(number: Int) throws(EMVError) {
        guard let cvn = CVN(rawValue: number) else {
            throw EMVError(field: "cvn", rule: "must be one of 10, 18, 22 (Visa) or 16, 17, 20, 21 (Mastercard), got \(number)")
        }
        self = cvn
    }

    public var isVisa: Bool { self == .visa10 || self == .visa18 || self == .visa22 }

    public var description: String { "\(isVisa ? "Visa" : "Mastercard") CVN \(rawValue)" }

    /// Which ICC master key derivation the CVN uses.
    var usesOptionB: Bool { self == .visa18 || self == .visa22 }

    /// The ARPC method: 1 (ARC, 8-byte ARPC) or 2 (CSU, 4-byte ARPC).
    public var arpcMethod: Int { self == .visa18 || self == .visa22 ? 2 : 1 }

    /// Whether the ARPC is keyed with the AC session key (otherwise the ICC master key).
    var arpcUsesSessionKey: Bool {
        switch self {
        case .visa18, .visa22, .mastercard20, .mastercard21: true
        case .visa10, .mastercard16, .mastercard17: false
        }
    }

    var needsCounters: Bool { self == .mastercard17 || self == .mastercard21 }

    /// The terminal tags every supported CVN puts into its cryptogram, in order, with lengths.
    public static let cryptogramTags: [(tag: EMVTag, length: Int)] = [
        (0x9F02, 6), (0x9F03, 6), (0x9F1A, 2), (0x95, 5), (0x5F2A, 2), (0x9A, 3), (0x9C, 1), (0x9F37, 4), (0x82, 2), (0x9F36, 2),
    ]
}

/// What goes into an application cryptogram beyond the key: tag values, and the card's
/// CVR, issuer application data and counters as the CVN needs them.
public struct CryptogramData: Sendable, Hashable {
    /// Tag values: 9F02, 9F03, 9F1A, 95, 5F2A, 9A, 9C, 9F37, 82, 9F36, and 9F10 if given that way.
    public var tags: [EMVTag: [UInt8]] { didSet { prepared = Prepared(tags) } }
    /// Card verification results; if absent they are taken from the issuer application data.
    public var cvr: [UInt8]?
    /// Issuer application data (9F10); falls back to `tags[9F10]`.
    public var issuerApplicationData: [UInt8]?
    /// Mastercard CVN 17/21 counters (8 bytes); if absent, taken from the IAD.
    public var counters: [UInt8]?
    /// The tags as every computation reads them, looked up once: a card and its issuer each MAC
    /// the same data, and a dozen dictionary lookups per MAC cost more than the DES.
    private(set) var prepared: Prepared

    /// The ten cryptogram tags in order (nil when one is missing or of the wrong length: `input`
    /// then names it), the ATC, the Unpredictable Number and the IAD given as a tag.
    struct Prepared: Sendable, Hashable {
        /// Empty when a tag is missing or of the wrong length (non-optional: an optional array
        /// is copied through a generic witness, which showed in `bench crypto`).
        let terminalInput: [UInt8]
        /// Empty when there is none.
        let atc: [UInt8]
        let unpredictableNumber: [UInt8]?
        let iad: [UInt8]?

        init(_ tags: [EMVTag: [UInt8]]) {
            var out: [UInt8] = []
            out.reserveCapacity(64)
            var complete = true
            for (tag, length) in CVN.cryptogramTags {
                guard let v = tags[tag], v.count == length else {
                    complete = false
                    break
                }
                out += v
            }
            terminalInput = complete ? out : []
            atc = tags[0x9F36] ?? []
            unpredictableNumber = tags[0x9F37]
            iad = tags[0x9F10]
        }
    }

    public init(tags: [EMVTag: [UInt8]], cvr: [UInt8]? = nil, issuerApplicationData: [UInt8]? = nil, counters: [UInt8]? = nil) {
        self.tags = tags
        self.cvr = cvr
        self.issuerApplicationData = issuerApplicationData
        self.counters = counters
        prepared = Prepared(tags)
    }

    var iad: [UInt8]? { issuerApplicationData ?? prepared.iad }
}

/// What the issuer returns for ARPC generation: an authorisation response code (method 1) or a
/// card status update (method 2).
public enum ARPCInput: Sendable, Hashable {
    case responseCode([UInt8])
    case cardStatusUpdate([UInt8], proprietaryData: [UInt8] = [])
}

/// A card's application cryptogram keys for one CVN, and the computations on them.
///
/// An issuer builds it from the issuer master key and the PAN; a card from its ICC master key.
public struct CryptogramKeys: Sendable {
    public let cvn: CVN
    /// The ICC master key. A derived one is kept as its two halves, with no key schedules: a
    /// card or issuer derives it for one cryptogram, and the schedules made on the stack when
    /// they are used cost less than a key object (`bench crypto` measures this path).
    public var iccMasterKey: TDESKey {
        switch master {
        case .halves(let left, let right): TDESKey(left: left, right: right)
        case .key(let key): key
        }
    }

    private enum Master: Sendable {
        case halves(DESBlock, DESBlock)
        case key(TDESKey)
    }

    private let master: Master

    /// Derives the ICC master key from the issuer master key as the CVN prescribes.
    public init(cvn: CVN, issuerMasterKey: TDESKey, pan: String, psn: String) throws(EMVError) {
        self.cvn = cvn
        let (left, right) = try KeyDerivation.iccMasterKeyHalves(issuerMasterKey: issuerMasterKey, pan: pan, psn: psn, optionB: cvn.usesOptionB)
        master = .halves(left, right)
    }

    /// Uses an ICC master key as personalised on a card.
    public init(cvn: CVN, iccMasterKey: TDESKey) {
        self.cvn = cvn
        master = .key(iccMasterKey)
    }

    /// Runs `body` with the ICC master key's K1, K2, K3 schedules.
    private func withMasterSchedules<R>(_ body: (UnsafeMutablePointer<DES_key_schedule>) -> R) -> R {
        switch master {
        case .halves(let left, let right): TDESKey.withSchedules(left, right, body)
        case .key(let key): key.withSchedules(body)
        }
    }

    /// The AC session key for a transaction: none (the ICC master key) for Visa CVN 10; the
    /// Mastercard key from ATC and UN for CVN 16/17; the EMV common session key otherwise.
    public func sessionKey(atc: [UInt8], unpredictableNumber: [UInt8]?) throws(EMVError) -> TDESKey {
        guard let (left, right) = try sessionKeyHalves(atc: atc, unpredictableNumber: unpredictableNumber) else { return iccMasterKey }
        return TDESKey(left: left, right: right)
    }

    /// The session key's two halves, or nil when the CVN MACs with the ICC master key.
    func sessionKeyHalves(atc: [UInt8], unpredictableNumber: [UInt8]?) throws(EMVError) -> (DESBlock, DESBlock)? {
        guard atc.count == 2 else { throw EMVError(field: "tag 9F36", rule: "the ATC is 2 bytes, got \(atc.count)") }
        let r: (DESBlock, DESBlock)
        switch cvn {
        case .visa10:
            return nil
        case .mastercard16, .mastercard17:
            guard let un = unpredictableNumber else {
                throw EMVError(field: "tag 9F37", rule: "missing: \(cvn) derives its session key from the Unpredictable Number")
            }
            guard un.count == 4 else { throw EMVError(field: "tag 9F37", rule: "the Unpredictable Number is 4 bytes, got \(un.count)") }
            r = KeyDerivation.mastercardSessionR(atc: atc, unpredictableNumber: un)
        case .visa18, .visa22, .mastercard20, .mastercard21:
            r = KeyDerivation.commonSessionR(atc: atc)
        }
        return withMasterSchedules { TDESKey.deriveHalves(r.0, r.1, schedules: $0) }
    }

    /// The bytes the MAC runs over: the ten terminal and card tags, then the CVR (Visa 10,
    /// Mastercard), the whole IAD (Visa 18/22) and the counters (Mastercard 17/21).
    public func input(_ data: CryptogramData) throws(EMVError) -> [UInt8] {
        let (tags, first, second) = try inputParts(data)
        return tags + first + second
    }

    /// `input` in its three parts, none copied: the tags, then what the CVN adds after them.
    private func inputParts(_ data: CryptogramData) throws(EMVError) -> ([UInt8], ArraySlice<UInt8>, ArraySlice<UInt8>) {
        let tags = data.prepared.terminalInput
        if tags.isEmpty {
            // Only to name what is wrong: a missing tag, or one of the wrong length.
            for (tag, length) in CVN.cryptogramTags {
                guard let v = data.tags[tag] else {
                    throw EMVError(field: "tag \(tag)", rule: "missing: \(cvn) needs \(tag.name ?? "it") (\(length) bytes)")
                }
                guard v.count == length else {
                    throw EMVError(field: "tag \(tag)", rule: "\(tag.name ?? "value") must be \(length) bytes, got \(v.count)")
                }
            }
            throw EMVError(field: "tags", rule: "the cryptogram's tags are incomplete")
        }
        switch cvn {
        case .visa10:
            return (tags, try extract(data.cvr, from: data.iad, range: 3..<7, name: "cvr", what: "the Visa CVR (4 bytes, IAD bytes 4–7)"), [])
        case .visa18, .visa22:
            guard let iad = data.iad else {
                throw EMVError(field: "iad", rule: "missing: \(cvn) MACs the whole issuer application data (9F10); give --iad or --tag 9F10=")
            }
            guard (1...32).contains(iad.count) else { throw EMVError(field: "iad", rule: "issuer application data is 1–32 bytes, got \(iad.count)") }
            return (tags, iad[...], [])
        case .mastercard16, .mastercard20:
            return (tags, try extract(data.cvr, from: data.iad, range: 2..<8, name: "cvr", what: "the Mastercard CVR (6 bytes, IAD bytes 3–8)"), [])
        case .mastercard17, .mastercard21:
            return (tags, try extract(data.cvr, from: data.iad, range: 2..<8, name: "cvr", what: "the Mastercard CVR (6 bytes, IAD bytes 3–8)"),
                    try extract(data.counters, from: data.iad, range: 10..<18, name: "counters", what: "the counters (8 bytes, IAD bytes 11–18)"))
        }
    }

    private func extract(_ given: [UInt8]?, from iad: [UInt8]?, range: Range<Int>, name: String, what: String) throws(EMVError) -> ArraySlice<UInt8> {
        if let given {
            guard given.count == range.count else {
                throw EMVError(field: name, rule: "\(what): must be \(range.count) bytes, got \(given.count)")
            }
            return given[...]
        }
        guard let iad, iad.count >= range.upperBound else {
            throw EMVError(field: name, rule: "missing: \(cvn) needs \(what); give --\(name) or an --iad that holds it")
        }
        return iad[range]
    }

    /// Computes the application cryptogram (ARQC, TC or AAC — the computation is the same)
    /// and the session key it used.
    public func generate(_ data: CryptogramData) throws(EMVError) -> (cryptogram: [UInt8], sessionKey: TDESKey) {
        (try cryptogram(data), try sessionKey(atc: data.prepared.atc, unpredictableNumber: data.prepared.unpredictableNumber))
    }

    /// The application cryptogram alone: what a card answers and an issuer checks, neither of
    /// which keeps the session key, so its schedules live on the stack for the one MAC.
    public func cryptogram(_ data: CryptogramData) throws(EMVError) -> [UInt8] {
        let (tags, first, second) = try inputParts(data)
        let halves = try sessionKeyHalves(atc: data.prepared.atc, unpredictableNumber: data.prepared.unpredictableNumber)
        // The message is built and padded (ISO 9797-1 method 1 for Visa CVN 10, else method 2)
        // in a buffer on the stack.
        let length = tags.count + first.count + second.count
        let method2 = cvn != .visa10
        let padded = method2 ? (length + 8) / 8 * 8 : (length == 0 ? 8 : (length + 7) / 8 * 8)
        let mac = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: padded) { buffer in
            let out = buffer.baseAddress!
            var n = 0
            func append(_ part: ArraySlice<UInt8>) {
                part.withUnsafeBufferPointer { bytes in
                    guard let base = bytes.baseAddress else { return }
                    (out + n).initialize(from: base, count: bytes.count)
                    n += bytes.count
                }
            }
            append(tags[...])
            append(first)
            append(second)
            if method2 {
                out[n] = 0x80
                n += 1
            }
            (out + n).initialize(repeating: 0, count: padded - n)
            let message = UnsafeBufferPointer(buffer)
            guard let (left, right) = halves else { return withMasterSchedules { TDESKey.retailMAC(schedules: $0, padded: message) } }
            return TDESKey.retailMAC(left: left, right: right, padded: message)
        }
        return mac.bytes
    }

    /// Recomputes the cryptogram and compares it in constant time.
    public func verify(_ cryptogram: [UInt8], _ data: CryptogramData) throws(EMVError) -> Bool {
        TDESKey.constantTimeEqual(try self.cryptogram(data), cryptogram)
    }

    /// The ARPC for an ARQC. Method 1 (Visa 10, Mastercard): TDES of ARQC ⊕ (ARC‖000000000000);
    /// method 2 (Visa 18/22): MAC algorithm 3 over ARQC‖CSU‖proprietary data, 4 bytes.
    /// `atc` (and for CVN 16/17 nothing more) is needed when the ARPC key is the session key.
    public func arpc(arqc: [UInt8], _ response: ARPCInput, atc: [UInt8]?) throws(EMVError) -> [UInt8] {
        guard arqc.count == 8 else { throw EMVError(field: "arqc", rule: "the ARQC is 8 bytes, got \(arqc.count)") }
        let key: TDESKey
        if cvn.arpcUsesSessionKey {
            guard let atc else {
                throw EMVError(field: "tag 9F36", rule: "missing: \(cvn) keys the ARPC with the session key, which needs the ATC")
            }
            key = try sessionKey(atc: atc, unpredictableNumber: nil)
        } else {
            key = iccMasterKey
        }
        switch (cvn.arpcMethod, response) {
        case (1, .responseCode(let arc)):
            guard arc.count == 2 else { throw EMVError(field: "arc", rule: "the authorisation response code is 2 bytes, got \(arc.count)") }
            var block = DESBlock(arqc)
            block.cblock.0 ^= arc[0]
            block.cblock.1 ^= arc[1]
            key.ede(&block, encrypt: true)
            return block.bytes
        case (2, .cardStatusUpdate(let csu, let proprietary)):
            guard csu.count == 4 else { throw EMVError(field: "csu", rule: "the card status update is 4 bytes, got \(csu.count)") }
            guard proprietary.count <= 8 else {
                throw EMVError(field: "proprietary-data", rule: "proprietary authentication data is 0–8 bytes, got \(proprietary.count)")
            }
            return ISO9797.algorithm3(key: key, data: arqc + csu + proprietary, padding: .method2, length: 4)
        case (1, _):
            throw EMVError(field: "csu", rule: "\(cvn) uses ARPC method 1, which takes an authorisation response code (--arc), not a CSU")
        default:
            throw EMVError(field: "arc", rule: "\(cvn) uses ARPC method 2, which takes a card status update (--csu), not an ARC")
        }
    }

    /// The issuer authentication data (tag 91) the host sends back: ARPC‖ARC for method 1,
    /// ARPC‖CSU‖proprietary data for method 2.
    public func issuerAuthenticationData(arqc: [UInt8], _ response: ARPCInput, atc: [UInt8]?) throws(EMVError) -> [UInt8] {
        let value = try arpc(arqc: arqc, response, atc: atc)
        switch response {
        case .responseCode(let arc): return value + arc
        case .cardStatusUpdate(let csu, let proprietary): return value + csu + proprietary
        }
    }
}

/// A network token's payment cryptogram, as a mobile wallet (Apple Pay, Google Pay) hands it to
/// the merchant with the device PAN and the ECI — in cardbench's own format, since the schemes'
/// are not public (docs/worldline.md, "Mobile wallets"): 20 bytes, base64 in the payment data.
/// Byte 0 is 0xCB (the format), bytes 1–2 a counter, bytes 3–10 an ISO 9797-1 algorithm 3 MAC
/// (method 2 padding) under the card's ICC master key over the DPAN, its expiry, the amount, the
/// currency, the ECI and the counter; the rest zero. The issuer checks it as it checks an ARQC:
/// with the keys it derives for the card, so a cryptogram for another card, amount or currency
/// fails.
public enum NetworkTokenCryptogram {
    public static let length = 20
    public static let format: UInt8 = 0xCB

    /// The MACed data: the DPAN (BCD, F-padded to 10 bytes), expiry YYMM, amount (6 bytes BCD),
    /// currency (2 bytes BCD), the ECI's two digits and the counter.
    static func input(pan: String, expiry: (year: Int, month: Int), amount: Int, currency: Int, eci: String, counter: [UInt8]) -> [UInt8] {
        func bcd(_ digits: String, bytes: Int) -> [UInt8] {
            let padded = digits.count % 2 == 0 ? digits : "0" + digits
            let packed = stride(from: 0, to: padded.count, by: 2).map { i -> UInt8 in
                let s = padded.utf8.dropFirst(i).prefix(2).map { $0 - 0x30 }
                return (s[s.startIndex] << 4) | s[s.index(after: s.startIndex)]
            }
            return [UInt8](repeating: 0, count: max(0, bytes - packed.count)) + packed.suffix(bytes)
        }
        var panBytes = Array(pan.utf8).map { $0 - 0x30 }
        if panBytes.count % 2 == 1 { panBytes.append(0x0F) }
        var packedPAN = stride(from: 0, to: panBytes.count, by: 2).map { (panBytes[$0] << 4) | panBytes[$0 + 1] }
        while packedPAN.count < 10 { packedPAN.append(0xFF) }
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yymm = two(expiry.year % 100) + two(expiry.month)
        return packedPAN + bcd(yymm, bytes: 2) + bcd(String(amount), bytes: 6) + bcd(String(currency), bytes: 2)
            + bcd(String(eci.suffix(2)), bytes: 1) + counter
    }

    /// A cryptogram for a payment of `amount` in `currency` with the card `keys` belong to.
    public static func make(keys: CryptogramKeys, pan: String, expiry: (year: Int, month: Int), amount: Int, currency: Int, eci: String,
                            counter: UInt16) -> [UInt8] {
        let c = [UInt8(counter >> 8), UInt8(counter & 0xFF)]
        let mac = ISO9797.algorithm3(key: keys.iccMasterKey, data: input(pan: pan, expiry: expiry, amount: amount, currency: currency, eci: eci, counter: c),
                                     padding: .method2)
        return [format] + c + mac + [UInt8](repeating: 0, count: length - 3 - mac.count)
    }

    /// Whether `cryptogram` is this card's for this payment.
    public static func verify(_ cryptogram: [UInt8], keys: CryptogramKeys, pan: String, expiry: (year: Int, month: Int), amount: Int, currency: Int,
                              eci: String) -> Bool {
        guard cryptogram.count == length, cryptogram[0] == format, eci.count == 2, eci.allSatisfy(\.isNumber) else { return false }
        let counter = UInt16(cryptogram[1]) << 8 | UInt16(cryptogram[2])
        let expected = make(keys: keys, pan: pan, expiry: expiry, amount: amount, currency: currency, eci: eci, counter: counter)
        var difference: UInt8 = 0
        for (a, b) in zip(expected, cryptogram) { difference |= a ^ b }
        return difference == 0
    }
}
