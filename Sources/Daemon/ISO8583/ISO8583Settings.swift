import ISO8583

/// Where an external ISO 8583 host is and how to talk to it: `host.upstream` (or a terminal's
/// `terminal.<name>.host`) as `iso8583://HOST:PORT`, the format in `host.iso8583.*`.
public struct ISO8583Upstream: Sendable, Equatable {
    public var host: String
    public var port: UInt16

    /// Reads `iso8583://HOST:PORT` (an IPv6 literal in brackets).
    public init(parsing text: String, key: String) throws(ConfigurationError) {
        let rule = "must be iso8583://HOST:PORT (an external ISO 8583 host) or emulated (cardbench's own issuer), got \"\(text)\""
        guard text.hasPrefix("iso8583://") else { throw ConfigurationError(key: key, rule: rule) }
        let rest = String(text.dropFirst("iso8583://".count))
        guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]), port > 0 else {
            throw ConfigurationError(key: key, rule: rule)
        }
        var host = String(rest[..<colon])
        // An IPv6 literal comes in brackets, and only an IPv6 literal has colons.
        if host.hasPrefix("[") || host.hasSuffix("]") {
            guard host.count > 2, host.hasPrefix("["), host.hasSuffix("]") else { throw ConfigurationError(key: key, rule: rule) }
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw ConfigurationError(key: key, rule: rule)
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".-:".contains($0)) }) else {
            throw ConfigurationError(key: key, rule: rule)
        }
        self.host = host
        self.port = port
    }

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `iso8583://HOST:PORT`, an IPv6 literal in brackets.
    public var url: String { "iso8583://" + (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
}

/// The message format both directions use, and the link's limits (`host.iso8583.*`).
public struct ISO8583Settings: Sendable, Equatable {
    /// `host.iso8583.packager`: pyiso8583-default (default), pyiso8583-default-ascii, jpos-iso87a, jpos-iso87b.
    public var packager: Packager = .pyiso8583Default
    /// `host.iso8583.framing`: binary2 (default), nac, ascii4.
    public var framing: Framing = .binary2
    /// `host.iso8583.connect_timeout_seconds`: how long a connection may take (default 5 s).
    public var connectTimeout: Duration = .seconds(5)
    /// `host.iso8583.retries`: connection attempts after the first, and reversals repeated while
    /// unanswered (default 2).
    public var retries = 2
    /// `host.iso8583.merchant_id`: field 42 (15 characters; default CARDBENCH000001).
    public var merchantID = "CARDBENCH000001"
    /// `host.iso8583.listen`: the port cardbench's issuer answers external terminals on (nil: off).
    public var listenPort: UInt16?
    /// `host.iso8583.listen_address`: 127.0.0.1 unless set (docs/security.md).
    public var listenAddress = "127.0.0.1"
    /// `host.iso8583.max_connections`: how many external terminals' connections the listener
    /// holds open at once (default 4096); one more is closed as it comes, with a notice in the log.
    public var maximumConnections = 4096
    /// `host.iso8583.sign_on`: each terminal with an external host signs on (0800, 70 = 001) when
    /// the daemon starts (default false).
    public var signOn = false
    /// `host.iso8583.echo_interval_seconds`: each terminal with an external host sends it an echo
    /// test (0800, 70 = 301) this often, logging when it stops or starts answering (nil: never).
    public var echoInterval: Duration?

    public init() {}
}

extension DaemonConfiguration {
    /// The link settings a terminal's external host gets: `host.iso8583.*`, with the terminal's
    /// own packager and framing when it names them.
    public func iso8583Settings(for terminal: TerminalSettings) -> ISO8583Settings {
        var settings = iso8583
        if let p = terminal.iso8583Packager { settings.packager = p }
        if let f = terminal.iso8583Framing { settings.framing = f }
        return settings
    }
}

/// What an 0800 to a terminal's external host found (`POST /v1/terminals/{name}/iso8583/echo`,
/// `cardbench iso8583 echo`).
public struct ISO8583EchoView: Codable, Sendable, Equatable {
    public let terminal: String
    /// `iso8583://HOST:PORT`.
    public let host: String
    /// "echo test" (70 = 301) or "sign-on" (70 = 001).
    public let function: String
    public let stan: String
    /// Whether the host answered with the 0810 for this STAN and a response code.
    public let answered: Bool
    public let responseCode: String?
    /// From connecting to the answer (or to giving up).
    public let milliseconds: Double
    /// Why there is no usable answer: no connection, no answer in time, an unreadable answer.
    public let error: String?
    /// The 0800 and its answer, described as the trace keeps them.
    public let messages: [HostMessageView]
}
