@testable import Daemon
import EMV
import Foundation
import ISO8583
import Testing

@Suite("JSONText: a sale's reply written by hand means what JSONEncoder's means")
struct JSONTextTests {
    /// Text with what JSON must escape, and what it must not: quotes, backslashes, every control
    /// character, slashes, non-ASCII, emoji.
    static func text(_ random: inout SplitMix64) -> String {
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "é", "€", "😀", "\u{7F}", "\u{85}", "%20", "://", "&"]
        var s = ""
        for _ in 0..<Int(random.next() % 12) {
            if random.next() % 5 == 0 {
                s.unicodeScalars.append(Unicode.Scalar(UInt8(random.next() % 0x20)))
            } else {
                s += pieces[Int(random.next() % UInt64(pieces.count))]
            }
        }
        return s
    }

    static func transaction(_ random: inout SplitMix64, withTraceAndCallbacks: Bool) throws -> TransactionView {
        var object: [String: Any] = [
            "id": Int64(random.next() % 1_000_000), "transactionId": text(&random), "terminal": text(&random), "tid": text(&random),
            "provider": text(&random), "action": text(&random), "status": text(&random), "amount": Int64(bitPattern: random.next()),
            "tipAmount": Int64(random.next() % 1000), "currency": Int(random.next() % 1000), "stan": text(&random), "rrn": text(&random),
            "createdAt": Int64(random.next() % (1 << 52)),
        ]
        for key in ["clientReference", "authorisationCode", "responseCode", "message", "maskedPAN", "brand", "aid", "applicationLabel",
                    "cardholderName", "arqc", "atc", "tvr", "cvm", "entryMode"] where random.next() % 3 != 0 {
            object[key] = text(&random)
        }
        for key in ["installments", "originalId", "completedAt"] where random.next() % 2 == 0 { object[key] = Int(random.next() % 100_000) }
        if withTraceAndCallbacks {
            object["trace"] = (0..<Int(random.next() % 4)).map { _ in ["command": text(&random), "response": text(&random), "name": text(&random)] }
            object["callbacks"] = (0..<Int(random.next() % 3)).map { _ in
                var c: [String: Any] = ["id": Int(random.next() % 100), "kind": text(&random), "target": text(&random), "payload": text(&random),
                                        "status": text(&random), "attempts": Int(random.next() % 10)]
                if random.next() % 2 == 0 { c["lastError"] = text(&random) }
                return c
            }
        }
        return try JSONDecoder().decode(TransactionView.self, from: JSONSerialization.data(withJSONObject: object))
    }

    @Test("random replies: the same JSON value as JSONEncoder's, and they decode back to what was written")
    func sameAsJSONEncoder() throws {
        var random = SplitMix64(state: 0x150)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        for n in 0..<500 {
            let fields = (0..<Int(random.next() % 6)).map { _ in OpenResult.Field(name: Self.text(&random), value: Self.text(&random)) }
            let transaction = random.next() % 4 == 0 ? nil : try Self.transaction(&random, withTraceAndCallbacks: n % 2 == 0)
            let value = OpenResult(callback: random.next() % 3 == 0 ? nil : Self.text(&random), fields: fields, status: Self.text(&random),
                                   message: Self.text(&random), transaction: transaction, replayed: random.next() % 2 == 0)
            let fast = Data(value.jsonBytes)
            let reference = try encoder.encode(value)
            let fastObject = try JSONSerialization.jsonObject(with: fast) as? NSDictionary
            let referenceObject = try JSONSerialization.jsonObject(with: reference) as? NSDictionary
            #expect(fastObject != nil)
            #expect(fastObject == referenceObject, "\(String(decoding: fast, as: UTF8.self))\n\(String(decoding: reference, as: UTF8.self))")
            #expect(try JSONDecoder().decode(OpenResult.self, from: fast) == value)
        }
    }

    @Test("keys come in declaration order, as JSONEncoder writes them, and slashes are not escaped")
    func order() throws {
        let value = OpenResult(callback: "app://result?x=1", fields: [.init(name: "a", value: "b/c")], status: "success", message: "ok",
                               transaction: nil, replayed: false)
        #expect(String(decoding: value.jsonBytes, as: UTF8.self)
                == #"{"callback":"app://result?x=1","fields":[{"name":"a","value":"b/c"}],"status":"success","message":"ok","replayed":false}"#)
    }

    @Test("an ISO 8583 message's fields as the trace keeps them: the same as JSONEncoder's with sorted keys")
    func describedFields() throws {
        var random = SplitMix64(state: 17)
        for _ in 0..<300 {
            let fields = (0..<Int(random.next() % 6)).map { n in
                DescribedField(field: Int(random.next() % 129), name: Self.text(&random), value: Self.text(&random),
                               tlv: random.next() % 2 == 0 ? nil : (0..<Int(random.next() % 4)).map { _ in
                                   DescribedTag(tag: Self.text(&random), name: Self.text(&random), value: Self.text(&random)) })
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let theirs = try JSONDecoder().decode([DescribedField].self, from: encoder.encode(fields))
            let ours = try JSONDecoder().decode([DescribedField].self, from: Data(ISO8583UpstreamSession.json(fields).utf8))
            #expect(ours == theirs && ours == fields)
        }
    }
}
