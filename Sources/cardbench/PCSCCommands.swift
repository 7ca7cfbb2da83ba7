import ArgumentParser
import CardIO
import Foundation

/// `cardbench pcsc …`: what pcscd sees, straight from libpcsclite (no daemon needed).
struct PCSCCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pcsc",
        abstract: "PC/SC readers as pcscd sees them, to write a terminal's reader: pcsc:<pattern>.",
        subcommands: [PCSCListCommand.self]
    )
}

struct PCSCListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "The readers pcscd has: name, state, card ATR and protocol, and a pattern for each.",
        discussion: """
        A terminal names its reader with `reader: pcsc:<pattern>`. The pattern is matched against the \
        name without pcscd's trailing plug index and slot (the last two hex pairs, which change with \
        plug order): as a substring ignoring case, or as a regular expression when written /…/. The \
        USB serial number in parentheses, when the reader has one, pins one physical reader. \
        PCSCLITE_CSOCK_NAME selects another pcscd socket, as for every libpcsclite program.
        """
    )

    @Option(help: "Show only the readers this pattern matches (as in reader: pcsc:<pattern>).")
    var match: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        var pattern: PCSCReaderPattern?
        if let match {
            do throws(PCSCReaderPattern.PatternError) { pattern = try PCSCReaderPattern(parsing: match) } catch {
                throw CLIError(message: "--match: \(error.rule)", code: 2)
            }
        }
        let readers: [PCSCReader.Listing]
        do throws(PCSCError) { readers = try PCSCReader.survey() } catch {
            throw CLIError(message: "pcscd cannot be reached: \(error); is it running? (systemctl status pcscd.socket; apt-get install pcscd)")
        }
        let shown = readers.filter { pattern?.matches($0.name) ?? true }
        if json { return try printJSON(shown) }
        guard !shown.isEmpty else {
            print(readers.isEmpty ? "pcscd lists no readers" : "none of pcscd's \(readers.count) readers matches \(match ?? "")")
            return
        }
        for r in shown {
            var line = "\(r.name)\n  state \(r.state.isEmpty ? "unknown" : r.state)"
            if let atr = r.atr { line += ", ATR \(atr)\(r.transmissionProtocol.map { " (T=\($0))" } ?? "")" }
            // Slots of one reader share the base name: only the full name tells them apart.
            let shared = readers.filter { $0.baseName == r.baseName }.count > 1
            line += "\n  reader: pcsc:\(shared ? r.name : r.baseName)"
            if shared { line += "   (pcsc:\(r.baseName) picks the first of \(readers.filter { $0.baseName == r.baseName }.count) readers of that name)" }
            print(line)
        }
    }
}
