import CardIO
import Defaults
import EMV
import Configuration
import Foundation
import Fronts
import ISO8583
import Workflows
import SystemPackage
import Terminal

/// A configuration value that breaks a rule: the key as written in the YAML file (and, upper-cased
/// with `CARDBENCH_` in front, as an environment variable) and the rule.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let key: String
    public let rule: String

    public init(key: String, rule: String) {
        self.key = key
        self.rule = rule
    }

    public var description: String { "configuration: \(key): \(rule)" }
}

/// One emulated device: its name, TID, reader and terminal data.
public struct TerminalSettings: Sendable, Equatable {
    /// 1–32 characters of letters, digits, `-` and `_`: it names sockets and URLs.
    public var name: String
    /// The Viva terminal ID: 8 digits.
    public var tid: String
    /// Which reader the terminal's cards come through.
    public var reader: ReaderSpec
    /// The line settings of a serial or udev reader.
    public var serial = SerialSettings()
    /// 9F1A, ISO 3166 numeric.
    public var countryCode: Int
    /// 5F2A, ISO 4217 numeric.
    public var currencyCode: Int
    /// Also listen for virtual cards on 127.0.0.1 at this port (0: any free port).
    public var readerTCPPort: UInt16?
    /// For a `pcsc:` reader that is vsmartcard's vpcd: where cards inserted through the API (a
    /// scenario's, the console's) connect, so they reach the reader through pcscd.
    public var vpcd: ReaderEndpoint?
    /// The terminal action code "default" (5 bytes), when not the kernel's DC4000A800: what the
    /// terminal decides when it cannot go online (00…00 lets it approve offline, as Y3).
    public var tacDefault: [UInt8]?
    /// CAPK files for offline data authentication, instead of `emv.capk`.
    public var capkFiles: [String]?
    /// The ways the reader takes cards (`interfaces`): contact slot, contactless field, stripe.
    public var interfaces: Set<CardInterface> = [.contact, .contactless, .magstripe]
    /// A chip that cannot be read may be swiped instead (POS entry mode 80).
    public var fallback = false
    /// The external host this terminal authorises against (`terminal.<name>.host`), when not the
    /// emulated issuer; nil follows `host.upstream`.
    public var upstream: ISO8583Upstream?
    /// `terminal.<name>.host: emulated`: this terminal asks the emulated issuer even when
    /// `host.upstream` names an external host.
    public var emulatedHost = false
    /// `terminal.<name>.iso8583.packager` and `.framing`: this terminal's external host speaks
    /// another format than `host.iso8583.*` (a bench whose terminals talk to different hosts).
    public var iso8583Packager: Packager?
    public var iso8583Framing: Framing?
    /// Contactless reader limits for every combination, minor units (nil: the kernel's default).
    public var contactlessTransactionLimit: Int?
    public var contactlessFloorLimit: Int?
    public var contactlessCVMLimit: Int?

    public init(name: String, tid: String, reader: ReaderSpec, countryCode: Int = 300, currencyCode: Int = 978,
                readerTCPPort: UInt16? = nil) {
        self.name = name
        self.tid = tid
        self.reader = reader
        self.countryCode = countryCode
        self.currencyCode = currencyCode
        self.readerTCPPort = readerTCPPort
    }

    /// The udev name when the reader is `udev:<name>`.
    public var udevName: String? {
        if case .udev(let name) = reader { return name }
        return nil
    }
}

/// A terminal's reader as the configuration names it, parsed once.
public enum ReaderSpec: Sendable, Equatable, CustomStringConvertible {
    /// `virtual:<name>`: a virtual reader listening on `<runtime>/readers/<name>.sock`.
    case virtual(name: String)
    /// `serial:<path>`: a serial reader on that tty.
    case serial(path: String)
    /// `udev:<name>`: the serial reader udev names so (`ENV{CARDBENCH_NAME}`,
    /// udev-rules/70-cardbench.rules), whenever it is plugged in.
    case udev(name: String)
    /// `pcsc:<pattern>`: the first reader pcscd lists whose name, without its trailing plug
    /// index and slot, contains the pattern (ignoring case) or matches it when written `/regex/`.
    case pcsc(pattern: PCSCReaderPattern)

    /// Parses `kind:value`; the error is the rule broken.
    public init(parsing text: String) throws(ConfigurationError) {
        func rule(_ r: String) -> ConfigurationError { ConfigurationError(key: "reader", rule: r) }
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let value = parts.count == 2 ? parts[1] : ""
        switch parts.count == 2 ? parts[0] : "" {
        case "virtual":
            guard DaemonConfiguration.isValidName(value) else {
                throw rule("virtual:<name> needs a name of 1 to 32 letters, digits, - or _, got \"\(text)\"")
            }
            self = .virtual(name: value)
        case "serial":
            guard value.hasPrefix("/"), value.count > 1 else {
                throw rule("serial:<path> needs an absolute path such as /dev/ttyUSB0, got \"\(text)\"")
            }
            self = .serial(path: value)
        case "udev":
            guard DaemonConfiguration.isValidName(value) else {
                throw rule("udev:<name> needs the reader's ENV{CARDBENCH_NAME}: 1 to 32 letters, digits, - or _, got \"\(text)\"")
            }
            self = .udev(name: value)
        case "pcsc":
            do throws(PCSCReaderPattern.PatternError) { self = .pcsc(pattern: try PCSCReaderPattern(parsing: value)) } catch {
                throw rule(error.rule)
            }
        default:
            throw rule("must be virtual:<name>, serial:<path>, udev:<name> or pcsc:<pattern>, got \"\(text)\"")
        }
    }

    /// `virtual`, `serial`, `udev` or `pcsc`, as `GET /v1/readers` shows it.
    public var kind: String {
        switch self {
        case .virtual: "virtual"
        case .serial: "serial"
        case .udev: "udev"
        case .pcsc: "pcsc"
        }
    }

    public var description: String {
        switch self {
        case .virtual(let name): "virtual:\(name)"
        case .serial(let path): "serial:\(path)"
        case .udev(let name): "udev:\(name)"
        case .pcsc(let pattern): pattern.description
        }
    }
}

/// Where callbacks are delivered besides the reply: webhooks on allowed hosts, a command, xdg-open.
public struct CallbackSettings: Sendable, Equatable {
    /// Hosts an http(s) callback may be posted to; loopback only unless more are listed.
    public var allowedHosts: [String] = ["127.0.0.1", "localhost", "::1"]
    /// Hand app-scheme callbacks to this command: a program and its arguments, each `{url}` in
    /// them replaced by the callback URL (which stays one argument; no shell), e.g.
    /// `adb exec-out am start -a android.intent.action.VIEW -d {url}`. Given as a single program
    /// name, the URL is its only argument.
    public var command: [String]?
    /// Hand app-scheme callbacks to `xdg-open`, as a phone hands them to the app.
    public var xdgOpen = false
    /// Attempts before a delivery is given up (the ledger marks it failed).
    public var maxAttempts = 10
    /// First retry after this long; each later one waits twice as long, up to `maxBackoff`.
    public var initialBackoff: Duration = .milliseconds(500)
    public var maxBackoff: Duration = .seconds(60)

    public init() {}

    /// The placeholder of the callback URL in `callbacks.command`.
    public static let urlPlaceholder = "{url}"

    /// A checked `callbacks.command`: a program (not itself the URL) and arguments; without a
    /// `{url}` anywhere the URL becomes the last argument.
    public static func commandTemplate(_ words: [String]) throws(ConfigurationError) -> [String]? {
        guard let program = words.first else { return nil }
        guard !program.isEmpty else {
            throw ConfigurationError(key: "callbacks.command", rule: "the first word must be the program to run (a name on PATH or an absolute path), got an empty one")
        }
        guard !program.contains(urlPlaceholder) else {
            throw ConfigurationError(key: "callbacks.command", rule: "the first word is the program to run and cannot be \(urlPlaceholder); e.g. [adb, exec-out, am, start, -a, android.intent.action.VIEW, -d, \(urlPlaceholder)]")
        }
        return words.contains { $0.contains(urlPlaceholder) } ? words : words + [urlPlaceholder]
    }

    /// The command's arguments (after the program) for one callback URL.
    public static func commandArguments(_ template: [String], url: String) -> [String] {
        template.dropFirst().map { $0.replacingOccurrences(of: urlPlaceholder, with: url) }
    }
}

/// Everything `cardbenchd` runs on. With no file and no environment it is the embedded default:
/// state under `./.cardbench/`, one terminal `bench1` on a virtual reader.
public struct DaemonConfiguration: Sendable, Equatable {
    public var stateDirectory = ".cardbench"
    /// Sockets: `control.sock` and the virtual readers. Default: `$RUNTIME_DIRECTORY` under
    /// systemd, else `<state>/run`.
    public var runtimeDirectory: String?
    /// The loopback HTTP listener; nil turns it off, 0 picks a free port (written to `<runtime>/http.port`).
    public var httpPort: UInt16? = 8780
    /// The address the TCP listener binds: loopback unless TLS is configured (docs/security.md).
    public var httpAddress = "127.0.0.1"
    /// A file holding the API token the TCP listener wants; nil: a fresh one in `<runtime>/api.token`.
    public var httpTokenFile: String?
    /// Host names, besides the loopback ones, the TCP listener answers to (the bench's name on the LAN).
    public var httpHostNames: [String] = []
    /// Whether the admin routes (Billpocket users, device tokens) answer on TCP too.
    public var httpAdmin = false
    /// PEM certificate chain and private key: the TCP listener speaks TLS when both are set.
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var terminals = [TerminalSettings(name: "bench1", tid: "10000001", reader: .virtual(name: "bench1"))]
    /// Card profiles (files or directories of `.yaml`) the emulated issuer holds besides the
    /// embedded ones; a file named like an embedded profile replaces it.
    public var cardProfiles: [String] = []
    /// CAPK files (docs/oda.md) every terminal authenticates cards with besides the embedded
    /// keys, unless it names its own.
    public var capkFiles: [String] = []
    /// Revoked issuer certificates, `RID:INDEX:SERIAL`.
    public var revokedCertificates: [String] = []
    /// The bench CA file (`emv.bench_ca`) that re-issues a captured card's certificates; nil: the
    /// source tree's, then the package's (`CardCaptureService.caSearchPath`).
    public var benchCAFile: String?
    /// Present this profile automatically when a transaction waits for a card, and enter its PIN.
    public var demoCard: String?
    /// `demo.card` as configured, also when `demo.enabled` is not: the card `--demo` turns on.
    public var demoCardSetting: String?
    /// How the demo card is presented: inserted (default), tapped or swiped (`demo.interface`).
    public var demoInterface = CardInterface.contact
    /// How long a transaction waits for a card, the cardholder for a prompt, the terminal for the host.
    public var cardTimeout: Duration = .seconds(60)
    public var promptTimeout: Duration = .seconds(30)
    public var hostTimeout: Duration = .seconds(30)
    /// `host.upstream`: the external ISO 8583 host every terminal authorises against (nil: the
    /// emulated issuer).
    public var upstream: ISO8583Upstream?
    /// The ISO 8583 link's format and limits, and the issuer's listener.
    public var iso8583 = ISO8583Settings()
    /// `host.iso8583.amount_table`: the scripted declines by amount the issuer applies to external
    /// terminals (none unless set).
    public var iso8583AmountTable: AmountTable = .none
    /// The Viva front's scripted declines by amount (`none`, `stripe-cents`, `billpocket`).
    public var vivaAmountTable: AmountTable = .stripeCents
    /// The Billpocket front's: its development environment's 10XX.00 table by default.
    public var billpocketAmountTable: AmountTable = .billpocket
    /// `billpocket.statusinfo_language` and `billpocket.installments_name`.
    public var billpocketCallbacks = BillpocketCallbackStyle()
    /// `system`, or `manual` (starting at `clockStart`, moved through the API).
    public var manualClock = false
    /// Microseconds since 1970 for a manual clock.
    public var clockStart: Int64 = 1_767_225_600_000_000
    /// The zone `transactionDate` is shown in, as an offset from UTC in seconds (default: the
    /// system's at start).
    public var utcOffsetSeconds: Int = TimeZone.current.secondsFromGMT()
    /// Scenario files the console may run (`scenarios.directory`); nil: none.
    public var scenariosDirectory: String?
    /// `scenarios.setup`: a scenario run may set the daemon up through the API, making the
    /// terminals its scenarios declare (and removing them after) and switching the clock to
    /// manual (and back). On by default, so a daemon started with no configuration runs the
    /// library; off on a shared bench whose terminals and clock no run may touch.
    public var scenarioSetup = true
    public var callbacks = CallbackSettings()
    public var worldline = WorldlineConfiguration()
    public var citcon = CitconConfiguration()

    public init() {}

    /// Whether `address` is a loopback address or name, which only this machine reaches.
    public static func isLoopback(_ address: String) -> Bool {
        let a = address.lowercased()
        return a == "localhost" || a == "::1" || a == "[::1]" || a.hasPrefix("127.")
    }

    /// The TCP listener's rules: TLS needs both files; beyond loopback only with TLS.
    public func checkListener() throws {
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw ConfigurationError(key: tlsCertificate == nil ? "http.tls.certificate" : "http.tls.key",
                                     rule: "http.tls.certificate and http.tls.key go together (PEM files)")
        }
        if httpPort != nil, !Self.isLoopback(httpAddress), tlsCertificate == nil {
            throw ConfigurationError(key: "http.address",
                                     rule: "\(httpAddress) is not a loopback address: listening beyond this machine needs TLS (http.tls.certificate and http.tls.key); the API token is required either way")
        }
    }

    /// The runtime directory in effect.
    public var effectiveRuntimeDirectory: String {
        runtimeDirectory ?? (stateDirectory as NSString).appendingPathComponent("run")
    }

    /// Reads a YAML file (if given) under environment overrides (`CARDBENCH_HTTP_PORT=0` sets
    /// `http.port`), then checks every value. Keys the file does not set keep their defaults.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment)
        async throws -> DaemonConfiguration {
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "cardbench")
        ]
        if let file {
            guard FileManager.default.fileExists(atPath: file) else {
                throw ConfigurationError(key: "--config", rule: "\(file) does not exist")
            }
            do {
                providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(file)))
            } catch {
                throw ConfigurationError(key: "--config", rule: "\(file) is not a YAML mapping of settings: \(error)")
            }
        }
        let reader = ConfigReader(providers: providers)
        var configuration = try DaemonConfiguration(reader: reader)
        if configuration.runtimeDirectory == nil, let systemd = environment["RUNTIME_DIRECTORY"], !systemd.isEmpty {
            configuration.runtimeDirectory = systemd.split(separator: ":").first.map(String.init)
        }
        if let state = environment["STATE_DIRECTORY"], !state.isEmpty, reader.string(forKey: "state_directory") == nil {
            configuration.stateDirectory = state.split(separator: ":").first.map(String.init) ?? state
        }
        return configuration
    }

    /// Every key, checked; an unusable value names its key and rule.
    init(reader: ConfigReader) throws {
        func text(_ key: String) -> String? { reader.string(forKey: ConfigKey(key)) }
        func list(_ key: String) -> [String]? { reader.stringArray(forKey: ConfigKey(key)) }
        func number(_ key: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let value = text(key) else { return nil }
            guard let n = Int(value.trimmingCharacters(in: .whitespaces)), range.contains(n) else {
                throw ConfigurationError(key: key, rule: "must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(value)\"")
            }
            return n
        }
        func seconds(_ key: String) throws -> Duration? {
            guard let value = text(key) else { return nil }
            guard let s = Double(value), s > 0, s <= 86_400 else {
                throw ConfigurationError(key: key, rule: "must be a number of seconds above 0 and at most 86400, got \"\(value)\"")
            }
            return .milliseconds(Int64((s * 1000).rounded()))
        }
        func flag(_ key: String) throws -> Bool? {
            guard let value = text(key) else { return nil }
            switch value.lowercased() {
            case "true", "yes", "on", "1": return true
            case "false", "no", "off", "0": return false
            default: throw ConfigurationError(key: key, rule: "must be true or false, got \"\(value)\"")
            }
        }

        if let state = text("state_directory") {
            guard !state.isEmpty else { throw ConfigurationError(key: "state_directory", rule: "must not be empty") }
            stateDirectory = state
        }
        runtimeDirectory = text("runtime_directory").flatMap { $0.isEmpty ? nil : $0 }
        if let port = text("http.port") {
            httpPort = port.lowercased() == "off" ? nil : UInt16(try number("http.port", 0...65535)!)
        }
        if let address = text("http.address") {
            guard !address.isEmpty else { throw ConfigurationError(key: "http.address", rule: "must be an IP address or host name") }
            httpAddress = address
        }
        httpTokenFile = text("http.token_file").flatMap { $0.isEmpty ? nil : $0 }
        if let names = list("http.host_names") { httpHostNames = names }
        if let admin = try flag("http.admin") { httpAdmin = admin }
        tlsCertificate = text("http.tls.certificate").flatMap { $0.isEmpty ? nil : $0 }
        tlsKey = text("http.tls.key").flatMap { $0.isEmpty ? nil : $0 }
        try checkListener()
        if let cards = list("host.cards") { cardProfiles = cards }
        if let files = list("emv.capk") { capkFiles = files }
        benchCAFile = text("emv.bench_ca").flatMap { $0.isEmpty ? nil : $0 }
        if let entries = list("emv.revoked") {
            _ = try CAPKStore.revoked(entries, key: "emv.revoked")
            revokedCertificates = entries
        }
        if let t = try seconds("host.timeout_seconds") { hostTimeout = t }
        if let url = text("host.upstream"), url != "emulated" { upstream = try ISO8583Upstream(parsing: url, key: "host.upstream") }
        if let name = text("host.iso8583.packager") {
            guard let p = Packager.named(name) else {
                throw ConfigurationError(key: "host.iso8583.packager", rule: "must be \(Packager.all.map(\.name).joined(separator: ", ")), got \"\(name)\"")
            }
            iso8583.packager = p
        }
        if let name = text("host.iso8583.framing") {
            guard let f = Framing(rawValue: name) else {
                throw ConfigurationError(key: "host.iso8583.framing", rule: "must be binary2, nac or ascii4, got \"\(name)\"")
            }
            iso8583.framing = f
        }
        if let t = try seconds("host.iso8583.connect_timeout_seconds") { iso8583.connectTimeout = t }
        if let n = try number("host.iso8583.retries", 0...10) { iso8583.retries = n }
        if let mid = text("host.iso8583.merchant_id") {
            guard (1...15).contains(mid.count), mid.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == " ") }) else {
                throw ConfigurationError(key: "host.iso8583.merchant_id", rule: "must be 1 to 15 letters, digits or spaces (field 42), got \"\(mid)\"")
            }
            iso8583.merchantID = mid
        }
        if let port = try number("host.iso8583.listen", 0...65_535) { iso8583.listenPort = UInt16(port) }
        if let n = try number("host.iso8583.max_connections", 1...100_000) { iso8583.maximumConnections = n }
        if let on = try flag("host.iso8583.sign_on") { iso8583.signOn = on }
        if let every = try number("host.iso8583.echo_interval_seconds", 0...86_400), every > 0 { iso8583.echoInterval = .seconds(every) }
        if let table = text("host.iso8583.amount_table") {
            guard let t = AmountTable(option: table) else {
                throw ConfigurationError(key: "host.iso8583.amount_table", rule: "must be none, stripe-cents, billpocket or worldline, got \"\(table)\"")
            }
            iso8583AmountTable = t
        }
        if let address = text("host.iso8583.listen_address") {
            guard address.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }), !address.isEmpty else {
                throw ConfigurationError(key: "host.iso8583.listen_address", rule: "must be an IPv4 or IPv6 address, got \"\(address)\"")
            }
            iso8583.listenAddress = address
        }
        if let table = text("viva.amount_table") {
            guard let t = AmountTable(option: table) else {
                throw ConfigurationError(key: "viva.amount_table", rule: "must be none, stripe-cents, billpocket or worldline, got \"\(table)\"")
            }
            vivaAmountTable = t
        }
        if let table = text("billpocket.amount_table") {
            guard let t = AmountTable(option: table) else {
                throw ConfigurationError(key: "billpocket.amount_table", rule: "must be none, stripe-cents, billpocket or worldline, got \"\(table)\"")
            }
            billpocketAmountTable = t
        }
        if let language = text("billpocket.statusinfo_language") {
            guard let l = BillpocketCallbackStyle.Language(rawValue: language) else {
                throw ConfigurationError(key: "billpocket.statusinfo_language", rule: "must be en or es, got \"\(language)\"")
            }
            billpocketCallbacks.language = l
        }
        if let name = text("billpocket.installments_name") {
            guard let i = BillpocketCallbackStyle.Installments(rawValue: name) else {
                throw ConfigurationError(key: "billpocket.installments_name", rule: "must be msi, payments or both, got \"\(name)\"")
            }
            billpocketCallbacks.installments = i
        }
        if let t = try seconds("timeouts.card_seconds") { cardTimeout = t }
        if let t = try seconds("timeouts.prompt_seconds") { promptTimeout = t }
        if let directory = text("scenarios.directory"), !directory.isEmpty {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ConfigurationError(key: "scenarios.directory", rule: "\(directory): no such directory (the scenario files the console runs)")
            }
            // Absolute, so a run's files are named the same wherever the daemon's working directory is.
            scenariosDirectory = URL(fileURLWithPath: directory).standardizedFileURL.path
        }
        if let setup = try flag("scenarios.setup") { scenarioSetup = setup }
        demoCardSetting = text("demo.card").flatMap { $0.isEmpty ? nil : $0 }
        if try flag("demo.enabled") == true { demoCard = demoCardSetting ?? EmbeddedDefaults.demoCard }
        if let verb = text("demo.interface") {
            guard let interface = CardInterface(verb: verb) else {
                throw ConfigurationError(key: "demo.interface", rule: "must be insert, tap or swipe, got \"\(verb)\"")
            }
            demoInterface = interface
        }
        if let mode = text("clock.mode") {
            switch mode {
            case "system": manualClock = false
            case "manual": manualClock = true
            default: throw ConfigurationError(key: "clock.mode", rule: "must be system or manual, got \"\(mode)\"")
            }
        }
        if let start = text("clock.start") {
            guard let micros = ISO8601.microseconds(start) else {
                throw ConfigurationError(key: "clock.start", rule: "must be an ISO 8601 date and time with a zone, e.g. 2026-11-23T10:00:00Z, got \"\(start)\"")
            }
            clockStart = micros
        }
        if let offset = text("clock.utc_offset") {
            guard let seconds = ISO8601.offsetSeconds(offset) else {
                throw ConfigurationError(key: "clock.utc_offset", rule: "must be an offset like +02:00 or -06:00, got \"\(offset)\"")
            }
            utcOffsetSeconds = seconds
        }
        if let port = text("worldline.port") {
            worldline.port = port.lowercased() == "off" ? nil : UInt16(try number("worldline.port", 0...65535)!)
        }
        if let address = text("worldline.address") {
            guard !address.isEmpty else {
                throw ConfigurationError(key: "worldline.address", rule: "must be an IP address or host name")
            }
            worldline.address = address
        }
        if let url = text("worldline.public_url"), !url.isEmpty {
            guard let u = URL(string: url), ["http", "https"].contains(u.scheme?.lowercased() ?? ""), u.host != nil, (u.path.isEmpty || u.path == "/") else {
                throw ConfigurationError(key: "worldline.public_url", rule: "must be an http(s) URL with no path, as the SDKs take the platform's endpoint, got \"\(url)\"")
            }
            worldline.publicURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        if let unknown = text("worldline.unknown_cards") {
            switch unknown {
            case "approve": worldline.settings.approveUnknownCards = true
            case "decline": worldline.settings.approveUnknownCards = false
            default: throw ConfigurationError(key: "worldline.unknown_cards", rule: "must be approve or decline, got \"\(unknown)\"")
            }
        }
        if let table = text("worldline.amount_table") {
            guard let t = AmountTable(option: table) else {
                throw ConfigurationError(key: "worldline.amount_table", rule: "must be none, worldline, stripe-cents or billpocket, got \"\(table)\"")
            }
            worldline.settings.amountTable = t
        }
        if let minutes = try number("worldline.session_minutes", 1...10_080) { worldline.settings.sessionLifetime = Duration.seconds(minutes * 60) }
        if let t = try seconds("worldline.settle_seconds") { worldline.settings.settleAfter = t }
        if let port = text("citcon.port") {
            citcon.port = port.lowercased() == "off" ? nil : UInt16(try number("citcon.port", 0...65535)!)
        }
        if let address = text("citcon.address") {
            guard !address.isEmpty else { throw ConfigurationError(key: "citcon.address", rule: "must be an IP address or host name") }
            citcon.address = address
        }
        if let url = text("citcon.public_url"), !url.isEmpty {
            guard let u = URL(string: url), ["http", "https"].contains(u.scheme?.lowercased() ?? ""), u.host != nil, (u.path.isEmpty || u.path == "/") else {
                throw ConfigurationError(key: "citcon.public_url", rule: "must be an http(s) URL with no path, got \"\(url)\"")
            }
            citcon.publicURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        if let version = text("citcon.version") {
            guard version == "2.1.0" || version == "2.2.0" else {
                throw ConfigurationError(key: "citcon.version", rule: "must be 2.1.0 or 2.2.0 (the UPI SDK document whose rules apply), got \"\(version)\"")
            }
            citcon.settings.version = version
        }
        if let table = text("citcon.amount_table") {
            guard let t = AmountTable(option: table) else {
                throw ConfigurationError(key: "citcon.amount_table", rule: "must be none, worldline, stripe-cents or billpocket, got \"\(table)\"")
            }
            citcon.settings.amountTable = t
        }
        if let unknown = text("citcon.unknown_cards") {
            switch unknown {
            case "approve": citcon.settings.approveUnknownCards = true
            case "decline": citcon.settings.approveUnknownCards = false
            default: throw ConfigurationError(key: "citcon.unknown_cards", rule: "must be approve or decline, got \"\(unknown)\"")
            }
        }
        if let hosts = list("callbacks.allowed_hosts") { callbacks.allowedHosts = hosts }
        if let template = list("callbacks.command") ?? text("callbacks.command").map({ [$0] }) {
            callbacks.command = try CallbackSettings.commandTemplate(template)
        }
        if let xdg = try flag("callbacks.xdg_open") { callbacks.xdgOpen = xdg }
        if let attempts = try number("callbacks.max_attempts", 1...1000) { callbacks.maxAttempts = attempts }

        if let names = list("terminals") {
            guard !names.isEmpty else { throw ConfigurationError(key: "terminals", rule: "must name at least one terminal") }
            var seen = Set<String>(), tids = Set<String>()
            terminals = try names.enumerated().map { index, name in
                guard Self.isValidName(name) else {
                    throw ConfigurationError(key: "terminals", rule: "\"\(name)\" must be 1 to 32 letters, digits, - or _")
                }
                guard seen.insert(name).inserted else {
                    throw ConfigurationError(key: "terminals", rule: "\"\(name)\" is listed twice")
                }
                let prefix = "terminal.\(name)."
                let tid = text(prefix + "tid") ?? String(10_000_001 + index)
                guard tid.count == 8, tid.allSatisfy(\.isASCIIDigit) else {
                    throw ConfigurationError(key: prefix + "tid", rule: "must be 8 digits, got \"\(tid)\"")
                }
                guard tids.insert(tid).inserted else {
                    throw ConfigurationError(key: prefix + "tid", rule: "\(tid) is already another terminal's TID")
                }
                let reader: ReaderSpec
                do throws(ConfigurationError) { reader = try ReaderSpec(parsing: text(prefix + "reader") ?? "virtual:\(name)") } catch {
                    throw ConfigurationError(key: prefix + "reader", rule: error.rule)
                }
                var settings = TerminalSettings(name: name, tid: tid, reader: reader)
                settings.serial = try Self.serialSettings(prefix + "serial.", text: text, number: number, flag: flag)
                if let c = try number(prefix + "country", 1...999) { settings.countryCode = c }
                if let c = try number(prefix + "currency", 1...999) { settings.currencyCode = c }
                if let p = try number(prefix + "reader_tcp_port", 0...65535) { settings.readerTCPPort = UInt16(p) }
                if let endpoint = text(prefix + "vpcd") {
                    guard case .pcsc = reader else {
                        throw ConfigurationError(key: prefix + "vpcd", rule: "is for a pcsc:<pattern> reader (vsmartcard's vpcd in pcscd); this terminal's reader is \(reader)")
                    }
                    guard case .tcp = try? ReaderEndpoint(parsing: endpoint) else {
                        throw ConfigurationError(key: prefix + "vpcd", rule: "must be host:port where vpcd listens (127.0.0.1:35963 for its first slot), got \"\(endpoint)\"")
                    }
                    settings.vpcd = try? ReaderEndpoint(parsing: endpoint)
                }
                if let files = list(prefix + "capk") { settings.capkFiles = files }
                if let hex = text(prefix + "tac_default") {
                    guard let bytes = try? Hex.decode(hex), bytes.count == 5 else {
                        throw ConfigurationError(key: prefix + "tac_default", rule: "must be 10 hex digits (5 bytes), got \"\(hex)\"")
                    }
                    settings.tacDefault = bytes
                }
                if let names = list(prefix + "interfaces") {
                    var set = Set<CardInterface>()
                    for n in names {
                        guard let i = CardInterface(rawValue: n) else {
                            throw ConfigurationError(key: prefix + "interfaces", rule: "lists \"\(n)\": each must be contact, contactless or magstripe")
                        }
                        set.insert(i)
                    }
                    guard !set.isEmpty else { throw ConfigurationError(key: prefix + "interfaces", rule: "must list at least one interface") }
                    settings.interfaces = set
                }
                if let f = try flag(prefix + "fallback") { settings.fallback = f }
                if let url = text(prefix + "host") {
                    if url == "emulated" { settings.emulatedHost = true } else { settings.upstream = try ISO8583Upstream(parsing: url, key: prefix + "host") }
                }
                if let name = text(prefix + "iso8583.packager") {
                    guard let p = Packager.named(name) else {
                        throw ConfigurationError(key: prefix + "iso8583.packager", rule: "must be \(Packager.all.map(\.name).joined(separator: ", ")), got \"\(name)\"")
                    }
                    settings.iso8583Packager = p
                }
                if let name = text(prefix + "iso8583.framing") {
                    guard let f = Framing(rawValue: name) else {
                        throw ConfigurationError(key: prefix + "iso8583.framing", rule: "must be binary2, nac or ascii4, got \"\(name)\"")
                    }
                    settings.iso8583Framing = f
                }
                func amount(_ key: String) throws -> Int? {
                    guard let value = text(prefix + key) else { return nil }
                    let parts = value.split(separator: ".", omittingEmptySubsequences: false)
                    guard (1...2).contains(parts.count), let whole = Int(parts[0]), whole >= 0, whole < 100_000_000,
                          parts.count == 1 || (parts[1].count == 2 && Int(parts[1]) != nil) else {
                        throw ConfigurationError(key: prefix + key, rule: "must be an amount like 400.00, got \"\(value)\"")
                    }
                    return whole * 100 + (parts.count == 2 ? Int(parts[1])! : 0)
                }
                settings.contactlessTransactionLimit = try amount("contactless.transaction_limit")
                settings.contactlessFloorLimit = try amount("contactless.floor_limit")
                settings.contactlessCVMLimit = try amount("contactless.cvm_limit")
                return settings
            }
            let readers = terminals.compactMap { t -> String? in
                if case .virtual(let name) = t.reader { return name }
                return nil
            }
            if Set(readers).count != readers.count {
                throw ConfigurationError(key: "terminals", rule: "two terminals use the same virtual reader")
            }
            // Two patterns may still pick the same reader (the first connection then holds it
            // exclusively, and the other terminal says "in use"); the same pattern twice surely does.
            let patterns = terminals.compactMap { t -> String? in
                if case .pcsc(let pattern) = t.reader { return pattern.text }
                return nil
            }
            if Set(patterns).count != patterns.count {
                throw ConfigurationError(key: "terminals", rule: "two terminals use the same pcsc:<pattern>: one PC/SC reader serves one terminal")
            }
        }
    }

    /// `terminal.<name>.serial.*`: a serial reader's line and wiring.
    static func serialSettings(_ prefix: String, text: (String) -> String?, number: (String, ClosedRange<Int>) throws -> Int?,
                               flag: (String) throws -> Bool?) throws -> SerialSettings {
        var s = SerialSettings()
        func choice<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type) throws -> T? where T.RawValue == String {
            guard let value = text(prefix + key) else { return nil }
            guard let v = T(rawValue: value.lowercased()) else {
                throw ConfigurationError(key: prefix + key, rule: "must be one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(value)\"")
            }
            return v
        }
        func level(_ key: String) throws -> Bool? {
            guard let value = text(prefix + key) else { return nil }
            switch value.lowercased() {
            case "asserted", "high": return true
            case "released", "low": return false
            default: throw ConfigurationError(key: prefix + key, rule: "must be asserted or released, got \"\(value)\"")
            }
        }
        if let baud = try number(prefix + "baud", 1200...230_400) {
            guard SerialPort.supportedBaudRates.contains(baud) else {
                throw ConfigurationError(key: prefix + "baud", rule: "must be one of \(SerialPort.supportedBaudRates.map(String.init).joined(separator: ", ")), got \(baud)")
            }
            s.baud = baud
        }
        if let p = try choice("parity", SerialSettings.Parity.self) { s.parity = p }
        if let b = try number(prefix + "stop_bits", 1...2) { s.stopBits = b }
        if let r = try choice("reset", SerialSettings.ResetLine.self) { s.resetLine = r }
        if let r = try level("reset_level") { s.resetAssertedIsReset = r }
        if let ms = try number(prefix + "reset_ms", 1...1000) { s.resetPulse = .milliseconds(ms) }
        if let p = try choice("presence", SerialSettings.PresenceLine.self) { s.presenceLine = p }
        if let p = try level("presence_level") { s.presenceAssertedIsCard = p }
        if let e = try flag(prefix + "echo") { s.echo = e }
        return s
    }

    static func isValidName(_ name: String) -> Bool {
        (1...32).contains(name.count) && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

/// The ISO 8601 forms configuration and the API accept.
public enum ISO8601 {
    /// `2026-11-23T10:00:00Z`, `2026-11-23T10:00:00.5+02:00`: microseconds since 1970.
    public static func microseconds(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1_000_000).rounded()) }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1_000_000).rounded()) }
        return nil
    }

    /// `+02:00`, `-06:00`, `Z`: seconds east of UTC.
    public static func offsetSeconds(_ text: String) -> Int? {
        if text == "Z" || text == "+00:00" || text == "-00:00" { return 0 }
        let chars = Array(text)
        guard chars.count == 6, chars[0] == "+" || chars[0] == "-", chars[3] == ":",
              let h = Int(String(chars[1...2])), let m = Int(String(chars[4...5])), h <= 14, m < 60 else { return nil }
        return (chars[0] == "-" ? -1 : 1) * (h * 3600 + m * 60)
    }
}

/// The Worldline platform's listener and behaviour (`worldline.*`).
public struct WorldlineConfiguration: Sendable, Equatable {
    /// Off unless set: 0 picks a free port (written to `<runtime>/worldline.port`).
    public var port: UInt16?
    /// Loopback by default: the Server API is signed, but the Client API and the challenge page
    /// answer whoever holds a session, as the real platform's do.
    public var address = "127.0.0.1"
    /// The URL the SDKs reach this listener at (in `clientApiUrl`, `assetUrl` and challenge
    /// links); default `http://{address}:{port}`.
    public var publicURL: String?
    public var settings = WorldlineSettings()

    public init() {}

    public static func == (a: WorldlineConfiguration, b: WorldlineConfiguration) -> Bool {
        let listener: Bool = a.port == b.port && a.address == b.address && a.publicURL == b.publicURL
        let unknown: Bool = a.settings.approveUnknownCards == b.settings.approveUnknownCards
        let table: Bool = a.settings.amountTable == b.settings.amountTable
        let lifetime: Bool = a.settings.sessionLifetime == b.settings.sessionLifetime
        return listener && unknown && table && lifetime
    }
}

/// The Citcon platform's listener and behaviour (`citcon.*`).
public struct CitconConfiguration: Sendable, Equatable {
    /// Off unless set: 0 picks a free port (written to `<runtime>/citcon.port`).
    public var port: UInt16?
    public var address = "127.0.0.1"
    /// The URL the wallet and challenge pages are reached at; default `http://{address}:{port}`.
    public var publicURL: String?
    public var settings = CitconSettings()

    public init() {}

    public static func == (a: CitconConfiguration, b: CitconConfiguration) -> Bool {
        let listener: Bool = a.port == b.port && a.address == b.address && a.publicURL == b.publicURL
        let rules: Bool = a.settings.version == b.settings.version && a.settings.approveUnknownCards == b.settings.approveUnknownCards
            && a.settings.amountTable == b.settings.amountTable
        return listener && rules
    }
}
