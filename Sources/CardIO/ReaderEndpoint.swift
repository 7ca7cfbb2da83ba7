/// Where a card connects: a Unix socket path (anything containing '/') or `host:port`
/// (`[v6-address]:port` for an IPv6 literal).
public enum ReaderEndpoint: Equatable, Sendable, CustomStringConvertible {
    /// A Unix socket path: a cardbench virtual reader.
    case unix(String)
    /// A TCP endpoint: a cardbench reader's loopback port, or vsmartcard's vpcd in pcscd.
    case tcp(host: String, port: UInt16)

    /// Parses a `--reader` value.
    public init(parsing text: String) throws(CardIOError) {
        let rule = "give a Unix socket path (containing '/') or host:port"
        guard !text.isEmpty else {
            throw .invalidEndpoint("reader endpoint is empty: \(rule)")
        }
        if text.contains("/") {
            guard !text.utf8.contains(0) else {
                throw .invalidEndpoint("reader endpoint \"\(text)\": a socket path cannot contain a NUL byte")
            }
            guard text.utf8.count <= Socket.maxUnixPathBytes else {
                throw .invalidEndpoint("reader endpoint \"\(text)\": a Unix socket path is at most \(Socket.maxUnixPathBytes) bytes, this one is \(text.utf8.count)")
            }
            self = .unix(text)
            return
        }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw .invalidEndpoint("reader endpoint \"\(text)\": an IPv6 address is written [address]:port")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw .invalidEndpoint("reader endpoint \"\(text)\": no '/' and no ':port': \(rule)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard !host.contains(":") else {
                throw .invalidEndpoint("reader endpoint \"\(text)\": an IPv6 address is written [address]:port")
            }
        }
        guard !host.isEmpty else {
            throw .invalidEndpoint("reader endpoint \"\(text)\": the host before ':' is empty: \(rule)")
        }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), (1...65535).contains(port) else {
            throw .invalidEndpoint("reader endpoint \"\(text)\": the port must be a number from 1 to 65535, got \"\(portText)\"")
        }
        self = .tcp(host: String(host), port: UInt16(port))
    }

    /// The endpoint as it would be given to `--reader`.
    public var description: String {
        switch self {
        case .unix(let path): path
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}
