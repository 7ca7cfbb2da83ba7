import ArgumentParser
import Daemon
import Foundation

struct WorldlineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worldline",
        abstract: "The Worldline platform in the daemon: API keys, webhooks, the Client API's key, 3-D Secure challenges, payments (docs/worldline.md).",
        subcommands: [Key.self, Webhook.self, RotateCryptoKey.self, Challenge.self, Payment.self]
    )

    struct Key: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create, list and revoke Server API keys.",
                                                        subcommands: [Create.self, List.self, Revoke.self])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create an API key for a merchant and print its secret (shown only this once).")
            @Option(help: "The merchant id (1–40 letters, digits, - or _): the {merchantId} of /v2/{merchantId}/….")
            var merchant: String
            @Flag(help: "Print JSON.") var json = false
            @OptionGroup var daemon: DaemonOptions

            func run() async throws {
                let data = try await daemon.call(.POST, "/v1/worldline/api-keys", json: WorldlineAPIKeyBody(merchantId: merchant))
                if json { return printRaw(data) }
                let key = try decodeReply(WorldlineAPIKeyView.self, data)
                print("key id \(key.keyId)  merchant \(key.merchantId)")
                print("secret \(key.secretApiKey ?? "")   (shown once: store it now)")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the API keys (never their secrets).")
            @Flag(help: "Print JSON.") var json = false
            @OptionGroup var daemon: DaemonOptions

            func run() async throws {
                let data = try await daemon.call(.GET, "/v1/worldline/api-keys")
                if json { return printRaw(data) }
                for key in try decodeReply([WorldlineAPIKeyView].self, data) {
                    print("\(key.keyId)  merchant \(key.merchantId)\(key.revokedAt == nil ? "" : "  revoked")")
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke an API key: its requests are refused (401) from now on.")
            @Argument(help: "The key id.") var keyID: String
            @OptionGroup var daemon: DaemonOptions

            func run() async throws {
                let key = try decodeReply(WorldlineAPIKeyView.self, try await daemon.call(.POST, "/v1/worldline/api-keys/\(keyID)/revoke"))
                print("key id \(key.keyId) revoked")
            }
        }
    }

    struct Webhook: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Where a merchant's webhooks go.", subcommands: [Set.self])

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Set (or with --off, stop) a merchant's webhook endpoint; prints the new signing key's id and secret (shown once).")
            @Option(help: "The merchant id.") var merchant: String
            @Option(help: "The endpoint (http or https).") var url: String?
            @Flag(help: "Stop the merchant's webhooks.") var off = false
            @OptionGroup var daemon: DaemonOptions

            func validate() throws {
                guard (url == nil) != !off else { throw ValidationError("give --url or --off") }
            }

            func run() async throws {
                let data = try await daemon.call(.PUT, "/v1/worldline/merchants/\(merchant)/webhook", json: WorldlineWebhookBody(url: off ? nil : url))
                let view = try decodeReply(WorldlineWebhookView.self, data)
                if let url = view.url {
                    print("webhooks of \(view.merchantId) go to \(url)")
                    print("webhook key id \(view.keyId ?? "")  secret \(view.secret ?? "")   (shown once)")
                } else {
                    print("webhooks of \(view.merchantId) are off")
                }
            }
        }
    }

    struct RotateCryptoKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-crypto-key",
            abstract: "Make a new RSA key for encrypted customer input; the old one still decrypts what was made with it.")
        @OptionGroup var daemon: DaemonOptions

        func run() async throws { printRaw(try await daemon.call(.POST, "/v1/worldline/crypto-keys/rotate")) }
    }

    struct Challenge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Answer a payment's 3-D Secure challenge, as its page's buttons do.")
        @Argument(help: "The payment id ({PAYID}_0).") var payment: String
        @Argument(help: "pass or fail.") var result: String
        @OptionGroup var daemon: DaemonOptions

        func validate() throws {
            guard result == "pass" || result == "fail" else { throw ValidationError("the result is pass or fail, got \"\(result)\"") }
        }

        func run() async throws {
            printRaw(try await daemon.call(.POST, "/v1/worldline/payments/\(payment)/challenge", json: WorldlineChallengeBody(result: result)))
        }
    }

    struct Payment: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a payment as the platform's details, or its ledger rows and webhooks (--record).")
        @Argument(help: "The payment id ({PAYID}_0).") var payment: String
        @Flag(help: "Its ledger transactions and webhooks instead.") var record = false
        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            printRaw(try await daemon.call(.GET, "/v1/worldline/payments/\(payment)\(record ? "/record" : "")"))
        }
    }
}
