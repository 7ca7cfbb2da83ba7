import ArgumentParser
import CardIO
import Daemon
import EMV
import Foundation
import Logging
import Terminal
import VirtualCard

/// `cardbench card capture`: a card in a reader read into a profile that answers the same
/// (docs/recording.md).
struct CardCaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Read a card in a reader into a profile that answers a terminal the same way.",
        discussion: """
        The card is read as a terminal reads it, as far as it allows: ATR, PSE or PPSE (or the known \
        AIDs), each application's FCI, GET PROCESSING OPTIONS, every record, GET DATA, its log, and one \
        GENERATE AC asking for an AAC, for its issuer application data (--no-generate-ac skips it). \
        What a card never reveals is made and the profile says so: the issuer master key, the ODA \
        certificates (re-issued under the bench CA for the same methods, key lengths and expiries), \
        the PIN. A number not on a test range is replaced by one of the same BIN and length unless \
        --keep-pan. Exit 0 with a profile, 1 when no card came or the card gives none, 2 for bad input.
        """)

    @Option(help: "The reader: pcsc:<pattern> (a PC/SC reader), serial:<path> (a serial reader), or virtual:<socket path> (a virtual reader listening there, for any vpcd card).")
    var reader: String?

    @Option(help: "A daemon terminal: the card in its reader is read by the daemon.")
    var terminal: String?

    @Option(help: "How the card is read: contact or contactless.")
    var interface = "contact"

    @Option(help: "Write the profile to this file (default: standard output, the report on standard error).")
    var out: String?

    @Option(help: "The PIN the profile gets (a card never reveals its own).")
    var pin = "1234"

    @Option(help: "The profile's name (default: \"captured <first label>\").")
    var name: String?

    @Flag(name: .customLong("keep-pan"), help: "Keep a card number that is not on a test range (it is replaced otherwise).")
    var keepPAN = false

    @Flag(name: .customLong("no-generate-ac"), help: "Do not send GENERATE AC: no ATC is spent, and the CVN is assumed from the scheme.")
    var noGenerateAC = false

    @Option(help: "Seconds to wait for a card.")
    var wait = 30

    @Option(help: "The bench CA that re-issues the certificates (default: Scenarios/ca/bench-ca.yaml, then /usr/share/cardbench/ca/bench-ca.yaml).")
    var ca: String?

    @Option(help: "A CAPK file with the card's CA key, to copy its certificates' exact key lengths and expiries; repeat for more.")
    var capk: [String] = []

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        guard (reader == nil) != (terminal == nil) else { throw ValidationError("give exactly one of --reader and --terminal") }
        guard interface == "contact" || interface == "contactless" else { throw ValidationError("--interface: must be contact or contactless, got '\(interface)'") }
        guard (1...600).contains(wait) else { throw ValidationError("--wait: 1 to 600 seconds, got \(wait)") }
    }

    func run() async throws {
        if let out, FileManager.default.fileExists(atPath: out) == false {
            guard FileManager.default.isWritableFile(atPath: (out as NSString).deletingLastPathComponent.isEmpty ? "." : (out as NSString).deletingLastPathComponent) else {
                throw CLIError(message: "--out: cannot write in the directory of \(out)", code: 2)
            }
        }
        let body = CaptureBody(interface: interface, pin: pin, keepPan: keepPAN, name: name, waitSeconds: wait, generateAc: !noGenerateAC)
        let view: CaptureView
        if let terminal {
            let data = try await daemon.call(.POST, "/v1/terminals/\(terminal.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? terminal)/capture", json: body)
            view = try decodeReply(CaptureView.self, data)
        } else {
            view = try local(body)
        }
        let report = (["card \(view.maskedPAN)\(view.panReplaced ? " (number replaced: not on a test range)" : "")", "read:"]
                      + view.read.map { "  \($0)" } + ["made:"] + view.made.map { "  \($0)" }).joined(separator: "\n")
        if let out {
            do { try view.profile.write(toFile: out, atomically: true, encoding: .utf8) } catch {
                throw CLIError(message: "--out: cannot write \(out): \(error.localizedDescription)", code: 2)
            }
            print(report)
            print("wrote \(out)")
        } else {
            FileHandle.standardError.write(Data((report + "\n").utf8))
            print(view.profile, terminator: "")
        }
    }

    /// The capture through a reader of this process.
    func local(_ body: CaptureBody) throws -> CaptureView {
        let ca: CertificationAuthority?
        var keys: [CAPublicKey]
        do throws(DaemonError) {
            ca = try CardCaptureService.benchCA(self.ca)
        } catch { throw CLIError(message: "--ca: \(error)", code: 2) }
        do throws(ConfigurationError) { keys = try CAPKStore.loadWithEmbedded(capk, key: "--capk") } catch {
            throw CLIError(message: "\(error)", code: 2)
        }
        if let ca { keys += ca.publicKeys }
        let options: (CardCapture.Options, CapturedProfile.Options, Duration)
        do throws(DaemonError) { options = try body.options(ca: ca, caKeys: keys, today: CardCaptureService.today()) } catch {
            throw CLIError(message: "\(error)", code: 2)
        }
        var logger = Logger(label: "cardbench.capture")
        logger.logLevel = .warning
        let opened: (reader: any CardReader, stop: @Sendable () -> Void)
        do throws(DaemonError) { opened = try CardCaptureService.openReader(reader!, logger: logger) } catch {
            throw CLIError(message: "\(error)", code: error.statusCode == 400 ? 2 : 1)
        }
        defer { opened.stop() }
        if reader!.hasPrefix("virtual:") {
            FileHandle.standardError.write(Data("waiting \(wait) s for a card at \(reader!.dropFirst("virtual:".count)) (cardbench card insert --reader …)\n".utf8))
        }
        do throws(DaemonError) {
            return try CardCaptureService.capture(reader: opened.reader, wait: .seconds(wait), capture: options.0, profile: options.1)
        } catch {
            throw CLIError(message: "\(error)", code: error.statusCode == 400 ? 2 : 1)
        }
    }
}

/// `cardbench card diff a.yaml b.yaml`: what differs in the terminal's terms.
struct CardDiffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "What differs between two card profiles in the terminal's terms: AIP bits, CVM rules, AFL, IACs, DOLs, ODA.",
        discussion: "Exit 0 when a terminal would see the same card, 1 when something differs, 2 for a profile that does not load. Keys and certificate values, which every capture makes anew, are not compared; their methods and lengths are.")

    @Argument(help: "The first profile: a file or an embedded profile's name.")
    var first: String

    @Argument(help: "The second profile.")
    var second: String

    func run() throws {
        let a = try loadCardProfile(first, option: "first")
        let b = try loadCardProfile(second, option: "second")
        let lines = ProfileDiff.differences(a, b)
        if lines.isEmpty {
            print("no difference a terminal would see")
            return
        }
        for line in lines { print(line) }
        throw ExitCode(1)
    }
}
