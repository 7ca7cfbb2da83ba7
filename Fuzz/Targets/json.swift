import Foundation
import Fronts

// `JSONBody` here is Fronts' reader, the one every listener uses (the control API and both
// platforms), not a copy.
//
// The API's JSON bodies (JSONBody.check and JSONBody.decode).
//
// Properties:
// - what the check accepts and Foundation reads holds no NUL in any key or string;
// - the check accepts what Foundation writes (JSONSerialization's text of an accepted value);
// - a key written twice into an accepted object is refused, whether the second one is written as
//   Foundation writes it or with every character \u-escaped (surrogate pairs for astral ones);
// - each body type that decodes re-encodes and decodes back to itself through JSONBody.
//
// The body types are copied from Sources/Daemon/API/Bodies.swift and BillpocketAPI.swift (their stored
// properties, which are all their Codable conformance uses): those files import Hummingbird.
struct OpenRequest: Codable, Equatable {
    var url: String
    var terminal: String?
    var wait: Bool?
}

struct ClockBody: Codable, Equatable {
    let set: String?
    let advanceSeconds: Int64?
}

struct CardBody: Codable, Equatable {
    let profile: String?
    let profileYAML: String?
    let removeAfter: String?
    let pinTries: Int?
    let corruptCryptogram: Bool?
}

struct AccountBody: Codable, Equatable {
    let profile: String?
    let profileYAML: String?
}

struct KeypadBody: Codable, Equatable {
    let pin: String?
    let select: Int?
    let confirm: Bool?
    let cancel: Bool?
}

struct HostOutcomeBody: Codable, Equatable {
    let code: String?
    let unavailable: Bool?
    let delayMs: Int?
}

struct BillpocketUserBody: Codable, Equatable {
    let name: String
    let msi: [String: Int64]?
}

struct DeviceTokenBody: Codable, Equatable {
    let user: Int64
    let alias: String?
}

func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ input: [UInt8]) {
    guard let body = try? JSONBody.decode(T.self, from: input) else { return }
    let encoded: Data
    do { encoded = try JSONEncoder().encode(body) } catch {
        require(false, "\(T.self) \(body) does not encode: \(error) (input \(hex(input)))")
        return
    }
    let again: T
    do { again = try JSONBody.decode(T.self, from: Array(encoded)) } catch {
        require(false, "\(T.self) re-encoded as \(String(decoding: encoded, as: UTF8.self)) is refused: \(error) (input \(hex(input)))")
        return
    }
    require(again == body, "\(T.self) \(body) reads back as \(again) (input \(hex(input)))")
}

func hasNUL(_ value: Any) -> Bool {
    switch value {
    case let s as String: return s.unicodeScalars.contains("\0")
    case let a as [Any]: return a.contains(where: hasNUL)
    case let d as [String: Any]: return d.contains { hasNUL($0.key) || hasNUL($0.value) }
    default: return false
    }
}

/// `key` as a JSON string with every character escaped as \uXXXX.
func escaped(_ key: String) -> [UInt8] {
    var out = Array("\"".utf8)
    for unit in key.utf16 { out += Array(String(format: "\\u%04X", unit).utf8) }
    return out + Array("\"".utf8)
}

func refusedAsDuplicate(_ bytes: [UInt8]) -> Bool {
    do { try JSONBody.check(bytes) } catch { return error.rule.contains("twice") }
    return false
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard (try? JSONBody.check(input)) != nil else { return 0 }
    guard let value = try? JSONSerialization.jsonObject(with: Data(input), options: .fragmentsAllowed) else { return 0 }
    require(!hasNUL(value), "NUL let through in \(hex(input))")

    if JSONSerialization.isValidJSONObject(value) || value is String {
        guard let written = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) else { return 0 }
        let text = Array(written)
        do { try JSONBody.check(text) } catch {
            require(false, "Foundation's \(String(decoding: text, as: UTF8.self).debugDescription) refused: \(error) (input \(hex(input)))")
        }
        if let object = value as? [String: Any], let key = object.keys.sorted().first, text.first == UInt8(ascii: "{") {
            let plain = (try? JSONSerialization.data(withJSONObject: key, options: .fragmentsAllowed)).map(Array.init) ?? escaped(key)
            for second in [plain, escaped(key)] {
                let doubled = [UInt8(ascii: "{")] + second + Array(":null,".utf8) + text.dropFirst()
                require(refusedAsDuplicate(doubled),
                        "duplicate key \(key.debugDescription) not refused in \(String(decoding: doubled, as: UTF8.self).debugDescription)")
            }
        }
    }

    roundTrip(OpenRequest.self, input)
    roundTrip(ClockBody.self, input)
    roundTrip(CardBody.self, input)
    roundTrip(AccountBody.self, input)
    roundTrip(KeypadBody.self, input)
    roundTrip(HostOutcomeBody.self, input)
    roundTrip(BillpocketUserBody.self, input)
    roundTrip(DeviceTokenBody.self, input)
    return 0
}
