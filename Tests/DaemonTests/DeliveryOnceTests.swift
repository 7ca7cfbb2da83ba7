import AsyncHTTPClient
import Daemon
import Foundation
import NIOCore
import Synchronization
import Testing
import DaemonTestSupport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A merchant's notification endpoint that counts what it is sent: a plain HTTP/1.1 server on
/// the loopback, a thread per connection, keep-alive, answering 200 to every request.
final class CountingReceiver: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    // Unchecked: every mutable value is behind `received`'s mutex, or set once.
    private let received = Mutex<[String]>([])
    private let lines = Mutex<[String]>([])
    private let stopped = Atomic<Bool>(false)
    private let heads = Mutex<[String]>([])
    /// The HTTP status every request is answered with from now on (200 unless a test says otherwise).
    let answerStatus = Atomic<Int>(200)

    init() throws {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(s, 128) == 0 else { throw HarnessError("the receiver cannot listen: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) } }
        fd = s
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// The bodies received, in order.
    var bodies: [String] { received.withLock { $0 } }
    /// The request lines received (`GET /cb?… HTTP/1.1`), in order.
    var requestLines: [String] { lines.withLock { $0 } }
    /// Each request's head (request line and headers, lower-cased), in order.
    var requestHeads: [String] { heads.withLock { $0 } }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .relaxed) {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { if stopped.load(ordering: .relaxed) { return } else { continue } }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            // One request: the head, then Content-Length bytes of body.
            while Data(pending).range(of: Data("\r\n\r\n".utf8)) == nil {
                let n = recv(client, &buffer, buffer.count, 0)
                guard n > 0 else { return }
                pending += buffer[..<n]
            }
            let split = Data(pending).range(of: Data("\r\n\r\n".utf8))!
            let head = String(decoding: pending[..<split.lowerBound], as: UTF8.self).lowercased()
            let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            let bodyStart = split.upperBound
            while pending.count < bodyStart + length {
                let n = recv(client, &buffer, buffer.count, 0)
                guard n > 0 else { return }
                pending += buffer[..<n]
            }
            let body = String(decoding: pending[bodyStart..<(bodyStart + length)], as: UTF8.self)
            pending = Array(pending[(bodyStart + length)...])
            received.withLock { $0.append(body) }
            lines.withLock { $0.append(String(head.split(separator: "\r\n").first ?? "")) }
            heads.withLock { $0.append(head) }
            let status = answerStatus.load(ordering: .relaxed)
            let answer = Array("HTTP/1.1 \(status) \(status == 200 ? "OK" : "Refused")\r\nContent-Length: 0\r\n\r\n".utf8)
            _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if head.contains("connection: close") { return }
        }
    }
}

/// Notifications go out once in normal operation: a merchant's endpoint that answers 200 each time
/// gets exactly one POST per webhook and per IPN, however many are delivered at once.
@Suite("notifications delivered once", .serialized)
struct DeliveryOnceTests {
    @Test("a counting receiver sees one request per notification across hundreds of Viva callbacks, Worldline webhooks and Citcon IPNs delivered concurrently")
    func oncePerNotification() async throws {
        let receiver = try CountingReceiver()
        defer { receiver.stop() }
        let daemon = try await DaemonProcess(["--demo", "--worldline-port", "0", "--citcon-port", "0"],
                                             config: "callbacks:\n  allowed_hosts: [127.0.0.1]\n")
        defer { daemon.stop(); daemon.remove() }
        _ = try await daemon.client.send(method: "PUT", "/v1/worldline/merchants/hooks/webhook", json: ["url": "http://127.0.0.1:\(receiver.port)/hooks"])
        _ = try await daemon.client.send(method: "POST", "/v1/citcon/merchants", json: ["merchantId": "ipns"])
        let payments = 100, charges = 100, sales = 30
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Card-present sales, one at a time on the demo terminal, their callbacks GET to the receiver.
            group.addTask {
                for i in 0..<sales {
                    let sale = try await daemon.open(saleURL(amount: 1000 + 100 * i, tip: 0, reference: "once-\(i)", callback: "http://127.0.0.1:\(receiver.port)/cb"))
                    #expect(sale.result?.status == "success", "\(sale.error)")
                }
            }
            for i in 0..<payments {
                group.addTask {
                    let body = #"{"order":{"amountOfMoney":{"amount":\#(100 + i),"currencyCode":"EUR"}},"cardPaymentMethodSpecificInput":{"authorizationMode":"SALE","card":\#(WorldlineHTTPTests.card)}}"#
                    let reply = try await daemon.client.send(method: "POST", "/v1/worldline/requests",
                                                            json: WorldlineRequestBody(method: "POST", path: "/v2/hooks/payments", body: body))
                    #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                }
            }
            for i in 0..<charges {
                group.addTask {
                    let body = #"{"transaction":{"reference":"ipn-\#(i)","amount":\#(100 + i),"currency":"USD","country":"US","auto_capture":true},"payment":{"method":"card","data":{"pan":"4761739001010010","expiry":"12/31","cvv":"123"}},"urls":{"ipn":"http://127.0.0.1:\#(receiver.port)/ipn"}}"#
                    let reply = try await daemon.client.send(method: "POST", "/v1/citcon/requests",
                                                            json: CitconRequestBody(merchantId: "ipns", method: "POST", path: "/v1/charges", body: body))
                    #expect(reply.status == 200, "\(String(decoding: reply.body, as: UTF8.self))")
                }
            }
            try await group.waitForAll()
        }
        let expected = payments + charges + sales
        let deadline = Date().addingTimeInterval(60)
        while receiver.bodies.count < expected, Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        // Long enough for a second delivery of anything (the outbox is read every 100 ms).
        try await Task.sleep(for: .seconds(1))
        let bodies = receiver.bodies
        #expect(bodies.count == expected, "\(bodies.count) requests for \(expected) notifications")
        // Each notification once: a webhook by its id, an IPN by its charge, a callback by its URL.
        var seen: [String: Int] = [:]
        for (body, line) in zip(bodies, receiver.requestLines) {
            let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
            let key = (json["id"] as? String) ?? line
            seen[key, default: 0] += 1
        }
        #expect(receiver.requestLines.filter { $0.hasPrefix("get /cb?") }.count == sales, "every sale's callback arrived")
        let twice = seen.filter { $0.value > 1 }
        #expect(twice.isEmpty, "sent more than once: \(twice.count) notifications")
    }
}
