import Daemon
import EMV
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite("the hostile corpus against a real daemon", .serialized)
struct HostileCorpusTests {
    struct Entry: Decodable {
        let id: String
        let category: String
        let request: Request
        struct Request: Decodable {
            let kind: String
            let url: String?
            let terminal: String?
            let method: String?
            let path: String?
            let headers: [String: String]?
            let body: String?
            let bodyBase64: String?
        }
    }

    @Test("every one of 1,623 hostile URLs and API bodies gets a clear error or a correct outcome, and the daemon stays healthy with no PAN stored")
    func replay() async throws {
        let corpus = try JSONDecoder().decode([Entry].self, from: Data(contentsOf: repositoryRoot.appendingPathComponent("Tests/DaemonTests/Hostile/corpus.json")))
        #expect(corpus.count >= 500)
        let daemon = try await DaemonProcess(["--demo"], config: "callbacks:\n  allowed_hosts: []\n")
        defer { daemon.remove() }
        // 1,623 blocking exchanges: on a thread of their own, not a cooperative one.
        let socket = daemon.socket
        let (problems, statuses) = try await onOwnThread { () throws -> ([String], [Int: Int]) in
            var problems: [String] = []
            var statuses: [Int: Int] = [:]
            for entry in corpus {
                var request: [UInt8]
                if entry.request.kind == "open" {
                    var body: [String: Any] = ["url": entry.request.url ?? "", "wait": true]
                    if let terminal = entry.request.terminal { body["terminal"] = terminal }
                    let json = try JSONSerialization.data(withJSONObject: body)
                    request = Array("POST /v1/open HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(json.count)\r\n\r\n".utf8) + Array(json)
                } else {
                    let body = entry.request.bodyBase64.flatMap { Data(base64Encoded: $0) }.map(Array.init) ?? entry.request.body.map { Array($0.utf8) } ?? []
                    var head = "\(entry.request.method ?? "GET") \(entry.request.path ?? "/") HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                    for (name, value) in (entry.request.headers ?? [:]).sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
                    if entry.request.body != nil || entry.request.bodyBase64 != nil { head += "Content-Length: \(body.count)\r\n" }
                    request = Array((head + "\r\n").utf8) + body
                }
                let reply: (status: Int, head: String, body: [UInt8])
                do { reply = try rawUnixHTTP(socketPath: socket, request) } catch {
                    problems.append("\(entry.id): no answer: \(error)")
                    continue
                }
                statuses[reply.status, default: 0] += 1
                let object = try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]
                switch reply.status {
                case 200..<300:
                    if let callback = object?["callback"] as? String, URLComponents(string: callback)?.scheme == nil {
                        problems.append("\(entry.id): a callback that is not a URL: \(callback.prefix(120))")
                    }
                case 400 where reply.body.isEmpty && request.count > 80_000:
                    // NIO's HTTP parser refuses a request head past its size limit before any route runs.
                    break
                case 400..<500:
                    let error = object?["error"] as? String ?? ""
                    if error.isEmpty { problems.append("\(entry.id): HTTP \(reply.status) without a JSON error: \(String(decoding: reply.body.prefix(160), as: UTF8.self))") }
                    if reply.status == 400, (object?["field"] as? String ?? "").isEmpty {
                        problems.append("\(entry.id): HTTP 400 naming no field: \(error.prefix(160))")
                    }
                default:
                    problems.append("\(entry.id): HTTP \(reply.status): \(String(decoding: reply.body.prefix(200), as: UTF8.self))")
                }
            }
            return (problems, statuses)
        }
        #expect(problems.isEmpty, "\(problems.count) of \(corpus.count):\n\(problems.prefix(40).joined(separator: "\n"))")
        // Still up, nothing stuck, nothing stored in clear.
        #expect(try await daemon.client.send(method: "GET", "/v1/health").status == 200)
        let (_, list) = try await daemon.json("GET", "/v1/transactions?limit=1000")
        let rows = list as? [[String: Any]] ?? []
        #expect(!rows.contains { $0["status"] as? String == "in_progress" })
        #expect(!containsBytes(daemon.ledgerBytes, demoPAN), "the demo PAN is in the ledger's files")
        for row in rows {
            for key in ["clientReference", "message", "cardholderName"] {
                if let text = row[key] as? String { #expect(!PAN.looksLikeItHoldsAPAN(text), "transaction \(row["id"] ?? ""): \(key) holds a card number") }
            }
        }
        #expect(!daemon.logText.contains(demoPAN))
        #expect(try await daemon.open(saleURL(reference: "after-corpus")).result?.status == "success")
        print("hostile corpus: \(corpus.count) requests, answers by status \(statuses.sorted { $0.key < $1.key }), \(rows.count) transactions recorded")
    }
}
