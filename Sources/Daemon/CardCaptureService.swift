import CardIO
import EMV
import Foundation
import Logging
import Terminal
import VirtualCard
import Workflows

/// `{"interface": "contact", "pin": "1234", "keepPan": false, "name": …, "waitSeconds": 30}`:
/// `POST /v1/terminals/{name}/capture`.
public struct CaptureBody: Codable, Sendable {
    public var interface: String?
    public var pin: String?
    public var keepPan: Bool?
    public var name: String?
    public var waitSeconds: Int?
    public var generateAc: Bool?

    public init(interface: String? = nil, pin: String? = nil, keepPan: Bool? = nil, name: String? = nil, waitSeconds: Int? = nil,
                generateAc: Bool? = nil) {
        self.interface = interface
        self.pin = pin
        self.keepPan = keepPan
        self.name = name
        self.waitSeconds = waitSeconds
        self.generateAc = generateAc
    }

    /// The capture's and the profile's options, each field checked.
    public func options(ca: CertificationAuthority?, caKeys: [CAPublicKey], today: ODADate)
        throws(DaemonError) -> (CardCapture.Options, CapturedProfile.Options, Duration) {
        var capture = CardCapture.Options()
        switch interface ?? "contact" {
        case "contact": capture.interface = .contact
        case "contactless": capture.interface = .contactless
        case let other: throw .badRequest(field: "interface", rule: "must be contact or contactless, got \"\(other.prefix(20))\"")
        }
        capture.generateAC = generateAc ?? true
        capture.date = [today.year % 100, today.month, today.day].map { UInt8(($0 / 10) << 4 | ($0 % 10)) }
        var profile = CapturedProfile.Options()
        if let pin {
            guard (4...12).contains(pin.count), pin.allSatisfy(\.isASCIIDigit) else { throw .badRequest(field: "pin", rule: "must be 4 to 12 digits") }
            profile.pin = pin
        }
        if let name {
            guard (1...64).contains(name.count), !name.contains(where: \.isNewline) else {
                throw .badRequest(field: "name", rule: "must be 1 to 64 characters on one line")
            }
            profile.name = name
        }
        profile.keepPAN = keepPan ?? false
        profile.ca = ca
        profile.caKeys = caKeys
        let wait = waitSeconds ?? 30
        guard (1...600).contains(wait) else { throw .badRequest(field: "waitSeconds", rule: "must be 1 to 600 seconds, got \(wait)") }
        return (capture, profile, .seconds(wait))
    }
}

/// What a capture made: the profile's YAML and what was read and what was made.
public struct CaptureView: Codable, Sendable {
    public let profile: String
    public let maskedPAN: String
    public let panReplaced: Bool
    public let read: [String]
    public let made: [String]

    public init(yaml: String, report: CapturedProfile.Report) {
        profile = yaml
        maskedPAN = report.maskedPAN
        panReplaced = report.panReplaced
        read = report.read
        made = report.made
    }
}

/// Reading a card into a profile (`cardbench card capture`, docs/recording.md), through a reader
/// of any kind the bench has or a daemon terminal's reader.
public enum CardCaptureService {
    /// Where the bench CA (test material) is looked for when none is named: the source tree, then
    /// the Debian package's copy.
    public static let caSearchPath = ["Scenarios/ca/bench-ca.yaml", "/usr/share/cardbench/ca/bench-ca.yaml"]

    /// The bench CA from `path`, or the first of the search path that exists; nil when none does.
    public static func benchCA(_ path: String? = nil, field: String = "ca") throws(DaemonError) -> CertificationAuthority? {
        let candidates = path.map { [$0] } ?? caSearchPath
        for candidate in candidates {
            guard let text = try? String(contentsOfFile: candidate, encoding: .utf8) else {
                if path != nil { throw .badRequest(field: field, rule: "cannot read \(candidate)") }
                continue
            }
            do { return try CertificationAuthority.parse(yaml: text, file: candidate) } catch { throw .badRequest(field: field, rule: error.description) }
        }
        return nil
    }

    /// Today as ODA dates are written.
    public static func today(_ date: Date = Date()) -> ODADate {
        let c = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: date)
        return ODADate(year: c.year!, month: c.month!, day: c.day!)
    }

    /// Reads the card on `link` and makes its profile.
    public static func capture(_ link: any CardLink, capture: CardCapture.Options, profile: CapturedProfile.Options)
        throws(DaemonError) -> CaptureView {
        let result: CardCapture.Result
        do { result = try CardCapture.run(link, options: capture) } catch {
            throw .conflict("the card could not be read: \(error)")
        }
        do {
            let (yaml, report) = try CapturedProfile.make(from: result, options: profile)
            return CaptureView(yaml: yaml, report: report)
        } catch {
            throw .conflict("the card was read (\(result.notes.joined(separator: "; "))) but gives no profile: \(error.reason)")
        }
    }

    /// A reader of this process for one capture: `pcsc:<pattern>`, `serial:<path>`, or
    /// `virtual:<socket path>` (a virtual reader listening there, which any vpcd card can
    /// connect to: `cardbench card insert --reader <path>`). Started; the caller stops it.
    public static func openReader(_ text: String, logger: Logger) throws(DaemonError) -> (reader: any CardReader, stop: @Sendable () -> Void) {
        if text.hasPrefix("virtual:") {
            let path = String(text.dropFirst("virtual:".count))
            guard path.hasPrefix("/") || path.hasPrefix("."), path.count > 1 else {
                throw .badRequest(field: "--reader", rule: "virtual:<socket path> needs a path, e.g. virtual:./capture.sock, got \"\(text)\"")
            }
            do {
                let reader = try VirtualReader(name: "capture", socketPath: path, logger: logger)
                try reader.start()
                return (reader, { reader.stop() })
            } catch {
                throw .conflict("cannot listen on \(path): \(error)")
            }
        }
        let spec: ReaderSpec
        do { spec = try ReaderSpec(parsing: text) } catch {
            throw .badRequest(field: "--reader", rule: "must be pcsc:<pattern>, serial:<path> or virtual:<socket path>, got \"\(text)\"")
        }
        switch spec {
        case .pcsc(let pattern):
            let reader = PCSCReader(name: "capture", pattern: pattern, logger: logger)
            reader.start()
            return (reader, { reader.stop() })
        case .serial(let path):
            let reader = SerialReader(name: "capture", path: path, settings: SerialSettings(), logger: logger)
            reader.start()
            return (reader, { reader.stop() })
        case .udev, .virtual:
            throw .badRequest(field: "--reader", rule: "must be pcsc:<pattern>, serial:<path> or virtual:<socket path>, got \"\(text)\"")
        }
    }

    /// Waits up to `wait` for a card in `reader`, captures it and powers it off.
    public static func capture(reader: any CardReader, wait: Duration, capture options: CardCapture.Options, profile: CapturedProfile.Options)
        throws(DaemonError) -> CaptureView {
        let channel: any CardChannel
        do { channel = try reader.connect(timeout: wait) } catch {
            throw .conflict("no card in \(reader.name) within \(wait): \(error)")
        }
        defer { channel.powerOff() }
        return try capture(ChannelCardLink(channel), capture: options, profile: profile)
    }
}

extension Bench {
    /// `POST /v1/terminals/{name}/capture`: the card in a terminal's reader, read into a profile.
    /// The terminal is taken for the capture, as for a transaction.
    public func capture(terminal name: String?, _ body: CaptureBody) async throws(DaemonError) -> CaptureView {
        let terminal = try self.terminal(name)
        let (captureOptions, profileOptions, wait) = try body.options(ca: try CardCaptureService.benchCA(configuration.benchCAFile, field: "emv.bench_ca"), caKeys: terminal.terminalData.oda.caKeys,
                                                                       today: CardCaptureService.today())
        do { try terminal.acquire("card capture") } catch { throw .conflict("terminal \(terminal.settings.name) is busy: \(error)") }
        defer { terminal.release() }
        let outcome: Result<CaptureView, DaemonError> = await terminal.perform {
            let session: any CardSession
            do { session = try terminal.waitForCard(timeout: wait) } catch {
                return .failure(.conflict("no card in terminal \(terminal.settings.name)'s reader within \(wait): \(error)"))
            }
            defer { session.powerOff() }
            do throws(DaemonError) { return .success(try CardCaptureService.capture(session, capture: captureOptions, profile: profileOptions)) } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }
}
