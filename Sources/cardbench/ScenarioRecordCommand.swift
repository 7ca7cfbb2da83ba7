import ArgumentParser
import Daemon
import Foundation

/// `cardbench scenario record <transaction>`: a transaction of a daemon's ledger written as a
/// scenario that replays it (docs/recording.md).
struct ScenarioRecord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Write a transaction of the daemon's ledger as a scenario that replays it, its card profile in a cards/ folder beside it.",
        discussion: """
        The request is rebuilt from the ledger row; the card is the daemon's profile with its number \
        when that profile answers as the card did, else a profile made from the trace (number \
        replaced); the keypad answers, a card removal and the host's answers come from the trace \
        and the row; the expectations are the callback's fields (the unstable ones by form), the \
        ledger row, the APDUs in order and the host messages. What could not be copied faithfully \
        is said in the scenario's description. Exit 1 when the transaction cannot be recorded.
        """)

    @Argument(help: "The transaction: its ledger id or transactionId.")
    var transaction: String

    @Option(help: "The scenario file to write (default: recorded-<id>.yaml here); its cards go in a cards/ folder beside it.")
    var out: String?

    @Flag(help: "Print the scenario instead of writing files (its cards are not written).")
    var stdout = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let key = transaction.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? transaction
        let recorded = try decodeReply(RecordedScenario.self, try await daemon.call(.GET, "/v1/transactions/\(key)/scenario"))
        if stdout {
            print(recorded.scenario, terminator: "")
            return
        }
        let file = out ?? recorded.file
        let directory = (file as NSString).deletingLastPathComponent.isEmpty ? "." : (file as NSString).deletingLastPathComponent
        let cards = (directory as NSString).appendingPathComponent("cards")
        do { try FileManager.default.createDirectory(atPath: cards, withIntermediateDirectories: true) } catch {
            throw CLIError(message: "--out: cannot make \(cards): \(error.localizedDescription)", code: 2)
        }
        for card in recorded.cards {
            let path = (cards as NSString).appendingPathComponent(card.file)
            if let existing = try? String(contentsOfFile: path, encoding: .utf8) {
                guard existing == card.profile else {
                    throw CLIError(message: "\(path) exists and holds another profile: record elsewhere (--out) or move it", code: 2)
                }
                continue
            }
            do { try card.profile.write(toFile: path, atomically: true, encoding: .utf8) } catch {
                throw CLIError(message: "cannot write \(path): \(error.localizedDescription)", code: 2)
            }
            print("wrote \(path)")
        }
        do { try recorded.scenario.write(toFile: file, atomically: true, encoding: .utf8) } catch {
            throw CLIError(message: "--out: cannot write \(file): \(error.localizedDescription)", code: 2)
        }
        print("wrote \(file)")
        for note in recorded.notes { print("note: \(note)") }
    }
}
