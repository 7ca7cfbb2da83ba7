import Daemon
import EMV
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// One HTTP/1.1 exchange written by hand on the daemon's control socket: a corpus entry's
/// method, path, headers and body reach the daemon byte for byte.
func rawUnixHTTP(socketPath: String, _ request: [UInt8]) throws -> (status: Int, head: String, body: [UInt8]) {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in socketPath.utf8.enumerated() { raw[i] = b } }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard connected == 0 else { throw HarnessError("connect \(socketPath): errno \(errno)") }
    var timeout = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The daemon may answer (and close) before reading a whole oversized request.
        guard n > 0 else { break }
        sent += n
    }
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { break }
        reply += buffer[..<n]
    }
    guard let split = Data(reply).range(of: Data("\r\n\r\n".utf8)) else { return (0, String(decoding: reply, as: UTF8.self), []) }
    let head = String(decoding: reply[..<split.lowerBound], as: UTF8.self)
    var body = Array(reply[split.upperBound...])
    if head.lowercased().contains("transfer-encoding: chunked") { body = dechunk(body) }
    let status = head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return (status, head, body)
}

func dechunk(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [], i = 0
    while i < bytes.count {
        guard let end = (i..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
              let size = Int(String(decoding: bytes[i..<end], as: UTF8.self).split(separator: ";")[0], radix: 16), size > 0 else { break }
        let start = end + 2
        out += bytes[start..<min(start + size, bytes.count)]
        i = start + size + 2
    }
    return out
}

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

    @Test("every one of 1,598 hostile URLs and API bodies gets a clear error or a correct outcome, and the daemon stays healthy with no PAN stored")
    func replay() async throws {
        let corpus = try JSONDecoder().decode([Entry].self, from: Data(contentsOf: repositoryRoot.appendingPathComponent("Tests/DaemonTests/Hostile/corpus.json")))
        #expect(corpus.count >= 500)
        let daemon = try await DaemonProcess(["--demo"], config: "callbacks:\n  allowed_hosts: []\n")
        defer { daemon.remove() }
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
            do { reply = try rawUnixHTTP(socketPath: daemon.socket, request) } catch {
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
