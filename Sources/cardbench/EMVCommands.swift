import ArgumentParser
import EMV
import Foundation

struct EMVCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emv",
        abstract: "Decode TLV and ATRs; compute cryptograms, ARPCs and PIN blocks; offline data authentication's keys and certificates.",
        subcommands: [TLVCommand.self, ARQCCommand.self, ARPCCommand.self, PINBlockCommand.self, ATRCommand.self, CACommand.self,
                      CAPKCommand.self, ODACommand.self, RecordsCommand.self]
    )
}

struct TLVCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tlv", abstract: "Decode BER-TLV into a tree with EMV tag names.")

    @Argument(help: "The TLV data in hex (spaces allowed).")
    var hex: String

    @Flag(help: "Print JSON instead of a tree.")
    var json = false

    func run() throws {
        let items = try TLV.parse(Hex.decode(hex, field: "hex"))
        if json {
            try printJSON(items.map(\.jsonObject))
        } else {
            for line in items.flatMap({ $0.treeLines() }) { print(line) }
        }
    }
}

/// The options every cryptogram command shares: which CVN, which issuer key, which card.
struct CardKeyOptions: ParsableArguments {
    @Option(help: "Cryptogram version: 10, 18, 22 (Visa) or 16, 17, 20, 21 (Mastercard).")
    var cvn: String

    @Option(help: "Issuer master key for application cryptograms, 32 hex digits.")
    var imk: String

    @Option(help: "Primary account number, 12–19 digits.")
    var pan: String

    @Option(help: "PAN sequence number, 2 digits.")
    var psn: String

    @Option(name: .customLong("tag"), help: "A tag value as TAG=HEX, e.g. 9F02=000000001000. Repeat for each tag.")
    var tags: [String] = []

    func keys() throws -> CryptogramKeys {
        guard let number = Int(cvn) else { throw EMVError(field: "cvn", rule: "must be a number: 10, 18, 22, 16, 17, 20 or 21, got '\(cvn)'") }
        let cvn = try CVN(number: number)
        let imk = try TDESKey(Hex.decode(imk, field: "imk", count: 16), field: "imk")
        return try CryptogramKeys(cvn: cvn, issuerMasterKey: imk, pan: pan, psn: psn)
    }

    func tagValues() throws -> [EMVTag: [UInt8]] {
        var out: [EMVTag: [UInt8]] = [:]
        for item in tags {
            guard let eq = item.firstIndex(of: "=") else {
                throw EMVError(field: "tag", rule: "must be TAG=HEX, e.g. 9F02=000000001000, got '\(item)'")
            }
            let tag = try EMVTag(hex: String(item[..<eq]), field: "tag")
            guard out[tag] == nil else { throw EMVError(field: "tag \(tag)", rule: "given more than once") }
            out[tag] = try Hex.decode(String(item[item.index(after: eq)...]), field: "tag \(tag)")
        }
        return out
    }
}

struct ARQCCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "arqc",
        abstract: "Compute an application cryptogram (ARQC/TC/AAC) for a CVN.",
        discussion: """
        Every CVN takes 9F02 9F03 9F1A 95 5F2A 9A 9C 9F37 82 9F36 as --tag. Visa 10 also needs the CVR \
        (--cvr, 4 bytes, or an --iad holding it); Visa 18/22 the whole IAD (--iad or --tag 9F10=); \
        Mastercard the CVR (6 bytes), and 17/21 also --counters (8 bytes). The cryptogram is printed \
        alone on the first line.
        """
    )

    @OptionGroup var card: CardKeyOptions

    @Option(help: "Card verification results in hex.")
    var cvr: String?

    @Option(help: "Issuer application data (9F10) in hex.")
    var iad: String?

    @Option(help: "Mastercard CVN 17/21 counters, 8 bytes in hex.")
    var counters: String?

    @Flag(help: "Print {\"arqc\", \"iccMasterKey\", \"sessionKey\"} as JSON.")
    var json = false

    func run() throws {
        let keys = try card.keys()
        let data = CryptogramData(
            tags: try card.tagValues(),
            cvr: try cvr.map { try Hex.decode($0, field: "cvr") },
            issuerApplicationData: try iad.map { try Hex.decode($0, field: "iad") },
            counters: try counters.map { try Hex.decode($0, field: "counters") }
        )
        let (arqc, sessionKey) = try keys.generate(data)
        if json {
            try printJSON(["arqc": Hex.encode(arqc), "iccMasterKey": Hex.encode(keys.iccMasterKey.clearBytes),
                           "sessionKey": Hex.encode(sessionKey.clearBytes)])
        } else {
            print(Hex.encode(arqc))
            print("\(keys.cvn): ICC master key KCV \(Hex.encode(keys.iccMasterKey.checkValue)), session key KCV \(Hex.encode(sessionKey.checkValue))")
        }
    }
}

struct ARPCCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "arpc",
        abstract: "Compute the issuer's ARPC for an ARQC.",
        discussion: """
        Method 1 (Visa 10, Mastercard) takes --arc (2 bytes); method 2 (Visa 18/22) takes --csu (4 bytes). \
        CVNs keyed with the session key need --tag 9F36=<ATC>. The ARPC is printed alone on the first \
        line; the second line is the issuer authentication data (tag 91) to send to the card.
        """
    )

    @OptionGroup var card: CardKeyOptions

    @Option(help: "The ARQC, 16 hex digits.")
    var arqc: String

    @Option(help: "Authorisation response code, 2 bytes in hex (ARPC method 1).")
    var arc: String?

    @Option(help: "Card status update, 4 bytes in hex (ARPC method 2).")
    var csu: String?

    @Option(name: .customLong("proprietary-data"), help: "Proprietary authentication data, 0–8 bytes in hex (method 2).")
    var proprietaryData: String?

    func run() throws {
        let keys = try card.keys()
        let tags = try card.tagValues()
        let arqcBytes = try Hex.decode(arqc, field: "arqc", count: 8)
        let input: ARPCInput
        switch (arc, csu) {
        case (let arc?, nil):
            input = .responseCode(try Hex.decode(arc, field: "arc"))
        case (nil, let csu?):
            input = .cardStatusUpdate(try Hex.decode(csu, field: "csu"),
                                      proprietaryData: try proprietaryData.map { try Hex.decode($0, field: "proprietary-data") } ?? [])
        case (nil, nil):
            throw EMVError(field: keys.cvn.arpcMethod == 1 ? "arc" : "csu",
                           rule: "missing: \(keys.cvn) uses ARPC method \(keys.cvn.arpcMethod)")
        default:
            throw EMVError(field: "arc", rule: "give --arc or --csu, not both")
        }
        let value = try keys.arpc(arqc: arqcBytes, input, atc: tags[0x9F36])
        print(Hex.encode(value))
        print("91: \(Hex.encode(try keys.issuerAuthenticationData(arqc: arqcBytes, input, atc: tags[0x9F36])))")
    }
}

struct PINBlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinblock",
        abstract: "Build an ISO 9564 PIN block: format 0 (clear, or under a TDES --key) or format 4 (AES --key).",
        discussion: "The block is printed in hex; the PIN itself is never printed."
    )

    @Option(help: "0 or 4.")
    var format: String

    @Option(help: "The PIN, 4–12 digits.")
    var pin: String

    @Option(help: "The PAN, 12–19 digits.")
    var pan: String

    @Option(help: "Format 0: optional TDES key (32 or 48 hex digits). Format 4: AES key (32, 48 or 64 hex digits).")
    var key: String?

    func run() throws {
        switch format {
        case "0":
            if let key {
                print(Hex.encode(try PINBlock.format0(pin: pin, pan: pan, key: TDESKey(hex: key, field: "key"))))
            } else {
                print(Hex.encode(try PINBlock.format0(pin: pin, pan: pan)))
            }
        case "4":
            guard let key else { throw EMVError(field: "key", rule: "missing: format 4 PIN blocks are enciphered with an AES key") }
            print(Hex.encode(try PINBlock.format4(pin: pin, pan: pan, key: AESKey(hex: key, field: "key"))))
        default:
            throw EMVError(field: "format", rule: "must be 0 or 4, got '\(format)'")
        }
    }
}

struct ATRCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "atr", abstract: "Explain an Answer To Reset (ISO 7816-3).")

    @Argument(help: "The ATR in hex (spaces allowed).")
    var hex: String

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let atr = try ATR.parse(Hex.decode(hex, field: "hex"))
        if json {
            try printJSON(atr)
        } else {
            for line in atr.summary { print(line) }
        }
    }
}
