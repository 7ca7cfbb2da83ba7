import ArgumentParser
import Daemon
import Defaults
import EMV
import Foundation

/// The process's entry point: runs `Cardbench.main()` on the global executor while the main
/// thread waits, as `cardbenchd` does (an `async` main hands the main thread to
/// `dispatch_main()`, which valgrind cannot run; `docs/performance.md` profiles this tool's
/// benchmarks with callgrind).
@main
enum CardbenchMain {
    static func main() {
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await Cardbench.main()
            finished.signal()
        }
        finished.wait()
    }
}

struct Cardbench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cardbench",
        abstract: "A payment-terminal test bench: EMV tools, virtual cards, in-process sales, the ledger and a client of the cardbench daemon (cardbenchd).",
        version: CardbenchVersion.string,
        subcommands: [EMVCommand.self, ISO8583Command.self, CardCommand.self, SaleCommand.self, OpenCommand.self, TxCommand.self, NotificationsCommand.self, TerminalsCommand.self, BillpocketCommand.self, WorldlineCommand.self, CitconCommand.self, ScenarioCommand.self,
                      ReadersCommand.self, PCSCCommand.self, KeypadCommand.self, AbortCommand.self, HostCommand.self, EventsCommand.self, ClockCommand.self,
                      LedgerCommand.self, BenchCommand.self, ConsoleCommand.self]
    )

    /// Bad input gets one line on stderr naming the argument and the rule, and exit status 2 —
    /// scripts and CI logs read it without a usage screen in the way.
    static func main() async {
        LineLogHandler.bootstrap("cardbench")
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as EMVError {
            FileHandle.standardError.write(Data("cardbench: \(CLIError.optionName(error.field)): \(error.rule)\n".utf8))
            Foundation.exit(2)
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("cardbench: \(error.message)\n".utf8))
            Foundation.exit(error.code)
        } catch {
            let code = exitCode(for: error)
            if code == .success || error is ExitCode {
                exit(withError: error)
            }
            FileHandle.standardError.write(Data("cardbench: \(message(for: error)) (see --help)\n".utf8))
            Foundation.exit(2)
        }
    }
}

/// A command-line failure that is not a validation error of the EMV library.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    var code: Int32 = 1

    /// ArgumentParser prints a `validate()` error through its description.
    var description: String { message }

    /// Library errors name fields ("pan", "tag 9F37"); on the command line those are options.
    static func optionName(_ field: String) -> String {
        if field.hasPrefix("tag ") { return "--" + field }
        let options: Set<String> = ["cvn", "imk", "pan", "psn", "cvr", "iad", "counters", "arqc", "arc", "csu",
                                    "proprietary-data", "pin", "key", "format", "tag"]
        return options.contains(field) ? "--" + field : field
    }
}

/// JSON output shared by the `--json` options: sorted keys so output is stable for diffing.
func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
