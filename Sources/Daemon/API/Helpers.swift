import EMV
import Foundation
import Fronts
import Hummingbird
import HummingbirdCore
import Ledger
import NIOCore
import Terminal
import Workflows

/// cost a tenth of the JSON encoding of every reply.
func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) -> Response {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.withoutEscapingSlashes]
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}

/// A sale's reply, written by `JSONText` rather than `JSONEncoder` (the same JSON, for less).
func json(_ value: OpenResult, status: HTTPResponse.Status = .ok) -> Response {
    Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: value.jsonBytes)))
}

func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: APIContext) async throws -> T {
    let buffer: ByteBuffer
    do { buffer = try await request.body.collect(upTo: 1 << 20) } catch {
        throw DaemonError.payloadTooLarge("the request body is over 1 MiB")
    }
    do {
        return try JSONBody.decode(T.self, from: Array(buffer.readableBytesView))
    } catch let problem as JSONBody.Problem {
        throw DaemonError.badRequest(field: problem.path, rule: problem.rule)
    } catch let DecodingError.keyNotFound(key, _) {
        throw DaemonError.badRequest(field: key.stringValue, rule: "is required")
    } catch let DecodingError.typeMismatch(_, c), let DecodingError.valueNotFound(_, c) {
        throw DaemonError.badRequest(field: c.codingPath.map(\.stringValue).joined(separator: ".").nonEmpty ?? "body",
                                     rule: "has the wrong type: \(c.debugDescription)")
    } catch {
        throw DaemonError.badRequest(field: "body", rule: "must be a JSON object: \(error.localizedDescription)")
    }
}

func intParameter(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws -> Int {
    guard let n = Int(text), range.contains(n) else {
        throw DaemonError.badRequest(field: name, rule: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
    }
    return n
}

extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// The filters of `GET /v1/transactions`: `provider`, `status`, `from` and `to` (a day,
/// `2026-11-24`, or an ISO 8601 time with a zone; `to` is exclusive, a day's `to` the next day's start).
func transactionFilter(_ q: FlatDictionary<Substring, Substring>) throws -> TransactionFilter {
    var filter = TransactionFilter()
    if let p = q.get("provider").map({ String($0) }), !p.isEmpty {
        guard let provider = Provider(rawValue: p) else {
            throw DaemonError.badRequest(field: "provider", rule: "must be one of \(Provider.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(p.prefix(40))\"")
        }
        filter.provider = provider
    }
    if let s = q.get("status").map({ String($0) }), !s.isEmpty {
        guard let status = TransactionStatus(rawValue: s) else {
            throw DaemonError.badRequest(field: "status", rule: "must be one of \(TransactionStatus.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s.prefix(40))\"")
        }
        filter.status = status
    }
    func time(_ name: String, dayEnd: Bool) throws -> Int64? {
        guard let text = q.get(name).map({ String($0) }), !text.isEmpty else { return nil }
        if text.count == 10, let start = ISO8601.microseconds(text + "T00:00:00Z") {
            return dayEnd ? start + 86_400_000_000 : start
        }
        guard let micros = ISO8601.microseconds(text) else {
            throw DaemonError.badRequest(field: name, rule: "must be a day (2026-11-24, UTC) or an ISO 8601 time with a zone, got \"\(text.prefix(40))\"")
        }
        return micros
    }
    filter.createdSince = try time("from", dayEnd: false)
    filter.createdBefore = try time("to", dayEnd: true)
    return filter
}
