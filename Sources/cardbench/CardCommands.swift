import ArgumentParser
import CardIO
import EMV
import Foundation
import Daemon
import VirtualCard

struct CardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "card",
        abstract: "Virtual cards: insert one into a reader.",
        subcommands: [CardInsert.self]
    )
}

struct CardInsert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "insert",
        abstract: "Connect a virtual card to a reader (vpcd protocol) and answer its APDUs until removed.",
        discussion: """
        The card is removed by Ctrl-C, by --remove-after (a number of seconds, or the command after \
        whose answer it leaves, as in scenarios: "GENERATE AC#2"), or when the reader closes the connection. \
        --reader is a Unix socket path (a cardbench virtual reader) or host:port (a cardbench reader's \
        TCP port, or vsmartcard's vpcd inside pcscd, usually 127.0.0.1:35963).
        """
    )

    @Option(help: "Card profile (YAML), e.g. Scenarios/cards/visa-credit-cvn10.yaml.")
    var profile: String

    @Option(help: "Reader: a Unix socket path or host:port.")
    var reader: String

    @Flag(help: "Print each command and response (PIN blocks withheld, PAN masked).")
    var trace = false

    @Option(name: .customLong("remove-after"), help: "Remove the card after this many seconds, or right after answering this command (NAME or NAME#n, e.g. \"GENERATE AC#2\").")
    var removeAfter: String?

    @Option(help: "Keep the card's ATC, PIN tries and blocked state in this JSON file across insertions.")
    var state: String?

    func validate() throws {
        _ = try removal()
    }

    /// `--remove-after` as seconds or a command.
    func removal() throws -> (seconds: Double?, command: RemovalPoint?) {
        guard let removeAfter else { return (nil, nil) }
        if let seconds = Double(removeAfter) {
            guard seconds > 0 else { throw CLIError(message: "--remove-after: must be more than 0 seconds", code: 2) }
            return (seconds, nil)
        }
        do throws(DaemonError) { return (nil, try RemovalPoint(parsing: removeAfter)) } catch {
            let rule = if case .badRequest(_, let rule) = error { rule } else { "\(error)" }
            throw CLIError(message: "--remove-after: a number of seconds more than 0, or a command: \(rule)", code: 2)
        }
    }

    func run() throws {
        let cardProfile = try loadCardProfile(profile)
        let stateFile = CardStateFile(path: state)
        let savedState = try stateFile.load()
        var card = try VirtualCard(profile: cardProfile, state: savedState)
        let endpoint: ReaderEndpoint
        do { endpoint = try ReaderEndpoint(parsing: reader) } catch { throw CLIError(message: "--reader: \(error)", code: 2) }

        let link: VPCDCardLink
        do { link = try VPCDCardLink.connect(to: endpoint) } catch { throw CLIError(message: "\(error)") }
        let masked = PAN.masked(cardProfile.pan)
        print("card inserted: \(cardProfile.name) (\(masked)) into \(endpoint)")
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

        var persisted = card.state
        do {
            try link.serve(atr: card.atr, respond: { command in
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
                if event != .powerOff { card.reset() }
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
        print("card removed")
    }
}

func flushOutput() { fflush(nil) }

/// Reads and parses a card profile named by an option; failures are one line naming the option,
/// the file, the field and the rule.
func loadCardProfile(_ path: String, option: String = "--profile") throws -> CardProfile {
    let text: String
    do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
        throw CLIError(message: "\(option): cannot read '\(path)': \(error.localizedDescription)", code: 2)
    }
    do { return try CardProfile.parse(yaml: text, file: path) } catch {
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
