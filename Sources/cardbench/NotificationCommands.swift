import ArgumentParser
import Daemon
import Foundation

struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "A transaction's notifications (callbacks, webhooks, IPNs) with every attempt; send one again now.",
        discussion: """
        `cardbench notifications 42` lists transaction 42's notifications and those of the operations \
        on it (a payment's captures and refunds), each with its attempts: when, what the endpoint \
        answered, and whether it was a resend. `cardbench notifications resend 7` sends notification 7 \
        again now — the same payload, so the same event id; a webhook signed with the merchant's \
        current key — and records the attempt as a resend (docs/daemon.md, "Notifications").
        """,
        subcommands: [NotificationsList.self, NotificationsResend.self],
        defaultSubcommand: NotificationsList.self
    )
}

struct NotificationsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "A transaction's notifications with their attempts.")

    @Argument(help: "The transaction: its ledger id or transactionId.")
    var transaction: String

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let data = try await daemon.call(.GET, "/v1/notifications?transaction=\(transaction.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? transaction)")
        if json { return printRaw(data) }
        let list = try decodeReply([NotificationView].self, data)
        if list.isEmpty { print("transaction \(transaction) has no notifications") }
        for n in list { NotificationsResend.show(n) }
    }
}

struct NotificationsResend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resend", abstract: "Send a notification again now; exit 1 when the endpoint did not take it.")

    @Argument(help: "The notification's id (from `cardbench notifications <transaction>`).")
    var id: Int64

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        guard id > 0 else { throw ValidationError("id: a notification's id is a positive number") }
    }

    func run() async throws {
        let data = try await daemon.call(.POST, "/v1/notifications/\(id)/resend")
        let resent = try decodeReply(ResendView.self, data)
        if json { printRaw(data) } else { Self.show(resent.notification) }
        if resent.attempt.outcome != "delivered" { throw ExitCode(1) }
    }

    static func show(_ n: NotificationView) {
        print("#\(n.id) \(n.kind)\(n.event.map { " \($0)" } ?? "") of transaction \(n.transactionId): \(n.status) → \(n.target)")
        if let eventId = n.eventId { print("    event id \(eventId)") }
        if n.history.isEmpty { print("    no attempt: \(n.status == "delivered" ? "it went in the app's reply" : "not yet tried")") }
        for a in n.history {
            print("    \(a.seq). \(a.at) \(a.outcome)\(a.resend ? " (resend)" : ""): \(a.answer)")
        }
    }
}
