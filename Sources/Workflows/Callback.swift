import Fronts
import LedgerModel
import Terminal

/// A callback as a front rendered it: the URL its app would open (none when the request named
/// nowhere to call back) with its fields in order and unencoded, and the words the reply shows
/// beside it. It is made once; nothing parses the URL back to learn its fields.
public struct Callback: Sendable, Equatable {
    /// One field: its name and its value, unencoded.
    public struct Field: Sendable, Equatable {
        public let name: String
        public let value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The URL the app would open, every value percent-encoded; nil when the request named nowhere to call back.
    public var url: String?
    /// What the URL was rendered after (the request's callback, or its URL scheme): where the
    /// outbox delivers it.
    public var target: String?
    /// The fields in the order the URL has them.
    public var fields: [Field]
    /// The app's own word for the outcome (`success`, `aprobada`, …).
    public var status: String
    /// The app's message for the outcome.
    public var message: String

    public init(url: String?, target: String?, fields: [(name: String, value: String)], status: String, message: String) {
        self.url = url
        self.target = target
        self.fields = fields.map { Field(name: $0.name, value: $0.value) }
        self.status = status
        self.message = message
    }

    /// The callback a stored outbox row holds (an idempotent replay), its fields read from the
    /// URL as it was rendered after `target`.
    public init(stored row: OutboxEntry, status: String, message: String) {
        self.init(url: row.payload, target: row.target, fields: RenderedCallback.fields(of: row.payload, renderedAfter: row.target),
                  status: status, message: message)
    }

    /// The outbox rows committed with the transaction: the URL itself, which the reply carries
    /// and a configured command, xdg-open or a webhook is given, due at `now` on the bench clock
    /// (the delivery loop and its retries follow that clock: docs/scenarios.md, "Virtual time").
    ///
    /// An app-scheme URL that nothing is configured to hand on (`appSchemesHandedOn` false) has
    /// nowhere to go but the reply: it is recorded delivered in the transaction's own commit,
    /// rather than left for the delivery loop to mark in a second commit of its own.
    public func outbox(now: Int64 = SystemClock().nowMicroseconds(), appSchemesHandedOn: Bool = true) -> [OutboxMessage] {
        guard let url, let target else { return [] }
        let replyOnly = !appSchemesHandedOn && !Self.isHTTP(url)
        return [OutboxMessage(kind: .callback, target: target, payload: url, nextAttemptAt: now, deliveredAt: replyOnly ? now : nil)]
    }

    /// Whether `url` is an http(s) callback, which the delivery loop requests; the loop and
    /// `outbox` both decide by this.
    public static func isHTTP(_ url: String) -> Bool {
        let scheme = url.utf8.prefix { $0 != UInt8(ascii: ":") }
        return scheme.count < url.utf8.count && ["http", "https"].contains(String(decoding: scheme, as: UTF8.self).lowercased())
    }

    /// A field's value.
    public func value(_ name: String) -> String? { fields.first { $0.name == name }?.value }
}

/// What a request came to: the callback, the transaction it recorded (if any), and whether this
/// is the stored answer to an earlier identical request.
public struct Answer: Sendable {
    /// The callback the app would send.
    public var callback: Callback
    /// The transaction recorded, when the request made or found one.
    public var transaction: StoredTransaction?
    /// True when this is the stored answer to an earlier identical request.
    public var replayed: Bool

    public init(callback: Callback, transaction: StoredTransaction?, replayed: Bool = false) {
        self.callback = callback
        self.transaction = transaction
        self.replayed = replayed
    }
}

/// A front: the app cardbench stands in for, behind one URL scheme. It parses its request, picks
/// the workflow and the rules and prompts it runs with, and renders the outcome as its app would.
public protocol Front: Sendable {
    /// The URL scheme the app answers, lower-case (`vivapayclient`).
    var scheme: String { get }
    /// The app's name in errors ("Viva Card Terminal app").
    var appName: String { get }
    /// Opens `url` on the terminal named `terminal` (the first one when nil). Throws only when no
    /// callback can be produced.
    func open(_ url: String, terminal: String?) async throws(WorkflowError) -> Answer
}
