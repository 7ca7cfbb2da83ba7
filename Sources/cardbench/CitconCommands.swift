import ArgumentParser
import Daemon
import Foundation

struct CitconCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "citcon",
        abstract: "The Citcon UPI platform in the daemon: merchant keys, wallet and 3-D Secure answers, charges, the SDK's results (docs/citcon.md).",
        subcommands: [Merchant.self, Payer.self, Challenge.self, Charge.self, RequestOrder.self, InquireOrder.self, Chargeback.self]
    )

    struct Merchant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create merchants (or give one a new key) and list them.", subcommands: [Create.self, List.self])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Create a merchant, or give it a new key, and print the key (shown only this once).")
            @Option(help: "The merchant id (1–40 letters, digits, - or _).") var merchant: String
            @OptionGroup var daemon: DaemonOptions

            func run() async throws {
                let view = try decodeReply(CitconMerchantView.self, try await daemon.call(.POST, "/v1/citcon/merchants", json: CitconMerchantBody(merchantId: merchant)))
                print("merchant \(view.merchantId)")
                print("key \(view.key ?? "")   (shown once: store it now)")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the merchants (never their keys).")
            @OptionGroup var daemon: DaemonOptions

            func run() async throws {
                for m in try decodeReply([CitconMerchantView].self, try await daemon.call(.GET, "/v1/citcon/merchants")) { print(m.merchantId) }
            }
        }
    }

    struct Payer: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Answer a wallet charge as its payer: approve, decline, cancel or expire.")
        @Argument(help: "The charge id.") var charge: String
        @Argument(help: "approve, decline, cancel or expire.") var action: String
        @OptionGroup var daemon: DaemonOptions

        func validate() throws {
            guard ["approve", "decline", "cancel", "expire"].contains(action) else { throw ValidationError("the action is approve, decline, cancel or expire") }
        }

        func run() async throws {
            printRaw(try await daemon.call(.POST, "/v1/citcon/charges/\(charge)/payer", json: CitconAnswerBody(action: action)))
        }
    }

    struct Chargeback: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Open a chargeback on a captured charge, or move its latest one on: under_review, won, lost (docs/citcon.md, \"Chargebacks\").")
        @Argument(help: "The charge id.") var charge: String
        @Argument(help: "open, under_review, won or lost.") var action: String
        @Option(help: "What the cardholder disputes, in minor units (all that is left when absent), when opening.") var amount: Int?
        @Option(help: "The bank's reason, when opening.") var reason: String?
        @OptionGroup var daemon: DaemonOptions

        func validate() throws {
            guard ["open", "under_review", "won", "lost"].contains(action) else { throw ValidationError("action: open, under_review, won or lost") }
            if let amount, amount < 1 { throw ValidationError("--amount: 1 or more, in minor units") }
        }

        func run() async throws {
            printRaw(try await daemon.call(.POST, "/v1/citcon/charges/\(pathComponent(charge))/chargebacks",
                                           json: CitconChargebackBody(action: action, amount: amount, reason: reason)))
        }
    }

    struct Challenge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Answer a card charge's 3-D Secure challenge: pass or fail.")
        @Argument(help: "The charge id.") var charge: String
        @Argument(help: "pass or fail.") var result: String
        @OptionGroup var daemon: DaemonOptions

        func validate() throws {
            guard result == "pass" || result == "fail" else { throw ValidationError("the result is pass or fail") }
        }

        func run() async throws {
            printRaw(try await daemon.call(.POST, "/v1/citcon/charges/\(charge)/challenge", json: CitconAnswerBody(action: result)))
        }
    }

    struct Charge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a charge with its ledger transactions and its IPNs (delivery, attempts).")
        @Argument(help: "The charge id.") var charge: String
        @OptionGroup var daemon: DaemonOptions

        func run() async throws { printRaw(try await daemon.call(.GET, "/v1/citcon/charges/\(charge)")) }
    }

    struct RequestOrder: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "request-order",
            abstract: "What the SDK's requestOrder would hand the app for a charge token: the CPayResult JSON.")
        @Option(help: "The merchant id.") var merchant: String
        @Option(help: "The charge token.") var chargeToken: String
        @Option(help: "The payment method (for a charge made without one).") var method: String?
        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            var body: [String: Any] = ["charge_token": chargeToken]
            if let method { body["payment"] = ["method": method] }
            let text = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
            try await printPlatformAnswer(daemon, CitconRequestBody(merchantId: merchant, method: "POST", path: "/citcon/sdk/requestOrder", body: text))
        }
    }

    struct InquireOrder: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inquire-order", abstract: "What the SDK's inquireOrder would hand the app: the CPayCheck JSON.")
        @Option(help: "The merchant id.") var merchant: String
        @Argument(help: "The transaction (charge) id.") var transaction: String
        @OptionGroup var daemon: DaemonOptions

        func run() async throws {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: ["transaction_id": transaction]), as: UTF8.self)
            try await printPlatformAnswer(daemon, CitconRequestBody(merchantId: merchant, method: "POST", path: "/citcon/sdk/inquireOrder", body: text))
        }
    }
}

/// Prints the platform's body of a `/v1/citcon/requests` answer; exits 1 when its HTTP status is not 2xx.
private func printPlatformAnswer(_ daemon: DaemonOptions, _ request: CitconRequestBody) async throws {
    let data = try await daemon.call(.POST, "/v1/citcon/requests", json: request)
    let answer = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    if let body = answer["body"], let pretty = try? JSONSerialization.data(withJSONObject: body, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]) {
        print(String(decoding: pretty, as: UTF8.self))
    }
    if let status = answer["status"] as? Int, !(200..<300).contains(status) { throw ExitCode(1) }
}
