import Defaults
import EMV
import Foundation
import Hummingbird
import Terminal
import VirtualCard
import Workflows

/// A card profile the daemon knows, as `GET /v1/cards` lists it.
public struct CardProfileView: Codable, Sendable, Equatable {
    public let name: String
    /// `embedded` (compiled in) or `configured` (a file of `host.cards`).
    public let source: String
    /// The first application's label, or "stripe only".
    public let label: String
    public let brand: String?
    public let maskedPAN: String
    /// How the card can be presented: insert, tap, swipe.
    public let interfaces: [String]
    /// The issuer's account of the card now: balance, state, online PIN tries.
    public let account: AccountView?
}

/// The emulated issuer's account of one card.
public struct AccountView: Codable, Sendable, Equatable {
    public let balance: Int
    public let currency: Int
    public let blocked: Bool
    public let lost: Bool
    public let stolen: Bool
    public let onlinePINTriesRemaining: Int

    init(_ a: IssuerAccount) {
        balance = a.balance; currency = a.currency; blocked = a.blocked; lost = a.lost; stolen = a.stolen
        onlinePINTriesRemaining = a.onlinePINTriesRemaining
    }
}

/// `GET /v1/terminals/{name}/card`: the card in the reader, or the last one the API put there.
public struct CardSlotView: Codable, Sendable, Equatable {
    public let terminal: String
    public let present: Bool
    /// `in-process` (put there through the API or demo mode), `socket` (a card process on the
    /// reader's socket), `reader` (a card in a serial or PC/SC reader), or nil when empty.
    public let card: String?
    /// The profile of the API's last card, present or gone.
    public let profile: String?
    /// How that card is presented now (insert, tap, swipe).
    public let interface: String?
    public let maskedPAN: String?
    /// Its application transaction counters by AID.
    public let atc: [String: Int]?
    public let pinTriesRemaining: Int?
    public let account: AccountView?
}

/// The issuer's settings in force: `GET /v1/host`.
public struct HostView: Codable, Sendable, Equatable {
    /// Each front's scripted declines by amount (`none`, `stripe-cents`, `billpocket`, `worldline`).
    public let amountTables: [String: String]
    public let timeoutSeconds: Double
    /// The outcomes queued on each terminal, first first.
    public let queues: [String: [HostOutcomeBody]]
    /// Who each terminal authorises against: `emulated` or `iso8583://HOST:PORT`.
    public let upstreams: [String: String]
    /// The ISO 8583 link's format, and where the issuer answers external terminals.
    public let iso8583: ISO8583View
    /// The message format of each terminal that authorises against an external host.
    public let upstreamFormats: [String: ISO8583FormatView]
}

/// The message format of a terminal's external host.
public struct ISO8583FormatView: Codable, Sendable, Equatable {
    public let packager: String
    public let framing: String

    public init(packager: String, framing: String) {
        self.packager = packager
        self.framing = framing
    }
}

/// The ISO 8583 settings in force.
public struct ISO8583View: Codable, Sendable, Equatable {
    public let packager: String
    public let framing: String
    /// `ADDRESS:PORT` the issuer listens on (the port bound, when configured as 0); absent when off.
    public let listen: String?
}

extension HostOutcomeBody: Equatable {
    public static func == (a: HostOutcomeBody, b: HostOutcomeBody) -> Bool {
        a.code == b.code && a.unavailable == b.unavailable && a.delayMs == b.delayMs
    }
}

extension Bench {
    /// Every profile a request may name, embedded first, then the configured ones, by name.
    public func cardProfiles() -> [CardProfileView] {
        profileLibrary.keys.sorted().compactMap { name in
            guard let entry = profileLibrary[name], let profile = try? Self.loadProfile(entry, key: "host.cards") else { return nil }
            return CardProfileView(name: name, source: entry.isEmbedded ? "embedded" : "configured",
                                   label: profile.applications.first?.label ?? "stripe only",
                                   brand: CardBrand.detect(pan: profile.pan)?.displayName, maskedPAN: PAN.masked(profile.pan),
                                   interfaces: CardInterface.allCases.filter(profile.interfaces.contains).map(\.verb),
                                   account: host.account(pan: profile.pan).map(AccountView.init))
        }
    }

    /// What a terminal's reader holds, and the counters of the API's last card there.
    public func cardSlot(terminal name: String?) throws(DaemonError) -> CardSlotView {
        let terminal = try self.terminal(name)
        let present = terminal.reader.isCardPresent
        let kind: String? = if !present { nil } else if let virtual = terminal.virtualReader {
            virtual.hasInProcessCard ? "in-process" : "socket"
        } else { "reader" }
        guard let (profile, card) = terminal.lastAPICard.withLock({ $0 }) else {
            return CardSlotView(terminal: terminal.settings.name, present: present, card: kind, profile: nil, interface: nil, maskedPAN: nil,
                                atc: nil, pinTriesRemaining: nil, account: nil)
        }
        let s = card.snapshot
        // Only the API's card is described: a card process on the socket, or a physical card, is not it.
        let inSlot = present && kind == "in-process" && !s.left
        return CardSlotView(terminal: terminal.settings.name, present: present, card: kind, profile: profile,
                            interface: inSlot ? s.interface.verb : nil, maskedPAN: PAN.masked(s.pan), atc: s.state.atc,
                            pinTriesRemaining: s.state.pinTriesRemaining, account: host.account(pan: s.pan).map(AccountView.init))
    }

    /// The host's settings and queues.
    public func hostView() throws(DaemonError) -> HostView {
        var queues: [String: [HostOutcomeBody]] = [:]
        for t in terminals { queues[t.settings.name] = try hostQueue(terminal: t.settings.name).map(HostOutcomeBody.init) }
        return HostView(amountTables: ["viva": configuration.vivaAmountTable.option, "billpocket": configuration.billpocketAmountTable.option,
                                       "worldline": configuration.worldline.settings.amountTable.option, "citcon": configuration.citcon.settings.amountTable.option,
                                       "iso8583": configuration.iso8583AmountTable.option],
                        timeoutSeconds: Double(configuration.hostTimeout.components.seconds), queues: queues,
                        upstreams: Dictionary(uniqueKeysWithValues: terminals.map { t in
                            (t.settings.name, upstream(of: t.settings.name)?.upstream.url ?? "emulated")
                        }),
                        iso8583: ISO8583View(packager: configuration.iso8583.packager.name, framing: configuration.iso8583.framing.rawValue,
                                             listen: iso8583Port.map { port in
                                                 let a = issuerListenAddress.withLock { $0 } ?? configuration.iso8583.listenAddress
                                                 return (a.contains(":") ? "[\(a)]" : a) + ":\(port)"
                                             }),
                        upstreamFormats: Dictionary(uniqueKeysWithValues: terminals.compactMap { t in
                            upstream(of: t.settings.name).map { link in
                                (t.settings.name, ISO8583FormatView(packager: link.settings.packager.name, framing: link.settings.framing.rawValue))
                            }
                        }))
    }
}

/// Card profiles, a terminal's card slot, and the host's settings: what the console shows.
struct CardRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.get("/v1/cards") { _, _ in json(bench.cardProfiles()) }
        routes.get("/v1/terminals/:name/card") { _, context in json(try bench.cardSlot(terminal: context.parameters.get("name"))) }
        routes.get("/v1/host") { _, _ in json(try bench.hostView()) }
        routes.post("/v1/terminals/:name/capture") { request, context in
            let body = try await decode(CaptureBody.self, request, context)
            return json(try await bench.capture(terminal: context.parameters.get("name"), body))
        }
        return routes
    }
}
