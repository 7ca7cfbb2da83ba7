import ArgumentParser
import Daemon
import Defaults
import EMV
import Foundation
import Terminal
import VirtualCard

/// `cardbench emv ca`: the bench certification authority and the certificates it signs.
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "The bench certification authority: its keys, its CAPK entries, and personalising card profiles for SDA, DDA and CDA.",
        subcommands: [CAInitCommand.self, CAExportCommand.self, CAPersonaliseCommand.self]
    )

    static let defaultFile = "Scenarios/ca/bench-ca.yaml"

    static func load(_ path: String) throws -> CertificationAuthority {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw CLIError(message: "--ca: cannot read '\(path)': \(error.localizedDescription)", code: 2)
        }
        do { return try CertificationAuthority.parse(yaml: text, file: path) } catch { throw CLIError(message: "--ca: \(error)", code: 2) }
    }
}

/// The RIDs the bench CA's keys are filed under: the schemes whose AIDs cardbench's profiles use
/// (Visa, Mastercard, American Express, JCB, Discover, Carnet).
private let schemeRIDs = ["A000000003", "A000000004", "A000000025", "A000000065", "A000000152", "A000000672"]

struct CAInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Generate a bench CA's RSA keys (libcrypto) into a new file: its private keys are test material.")

    @Option(help: "The file to write; it must not exist.")
    var out: String

    @Option(help: "Key index and size as INDEX:BITS (hex index, bits a multiple of 8 up to 1984); repeat for more.")
    var key: [String] = ["B0:1984", "B1:1408", "B2:1984"]

    @Option(help: "The last day the keys may be used, YYYY-MM-DD.")
    var expiry = "2035-12-31"

    func run() throws {
        guard !FileManager.default.fileExists(atPath: out) else { throw CLIError(message: "--out: \(out) exists; a CA's keys are never overwritten", code: 2) }
        guard let date = CAPKFile.date(expiry) else { throw CLIError(message: "--expiry: must be YYYY-MM-DD, got '\(expiry)'", code: 2) }
        var keys: [CertificationAuthority.Key] = []
        for spec in key {
            let parts = spec.split(separator: ":")
            guard parts.count == 2, let index = try? Hex.decode(String(parts[0])), index.count == 1, let bits = Int(parts[1]), bits <= 1984 else {
                throw CLIError(message: "--key: must be INDEX:BITS, e.g. B0:1984, got '\(spec)'", code: 2)
            }
            keys.append(.init(index: index[0], key: try RSAPrivateKey.generate(bits: bits, exponent: 3), expiry: date))
        }
        let ca = CertificationAuthority(name: "cardbench bench CA", rids: try schemeRIDs.map { try Hex.decode($0) }, keys: keys)
        try ca.render(header: """
            cardbench's bench certification authority (docs/oda.md). TEST MATERIAL: these private keys are
            published on purpose, so anyone can sign cards a cardbench terminal authenticates. Never use them
            for anything but tests. Made by `cardbench emv ca init`; the public halves are in Scenarios/ca/capk.yaml.
            """).write(toFile: out, atomically: true, encoding: .utf8)
        print("wrote \(out): \(keys.map { "\(Hex.encode([$0.index])) (\($0.key.publicKey.bits)-bit)" }.joined(separator: ", "))")
    }

}

struct CAExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capk",
        abstract: "Print a CAPK file: the bench CA's public keys under every scheme RID, then the keys of other CAPK files (--merge).")

    @Option(help: "The bench CA file.")
    var ca = CACommand.defaultFile

    @Option(help: "A CAPK file whose keys follow the bench CA's (the schemes' published test keys); repeat for more.")
    var merge: [String] = []

    func run() throws {
        let authority = try CACommand.load(ca)
        var keys = authority.publicKeys
        do throws(ConfigurationError) { keys += try CAPKStore.load(merge, key: "--merge") } catch {
            throw CLIError(message: "\(error.key): \(error.rule)", code: 2)
        }
        print(CAPKFile.render(keys, header: """
            CA public keys for offline data authentication (docs/oda.md), each with its SHA-1 check value over
            RID, index, modulus and exponent (EMV Book 2 §11.2.2), verified when the file is loaded.
            The bench CA's keys (index B0–B2, under every scheme RID) sign cardbench's virtual cards; the schemes'
            published TEST keys let physical test cards in a PC/SC or serial reader authenticate.
            Made by `cardbench emv ca capk --merge <scheme keys>`.
            """), terminator: "")
    }
}

struct CAPersonaliseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "personalise",
        abstract: "Give a card profile issuer and ICC keys and certificates (and signed static data) under the bench CA, rewriting its oda: block.",
        discussion: """
            New issuer and ICC keys are generated each time (libcrypto); the certificates cover the records the \
            profile marks for offline data authentication, so personalise again after changing one of them. \
            --fault spoils the result in one named way, for the faulty cards of Scenarios/oda/.
            """)

    @Argument(help: "The card profile (YAML) to rewrite.")
    var profile: String

    @Option(help: "Methods the card offers, comma-separated: sda, dda, cda.")
    var methods = "sda,dda,cda"

    @Option(help: "The bench CA file.")
    var ca = CACommand.defaultFile

    @Option(name: .customLong("ca-index"), help: "The bench CA key that signs the issuer certificate (hex).")
    var caIndex = "B0"

    @Option(name: .customLong("issuer-bits"), help: "Issuer key size, a multiple of 8 (realistic: 1152–1984).")
    var issuerBits = 1408

    @Option(name: .customLong("icc-bits"), help: "ICC key size, a multiple of 8 (realistic: 1024–1408).")
    var iccBits = 1024

    @Option(help: "Public exponent of the issuer and ICC keys: 3 or 65537.")
    var exponent: UInt32 = 3

    @Option(name: .customLong("issuer-expiry"), help: "Issuer certificate expiry MMYY (default: the card's expiry month).")
    var issuerExpiry: String?

    @Option(name: .customLong("icc-expiry"), help: "ICC certificate expiry MMYY (default: the card's expiry month).")
    var iccExpiry: String?

    @Option(help: "DDOL (9F49) in hex, or 'none' for a card relying on the terminal's default.")
    var ddol = "9F3704"

    @Option(help: "A deliberate defect: \(ODAPersonaliser.Fault.allCases.map(\.rawValue).joined(separator: ", ")); repeat for more.")
    var fault: [String] = []

    @Flag(help: "Print the new profile instead of rewriting the file.")
    var stdout = false

    func run() throws {
        var options = ODAPersonaliser.Options()
        options.methods = []
        for name in methods.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let m = ODAPersonalisation.Method(rawValue: name) else { throw CLIError(message: "--methods: \(name) is not sda, dda or cda", code: 2) }
            options.methods.append(m)
        }
        guard !options.methods.isEmpty else { throw CLIError(message: "--methods: name at least one of sda, dda, cda", code: 2) }
        options.methods.sort()
        guard let index = try? Hex.decode(caIndex), index.count == 1 else { throw CLIError(message: "--ca-index: must be one byte in hex, e.g. B0", code: 2) }
        options.caIndex = index[0]
        options.issuerBits = issuerBits
        options.iccBits = iccBits
        options.exponent = exponent
        options.issuerExpiry = issuerExpiry
        options.iccExpiry = iccExpiry
        if ddol.lowercased() == "none" { options.ddol = nil } else {
            guard let bytes = try? Hex.decode(ddol), (try? DOL.parse(bytes, field: "ddol")) != nil else {
                throw CLIError(message: "--ddol: must be a DOL in hex (e.g. 9F3704) or none", code: 2)
            }
            options.ddol = bytes
        }
        for name in fault {
            guard let f = ODAPersonaliser.Fault(rawValue: name) else {
                throw CLIError(message: "--fault: must be one of \(ODAPersonaliser.Fault.allCases.map(\.rawValue).joined(separator: ", ")), got '\(name)'", code: 2)
            }
            options.faults.append(f)
        }
        let authority = try CACommand.load(ca)
        let text: String
        do { text = try String(contentsOfFile: profile, encoding: .utf8) } catch {
            throw CLIError(message: "profile: cannot read '\(profile)': \(error.localizedDescription)", code: 2)
        }
        let result: String
        do { result = try ODAPersonaliser(ca: authority).personalise(yaml: text, file: profile, options: options) } catch {
            throw CLIError(message: "\(error)", code: 2)
        }
        if stdout {
            print(result, terminator: "")
        } else {
            try result.write(toFile: profile, atomically: true, encoding: .utf8)
            print("personalised \(profile): \(options.methods.map { $0.rawValue.uppercased() }.joined(separator: ", ")) under CA \(caIndex)"
                  + (options.faults.isEmpty ? "" : ", faults: \(options.faults.map(\.rawValue).joined(separator: ", "))"))
        }
    }
}

/// `cardbench emv capk`: the CA public keys a terminal holds.
struct CAPKCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "capk", abstract: "The CA public keys of CAPK files.",
                                                    subcommands: [CAPKListCommand.self])
}

struct CAPKListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the keys of CAPK files, each check value verified (a file that fails to load names the key and field).")

    @Option(help: "CAPK file; repeat for more (default: the embedded keys, the same as \(CAPKStore.defaultFile)).")
    var capk: [String] = []

    @Option(help: "Only keys under this RID (hex).")
    var rid: String?

    @Flag(help: "Print JSON.")
    var json = false

    struct Row: Encodable {
        let rid: String, index: String, bits: Int, exponent: String, expiry: String, checksum: String, name: String, source: String
    }

    func run() throws {
        let keys: [CAPublicKey]
        do throws(ConfigurationError) { keys = try capk.isEmpty ? CAPKStore.embedded() : CAPKStore.load(capk, key: "--capk") } catch {
            throw CLIError(message: "\(error.key): \(error.rule)", code: 2)
        }
        let rows = keys.filter { rid == nil || Hex.encode($0.rid) == rid!.uppercased() }.map {
            Row(rid: Hex.encode($0.rid), index: Hex.encode([$0.index]), bits: $0.key.bits, exponent: Hex.encode($0.key.exponent),
                expiry: $0.expiry.description, checksum: Hex.encode($0.checksum), name: $0.name, source: $0.source)
        }
        if json { return try printJSON(rows) }
        print("RID         IDX  BITS  EXP     EXPIRY      CHECKSUM (SHA-1, verified)                 NAME")
        for r in rows {
            print("\(r.rid)  \(r.index)   \(String(r.bits).padding(toLength: 4, withPad: " ", startingAt: 0))  \(r.exponent.padding(toLength: 6, withPad: " ", startingAt: 0))  \(r.expiry)  \(r.checksum)   \(r.name)")
        }
        print("\(rows.count) keys")
    }
}

/// `cardbench emv oda`: offline data authentication's recoveries, offline, from a card's data.
struct ODACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "oda",
        abstract: "Recover and check a card's issuer and ICC certificates and signatures from its TLV data and a CAPK file.",
        discussion: """
            Give the card's data as it answered: --record for each record the AFL marks for offline data \
            authentication (the static data is computed from them, Book 2 §5.4), --tlv for anything else (other \
            records, a format 2 INTERNAL AUTHENTICATE response with 9F4B); --aip the AIP. --signature and \
            --ddol-data are what INTERNAL AUTHENTICATE returned and was sent, to check DDA's signature. Or take \
            all of it from a virtual card: --card. CDA's signature needs the transaction's hash input: see a \
            transaction's trace instead.
            """)

    @Option(help: "CAPK file, added to the embedded keys; repeat for more.")
    var capk: [String] = []

    @Option(help: "The application's AID (its first 5 bytes are the RID), hex.")
    var aid: String?

    @Option(help: "A record marked for ODA as READ RECORD returned it (70…), hex; repeat, in AFL order. SFI 1–10 assumed; write SFI:HEX otherwise.")
    var record: [String] = []

    @Option(help: "Other TLV data from the card (records, GPO or INTERNAL AUTHENTICATE responses), hex; repeat.")
    var tlv: [String] = []

    @Option(help: "The AIP (82), when no --tlv holds it.")
    var aip: String?

    @Option(help: "The signed dynamic application data INTERNAL AUTHENTICATE returned (the value of 80, or of 9F4B), hex.")
    var signature: String?

    @Option(name: .customLong("ddol-data"), help: "The DDOL data sent in INTERNAL AUTHENTICATE, to check the signature.")
    var ddolData: String?

    @Option(help: "A revoked issuer certificate, RID:INDEX:SERIAL in hex; repeat for more.")
    var revoked: [String] = []

    @Option(help: "Transaction date YYMMDD for the expiry checks (default: today).")
    var date: String?

    @Option(help: "A virtual card profile to take the data from instead (its first application unless --aid).")
    var card: String?

    func run() throws {
        let keys: [CAPublicKey], revocations: [RevokedCertificate]
        do throws(ConfigurationError) {
            keys = try CAPKStore.loadWithEmbedded(capk, key: "--capk")
            revocations = try CAPKStore.revoked(revoked, key: "--revoked")
        } catch {
            throw CLIError(message: "\(error.key): \(error.rule)", code: 2)
        }
        var data: [EMVTag: [UInt8]] = [:]
        var records: [(sfi: Int, record: [UInt8])] = []
        var aidBytes = try aid.map { try Hex.decode($0, field: "aid") }
        if let card {
            let profile = try loadCardProfile(card, option: "--card")
            guard !profile.applications.isEmpty else { throw CLIError(message: "--card: \(profile.name) is a stripe-only card, with no chip application", code: 2) }
            let virtual = try VirtualCard(profile: profile)
            let index = aidBytes.flatMap { a in profile.applications.firstIndex { $0.aid == a } } ?? 0
            let app = profile.applications[index]
            aidBytes = app.aid
            data[0x82] = app.aip.bytes
            for r in virtual.storedRecords(application: index) {
                if r.offlineAuthentication { records.append((r.sfi, r.bytes)) }
                for (tag, value) in try TLV.parse(r.bytes).primitives() where data[tag] == nil { data[tag] = value }
            }
        }
        for text in record {
            let parts = text.split(separator: ":")
            let sfi = parts.count == 2 ? Int(parts[0]) ?? 0 : 1
            guard (1...30).contains(sfi) else { throw CLIError(message: "--record: SFI must be 1–30 in SFI:HEX", code: 2) }
            let bytes = try Hex.decode(String(parts.last!), field: "record")
            records.append((sfi, bytes))
            for (tag, value) in try TLV.parse(bytes).primitives() where data[tag] == nil { data[tag] = value }
        }
        for text in tlv {
            for (tag, value) in try TLV.parse(Hex.decode(text, field: "tlv")).primitives() where data[tag] == nil { data[tag] = value }
        }
        if let aip { data[0x82] = try Hex.decode(aip, field: "aip", count: 2) }
        guard let aidBytes, aidBytes.count >= 5 else { throw CLIError(message: "--aid: required (or --card): the RID picks the CA key", code: 2) }
        guard let pan = data[0x5A].map({ Hex.encode($0).filter { $0 != "F" } }) else { throw CLIError(message: "the data holds no PAN (5A): give its record", code: 2) }
        let today: ODADate
        if let date {
            guard let d = try? Hex.decode(date), let parsed = ODADate(bcd: d) else { throw CLIError(message: "--date: must be YYMMDD", code: 2) }
            today = parsed
        } else {
            let c = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date())
            today = ODADate(year: c.year!, month: c.month!, day: c.day!)
        }
        var failed = false
        func step(_ name: String, _ body: () throws(ODAFailure) -> [String]) {
            do throws(ODAFailure) {
                let lines = try body()
                print("✓ \(name)")
                for l in lines { print("    \(l)") }
            } catch {
                failed = true
                print("✗ \(name): \(error)")
            }
        }
        print("PAN \(PAN.masked(pan))  RID \(Hex.encode(aidBytes.prefix(5)))  date \(today)  AIP \(data[0x82].map(Hex.encode) ?? "?")")
        var staticData: [UInt8] = []
        step("static data to be authenticated") { () throws(ODAFailure) -> [String] in
            staticData = try ODA.staticData(records: records, aip: data[0x82] ?? [], tagList: data[0x9F4A])
            return ["\(staticData.count) bytes from \(records.count) records" + (data[0x9F4A] != nil ? " and the AIP (9F4A)" : "")]
        }
        guard let index = data[0x8F]?.first else { throw CLIError(message: "the data holds no CA public key index (8F)", code: 1) }
        guard let ca = keys.first(where: { $0.rid == Array(aidBytes.prefix(5)) && $0.index == index }) else {
            throw CLIError(message: "no CA key \(Hex.encode(aidBytes.prefix(5))) index \(Hex.encode([index])) in the CAPK files", code: 1)
        }
        print("CA key \(Hex.encode(ca.rid)) \(Hex.encode([ca.index])): \(ca.name.isEmpty ? "unnamed" : ca.name)"
              + (ca.name.contains("-bit") ? "" : ", \(ca.key.bits)-bit") + ", expires \(ca.expiry)")
        var issuer: IssuerCertificate?
        step("issuer public key certificate (90)") { () throws(ODAFailure) -> [String] in
            guard let cert = data[0x90], let e = data[0x9F32] else { throw ODAFailure("issuer certificate", "no 90 or 9F32 in the data", missingData: true) }
            let c = try ODA.recoverIssuerKey(certificate: cert, remainder: data[0x92], exponent: e, ca: ca, pan: pan, today: today, revoked: revocations)
            issuer = c
            return ["issuer identifier \(c.issuerIdentifier), serial \(Hex.encode(c.serial)), expires \(c.expiry) (MMYY)",
                    "issuer key \(c.key.bits)-bit, exponent \(Hex.encode(c.key.exponent))"]
        }
        guard let issuer else { throw ExitCode(1) }
        if let ssad = data[0x93] {
            step("signed static application data (93)") { () throws(ODAFailure) -> [String] in
                ["data authentication code \(Hex.encode(try ODA.verifyStaticSignature(ssad, issuer: issuer.key, staticData: staticData)))"]
            }
        }
        if let cert = data[0x9F46], let e = data[0x9F47] {
            var icc: ICCCertificate?
            step("ICC public key certificate (9F46)") { () throws(ODAFailure) -> [String] in
                let c = try ODA.recoverICCKey(certificate: cert, remainder: data[0x9F48], exponent: e, issuer: issuer.key, pan: pan,
                                              staticData: staticData, today: today)
                icc = c
                return ["PAN \(PAN.masked(c.pan)), serial \(Hex.encode(c.serial)), expires \(c.expiry) (MMYY)", "ICC key \(c.key.bits)-bit, exponent \(Hex.encode(c.key.exponent))"]
            }
            if let icc, let sdad = try signature.map({ try Hex.decode($0, field: "signature") }) ?? data[0x9F4B] {
                guard let ddolData else { throw CLIError(message: "--ddol-data: needed to check the signed dynamic application data", code: 2) }
                let terminal = try Hex.decode(ddolData, field: "ddol-data")
                step("signed dynamic application data (9F4B)") { () throws(ODAFailure) -> [String] in
                    let dynamic = try ODA.verifyDynamicSignature(sdad, icc: icc.key, terminalData: terminal)
                    return ["ICC dynamic data \(Hex.encode(dynamic))", "ICC dynamic number \(Hex.encode(try ODA.dynamicNumber(dynamic)))"]
                }
            }
        }
        if failed { throw ExitCode(1) }
    }
}

/// `cardbench emv records`: a virtual card's records as the card stores them, for oracles and
/// engineers checking what its certificates cover.
struct RecordsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "records", abstract: "Print a virtual card's records, which are signed for ODA, and its static data to be authenticated.")

    @Option(help: "Card profile (YAML).")
    var card: String

    @Option(help: "The application (AID, hex); default: the first.")
    var aid: String?

    @Flag(help: "Print JSON.")
    var json = false

    struct Record: Encodable { let sfi: Int, record: Int, oda: Bool, hex: String }
    struct Report: Encodable { let aid: String, aip: String, records: [Record], staticData: String?, staticDataError: String? }

    func run() throws {
        let profile = try loadCardProfile(card, option: "--card")
        let card = try VirtualCard(profile: profile)
        let wanted = try aid.map { try Hex.decode($0, field: "aid") }
        guard !profile.applications.isEmpty else { throw CLIError(message: "\(profile.name): a stripe-only card has no chip application", code: 2) }
        guard let index = wanted.map({ w in profile.applications.firstIndex { $0.aid == w } }) ?? 0 else {
            throw CLIError(message: "--aid: the card has no application \(aid!)", code: 2)
        }
        let records = card.storedRecords(application: index).map {
            Record(sfi: $0.sfi, record: $0.record, oda: $0.offlineAuthentication, hex: TraceRedaction.masking(pan: profile.pan, in: Hex.encode($0.bytes)))
        }
        var staticData: String?, problem: String?
        do throws(ODAFailure) { staticData = TraceRedaction.masking(pan: profile.pan, in: Hex.encode(try card.staticDataToBeAuthenticated(application: index))) } catch {
            problem = error.description
        }
        let report = Report(aid: Hex.encode(profile.applications[index].aid), aip: Hex.encode(profile.applications[index].aip.bytes), records: records,
                            staticData: staticData, staticDataError: problem)
        if json { return try printJSON(report) }
        print("application \(report.aid)  AIP \(report.aip)")
        for r in records { print("SFI \(r.sfi) record \(r.record)\(r.oda ? " (ODA)" : "")  \(r.hex)") }
        print("static data to be authenticated: \(staticData ?? problem ?? "")")
    }
}
