import ArgumentParser
import Daemon
import Foundation
import EMV
import ISO8583

struct ISO8583Command: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iso8583",
        abstract: "Decode ISO 8583 messages in the formats cardbench's host link speaks; ask a terminal's external host if it is there.",
        subcommands: [ISO8583Decode.self, ISO8583Echo.self]
    )
}

struct ISO8583Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Send an 0800 echo test (or a sign-on) to a terminal's external ISO 8583 host and show its 0810.",
        discussion: """
            The 0800 carries the terminal's TID and its next STAN; field 70 is 301 (echo test), or 001 \
            with --sign-on. Exit status 0 when the host answers 00, 1 when it answers another code or \
            not at all, 2 when the terminal has no external host.
            """
    )

    @Argument(help: "The terminal (default: the daemon's first).")
    var terminal: String?

    @Flag(help: "Send a sign-on (70 = 001) instead of an echo test (301).")
    var signOn = false

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        var name = terminal ?? "bench1"
        if terminal == nil, let first = try decodeReply([TerminalView].self, try await daemon.call(.GET, "/v1/terminals")).first { name = first.name }
        let data = try await daemon.call(.POST, "/v1/terminals/\(pathComponent(name))/iso8583/echo", json: ISO8583EchoBody(signOn: signOn ? true : nil))
        let echo = try decodeReply(ISO8583EchoView.self, data)
        if json {
            printRaw(data)
        } else {
            let outcome = echo.responseCode.map { "answered \($0)" } ?? "no answer: \(echo.error ?? "")"
            print("\(echo.function) of \(echo.terminal) (STAN \(echo.stan)) to \(echo.host): \(outcome) in \(String(format: "%.1f", echo.milliseconds)) ms")
            printHostMessages(echo.messages)
        }
        if !(echo.answered && echo.responseCode == "00") { throw ExitCode(1) }
    }
}

struct ISO8583Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Unpack an ISO 8583 message field by field, with names; card numbers and tracks masked, PIN blocks withheld.",
        discussion: """
        Packagers: pyiso8583-default (alias default), pyiso8583-default-ascii (alias default_ascii), jpos-iso87a, \
        jpos-iso87b. With --framing, the hex starts with the frame's length header (and NAC's TPDU).
        """
    )

    @Argument(help: "The message in hex (spaces allowed).")
    var hex: String

    @Option(help: "The message format: pyiso8583-default, pyiso8583-default-ascii, jpos-iso87a or jpos-iso87b.")
    var packager = "pyiso8583-default"

    @Option(help: "The frame around the message, if the hex includes it: none, binary2, nac or ascii4.")
    var framing = "none"

    @Flag(help: "Print JSON instead of lines.")
    var json = false

    func validate() throws {
        guard Packager.named(packager) != nil else {
            throw ValidationError("--packager: '\(packager)' is not one of \(Packager.all.map(\.name).joined(separator: ", "))")
        }
        guard framing == "none" || Framing(rawValue: framing) != nil else {
            throw ValidationError("--framing: '\(framing)' is not one of none, binary2, nac, ascii4")
        }
    }

    func run() throws {
        let p = Packager.named(packager)!
        var bytes = try Hex.decode(hex.filter { !$0.isWhitespace }, field: "hex")
        var tpdu: [UInt8]? = nil
        if let f = Framing(rawValue: framing) {
            guard bytes.count >= f.headerLength else { throw ISO8583Error(part: "frame", reason: "shorter than its length header") }
            let length = try f.bodyLength(Array(bytes.prefix(f.headerLength)))
            let body = Array(bytes.dropFirst(f.headerLength))
            guard body.count == length else {
                throw ISO8583Error(part: "frame", reason: "the header announces \(length) bytes, \(body.count) follow")
            }
            (tpdu, bytes) = f.split(body)
        }
        let message = try p.unpack(bytes)
        let described = message.described(direction: "in", packager: p)
        if json {
            try printJSON(described)
            return
        }
        if let tpdu { print("TPDU \(Hex.encode(tpdu))") }
        print("MTI \(described.mti) (\(described.meaning))")
        for f in described.fields {
            let number = f.field < 10 ? "  \(f.field)" : f.field < 100 ? " \(f.field)" : "\(f.field)"
            print("\(number) \(f.name): \(f.value)")
            for t in f.tlv ?? [] { print("      \(t.tag) \(t.name): \(t.value)") }
        }
    }
}
