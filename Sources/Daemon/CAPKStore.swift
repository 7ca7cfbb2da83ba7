import Defaults
import EMV
import Foundation
import Terminal
import VirtualCard

/// Reads CAPK files and revocation entries into a terminal's offline data authentication
/// settings: the file I/O behind `emv.capk`, `terminal.<name>.capk` and `cardbench --capk`.
public enum CAPKStore {
    /// The CAPK file shipped with cardbench (the bench CA's keys and the schemes' published test
    /// keys), as it sits in the source tree; the binaries carry it embedded (`embedded()`).
    public static let defaultFile = "Scenarios/ca/capk.yaml"

    /// The embedded CAPK file's keys.
    public static func embedded() throws(ConfigurationError) -> [CAPublicKey] {
        do { return try CAPKFile.parse(yaml: EmbeddedDefaults.capk, file: EmbeddedDefaults.capkName) } catch {
            throw ConfigurationError(key: "emv.capk", rule: "the embedded CAPK file: \(error)")
        }
    }

    /// The embedded keys and those of `paths`: a file's key replaces an embedded one of the same
    /// RID and index (a scheme's key updated on the bench), while two files giving the same key
    /// stay an error.
    public static func loadWithEmbedded(_ paths: [String], key: String) throws(ConfigurationError) -> [CAPublicKey] {
        let files = try load(paths, key: key)
        return try embedded().filter { e in !files.contains { $0.rid == e.rid && $0.index == e.index } } + files
    }

    /// The keys of every file, in order; a RID and index given twice is an error naming both files.
    public static func load(_ paths: [String], key: String) throws(ConfigurationError) -> [CAPublicKey] {
        var out: [(CAPublicKey, String)] = []
        for path in paths {
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw ConfigurationError(key: key, rule: "cannot read \(path): \(error.localizedDescription)")
            }
            let keys: [CAPublicKey]
            do { keys = try CAPKFile.parse(yaml: text, file: path) } catch { throw ConfigurationError(key: key, rule: "\(error)") }
            for k in keys {
                if let (_, other) = out.first(where: { $0.0.rid == k.rid && $0.0.index == k.index }) {
                    throw ConfigurationError(key: key, rule: "\(Hex.encode(k.rid)) index \(Hex.encode([k.index])) is in both \(other) and \(path)")
                }
                out.append((k, path))
            }
        }
        return out.map(\.0)
    }

    /// Revocation entries written `RID:INDEX:SERIAL` (hex: 5, 1 and 3 bytes), as Book 2 §5.3
    /// step 10 names a revoked issuer certificate.
    public static func revoked(_ entries: [String], key: String) throws(ConfigurationError) -> [RevokedCertificate] {
        var out: [RevokedCertificate] = []
        for entry in entries {
            let parts = entry.split(separator: ":").map(String.init)
            guard parts.count == 3, let rid = try? Hex.decode(parts[0]), rid.count == 5, let index = try? Hex.decode(parts[1]), index.count == 1,
                  let serial = try? Hex.decode(parts[2]), serial.count == 3 else {
                throw ConfigurationError(key: key, rule: "must be RID:INDEX:SERIAL in hex (5, 1 and 3 bytes), e.g. A000000003:B0:00A1B2, got \"\(entry)\"")
            }
            out.append(RevokedCertificate(rid: rid, index: index[0], serial: serial))
        }
        return out
    }
}
