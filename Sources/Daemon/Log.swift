import Foundation
import Logging

/// The daemon's and the tool's log lines: one line per message on standard error, `label:
/// message` — what journald keeps for a service. When standard error is the journal (systemd sets
/// `JOURNAL_STREAM`), each line starts with its sd-daemon(3) priority (`<4>` for a warning), so
/// `journalctl -p warning` finds the warnings; a terminal gets the plain line.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let journal: Bool

    public init(label: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.label = label
        journal = environment["JOURNAL_STREAM"] != nil
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        FileHandle.standardError.write(Data(line(event.level, "\(event.message)").utf8))
    }

    /// The line written for a message at `level`.
    func line(_ level: Logger.Level, _ message: String) -> String {
        (journal ? "<\(Self.priority(level))>" : "") + "\(label): \(message)\n"
    }

    /// syslog's priority for a swift-log level.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Makes every `Logger` of this process write such lines, labelled `label` (the program's name).
    public static func bootstrap(_ label: String) {
        LoggingSystem.bootstrap { _ in LineLogHandler(label: label) }
    }
}
