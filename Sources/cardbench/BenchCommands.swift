import ArgumentParser
import CLibCrypto
import EMV
import Foundation

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure cardbench against a floor measured in the same run.",
        subcommands: [CryptoBench.self, CardBench.self, LedgerBench.self, SaleBench.self, ISO8583Bench.self, WorldlineBench.self, CitconBench.self, SerialBench.self, PCSCBenchCommand.self, ODABench.self,
                      ScenarioBench.self]
    )
}

/// One generated case of the crypto workload: the same inputs go to cardbench and to pyemv.
struct CryptoCase: Encodable {
    let cvn: Int
    let imk: String
    let pan: String
    let psn: String
    let tags: [String: String]
    let extra: String

    /// The issuer master key, scheduled once per case so the timed loop measures EMV work, not
    /// hex parsing; not part of the JSON sent to pyemv.
    let issuerMasterKey: TDESKey
    let data: CryptogramData

    enum CodingKeys: String, CodingKey { case cvn, imk, pan, psn, tags, extra }
}


struct CryptoBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crypto",
        abstract: "ARQC generate-plus-verify operations per second: cardbench and pyemv in the same run.",
        discussion: """
        One operation is what a card and its issuer do for one transaction: derive the ICC master key \
        from the issuer master key, derive the session key, MAC the cryptogram data (generate), then do \
        all of it again and compare (verify). Both sides run the same cases, round-robin over CVN 10, 16, \
        17, 18, 20, 21 and 22, and their ARQCs are checked equal before timing. pyemv runs in the Python \
        given by --python, $CARDBENCH_PYTHON, ./.venv/bin/python or python3 (make venv installs it).
        """
    )

    @Option(help: "Seconds to run each side.")
    var seconds: Double = 2

    @Option(help: "Number of distinct cases in the workload.")
    var cases: Int = 512

    @Option(help: "Workload seed.")
    var seed: UInt64 = 20261122

    @Option(help: "Python interpreter with pyemv installed.")
    var python: String?

    @Flag(help: "Print the figures as JSON.")
    var json = false

    @Flag(help: ArgumentHelp("Measure cardbench and the DES floor only, checking cardbench's ARQCs against its own generate-then-verify.",
                             discussion: "For profiling under valgrind, which cannot start the Python side (docs/performance.md)."))
    var withoutPyemv = false

    func validate() throws {
        guard seconds > 0, seconds <= 600 else { throw CLIError(message: "--seconds: must be more than 0 and at most 600", code: 2) }
        guard (1...100_000).contains(cases) else { throw CLIError(message: "--cases: must be 1–100000", code: 2) }
    }

    func run() throws {
        let workload = try Self.workload(count: cases, seed: seed)
        if withoutPyemv {
            let swift = try Self.measureSwift(workload, seconds: seconds)
            let floor = Self.measureDESFloor(workload, seconds: seconds)
            let swiftRate = Double(swift.ops) / swift.seconds, floorRate = Double(floor.ops) / floor.seconds
            print(Self.row("cardbench (Swift, libcrypto DES)", swiftRate) + "  (\(swift.ops) operations)")
            print(Self.row("floor: libcrypto DES alone, same blocks", floorRate) + "  (\(floor.ops) operations)")
            print(Self.floorGoalLine(swiftRate / floorRate))
            return
        }
        let interpreter = try Self.pythonInterpreter(python)

        // pyemv first computes every case's ARQC, so the two sides are known to do the same work.
        let py = try Self.runPyemv(interpreter, workload: workload, seconds: seconds)
        for (i, c) in workload.enumerated() {
            let ours = Hex.encode(try CryptogramKeys(cvn: CVN(number: c.cvn), issuerMasterKey: c.issuerMasterKey, pan: c.pan, psn: c.psn).generate(c.data).cryptogram)
            guard ours == py.arqcs[i] else {
                throw CLIError(message: "case \(i) (CVN \(c.cvn)): cardbench computed \(ours), pyemv \(py.arqcs[i]); refusing to compare speeds of different work")
            }
        }

        let swift = try Self.measureSwift(workload, seconds: seconds)
        let floor = Self.measureDESFloor(workload, seconds: seconds)
        let swiftRate = Double(swift.ops) / swift.seconds
        let pyRate = Double(py.ops) / py.seconds
        let floorRate = Double(floor.ops) / floor.seconds
        let ratio = swiftRate / pyRate
        if json {
            try printJSON(BenchFigures(operation: "arqc-generate-verify", cases: cases, seed: seed,
                                       cardbenchOpsPerSecond: swiftRate.rounded(), pyemvOpsPerSecond: pyRate.rounded(),
                                       ratio: (ratio * 10).rounded() / 10, goal: 30, python: py.pythonVersion, pyemv: py.pyemvVersion,
                                       desFloorOpsPerSecond: floorRate.rounded(),
                                       ceilingRatio: (floorRate / pyRate * 10).rounded() / 10,
                                       shareOfDESFloor: (swiftRate / floorRate * 1000).rounded() / 1000, goalShareOfDESFloor: Self.goalShareOfFloor))
        } else {
            print("cardbench bench crypto: ARQC generate + verify (ICC master key, session key and MAC, twice per operation)")
            print("workload: \(cases) cases, CVN 10/16/17/18/20/21/22 round-robin, seed \(seed), \(seconds) s per side; ARQCs agree with pyemv")
            print(Self.row("cardbench (Swift, libcrypto DES)", swiftRate))
            print(Self.row("pyemv \(py.pyemvVersion) (Python \(py.pythonVersion))", pyRate))
            print(Self.row("floor: libcrypto DES alone, same blocks", floorRate))
            print(String(format: "ratio: %.1fx pyemv (goal: at least 30x); with this DES no implementation passes %.1fx pyemv", ratio, floorRate / pyRate))
            print(Self.floorGoalLine(swiftRate / floorRate))
        }
    }

    /// The share of the DES floor's rate cardbench is to reach.
    static let goalShareOfFloor = 0.9

    static func floorGoalLine(_ share: Double) -> String {
        String(format: "goal: at least 90%% of the DES floor's rate: %.0f%%, %@", 100 * share, share >= goalShareOfFloor ? "met" : "not met")
    }

    struct BenchFigures: Encodable {
        let operation: String
        let cases: Int
        let seed: UInt64
        let cardbenchOpsPerSecond: Double
        let pyemvOpsPerSecond: Double
        let ratio: Double
        let goal: Double
        let python: String
        let pyemv: String
        let desFloorOpsPerSecond: Double
        let ceilingRatio: Double
        /// cardbench's rate over the DES floor's.
        let shareOfDESFloor: Double
        let goalShareOfDESFloor: Double
    }

    static func row(_ name: String, _ rate: Double) -> String {
        let label = name.padding(toLength: 42, withPad: " ", startingAt: 0)
        return String(format: "%@ %12.0f ops/s  %8.2f µs/op", label, rate, 1e6 / rate)
    }

    /// Random cases: keys, PANs of 13–19 digits, PSNs, tag values, ATCs, unpredictable numbers.
    static func workload(count: Int, seed: UInt64) throws -> [CryptoCase] {
        var rng = SplitMix64(state: seed)
        func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        func digits(_ n: Int) -> String { String((0..<n).map { _ in Character(String(Int.random(in: 0...9, using: &rng))) }) }
        let cvns: [CVN] = [.visa10, .mastercard16, .mastercard17, .visa18, .mastercard20, .mastercard21, .visa22]
        let lengths: [(EMVTag, Int)] = CVN.cryptogramTags.map { ($0.tag, $0.length) }
        return try (0..<count).map { i in
            let cvn = cvns[i % cvns.count]
            let imkBytes = bytes(16)
            let pan = "4" + digits(Int.random(in: 12...18, using: &rng))
            let psn = digits(2)
            var tags: [EMVTag: [UInt8]] = [:]
            for (tag, n) in lengths { tags[tag] = bytes(n) }
            let extra: [UInt8]
            var data: CryptogramData
            switch cvn {
            case .visa10:
                extra = [0x03] + bytes(3)
                data = CryptogramData(tags: tags, cvr: extra)
            case .visa18, .visa22:
                extra = [0x06, 0x01, UInt8(cvn.rawValue)] + [0x03] + bytes(3)
                data = CryptogramData(tags: tags, issuerApplicationData: extra)
            case .mastercard16, .mastercard20:
                extra = bytes(6)
                data = CryptogramData(tags: tags, cvr: extra)
            case .mastercard17, .mastercard21:
                let cvr = bytes(6), counters = bytes(8)
                extra = cvr + counters
                data = CryptogramData(tags: tags, cvr: cvr, counters: counters)
            }
            return CryptoCase(cvn: cvn.rawValue, imk: Hex.encode(imkBytes), pan: pan, psn: psn,
                              tags: Dictionary(uniqueKeysWithValues: tags.map { ($0.key.description, Hex.encode($0.value)) }),
                              extra: Hex.encode(extra), issuerMasterKey: try TDESKey(imkBytes), data: data)
        }
    }

    static func measureSwift(_ workload: [CryptoCase], seconds: Double) throws -> (ops: Int, seconds: Double) {
        let cvns = try workload.map { try CVN(number: $0.cvn) }
        // The fields an operation reads, apart, as the floor has its work apart: copying a whole
        // case (strings, a dictionary) per operation would time the harness.
        let keys = workload.map(\.issuerMasterKey), pans = workload.map(\.pan), psns = workload.map(\.psn), data = workload.map(\.data)
        let clock = ContinuousClock()
        let start = clock.now
        let limit = Duration.milliseconds(Int64(seconds * 1000))
        var ops = 0
        var failures = 0
        while true {
            for _ in 0..<64 {
                let i = ops % workload.count
                let card = try CryptogramKeys(cvn: cvns[i], issuerMasterKey: keys[i], pan: pans[i], psn: psns[i])
                // `pointee` lends the case's data where a subscript would copy it.
                let arqc = try data.withUnsafeBufferPointer { data throws(EMVError) in try card.cryptogram((data.baseAddress! + i).pointee) }
                let issuer = try CryptogramKeys(cvn: cvns[i], issuerMasterKey: keys[i], pan: pans[i], psn: psns[i])
                if try !data.withUnsafeBufferPointer({ data throws(EMVError) in try issuer.verify(arqc, (data.baseAddress! + i).pointee) }) { failures += 1 }
                ops += 1
            }
            if clock.now - start >= limit { break }
        }
        let elapsed = clock.now - start
        guard failures == 0 else { throw CLIError(message: "\(failures) cryptograms failed their own verification") }
        return (ops, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// The DES work one operation of a case needs: EDE blocks (key derivations), single-DES blocks
    /// (the retail MAC's CBC and its final steps) and key schedules, generate and verify together.
    static func desWork(_ c: CryptoCase) -> (ede: Int, single: Int, schedules: Int) {
        let hasSessionKey = c.cvn != 10
        let macInput = 35 + c.extra.count / 2 + (c.cvn == 10 ? 0 : 1)
        let macBlocks = (macInput + 7) / 8 + 2
        let derivations = hasSessionKey ? 2 : 1
        return (2 * 2 * derivations, 2 * macBlocks, 2 * 2 * derivations)
    }

    /// The floor: the same DES calls an operation needs, straight on libcrypto with no EMV logic,
    /// no allocation and no data handling.
    static func measureDESFloor(_ workload: [CryptoCase], seconds: Double) -> (ops: Int, seconds: Double) {
        let work = workload.map(desWork)
        var k1: DES_cblock = (1, 2, 3, 4, 5, 6, 7, 8), k2: DES_cblock = (8, 7, 6, 5, 4, 3, 2, 1)
        var s1 = DES_key_schedule(), s2 = DES_key_schedule()
        DES_set_key_unchecked(&k1, &s1)
        DES_set_key_unchecked(&k2, &s2)
        var s3 = s1
        var block: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0), out: DES_cblock = (0, 0, 0, 0, 0, 0, 0, 0)
        let clock = ContinuousClock()
        let start = clock.now
        let limit = Duration.milliseconds(Int64(seconds * 1000))
        var ops = 0
        while true {
            for _ in 0..<64 {
                let w = work[ops % work.count]
                for _ in 0..<w.schedules {
                    k1.0 = UInt8(truncatingIfNeeded: ops)
                    DES_set_key_unchecked(&k1, &s2)
                }
                for _ in 0..<w.ede {
                    DES_ecb3_encrypt(&block, &out, &s1, &s2, &s3, DES_ENCRYPT)
                    block = out
                }
                for _ in 0..<w.single {
                    DES_ecb_encrypt(&block, &out, &s1, DES_ENCRYPT)
                    block = out
                }
                ops += 1
            }
            if clock.now - start >= limit { break }
        }
        let elapsed = clock.now - start
        _ = k2
        return (ops, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    struct PyemvResult: Decodable {
        let arqcs: [String]
        let ops: Int
        let seconds: Double
        let pythonVersion: String
        let pyemvVersion: String
    }

    static func pythonInterpreter(_ given: String?) throws -> String {
        if let given { return given }
        if let env = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"], !env.isEmpty { return env }
        let local = FileManager.default.currentDirectoryPath + "/.venv/bin/python"
        return FileManager.default.isExecutableFile(atPath: local) ? local : "python3"
    }

    static func runPyemv(_ interpreter: String, workload: [CryptoCase], seconds: Double) throws -> PyemvResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [interpreter, "-W", "ignore", "-c", pyemvScript, String(seconds)]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        // A Python that exits early must give an error message, not kill us with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        do { try process.run() } catch {
            throw CLIError(message: "--python: cannot run '\(interpreter)': \(error.localizedDescription)")
        }
        let payload = try JSONEncoder().encode(workload)
        // Written from another thread so a child that answers before reading all its input
        // cannot deadlock against us.
        let writer = Thread {
            try? input.fileHandleForWriting.write(contentsOf: payload)
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let detail = String(decoding: err, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? "exit \(process.terminationStatus)"
            throw CLIError(message: "pyemv run with '\(interpreter)' failed: \(detail) (make venv installs pyemv into .venv)")
        }
        return try JSONDecoder().decode(PyemvResult.self, from: out)
    }

    /// The pyemv side: the same steps with pyemv's own key derivation and AC functions.
    static let pyemvScript = #"""
import json, sys, time
from importlib.metadata import version
from pyemv import ac, kd
cases = json.load(sys.stdin)
seconds = float(sys.argv[1])
h = bytes.fromhex
order = ["9F02", "9F03", "9F1A", "95", "5F2A", "9A", "9C", "9F37", "82", "9F36"]
prepared = [(c["cvn"], h(c["imk"]), c["pan"], c["psn"], {k: h(v) for k, v in c["tags"].items()}, h(c["extra"])) for c in cases]
def arqc(cvn, imk, pan, psn, t, extra):
    mk = kd.derive_icc_mk_b(imk, pan, psn) if cvn in (18, 22) else kd.derive_icc_mk_a(imk, pan, psn)
    if cvn == 10:
        sk, pad = mk, ac.PaddingType.VISA
    elif cvn in (16, 17):
        sk, pad = kd.derive_common_sk(mk, t["9F36"] + b"\0\0" + t["9F37"]), ac.PaddingType.EMV
    else:
        sk, pad = kd.derive_common_sk(mk, t["9F36"] + b"\0" * 6), ac.PaddingType.EMV
    return ac.generate_ac(sk, b"".join(t[k] for k in order) + extra, pad, 8)
arqcs = [arqc(*p).hex().upper() for p in prepared]
n = len(prepared)
ops = 0
start = time.perf_counter()
while True:
    for _ in range(64):
        p = prepared[ops % n]
        cryptogram = arqc(*p)
        if arqc(*p) != cryptogram:
            raise SystemExit("verification failed")
        ops += 1
    if time.perf_counter() - start >= seconds:
        break
elapsed = time.perf_counter() - start
print(json.dumps({"arqcs": arqcs, "ops": ops, "seconds": elapsed,
                  "pythonVersion": sys.version.split()[0], "pyemvVersion": version("pyemv")}))
"""#
}
