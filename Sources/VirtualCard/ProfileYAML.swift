import EMV
import Yams

/// A card profile that could not be loaded: the file, the field (a path such as
/// `applications[1].cvn`) and the rule it broke.
public struct ProfileError: Error, Equatable, Sendable, CustomStringConvertible {
    public let file: String
    public let field: String
    public let reason: String

    public init(file: String, field: String, reason: String) {
        self.file = file
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(file): \(field): \(reason)" }
}

/// A view of one YAML mapping that reads scalars as the text written (so a 19-digit PAN never
/// becomes a number) and refuses keys nobody asked for (so a misspelt field is an error, not a
/// silently ignored line).
struct YAMLMapping {
    let file: String
    let path: String
    private let entries: [String: Node]
    private var order: [String]

    init(_ node: Node, file: String, path: String) throws(ProfileError) {
        self.file = file
        self.path = path
        guard case .mapping(let mapping) = node else {
            throw ProfileError(file: file, field: path.isEmpty ? "(document)" : path, reason: "must be a mapping of fields")
        }
        var entries: [String: Node] = [:]
        var order: [String] = []
        for (key, value) in mapping {
            guard let name = key.string else {
                throw ProfileError(file: file, field: path.isEmpty ? "(document)" : path, reason: "keys must be plain names")
            }
            entries[name] = value
            order.append(name)
        }
        self.entries = entries
        self.order = order
    }

    func field(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func error(_ key: String, _ reason: String) -> ProfileError {
        ProfileError(file: file, field: field(key), reason: reason)
    }

    /// Throws for the first key that is not in `known`, listing what is allowed.
    func rejectUnknown(_ known: Set<String>) throws(ProfileError) {
        for key in order where !known.contains(key) {
            throw error(key, "unknown field; expected one of \(known.sorted().joined(separator: ", "))")
        }
    }

    func has(_ key: String) -> Bool { entries[key] != nil }

    /// The keys in the order written.
    var keys: [String] { order }

    func string(_ key: String) throws(ProfileError) -> String? {
        guard let node = entries[key] else { return nil }
        guard case .scalar(let scalar) = node else { throw error(key, "must be a single value") }
        return scalar.string
    }

    func requiredString(_ key: String) throws(ProfileError) -> String {
        guard let value = try string(key), !value.isEmpty else { throw error(key, "is required") }
        return value
    }

    func digits(_ key: String, count: ClosedRange<Int>) throws(ProfileError) -> String? {
        guard let value = try string(key) else { return nil }
        guard !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { throw error(key, "must be digits only, got '\(value)'") }
        guard count.contains(value.utf8.count) else {
            throw error(key, count.lowerBound == count.upperBound ? "must be \(count.lowerBound) digits, got \(value.utf8.count)"
                : "must be \(count.lowerBound)–\(count.upperBound) digits, got \(value.utf8.count)")
        }
        return value
    }

    func hex(_ key: String, count: ClosedRange<Int>? = nil) throws(ProfileError) -> [UInt8]? {
        guard let value = try string(key) else { return nil }
        let bytes: [UInt8]
        do { bytes = try Hex.decode(value, field: field(key)) } catch { throw self.error(key, error.rule) }
        if let count, !count.contains(bytes.count) {
            throw self.error(key, count.lowerBound == count.upperBound ? "must be \(count.lowerBound) bytes, got \(bytes.count)"
                : "must be \(count.lowerBound)–\(count.upperBound) bytes, got \(bytes.count)")
        }
        return bytes
    }

    func int(_ key: String, in range: ClosedRange<Int>) throws(ProfileError) -> Int? {
        guard let value = try string(key) else { return nil }
        guard let n = Int(value) else { throw error(key, "must be a whole number, got '\(value)'") }
        guard range.contains(n) else { throw error(key, "must be \(range.lowerBound)–\(range.upperBound), got \(n)") }
        return n
    }

    func bool(_ key: String) throws(ProfileError) -> Bool? {
        guard let value = try string(key) else { return nil }
        switch value.lowercased() {
        case "true", "yes": return true
        case "false", "no": return false
        default: throw error(key, "must be true or false, got '\(value)'")
        }
    }

    func mapping(_ key: String) throws(ProfileError) -> YAMLMapping? {
        guard let node = entries[key] else { return nil }
        return try YAMLMapping(node, file: file, path: field(key))
    }

    func sequence(_ key: String) throws(ProfileError) -> [Node]? {
        guard let node = entries[key] else { return nil }
        guard case .sequence(let items) = node else { throw error(key, "must be a list") }
        return Array(items)
    }

    func stringList(_ key: String) throws(ProfileError) -> [String]? {
        guard let items = try sequence(key) else { return nil }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            guard case .scalar(let scalar) = item else { throw error("\(key)[\(i)]", "must be a single value") }
            out.append(scalar.string)
        }
        return out
    }
}
