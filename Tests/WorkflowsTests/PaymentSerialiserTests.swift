import Foundation
import Synchronization
import Testing
@testable import Workflows

@Suite("operations on one payment, one at a time")
struct PaymentSerialiserTests {
    final class Overlap: @unchecked Sendable {
        // Unchecked: everything is behind the mutex.
        let state = Mutex((inside: [String: Int](), most: [String: Int]()))
        func enter(_ key: String) { state.withLock { $0.inside[key, default: 0] += 1; $0.most[key] = max($0.most[key, default: 0], $0.inside[key]!) } }
        func leave(_ key: String) { state.withLock { $0.inside[key, default: 0] -= 1 } }
    }

    @Test("many threads on one key never overlap; another key runs beside them; the table empties")
    func exclusion() {
        let serialiser = PaymentSerialiser()
        let overlap = Overlap()
        let group = DispatchGroup()
        for i in 0..<32 {
            group.enter()
            Thread {
                let key = i % 4 == 0 ? "citcon:b" : "worldline:a"
                serialiser.run(key) { () -> Void in
                    overlap.enter(key)
                    Thread.sleep(forTimeInterval: 0.002)
                    overlap.leave(key)
                }
                group.leave()
            }.start()
        }
        group.wait()
        let most = overlap.state.withLock { $0.most }
        #expect(most["worldline:a"] == 1 && most["citcon:b"] == 1, "\(most)")
        #expect(serialiser.busyPayments == 0)
    }

    @Test("a body that throws lets the next one in")
    func throwing() {
        struct Refused: Error {}
        let serialiser = PaymentSerialiser()
        #expect(throws: Refused.self) { try serialiser.run("k") { () throws(Refused) -> Int in throw Refused() } }
        #expect(serialiser.run("k") { () -> Int in 7 } == 7)
        #expect(serialiser.busyPayments == 0)
    }
}
