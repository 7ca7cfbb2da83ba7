import EMV
import Yams

/// A CAPK file (docs/oda.md): the CA public keys a terminal authenticates cards with, each with
/// its SHA-1 check value, which is verified on load so a mistyped modulus never loads.
public enum CAPKFile {
    static let fields: Set<String> = ["rid", "index", "modulus", "exponent", "expiry", "checksum", "name", "source"]

    /// Parses a CAPK file's text; `file` names it in errors.
    public static func parse(yaml: String, file: String) throws(ProfileError) -> [CAPublicKey] {
        let root = try document(yaml, file: file)
        guard let nodes = try root.sequence("keys") else { throw root.error("keys", "is required: a list of CA public keys") }
        try root.rejectUnknown(["keys"])
        var out: [CAPublicKey] = []
        for (i, node) in nodes.enumerated() {
            let m = try YAMLMapping(node, file: file, path: "keys[\(i)]")
            try m.rejectUnknown(fields)
            guard let rid = try m.hex("rid", count: 5...5) else { throw m.error("rid", "is required (5 bytes in hex)") }
            guard let index = try m.hex("index", count: 1...1) else { throw m.error("index", "is required (1 byte in hex)") }
            guard let modulus = try m.hex("modulus", count: 64...248) else { throw m.error("modulus", "is required (512–1984 bits in hex)") }
            guard modulus.first != 0, modulus.last.map({ $0 & 1 == 1 }) == true else {
                throw m.error("modulus", "must be an odd number with no leading zero byte")
            }
            let exponent = try m.hex("exponent", count: 1...3) ?? [0x03]
            guard exponent == [0x03] || exponent == [0x01, 0x00, 0x01] else { throw m.error("exponent", "must be 03 or 010001 (EMV Book 2 §11.2)") }
            guard let expiryText = try m.string("expiry") else { throw m.error("expiry", "is required (YYYY-MM-DD)") }
            guard let expiry = date(expiryText) else { throw m.error("expiry", "must be YYYY-MM-DD, a year 1990–2099, got '\(expiryText)'") }
            let name = try oneLine(m, "name"), source = try oneLine(m, "source")
            let key = CAPublicKey(rid: rid, index: index[0], key: RSAPublicKey(modulus: modulus, exponent: exponent), expiry: expiry,
                                  name: name, source: source)
            guard let checksum = try m.hex("checksum", count: 20...20) else { throw m.error("checksum", "is required (SHA-1 over RID, index, modulus, exponent)") }
            guard checksum == key.checksum else {
                throw m.error("checksum", "is \(Hex.encode(checksum)) but SHA-1(RID ‖ index ‖ modulus ‖ exponent) is \(Hex.encode(key.checksum)): a value was mistyped")
            }
            guard !out.contains(where: { $0.rid == rid && $0.index == index[0] }) else {
                throw m.error("index", "\(Hex.encode(rid)) index \(Hex.encode(index)) is listed twice")
            }
            out.append(key)
        }
        return out
    }

    /// A text field on one line: `cardbench emv capk list` prints it as a column.
    static func oneLine(_ m: YAMLMapping, _ key: String) throws(ProfileError) -> String {
        let text = try m.string(key) ?? ""
        guard text.unicodeScalars.allSatisfy({ $0.properties.generalCategory != .control && $0.properties.generalCategory != .lineSeparator
                                                && $0.properties.generalCategory != .paragraphSeparator }) else {
            throw m.error(key, "must be one line of text, without control characters")
        }
        return text
    }

    /// The YAML text of `keys`, checksums computed.
    public static func render(_ keys: [CAPublicKey], header: String) -> String {
        var out = header.split(separator: "\n", omittingEmptySubsequences: false).map { "# \($0)".trimmingTrailingSpaces() }.joined(separator: "\n")
        out += "\nkeys:\n"
        for key in keys {
            out += "  - rid: \"\(Hex.encode(key.rid))\"\n    index: \"\(Hex.encode([key.index]))\"\n"
            out += "    name: \(YAMLText.quoted(key.name))\n    source: \(YAMLText.quoted(key.source))\n"
            out += "    expiry: \"\(key.expiry)\"\n    exponent: \"\(Hex.encode(key.key.exponent))\"\n"
            out += "    modulus: \"\(Hex.encode(key.key.modulus))\"\n    checksum: \"\(Hex.encode(key.checksum))\"\n"
        }
        return out
    }

    /// A `YYYY-MM-DD` date, as the files give expiries.
    public static func date(_ text: String) -> ODADate? {
        let parts = text.split(separator: "-")
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2, let y = Int(parts[0]), let m = Int(parts[1]),
              let d = Int(parts[2]), (1990...2099).contains(y), (1...12).contains(m), (1...31).contains(d) else { return nil }
        return ODADate(year: y, month: m, day: d)
    }

    static func document(_ yaml: String, file: String) throws(ProfileError) -> YAMLMapping {
        let node: Node?
        do { node = try Yams.compose(yaml: yaml) } catch {
            throw ProfileError(file: file, field: "(document)", reason: "not valid YAML: \(String(describing: error).split(separator: "\n").first ?? "")")
        }
        guard let node else { throw ProfileError(file: file, field: "(document)", reason: "is empty") }
        return try YAMLMapping(node, file: file, path: "")
    }
}

/// A certification authority's private keys: the bench CA cardbench signs its virtual cards'
/// issuer certificates with (test material kept in the repository, Scenarios/ca/bench-ca.yaml).
public struct CertificationAuthority: Sendable {
    public struct Key: Sendable {
        public let index: UInt8
        public let key: RSAPrivateKey
        public let expiry: ODADate

        public init(index: UInt8, key: RSAPrivateKey, expiry: ODADate) {
            self.index = index
            self.key = key
            self.expiry = expiry
        }
    }

    public let name: String
    /// The RIDs its keys are filed under in a terminal's CAPK file.
    public let rids: [[UInt8]]
    public let keys: [Key]

    public init(name: String, rids: [[UInt8]], keys: [Key]) {
        self.name = name
        self.rids = rids
        self.keys = keys
    }

    public func key(index: UInt8) -> Key? { keys.first { $0.index == index } }

    /// The CAPK entries a terminal needs: every key under every RID.
    public var publicKeys: [CAPublicKey] {
        rids.flatMap { rid in
            keys.map { k in
                CAPublicKey(rid: rid, index: k.index, key: k.key.publicKey, expiry: k.expiry, name: "\(name) \(Hex.encode([k.index])) (\(k.key.publicKey.bits)-bit)",
                            source: "Scenarios/ca/bench-ca.yaml (cardbench test material, private key published)")
            }
        }
    }

    public static func parse(yaml: String, file: String) throws(ProfileError) -> CertificationAuthority {
        let root = try CAPKFile.document(yaml, file: file)
        try root.rejectUnknown(["name", "rids", "keys"])
        let name = try root.string("name") ?? "cardbench bench CA"
        guard let ridTexts = try root.stringList("rids"), !ridTexts.isEmpty else { throw root.error("rids", "is required: the RIDs to file the keys under") }
        var rids: [[UInt8]] = []
        for (i, text) in ridTexts.enumerated() {
            guard let rid = try? Hex.decode(text), rid.count == 5 else { throw root.error("rids[\(i)]", "must be 5 bytes in hex, got '\(text)'") }
            rids.append(rid)
        }
        guard let nodes = try root.sequence("keys"), !nodes.isEmpty else { throw root.error("keys", "is required") }
        var keys: [Key] = []
        for (i, node) in nodes.enumerated() {
            let m = try YAMLMapping(node, file: file, path: "keys[\(i)]")
            try m.rejectUnknown(["index", "modulus", "publicExponent", "privateExponent", "expiry"])
            guard let index = try m.hex("index", count: 1...1) else { throw m.error("index", "is required") }
            guard let modulus = try m.hex("modulus", count: 64...248) else { throw m.error("modulus", "is required") }
            guard let d = try m.hex("privateExponent", count: 64...248) else { throw m.error("privateExponent", "is required") }
            let e = try m.hex("publicExponent", count: 1...3) ?? [0x03]
            guard let expiryText = try m.string("expiry"), let expiry = CAPKFile.date(expiryText) else { throw m.error("expiry", "is required (YYYY-MM-DD)") }
            let key = RSAPrivateKey(modulus: modulus, publicExponent: e, privateExponent: d)
            // A key whose halves do not match would sign certificates no terminal recovers.
            let probe = [UInt8](repeating: 0x5A, count: modulus.count - 1) + [0x01]
            guard let signed = try? key.sign(probe), key.publicKey.recover(signed) == probe else {
                throw m.error("privateExponent", "does not match the modulus and public exponent")
            }
            keys.append(Key(index: index[0], key: key, expiry: expiry))
        }
        return CertificationAuthority(name: name, rids: rids, keys: keys)
    }

    public func render(header: String) -> String {
        var out = header.split(separator: "\n", omittingEmptySubsequences: false).map { "# \($0)".trimmingTrailingSpaces() }.joined(separator: "\n")
        out += "\nname: \(YAMLText.quoted(name))\nrids: [\(rids.map { "\"\(Hex.encode($0))\"" }.joined(separator: ", "))]\nkeys:\n"
        for k in keys {
            out += "  - index: \"\(Hex.encode([k.index]))\"\n    expiry: \"\(k.expiry)\"\n    publicExponent: \"\(Hex.encode(k.key.publicExponent))\"\n"
            out += "    modulus: \"\(Hex.encode(k.key.modulus))\"\n    privateExponent: \"\(Hex.encode(k.key.privateExponent))\"\n"
        }
        return out
    }
}

extension String {
    func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
