import CardIO
import Defaults
import EMV
import Foundation
import Logging
import VirtualCard
import Workflows

/// A point in a card's conversation: the `n`th command with this instruction name
/// (`GENERATE AC#2`; `GENERATE AC` is the first).
public struct RemovalPoint: Sendable, Equatable, CustomStringConvertible {
    public let instruction: String
    public let occurrence: Int

    /// Parses `NAME` or `NAME#n`; the name must be one the kernel sends.
    public init(parsing text: String) throws(DaemonError) {
        let parts = text.split(separator: "#", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        let name = parts[0].uppercased()
        guard Self.names.contains(name) else {
            throw .badRequest(field: "removeAfter", rule: "must name a command (\(Self.names.sorted().joined(separator: ", "))), optionally #n, got \"\(text)\"")
        }
        var n = 1
        if parts.count == 2 {
            guard let v = Int(parts[1]), v >= 1, v <= 99 else {
                throw .badRequest(field: "removeAfter", rule: "the occurrence after # must be 1 to 99, got \"\(parts[1])\"")
            }
            n = v
        }
        instruction = name
        occurrence = n
    }

    /// The instruction names of the commands an EMV terminal sends (`CommandAPDU.instructionName`).
    static let names: Set<String> = ["SELECT", "GET PROCESSING OPTIONS", "READ RECORD", "GET DATA", "VERIFY", "GENERATE AC",
                                     "EXTERNAL AUTHENTICATE", "GET CHALLENGE", "INTERNAL AUTHENTICATE", "GET RESPONSE"]

    public var description: String { occurrence == 1 ? instruction : "\(instruction)#\(occurrence)" }
}

/// A virtual card living in the daemon, in a terminal's reader as an in-process card (it answers
/// on the kernel's own thread): one inserted through the API (a scenario's, a tester's), which can
/// leave by itself right after answering a given command, as a cardholder pulling it out at that
/// moment, or demo mode's card.
final class InsertedVirtualCard: InProcessCard, @unchecked Sendable {
    // Unchecked: everything mutable is under `lock`.
    private let lock = NSLock()
    private var card: VirtualCard
    private let removeAfter: RemovalPoint?
    private var seen: [String: Int] = [:]
    private var left = false
    /// Flip a bit of the cryptogram in the first GENERATE AC answer: an ARQC the issuer cannot verify.
    private var corruptCryptogram: Bool
    /// How the cardholder presents the card, in order (`tap`, then `insert` when the terminal asks
    /// for another interface); the first is the current one. A tap or a swipe is momentary: when
    /// the terminal powers it off the card moves to the next presentation, or leaves.
    private var presentations: [CardInterface]

    init(profile: CardProfile, removeAfter: RemovalPoint?, pinTries: Int?, corruptCryptogram: Bool = false,
         presentations: [CardInterface] = [.contact]) throws(EMVError) {
        var state = CardState(profile: profile)
        if let pinTries { state.pinTriesRemaining = pinTries }
        card = try VirtualCard(profile: profile, state: state)
        self.removeAfter = removeAfter
        self.corruptCryptogram = corruptCryptogram
        self.presentations = presentations.isEmpty ? [.contact] : presentations
        initialPresentations = self.presentations
    }

    private let initialPresentations: [CardInterface]

    /// What the console shows of the card: its counters, PIN tries and how it is presented now.
    var snapshot: (state: CardState, interface: CardInterface, left: Bool, pan: String) {
        lock.withLock { (card.state, presentations[0], left, card.profile.pan) }
    }

    /// The cardholder presents the card again, the first way: after a tap or a swipe it had left.
    func presentAgain() {
        lock.withLock {
            presentations = initialPresentations
            left = false
            sessionLost = false
        }
    }

    /// The response with one bit of its application cryptogram flipped: in format 1 (80 …) the
    /// AC follows CID and ATC; in format 2 (77 …) it is the value of 9F26.
    static func corrupted(_ response: [UInt8]) -> [UInt8] {
        var r = response
        guard r.count > 2, r.suffix(2) == [0x90, 0x00] else { return r }
        if r[0] == 0x80, r.count > 2 + 5 + 8 {
            r[2 + 3] ^= 0x01
        } else if let i = (0..<max(0, r.count - 3)).first(where: { r[$0] == 0x9F && r[$0 + 1] == 0x26 && r[$0 + 2] == 0x08 }) {
            r[i + 3] ^= 0x01
        }
        return r
    }

    func powerOn(warm: Bool) -> [UInt8] {
        lock.withLock {
            // A swiped card has no chip in the reader: no ATR.
            presentations[0] == .magstripe ? [] : card.powerOn(presentations[0])
        }
    }

    func powerOff() {
        lock.withLock {
            card.reset()
            guard presentations[0] != .contact || presentations.count > 1 else { return }
            presentations.removeFirst()
            if presentations.isEmpty {
                presentations = [.contact]
                left = true
            }
        }
    }

    var magneticStripe: MagneticStripe? {
        lock.withLock { presentations[0] == .magstripe ? card.profile.magneticStripe : nil }
    }

    func respond(to command: [UInt8]) -> [UInt8] {
        lock.withLock {
            var response = card.respond(to: command)
            guard let name = try? CommandAPDU(bytes: command).instructionName else { return response }
            seen[name, default: 0] += 1
            if corruptCryptogram, name == "GENERATE AC" {
                corruptCryptogram = false
                response = Self.corrupted(response)
            }
            if let removeAfter, name == removeAfter.instruction, seen[name] == removeAfter.occurrence {
                if presentations.count > 1 {
                    // Out of the field (or the slot) now, presented again next.
                    presentations.removeFirst()
                    card.reset()
                    sessionLost = true
                } else {
                    left = true
                }
            }
            return response
        }
    }

    var hasLeft: Bool { lock.withLock { left } }

    private var sessionLost = false

    func takeSessionLoss() -> Bool {
        lock.withLock {
            defer { sessionLost = false }
            return sessionLost
        }
    }
}

/// Where an API request's card profile comes from: a profile of the configured card
/// directories by name, or the profile's YAML in the request itself. Never a path: the daemon
/// reads no file a caller names, so no reply can tell what a file holds or whether it exists.
public enum ProfileSource: Sendable, Equatable {
    case named(String)
    case inline(String)

    /// How the console names the card: the profile's name, or "inline profile".
    var shownName: String {
        switch self {
        case .named(let name): EmbeddedDefaults.profileName(name)
        case .inline: "inline profile"
        }
    }

    /// From a body's `profile` (a name) and `profileYAML` (the text): exactly one of them.
    public init(name: String?, yaml: String?) throws(DaemonError) {
        switch (name, yaml) {
        case (let name?, nil): self = .named(name)
        case (nil, let yaml?): self = .inline(yaml)
        default:
            throw .badRequest(field: "profile", rule: "give exactly one of profile (the name of a profile in the configured card directories) and profileYAML (the profile itself)")
        }
    }

    /// The longest inline profile taken, in bytes.
    public static let maximumYAMLBytes = 256 << 10
}

extension Bench {
    /// The card profiles a request may name: the embedded ones, and every `.yaml`/`.yml` file of
    /// the configured card directories (and files) by its name without the extension, a
    /// configured file replacing an embedded profile of the same name.
    static func profileLibrary(_ entries: [String]) throws(ConfigurationError) -> [String: ProfileEntry] {
        var library: [String: ProfileEntry] = [:]
        for name in EmbeddedDefaults.cardProfileNames { library[name] = .embedded(name) }
        var configured: Set<String> = []
        for path in try profilePaths(entries) {
            let name = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
            // The first file of a name wins among the configured ones, as the entries are ordered.
            if configured.insert(name).inserted { library[name] = .file(path) }
        }
        return library
    }

    /// The demo card: a profile name of the library (`visa-credit-cvn10`, `.yaml` allowed), or a
    /// path to a profile file, which then joins the library under its file name.
    static func demoEntry(_ given: String, library: [String: ProfileEntry]) throws(ConfigurationError) -> (name: String, entry: ProfileEntry) {
        let name = EmbeddedDefaults.profileName(given)
        if !given.contains("/"), let entry = library[name] { return (name, entry) }
        if FileManager.default.fileExists(atPath: given) {
            return (((given as NSString).lastPathComponent as NSString).deletingPathExtension, .file(given))
        }
        let shown = given.count > 80 ? String(given.prefix(80)).debugDescription + "…" : given.debugDescription
        throw ConfigurationError(key: "demo.card", rule: "must name a card profile (embedded or in host.cards, e.g. \(EmbeddedDefaults.demoCard)) or a profile file; no profile and no file \(shown)")
    }

    /// The profile a request means. A name may carry its `.yaml` extension; it must be one of the
    /// library's, and a name is never taken as a path.
    func profile(from source: ProfileSource) throws(DaemonError) -> CardProfile {
        switch source {
        case .named(let given):
            guard let entry = profileLibrary[EmbeddedDefaults.profileName(given)] else {
                let known = profileLibrary.keys.sorted()
                let list = known.count > 40 ? known.prefix(40).joined(separator: ", ") + ", …" : known.joined(separator: ", ")
                let shown = given.count > 80 ? String(given.prefix(80)).debugDescription + "…" : given.debugDescription
                throw .badRequest(field: "profile", rule: "must name an embedded profile or one of the configured card directories (\(list)), or give the profile itself as profileYAML; no such profile \(shown) (paths are not read)")
            }
            do throws(ConfigurationError) { return try Self.loadProfile(entry, key: "profile") } catch { throw .badRequest(field: "profile", rule: error.rule) }
        case .inline(let yaml):
            guard yaml.utf8.count <= ProfileSource.maximumYAMLBytes else {
                throw .badRequest(field: "profileYAML", rule: "must be at most \(ProfileSource.maximumYAMLBytes) bytes")
            }
            // A scenario run sends the same few profiles with every scenario: each is read once.
            if let known = inlineProfiles.withLock({ $0[yaml] }) { return known }
            let profile: CardProfile
            do { profile = try CardProfile.parse(yaml: yaml, file: "profileYAML") } catch {
                throw .badRequest(field: "profileYAML", rule: "\(error)")
            }
            inlineProfiles.withLock { cache in
                if cache.count >= 64 { cache.removeAll() }
                cache[yaml] = profile
            }
            return profile
        }
    }

    /// Puts a fresh virtual card from `source` into the terminal's (virtual) reader; the issuer
    /// learns its account if it did not know it.
    public func insertCard(terminal name: String?, profile source: ProfileSource, removeAfter: String?, pinTries: Int?,
                           corruptCryptogram: Bool = false, presentations: [CardInterface] = [.contact]) throws(DaemonError) {
        let terminal = try self.terminal(name)
        guard terminal.virtualReader != nil || terminal.settings.vpcd != nil else {
            let hint = terminal.pcscReader != nil ? " (when the reader is vsmartcard's vpcd, set terminal.\(terminal.settings.name).vpcd to its host:port)" : ""
            throw .badRequest(field: "terminal", rule: "terminal \(terminal.settings.name) has a \(terminal.settings.reader.kind) reader: its cards are physical\(hint)")
        }
        let profile = try self.profile(from: source)
        for (i, interface) in presentations.enumerated() {
            let field = i == 0 ? "interface" : "then[\(i - 1)]"
            guard profile.interfaces.contains(interface) else {
                throw .badRequest(field: field, rule: "the card \(profile.name) cannot be \(interface == .contact ? "inserted" : interface == .contactless ? "tapped" : "swiped"): its profile's interfaces are \(profile.interfaces.map(\.rawValue).sorted().joined(separator: ", "))")
            }
            guard terminal.settings.interfaces.contains(interface) else {
                throw .badRequest(field: field, rule: "terminal \(terminal.settings.name)'s reader has no \(interface.rawValue) interface (terminal.\(terminal.settings.name).interfaces: \(terminal.settings.interfaces.map(\.rawValue).sorted().joined(separator: ", ")))")
            }
            if interface == .magstripe, terminal.virtualReader == nil {
                throw .badRequest(field: field, rule: "a swipe reaches only a virtual reader: vpcd carries no magnetic stripe")
            }
        }
        let point = try removeAfter.map { text throws(DaemonError) in try RemovalPoint(parsing: text) }
        if let pinTries, !(0...15).contains(pinTries) { throw .badRequest(field: "pinTries", rule: "must be 0 to 15, got \(pinTries)") }
        if host.account(pan: profile.pan) == nil {
            do { try host.register(profile) } catch { throw .badRequest(field: "profile", rule: "\(error)") }
        }
        let card: InsertedVirtualCard
        do {
            card = try InsertedVirtualCard(profile: profile, removeAfter: point, pinTries: pinTries, corruptCryptogram: corruptCryptogram,
                                           presentations: presentations)
        } catch {
            throw .badRequest(field: "profile", rule: "\(error)")
        }
        if let reader = terminal.virtualReader {
            do { try reader.insert(card) } catch { throw .conflict("\(error)") }
            terminal.lastAPICard.withLock { $0 = (source.shownName, card) }
        } else if let vpcd = terminal.settings.vpcd {
            try terminal.attach(card, to: vpcd, logger: logger)
        }
    }

    /// Takes the API-inserted card out of the terminal's reader; false when there was none.
    public func removeCard(terminal name: String?) throws(DaemonError) -> Bool {
        let terminal = try self.terminal(name)
        return terminal.virtualReader?.removeInProcessCard() ?? terminal.detachCard()
    }

    /// Registers (again) the issuer's account of the card in `source`: balance, blocked, lost,
    /// stolen, PIN tries as the profile says.
    public func registerAccount(profile source: ProfileSource) throws(DaemonError) -> String {
        let profile = try self.profile(from: source)
        do { try host.register(profile) } catch { throw .badRequest(field: "profile", rule: "\(error)") }
        return PAN.masked(profile.pan)
    }

    /// A terminal as a new scenario wants it: no queued keypad inputs, no queued host outcomes,
    /// no API-inserted card. Refused while a transaction runs.
    public func resetTerminal(_ name: String?) throws(DaemonError) {
        let terminal = try self.terminal(name)
        if let activity = terminal.currentActivity { throw .conflict("terminal \(terminal.settings.name) is busy: \(activity)") }
        terminal.keypad.clearQueue()
        _ = host.clearQueue(terminal.settings.name)
        terminal.virtualReader?.removeInProcessCard()
        terminal.detachCard()
    }
}

/// A virtual card the daemon connects to vsmartcard's vpcd itself, for a `pcsc:` terminal whose
/// reader is vpcd (`terminal.<name>.vpcd`): how an API or scenario card reaches such a terminal,
/// through pcscd as a card in a USB reader would.
final class VPCDAttachedCard: @unchecked Sendable {
    // Unchecked: `link` is thread-safe (close from any thread); `done` is a semaphore.
    private let link: VPCDCardLink
    private let done = DispatchSemaphore(value: 0)

    init(_ card: InsertedVirtualCard, endpoint: ReaderEndpoint, logger: Logger) throws(CardIOError) {
        link = try VPCDCardLink.connect(to: endpoint)
        let (link, done) = (self.link, self.done)
        let thread = Thread {
            do throws(CardIOError) { try link.serve(card) } catch { logger.error("card on \(endpoint): \(error)") }
            done.signal()
        }
        thread.name = "cardbench vpcd card"
        thread.start()
    }

    /// Still connected: not removed, not left by itself, not dropped by vpcd.
    var isConnected: Bool {
        guard done.wait(timeout: .now()) == .success else { return true }
        done.signal()
        return false
    }

    /// Pulls the card out and waits for its thread.
    func remove() {
        link.close()
        if done.wait(timeout: .now() + 5) == .success { done.signal() }
    }
}
