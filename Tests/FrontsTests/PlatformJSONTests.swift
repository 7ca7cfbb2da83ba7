import EMV
import Foundation
@testable import Fronts
import Testing

@Suite("PlatformJSON: the platforms' replies, byte for byte what JSONSerialization writes")
struct PlatformJSONTests {
    static let keyPieces = ["a", "A", "b", "Z", "_", "id", "Id", "ID", "status", "statusOutput", "amount_captured", "amount", "2", "10",
                            "time_authorized", "timezone", "x-y", "é", "errorId", "errors", "3ds", "payment", "Payment"]
    static let textPieces = ["a", " ", "\"", "\\", "/", "é", "😀", "\u{7F}", "\n", "\t", "\u{01}", "https://x.example/a?b=c&d", "0"]

    static func key(_ r: inout SplitMix64) -> String {
        (0..<Int(1 + r.next() % 3)).map { _ in keyPieces[Int(r.next() % UInt64(keyPieces.count))] }.joined()
    }

    static func value(_ r: inout SplitMix64, depth: Int) -> Any {
        switch r.next() % (depth > 3 ? 6 : 8) {
        case 0: return (0..<Int(r.next() % 4)).map { _ in textPieces[Int(r.next() % UInt64(textPieces.count))] }.joined()
        case 1: return r.next() % 2 == 0
        case 2: return Int(truncatingIfNeeded: r.next()) >> Int(r.next() % 60)
        case 3: return Int64(truncatingIfNeeded: r.next() % 1_000_000)
        case 4: return NSNull()
        case 5: return Int32(truncatingIfNeeded: r.next())
        case 6: return (0..<Int(r.next() % 4)).map { _ in value(&r, depth: depth + 1) }
        default: return object(&r, depth: depth + 1)
        }
    }

    static func object(_ r: inout SplitMix64, depth: Int) -> [String: Any] {
        var d: [String: Any] = [:]
        for _ in 0..<Int(r.next() % 7) { d[key(&r)] = value(&r, depth: depth) }
        return d
    }

    @Test func sameBytesAsJSONSerialization() throws {
        var r = SplitMix64(state: 40)
        for _ in 0..<2000 {
            let tree = Self.object(&r, depth: 0)
            let theirs = String(decoding: try JSONSerialization.data(withJSONObject: tree, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
            let ours = PlatformJSON.text(tree)
            #expect(ours == theirs)
            if ours != theirs { return }
        }
    }

    @Test("a tree with a value it does not write is left to JSONSerialization: a Double, NSNumbers read back from JSON")
    func fallsBack() throws {
        let parsed = try JSONSerialization.jsonObject(with: Data(#"{"paymentProductId":1,"isTemporary":false,"on":true,"n":0,"s":"x"}"#.utf8))
        for tree: [String: Any] in [["rate": 1.25, "b": ["c": NSNull()], "a": "x"], ["token": parsed, "id": 1, "ok": true],
                                    ["list": [parsed, parsed]]] {
            let theirs = String(decoding: try JSONSerialization.data(withJSONObject: tree, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
            #expect(PlatformJSON.text(tree) == theirs)
        }
        #expect(PlatformJSON.text(["p": parsed]).contains(#""paymentProductId":1"#))
    }
}
