import ArgumentParser
import Daemon
import Foundation

/// `cardbench console`: the link that opens the bench console signed in (docs/console.md).
struct ConsoleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Print (or open) the link to the daemon's web console, signed in with its API token.",
        discussion: """
        The console is served on the daemon's TCP listener (http.port). The link carries the token \
        after '#', which the browser never sends to a server: the page keeps it for the tab and \
        takes it out of the address bar.
        """)

    @Option(help: "The daemon's runtime directory, where http.port and api.token are (default: ./.cardbench/run, then /run/cardbench).")
    var runtimeDirectory: String?

    @Option(help: "The listener's base URL (default: http://127.0.0.1:<the port in http.port>).")
    var url: String?

    @Flag(help: "Open the link with xdg-open instead of printing it.")
    var open = false

    func run() throws {
        let candidates = runtimeDirectory.map { [$0] } ?? [DaemonConfiguration().effectiveRuntimeDirectory, "/run/cardbench"]
        guard let directory = candidates.first(where: { FileManager.default.fileExists(atPath: ($0 as NSString).appendingPathComponent(APIToken.fileName)) }) else {
            throw CLIError(message: "no api.token in \(candidates.joined(separator: " or ")): is cardbenchd running with its TCP listener on (http.port)? --runtime-directory names another")
        }
        let base: String
        if let url {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                throw CLIError(message: "--url: must be an http(s)://HOST:PORT base URL, got \"\(url)\"", code: 2)
            }
            base = url.hasSuffix("/") ? String(url.dropLast()) : url
        } else {
            let portFile = (directory as NSString).appendingPathComponent("http.port")
            guard let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw CLIError(message: "no http.port in \(directory): the daemon's TCP listener is off (http.port: off); the console needs it (docs/console.md)")
            }
            base = "http://127.0.0.1:\(port)"
        }
        let token: String
        do {
            token = try String(contentsOfFile: (directory as NSString).appendingPathComponent(APIToken.fileName), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            throw CLIError(message: "cannot read \(directory)/\(APIToken.fileName): \(error.localizedDescription) (it is readable by the daemon's group)")
        }
        let link = "\(base)/console/#token=\(token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token)"
        guard open else { return print(link) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // The link is one argument, never through a shell.
        process.arguments = ["xdg-open", link]
        do { try process.run() } catch { throw CLIError(message: "cannot run xdg-open: \(error.localizedDescription)") }
        process.waitUntilExit()
        if process.terminationStatus != 0 { throw CLIError(message: "xdg-open exited with \(process.terminationStatus)") }
    }
}
