import ArgumentParser
import Daemon
import Foundation
import Terminal

struct BillpocketCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "billpocket",
        abstract: "Billpocket users (user tokens) and device tokens in the daemon.",
        subcommands: [BillpocketUserCommand.self, DeviceTokenCommand.self]
    )
}

struct BillpocketUserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Create, rotate, invalidate and list Billpocket users.",
        subcommands: [Create.self, Rotate.self, Invalidate.self, List.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user and print its token (shown only this once; the daemon keeps its hash).")

        @Option(help: "The user's (merchant's) name, 1–64 characters.")
        var name: String

        @Option(help: "Installment plans as months:minimum, e.g. 3:300.00,6:600.00 (default: 3, 6, 9 and 12 months from 300.00, 600.00, 900.00 and 1200.00; \"none\" for none).")
        var msi: String?

        @Flag(help: "Print JSON.")
        var json = false

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let data = try await daemon.call(.POST, "/v1/billpocket/users", json: BillpocketUserBody(name: name, msi: try msi.map(Self.plans)))
            if json { return printRaw(data) }
            let user = try decodeReply(BillpocketUserView.self, data)
            print("user \(user.id) \(user.name): \(planText(user.msi))")
            print("token \(user.token ?? "")")
        }

        static func plans(_ text: String) throws -> [String: Int64] {
            if text == "none" { return [:] }
            var plans: [String: Int64] = [:]
            for item in text.split(separator: ",") {
                let parts = item.split(separator: ":")
                guard parts.count == 2, let months = Int(parts[0]), let minimum = cents(String(parts[1])) else {
                    throw CLIError(message: "--msi: each plan is months:minimum (e.g. 3:300.00), got \"\(item)\"", code: 2)
                }
                plans[String(months)] = minimum
            }
            return plans
        }

        static func cents(_ text: String) -> Int64? {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let whole = Int64(parts[0]), whole >= 0 else { return nil }
            guard parts.count == 2 else { return whole * 100 }
            guard (1...2).contains(parts[1].count), let fraction = Int64(parts[1]) else { return nil }
            return whole * 100 + (parts[1].count == 1 ? fraction * 10 : fraction)
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a user a new token (printed once); the old one is refused as rotated from now on.")

        @Argument(help: "The user's id.")
        var id: Int

        @Flag(help: "Print JSON.")
        var json = false

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let data = try await daemon.call(.POST, "/v1/billpocket/users/\(id)/rotate")
            if json { return printRaw(data) }
            let user = try decodeReply(BillpocketUserView.self, data)
            print("user \(user.id) \(user.name): new token")
            print("token \(user.token ?? "")")
        }
    }

    struct Invalidate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invalidate a user's token: requests with it are errors until the user is rotated.")

        @Argument(help: "The user's id.")
        var id: Int

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let user = try decodeReply(BillpocketUserView.self, try await daemon.call(.POST, "/v1/billpocket/users/\(id)/invalidate"))
            print("user \(user.id) \(user.name): \(user.state)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the users (never their tokens: only hashes are kept).")

        @Flag(help: "Print JSON.")
        var json = false

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let data = try await daemon.call(.GET, "/v1/billpocket/users")
            if json { return printRaw(data) }
            let users = try decodeReply([BillpocketUserView].self, data)
            if users.isEmpty { print("no users") }
            for u in users { print("\(u.id) \(u.name) \(u.state) msi \(planText(u.msi))") }
        }
    }
}

struct DeviceTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-token",
        abstract: "Issue and list device tokens: alive until one configures a device, then dead and bound to it.",
        subcommands: [Issue.self, List.self]
    )

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Issue a device token for a user and print it (shown only this once).")

        @Option(help: "The user's id.")
        var user: Int

        @Option(help: "A name for the device.")
        var alias: String?

        @Flag(help: "Print JSON.")
        var json = false

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let data = try await daemon.call(.POST, "/v1/billpocket/device-tokens", json: DeviceTokenBody(user: Int64(user), alias: alias))
            if json { return printRaw(data) }
            let issued = try decodeReply(DeviceTokenView.self, data)
            print("device token \(issued.id) for user \(issued.user)\(issued.alias.map { " (\($0))" } ?? ""): alive")
            print("token \(issued.token ?? "")")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List device tokens (never the tokens themselves), of one user or all.")

        @Option(help: "Only this user's.")
        var user: Int?

        @Flag(help: "Print JSON.")
        var json = false

        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let data = try await daemon.call(.GET, "/v1/billpocket/device-tokens" + (user.map { "?user=\($0)" } ?? ""))
            if json { return printRaw(data) }
            let tokens = try decodeReply([DeviceTokenView].self, data)
            if tokens.isEmpty { print("no device tokens") }
            for t in tokens {
                print("\(t.id) user \(t.user)\(t.alias.map { " \($0)" } ?? "") \(t.state)\(t.device.map { " on \($0)" } ?? "")")
            }
        }
    }
}

private func planText(_ plans: [String: Int64]) -> String {
    let sorted = plans.compactMap { key, value in Int(key).map { ($0, value) } }.sorted { $0.0 < $1.0 }
    if sorted.isEmpty { return "none" }
    return sorted.map { "\($0.0) from \(Money.decimal($0.1))" }.joined(separator: ", ")
}
