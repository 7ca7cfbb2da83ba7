import ArgumentParser
import CardIO
import EMV
import Foundation
import Daemon
import Defaults
import VirtualCard

struct CardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "card",
        abstract: "Virtual cards: insert, tap or swipe one at a reader; list the embedded profiles; capture a real card into a profile; compare two.",
        subcommands: [CardInsert.self, CardTap.self, CardSwipe.self, CardList.self, CardCaptureCommand.self, CardDiffCommand.self]
    )
}

/// `cardbench card list`: the profiles compiled into the binaries, which every `--profile` and
/// `--card` option and the daemon know by name.
struct CardList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the embedded card profiles: name, first application label, interfaces, masked card number.",
        discussion: "The same profiles ship as files in /usr/share/cardbench/cards (Scenarios/cards in the source tree); a file of the same name in a daemon's host.cards replaces one.")

    func run() throws {
        for name in EmbeddedDefaults.cardProfileNames {
            let profile = try loadCardProfile(name)
            let label = profile.applications.first.map { $0.label } ?? "stripe only"
            let interfaces = profile.interfaces.map(\.rawValue).sorted().joined(separator: ",")
            print([name, label, interfaces, PAN.masked(profile.pan)].joined(separator: "\t"))
        }
    }
}

/// What `card insert`, `card tap` and `card swipe` share: the profile, and where the card goes —
/// a reader over the vpcd protocol (`--reader`), or a daemon terminal's reader (`--terminal`).
struct CardPresentation: ParsableArguments {
    @Option(help: "Card profile: a YAML file, or the name of an embedded profile (e.g. visa-credit-cvn10; cardbench card list); with --terminal also a profile of the daemon's card directories.")
    var profile: String

    @Option(help: "Reader: a Unix socket path or host:port (the card process answers over vpcd).")
    var reader: String?

    @Option(help: "A daemon terminal: the daemon holds the card in its reader (needed for a swipe).")
    var terminal: String?

    @Option(help: "With --terminal: how the card is presented again when the terminal asks, comma-separated (insert, tap, swipe), e.g. --then insert.")
    var then: String?

    @Flag(help: "Print each command and response (PIN blocks withheld, PAN masked).")
    var trace = false

    @Option(name: .customLong("remove-after"), help: "Remove the card after this many seconds, or right after answering this command (NAME or NAME#n, e.g. \"GENERATE AC#2\").")
    var removeAfter: String?

    @Option(help: "Keep the card's ATC, PIN tries and blocked state in this JSON file across insertions (--reader only).")
    var state: String?

    @OptionGroup var daemon: DaemonOptions

    func validate(_ interface: CardInterface) throws {
        guard (reader == nil) != (terminal == nil) else { throw CLIError(message: "give exactly one of --reader and --terminal", code: 2) }
        if reader != nil, interface == .magstripe {
            throw CLIError(message: "--reader: a swipe reaches a daemon terminal only (vpcd carries no stripe); use --terminal", code: 2)
        }
        if reader != nil, then != nil { throw CLIError(message: "--then: only with --terminal", code: 2) }
        if terminal != nil, state != nil { throw CLIError(message: "--state: only with --reader (the daemon keeps its card's state)", code: 2) }
        _ = try removal()
    }

    /// `--remove-after` as seconds or a command.
    func removal() throws -> (seconds: Double?, command: RemovalPoint?) {
        guard let removeAfter else { return (nil, nil) }
        if let seconds = Double(removeAfter) {
            guard seconds > 0 else { throw CLIError(message: "--remove-after: must be more than 0 seconds", code: 2) }
            guard terminal == nil else { throw CLIError(message: "--remove-after: with --terminal, a command (NAME or NAME#n), not seconds", code: 2) }
            return (seconds, nil)
        }
        do throws(DaemonError) { return (nil, try RemovalPoint(parsing: removeAfter)) } catch {
            let rule = if case .badRequest(_, let rule) = error { rule } else { "\(error)" }
            throw CLIError(message: "--remove-after: a number of seconds more than 0, or a command: \(rule)", code: 2)
        }
    }

    func present(_ interface: CardInterface) async throws {
        if let terminal {
            let yaml = FileManager.default.fileExists(atPath: profile) ? try String(contentsOfFile: profile, encoding: .utf8) : nil
            let body = CardBody(profile: yaml == nil ? profile : nil, profileYAML: yaml, removeAfter: removeAfter, interface: interface.verb,
                                then: then.map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } })
            _ = try await daemon.call(.POST, "/v1/terminals/\(pathComponent(terminal))/card", json: body)
            print("card \(interface == .contact ? "inserted into" : interface == .contactless ? "tapped on" : "swiped at") \(terminal)"
                  + (then.map { " (then: \($0))" } ?? ""))
            return
        }
        try serveOverVPCD(interface)
    }

    /// The card answers a reader over vpcd until it is removed; a tapped card leaves the field
    /// when the reader powers it off after a terminal has used it.
    func serveOverVPCD(_ interface: CardInterface) throws {
        let cardProfile = try loadCardProfile(profile)
        guard cardProfile.interfaces.contains(interface) else {
            throw CLIError(message: "--profile: \(cardProfile.name) cannot be \(interface == .contact ? "inserted" : "tapped"): its interfaces are \(cardProfile.interfaces.map(\.rawValue).sorted().joined(separator: ", "))", code: 2)
        }
        let stateFile = CardStateFile(path: state)
        let savedState = try stateFile.load()
        var card = try VirtualCard(profile: cardProfile, state: savedState)
        let endpoint: ReaderEndpoint
        do { endpoint = try ReaderEndpoint(parsing: reader!) } catch { throw CLIError(message: "--reader: \(error)", code: 2) }

        let link: VPCDCardLink
        do { link = try VPCDCardLink.connect(to: endpoint) } catch { throw CLIError(message: "\(error)") }
        let masked = PAN.masked(cardProfile.pan)
        print("card \(interface == .contact ? "inserted" : "tapped"): \(cardProfile.name) (\(masked)) \(interface == .contact ? "into" : "on") \(endpoint)")
        flushOutput()

        // Ctrl-C and the timer remove the card by closing the link; serve() then returns.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { link.close() }
            source.resume()
            return source
        }
        let (removeSeconds, removeCommand) = try removal()
        if let removeSeconds {
            DispatchQueue.global().asyncAfter(deadline: .now() + removeSeconds) { link.close() }
        }
        var seen: [String: Int] = [:]
        // Whether a terminal has talked to the card since it was powered: pcscd powers a new card
        // on to read its ATR and off again while no one uses it, which is no tap ending.
        var used = false

        var persisted = card.state
        let atr = interface == .contactless ? cardProfile.contactlessATR : cardProfile.atr
        do {
            try link.serve(atr: atr, respond: { command in
                used = true
                let response = card.respond(to: command)
                if trace {
                    let c = TraceRedaction.command(command)
                    let r = TraceRedaction.masking(pan: cardProfile.pan, in: Hex.encode(response))
                    let name = (try? CommandAPDU(bytes: command).instructionName) ?? "?"
                    print("> \(c)  \(name)\n< \(r)")
                    flushOutput()
                }
                if card.state != persisted {
                    persisted = card.state
                    try? stateFile.save(persisted)
                }
                if let removeCommand, let name = try? CommandAPDU(bytes: command).instructionName {
                    seen[name, default: 0] += 1
                    if name == removeCommand.instruction, seen[name] == removeCommand.occurrence { link.leaveAfterReply() }
                }
                return response
            }, onPower: { event in
                if event != .powerOff {
                    _ = card.powerOn(interface)
                    if event == .powerOn { used = false }
                } else if interface == .contactless, used {
                    // The tap is over: the card leaves the field.
                    link.close()
                }
                if trace {
                    print("* \(event)")
                    flushOutput()
                }
            })
        } catch {
            print("card removed: \(error)")
            flushOutput()
            sources.forEach { $0.cancel() }
            return
        }
        sources.forEach { $0.cancel() }
        print(interface == .contactless ? "card left the field" : "card removed")
    }
}

struct CardInsert: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "insert",
        abstract: "Insert a virtual card: into a reader over vpcd (answering its APDUs until removed), or into a daemon terminal's reader.",
        discussion: """
        With --reader the card is removed by Ctrl-C, by --remove-after (a number of seconds, or the command after \
        whose answer it leaves, as in scenarios: "GENERATE AC#2"), or when the reader closes the connection. \
        --reader is a Unix socket path (a cardbench virtual reader) or host:port (a cardbench reader's \
        TCP port, or vsmartcard's vpcd inside pcscd, usually 127.0.0.1:35963). With --terminal the daemon \
        holds the card (as scenarios do).
        """
    )

    @OptionGroup var options: CardPresentation

    func validate() throws { try options.validate(.contact) }

    func run() async throws { try await options.present(.contact) }
}

struct CardTap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tap",
        abstract: "Tap a virtual card on a contactless reader: it answers with a PC/SC part 3 ATR and leaves the field when a terminal that used it powers it off.",
        discussion: """
        The card must list contactless in its profile's interfaces (docs/contactless.md). With --terminal the daemon \
        holds it; --then insert presents it again in the chip slot when the tap ends "try another interface".
        """
    )

    @OptionGroup var options: CardPresentation

    func validate() throws { try options.validate(.contactless) }

    func run() async throws { try await options.present(.contactless) }
}

struct CardSwipe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swipe",
        abstract: "Swipe a virtual card's magnetic stripe at a daemon terminal (its tracks, from the profile).",
        discussion: """
        A chip card (service code 2xx or 6xx) swiped first is refused ("insert the card"): give --then insert. A swipe \
        after a chip that could not be read is a fallback (POS entry mode 80) when the terminal allows it \
        (terminal.<name>.fallback); insert such a card with --then swipe.
        """
    )

    @OptionGroup var options: CardPresentation

    func validate() throws { try options.validate(.magstripe) }

    func run() async throws { try await options.present(.magstripe) }
}

func flushOutput() { fflush(nil) }

/// Reads and parses a card profile named by an option: a profile file, or the name of an
/// embedded profile (`visa-credit-cvn10`) when no such file exists. Failures are one line naming
/// the option, the file, the field and the rule.
func loadCardProfile(_ path: String, option: String = "--profile") throws -> CardProfile {
    let text: String
    var source = path
    if !path.contains("/"), !FileManager.default.fileExists(atPath: path), let embedded = EmbeddedDefaults.cardProfile(named: path) {
        text = embedded
        source = EmbeddedDefaults.displayName(path)
    } else {
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            let hint = path.contains("/") ? "" : " (nor is it an embedded profile: \(EmbeddedDefaults.cardProfileNames.prefix(6).joined(separator: ", ")), …; see cardbench card list)"
            throw CLIError(message: "\(option): cannot read '\(path)': \(error.localizedDescription)\(hint)", code: 2)
        }
    }
    do { return try CardProfile.parse(yaml: text, file: source) } catch {
        throw CLIError(message: "\(option): \(error)", code: 2)
    }
}

/// A virtual card's state (ATC, PIN tries, blocked flags) kept in a JSON file by `--state`.
struct CardStateFile {
    let path: String?

    func load() throws -> CardState? {
        guard let path, FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(CardState.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw CLIError(message: "--state: '\(path)' is not a card state file: \(error.localizedDescription)", code: 2)
        }
    }

    func save(_ value: CardState) throws {
        guard let path else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // Write-then-rename so a crash never leaves half a state file.
        do { try encoder.encode(value).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw CLIError(message: "--state: cannot write '\(path)': \(error.localizedDescription)")
        }
    }
}
