import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A JUnit XML report as CI servers read it: `<testsuites>` with the run's totals, one
/// `<testsuite>` per folder of the library (its name), a `<testcase>` per scenario (`classname`
/// its file, `name` its name, `time` in seconds) with a `<failure>` holding the expectation and
/// what was seen, and a `<system-out>` saying where its transactions and their traces are.
public enum JUnitReport {
    /// One scenario's line in a report, read back or about to be written.
    public struct Case: Sendable, Equatable {
        public let file: String
        public let name: String
        public let seconds: Double
        public let failure: String?
        /// The case's `system-out`: where its transactions and their traces are.
        public let output: String?

        public init(file: String, name: String, seconds: Double, failure: String?, output: String? = nil) {
            self.file = file
            self.name = name
            self.seconds = seconds
            self.failure = failure
            self.output = output
        }
    }

    /// The report of a run's results, in the order they ran.
    public static func xml(_ results: [ScenarioResult]) -> String {
        xml(results.map { Case(file: $0.file, name: $0.name, seconds: $0.seconds, failure: $0.failure, output: $0.output) })
    }

    /// The report of `cases`: their folders in the order they first appear, the cases in order within.
    public static func xml(_ cases: [Case]) -> String {
        func escape(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        func time(_ seconds: Double) -> String { String(format: "%.3f", seconds) }
        var folders: [String] = []
        var byFolder: [String: [Case]] = [:]
        for c in cases {
            let folder = Self.folder(of: c.file)
            if byFolder[folder] == nil { folders.append(folder) }
            byFolder[folder, default: []].append(c)
        }
        let failures = cases.filter { $0.failure != nil }.count
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites name=\"cardbench scenarios\" tests=\"\(cases.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(time(cases.reduce(0) { $0 + $1.seconds }))\">\n"
        for folder in folders {
            let inFolder = byFolder[folder]!
            out += "  <testsuite name=\"\(escape(folder))\" tests=\"\(inFolder.count)\" failures=\"\(inFolder.filter { $0.failure != nil }.count)\" errors=\"0\" time=\"\(time(inFolder.reduce(0) { $0 + $1.seconds }))\">\n"
            for c in inFolder {
                out += "    <testcase classname=\"\(escape(c.file))\" name=\"\(escape(c.name))\" time=\"\(time(c.seconds))\""
                guard c.failure != nil || c.output != nil else {
                    out += "/>\n"
                    continue
                }
                out += ">\n"
                if let failure = c.failure {
                    out += "      <failure message=\"\(escape(failure.split(separator: "\n").first.map(String.init) ?? ""))\">\(escape(failure))</failure>\n"
                }
                if let output = c.output { out += "      <system-out>\(escape(output))</system-out>\n" }
                out += "    </testcase>\n"
            }
            out += "  </testsuite>\n"
        }
        return out + "</testsuites>\n"
    }

    /// The folder a scenario file belongs to: its directory's last component.
    static func folder(of file: String) -> String {
        let parent = (file as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : (parent as NSString).lastPathComponent
    }

    /// Every test case of a JUnit report (this one's, or any tool's: `testcase` elements at any
    /// depth), in document order; an error names what is wrong.
    public static func read(_ data: Data) throws -> [Case] {
        let document: XMLDocument
        do { document = try XMLDocument(data: data) } catch {
            throw JUnitError("not XML: \(error.localizedDescription)")
        }
        let nodes = try document.nodes(forXPath: "//testcase")
        return try nodes.compactMap { $0 as? XMLElement }.map { element in
            guard let file = element.attribute(forName: "classname")?.stringValue, let name = element.attribute(forName: "name")?.stringValue else {
                throw JUnitError("a testcase without classname or name")
            }
            let seconds = Double(element.attribute(forName: "time")?.stringValue ?? "") ?? 0
            let failure = element.elements(forName: "failure").first.map { $0.stringValue ?? $0.attribute(forName: "message")?.stringValue ?? "failed" }
                ?? element.elements(forName: "error").first.map { $0.stringValue ?? "error" }
            let output = element.elements(forName: "system-out").first?.stringValue
            return Case(file: file, name: name, seconds: seconds, failure: failure, output: output)
        }
    }

    /// Shards' reports as one: every case of each, in the library's order (by file, as the
    /// library runs), a case found twice kept once (its last report).
    public static func merge(_ reports: [[Case]]) -> [Case] {
        var byFile: [String: Case] = [:]
        for report in reports { for c in report { byFile[c.file] = c } }
        return byFile.keys.sorted().map { byFile[$0]! }
    }
}

/// A JUnit report that cannot be read.
public struct JUnitError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A stable part of the library for one of N CI runners (`--shard K/N`): every file in exactly
/// one shard, whatever runner asks. By count, the files in library order dealt round the shards;
/// with an earlier run's timings, the longest first, each to the shard with the least time so far.
public struct ScenarioShard: Sendable, Equatable {
    /// 1-based.
    public let index: Int
    public let count: Int

    /// The rule `--shard` takes.
    public static let rule = "must be K/N with 1 ≤ K ≤ N ≤ 1000, e.g. 2/4"

    /// `K/N` with 1 ≤ K ≤ N ≤ 1000; nil otherwise.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), (1...1000).contains(n), (1...n).contains(k) else {
            return nil
        }
        index = k
        count = n
    }

    /// This shard's files of `files` (the library in its order). `timings` are seconds by file
    /// as an earlier run's JUnit report gives them (`classname`); a file is found there by its
    /// path, or else by its folder and name; one not found counts as the average.
    public func select(_ files: [String], timings: [String: Double]? = nil) -> [String] {
        guard let timings, !timings.isEmpty else {
            return files.enumerated().filter { $0.offset % count == index - 1 }.map(\.element)
        }
        func key(_ path: String) -> String {
            let parts = path.split(separator: "/")
            return parts.suffix(2).joined(separator: "/")
        }
        var byKey: [String: Double] = [:]
        for (file, seconds) in timings { byKey[key(file)] = seconds }
        let average = timings.values.reduce(0, +) / Double(timings.count)
        let timed = files.map { ($0, timings[$0] ?? byKey[key($0)] ?? average) }
        // Longest first (ties by path), each to the least loaded shard (ties to the lowest).
        var load = Array(repeating: 0.0, count: count)
        var mine: Set<String> = []
        for (file, seconds) in timed.sorted(by: { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }) {
            let shard = load.indices.min { load[$0] != load[$1] ? load[$0] < load[$1] : $0 < $1 }!
            load[shard] += seconds
            if shard == index - 1 { mine.insert(file) }
        }
        return files.filter { mine.contains($0) }
    }
}
