import Foundation

/// A Billpocket user: the merchant account a user token stands for, with the installment plans
/// (`msi`) it may sell and each plan's minimum amount.
public struct BillpocketUser: Sendable, Equatable, Codable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, name: String, state: State, msiMinimums: [Int: Int64], createdAt: Int64, updatedAt: Int64) {
        self.id = id
        self.name = name
        self.state = state
        self.msiMinimums = msiMinimums
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    public let id: Int64
    public let name: String
    /// `active` while it has a working token; `invalidated` after `invalidate` until a rotation.
    public let state: State
    /// Installment plans (3, 6, 9, 12) and each one's minimum amount in minor units.
    public let msiMinimums: [Int: Int64]
    public let createdAt: Int64
    public let updatedAt: Int64

    public enum State: String, Sendable, Codable {
        case active, invalidated
    }
}

/// A device token: alive until it configures a device, then dead and bound to that device.
public struct BillpocketDeviceToken: Sendable, Equatable, Codable {
    /// Every stored property, for the ledger that reads them back.
    package init(id: Int64, userID: Int64, alias: String?, device: String?, createdAt: Int64, boundAt: Int64?) {
        self.id = id
        self.userID = userID
        self.alias = alias
        self.device = device
        self.createdAt = createdAt
        self.boundAt = boundAt
    }

    public let id: Int64
    public let userID: Int64
    public let alias: String?
    /// The terminal it configured, once dead.
    public let device: String?
    public let createdAt: Int64
    public let boundAt: Int64?

    public var isAlive: Bool { device == nil }
}

/// What a request's tokens amount to on a terminal (see `Ledger.configureBillpocket`).
public enum BillpocketAccess: Sendable, Equatable {
    /// The terminal now works for `user`; `reconfigured` when it worked for someone else (or no
    /// one) before this request.
    case granted(user: BillpocketUser, reconfigured: Bool)
    case unknownUserToken
    case invalidatedUserToken
    case rotatedUserToken
    case unknownDeviceToken
    /// A device token of another user.
    case deviceTokenOfAnotherUser
    /// A dead device token bound to another device.
    case deviceTokenOfAnotherDevice(device: String)
}

/// A merchant of the emulated Citcon platform.
public struct CitconMerchant: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(merchantID: String, terminalName: String, createdAt: Int64) {
        self.merchantID = merchantID
        self.terminalName = terminalName
        self.createdAt = createdAt
    }

    public let merchantID: String
    /// The ledger terminal of its charges (`citcon.<merchantID>`).
    public let terminalName: String
    public let createdAt: Int64
}

/// A capture, refund or cancel of a charge (`POST /v1/captures`, `/v1/refunds`, `/v1/cancels`).
public struct CitconOperation: Sendable, Equatable, Codable {
    /// capture, refund or cancel.
    public var object: String
    public var id: String
    public var reference: String
    public var amount: Int64
    /// succeeded or failed.
    public var status: String
    /// Epoch milliseconds.
    public var timeCreated: Int64
    /// The operation's ledger row.
    public var transactionID: Int64?

    public init(object: String, id: String, reference: String, amount: Int64, status: String, timeCreated: Int64, transactionID: Int64?) {
        self.object = object
        self.id = id
        self.reference = reference
        self.amount = amount
        self.status = status
        self.timeCreated = timeCreated
        self.transactionID = transactionID
    }
}

/// A Citcon charge's status, in the SDK document's words; stored by its name. `CitconLifecycle`
/// (Workflows) says which event moves a charge from one to another.
public enum CitconChargeStatus: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case initiated, pending, authorized, succeeded, failed, canceled, expired

    /// Waiting for the payer (a wallet's page, a card's challenge).
    public var isOpen: Bool { self == .initiated || self == .pending }

    public var description: String { rawValue }
}

/// A charge of the emulated Citcon platform, as its inquiry shows it. Card data is masked only.
public struct CitconCharge: Sendable, Equatable, Codable {
    /// 32 lower-case hex digits, as the platform's ids.
    public var id: String
    public var chargeToken: String
    public var merchantID: String
    public var reference: String
    /// Minor units.
    public var amount: Int64
    public var currency: String
    public var country: String
    public var autoCapture: Bool
    public var note: String?
    /// `card`, `wechatpay`, `alipay`, `upop`, `paypal`, …
    public var method: String
    /// initiated, pending, authorized, succeeded, failed, canceled, expired (the SDK document's words).
    public var status: CitconChargeStatus
    public var amountCaptured: Int64?
    public var amountRefunded: Int64?
    /// Epoch milliseconds.
    public var timeCreated: Int64
    public var timeCaptured: Int64?
    /// When the issuer (or the payer's wallet) approved it: the SDK's `timeAuthorized`, absent
    /// until then and on a payment that failed.
    public var timeAuthorized: Int64?
    public var timeCanceled: Int64?
    public var timeCompleted: Int64?
    /// ipn, success, fail, cancel, mobile.
    public var urls: [String: String]
    /// A card's number as `411111******1111`, and its expiry (MM/YY).
    public var maskedPAN: String?
    public var expiry: String?
    public var authorisationCode: String?
    /// The issuer's response code and message of a decline.
    public var responseCode: String?
    public var message: String?
    /// The authorisation's ledger row.
    public var transactionID: Int64?
    public var operations: [CitconOperation]
    /// A card charge waiting for its 3-D Secure challenge.
    public var challengePending: Bool
    /// The vault token the charge's card became (`payment.requestToken`). In memory only: the
    /// ledger stores it sealed (`sealedVaultToken`) and fills it in when it reads the charge.
    public var vaultToken: String? = nil
    public var sealedVaultToken: String? = nil
    /// The merchant asked to vault the card (`requestToken`), for `vaultConsumer`.
    public var vaultRequested: Bool? = nil
    /// `consumer.reference`: whose vault the token belongs to.
    public var vaultConsumer: String? = nil

    /// Every property but `vaultToken`, which is never stored in clear.
    enum CodingKeys: String, CodingKey {
        case id, chargeToken, merchantID, reference, amount, currency, country, autoCapture, note, method, status, amountCaptured, amountRefunded,
             timeCreated, timeCaptured, timeAuthorized, timeCanceled, timeCompleted, urls, maskedPAN, expiry, authorisationCode, responseCode, message,
             transactionID, operations, challengePending, sealedVaultToken, vaultRequested, vaultConsumer
    }

    public init(id: String, chargeToken: String, merchantID: String, reference: String, amount: Int64, currency: String, country: String,
                autoCapture: Bool, note: String?, method: String, status: CitconChargeStatus, timeCreated: Int64, urls: [String: String]) {
        self.id = id
        self.chargeToken = chargeToken
        self.merchantID = merchantID
        self.reference = reference
        self.amount = amount
        self.currency = currency
        self.country = country
        self.autoCapture = autoCapture
        self.note = note
        self.method = method
        self.status = status
        self.timeCreated = timeCreated
        self.urls = urls
        operations = []
        challengePending = false
    }
}

/// A merchant of the emulated Worldline platform: the ledger terminal its payments are recorded
/// on, and where its webhooks go.
public struct WorldlineMerchant: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(merchantID: String, terminalName: String, webhookURL: String?, webhookKeyID: String?, createdAt: Int64) {
        self.merchantID = merchantID
        self.terminalName = terminalName
        self.webhookURL = webhookURL
        self.webhookKeyID = webhookKeyID
        self.createdAt = createdAt
    }

    public let merchantID: String
    /// The ledger terminal of its payments (`worldline.<merchantID>`).
    public let terminalName: String
    public let webhookURL: String?
    public let webhookKeyID: String?
    public let createdAt: Int64
}

/// An API key of the Server API (its secret is only ever shown when it is made).
public struct WorldlineAPIKey: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(keyID: String, merchantID: String, createdAt: Int64, revokedAt: Int64?) {
        self.keyID = keyID
        self.merchantID = merchantID
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }

    public let keyID: String
    public let merchantID: String
    public let createdAt: Int64
    public let revokedAt: Int64?
}

/// A key pair encrypted customer input is encrypted to (`GET crypto/publickey`).
public struct WorldlineCryptoKey: Sendable {
    /// Every stored property, for the ledger that reads them back.
    package init(keyID: String, publicKeyDER: [UInt8], privateKeyDER: [UInt8], createdAt: Int64, retiredAt: Int64?) {
        self.keyID = keyID
        self.publicKeyDER = publicKeyDER
        self.privateKeyDER = privateKeyDER
        self.createdAt = createdAt
        self.retiredAt = retiredAt
    }

    public let keyID: String
    /// DER SubjectPublicKeyInfo.
    public let publicKeyDER: [UInt8]
    /// PKCS#1 or PKCS#8 DER; sealed at rest.
    public let privateKeyDER: [UInt8]
    public let createdAt: Int64
    public let retiredAt: Int64?
}

/// A client session of the Client API.
public struct WorldlineSession: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(merchantID: String, customerID: String, createdAt: Int64, expiresAt: Int64) {
        self.merchantID = merchantID
        self.customerID = customerID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }

    public let merchantID: String
    public let customerID: String
    public let createdAt: Int64
    public let expiresAt: Int64
}

/// A capture, refund or cancel of a payment, as the platform lists them.
/// A Worldline payment's (or operation's) status, as the platform names it; stored by its name.
/// `WorldlineLifecycle` (Workflows) says which event moves a payment from one to another.
public enum WorldlinePaymentStatus: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case created = "CREATED"
    case redirected = "REDIRECTED"
    case pendingCapture = "PENDING_CAPTURE"
    /// A capture is queued: it becomes CAPTURED when the platform settles it (`worldline.settle_after`).
    case captureRequested = "CAPTURE_REQUESTED"
    case captured = "CAPTURED"
    /// A refund is queued: it becomes REFUNDED when the platform settles it.
    case refundRequested = "REFUND_REQUESTED"
    case rejected = "REJECTED"
    case cancelled = "CANCELLED"
    case refunded = "REFUNDED"

    public var description: String { rawValue }
}

public struct WorldlineOperation: Sendable, Equatable, Codable {
    /// What the operation did.
    public enum Kind: String, Sendable, Codable { case capture, refund, cancel }
    public var id: String
    public var kind: Kind
    public var amount: Int64
    /// CAPTURE_REQUESTED then CAPTURED, REFUND_REQUESTED then REFUNDED, CANCELLED or REJECTED.
    public var status: WorldlinePaymentStatus
    /// The ledger row of the operation.
    public var transactionID: Int64?
    public var merchantReference: String?
    public var createdAt: Int64
    /// When a requested capture or refund settles (microseconds on the bench clock).
    public var settleAt: Int64?
    /// A refund's capture (the operation id), when the payment has captures.
    public var captureID: String?

    public init(id: String, kind: Kind, amount: Int64, status: WorldlinePaymentStatus, transactionID: Int64?, merchantReference: String? = nil,
                createdAt: Int64, settleAt: Int64? = nil, captureID: String? = nil) {
        self.id = id
        self.kind = kind
        self.amount = amount
        self.status = status
        self.transactionID = transactionID
        self.merchantReference = merchantReference
        self.createdAt = createdAt
        self.settleAt = settleAt
        self.captureID = captureID
    }

    /// A capture or refund still waiting to settle.
    public var isRequested: Bool { status == .captureRequested || status == .refundRequested }
}

/// A payment of the emulated Worldline platform: what its `GET …/payments/{id}` shows. Card data
/// is masked only; the full PAN of a payment is in no field.
public struct WorldlinePayment: Sendable, Equatable, Codable {
    /// `{PAYID}_0`; set by `insertWorldlinePayment`.
    public var id: String
    public var merchantID: String
    /// REDIRECTED, PENDING_CAPTURE, CAPTURED, REJECTED, CANCELLED, REFUNDED.
    public var status: WorldlinePaymentStatus
    public var amount: Int64
    /// ISO 4217 alphabetic code, as the platform's API speaks.
    public var currency: String
    /// SALE, FINAL_AUTHORIZATION or PRE_AUTHORIZATION.
    public var authorizationMode: String
    public var merchantReference: String?
    public var paymentProductID: Int
    /// `************4675`: the last four digits only, as the platform masks.
    public var maskedCardNumber: String?
    /// The first six digits.
    public var bin: String?
    /// MMYY.
    public var expiryDate: String?
    public var authorisationCode: String?
    /// The host's response code and message of a decline or a failed challenge.
    public var responseCode: String?
    public var message: String?
    /// The authorisation's ledger row.
    public var transactionID: Int64?
    /// Captured, requested or settled.
    public var capturedAmount: Int64
    /// Refunded, requested or settled.
    public var refundedAmount: Int64
    /// Released by cancels (all of it, or parts with `amountOfMoney`); nil for none.
    public var cancelledAmount: Int64?
    /// A final capture or cancel closed the payment to more captures (the rest released).
    public var captureClosed: Bool?
    /// 3-D Secure: the merchant's return URL and the RETURNMAC, while a challenge is pending or after.
    public var returnURL: String?
    public var returnMAC: String?
    /// "challenge-passed", "challenge-failed", "frictionless", or nil when 3-D Secure was not asked for.
    public var threeDSecure: String?
    /// The SHA-256 of the challenge page's token (`PageToken`): the page is reached by it, not
    /// by the payment's id.
    public var challengeTokenHash: String?
    public var operations: [WorldlineOperation]
    public var createdAt: Int64
    public var updatedAt: Int64
    /// The card-on-file token the payment was made with or created (`tokenize`). In memory only:
    /// the ledger stores it sealed (`sealedToken`) and fills it in when it reads the payment back.
    public var token: String? = nil
    /// `token`, sealed by the ledger (AES-GCM under a key derived from its PAN key).
    public var sealedToken: String? = nil
    /// The payment created its token (`creationOutput.isNewToken`).
    public var isNewToken: Bool? = nil
    /// The scheme's id for an approved authorisation (`schemeReferenceData`), carried into the
    /// card-on-file and recurring payments that follow it.
    public var schemeTransactionID: String? = nil
    /// The first payment's scheme id a card-on-file or recurring payment refers to.
    public var initialSchemeTransactionID: String? = nil
    /// Card on file: who started the payment and where it is in its series
    /// (`cardholderInitiated/first`, `merchantInitiated/subsequent`, `recurring/first`, …).
    public var cardOnFile: String? = nil
    /// `mobile` for a wallet's payment (Apple Pay 302, Google Pay 320); nil: `card`.
    public var paymentMethod: String? = nil
    /// A wallet payment's card network (`VISA`, `MASTERCARD`).
    public var network: String? = nil

    /// Every property but `token`, which is never stored in clear.
    enum CodingKeys: String, CodingKey {
        case id, merchantID, status, amount, currency, authorizationMode, merchantReference, paymentProductID, maskedCardNumber, bin,
             expiryDate, authorisationCode, responseCode, message, transactionID, capturedAmount, refundedAmount, cancelledAmount,
             captureClosed, returnURL, returnMAC, threeDSecure, challengeTokenHash, operations, createdAt, updatedAt, sealedToken,
             isNewToken, schemeTransactionID, initialSchemeTransactionID, cardOnFile, paymentMethod, network
    }

    public init(merchantID: String, status: WorldlinePaymentStatus, amount: Int64, currency: String, authorizationMode: String,
                merchantReference: String?, paymentProductID: Int, maskedCardNumber: String?, bin: String?, expiryDate: String?,
                createdAt: Int64) {
        id = ""
        self.merchantID = merchantID
        self.status = status
        self.amount = amount
        self.currency = currency
        self.authorizationMode = authorizationMode
        self.merchantReference = merchantReference
        self.paymentProductID = paymentProductID
        self.maskedCardNumber = maskedCardNumber
        self.bin = bin
        self.expiryDate = expiryDate
        capturedAmount = 0
        refundedAmount = 0
        operations = []
        self.createdAt = createdAt
        updatedAt = createdAt
    }

    /// What may still be captured: the authorisation less what was captured and cancelled,
    /// nothing once a final capture or cancel closed it.
    public var capturable: Int64 {
        captureClosed == true || authorizationMode == "SALE" || transactionID == nil ? 0 : max(0, amount - capturedAmount - (cancelledAmount ?? 0))
    }

    /// When the next requested capture or refund settles.
    public var dueAt: Int64? { operations.filter(\.isRequested).compactMap(\.settleAt).min() }

    /// The PAYID: the id without its `_0`.
    public var payid: String { String(id.prefix { $0 != "_" }) }

    /// The id of the next capture or refund: `{PAYID}_{n}`, counting from 1.
    public var nextOperationID: String { "\(payid)_\(operations.count + 1)" }
}

/// What an idempotence key amounts to for a request (see `Ledger.claimWorldlineIdempotence`).
public enum WorldlineIdempotence: Sendable, Equatable {
    /// First use: go on, then `finishWorldlineIdempotence`.
    case new
    /// A request with this key is still running (the platform answers 409).
    case inProgress(requestedAt: Int64)
    /// Done: answer the stored status and body again.
    case done(requestedAt: Int64, status: Int, body: String)
    /// The key was used for a different request.
    case differentRequest(requestedAt: Int64)
}

/// A card-on-file token of the emulated Worldline platform, as `GET …/tokens/{id}` shows it:
/// the card masked, never its number (the ledger keeps the number sealed, found by the keyed
/// hash the card core searches cards by).
public struct WorldlineToken: Sendable, Equatable {
    /// Every stored property, for the ledger that reads them back.
    package init(token: String, merchantID: String, paymentProductID: Int, maskedCardNumber: String, bin: String, expiryDate: String,
                 cardholderName: String?, initialSchemeTransactionID: String?, createdAt: Int64, deletedAt: Int64?) {
        self.token = token
        self.merchantID = merchantID
        self.paymentProductID = paymentProductID
        self.maskedCardNumber = maskedCardNumber
        self.bin = bin
        self.expiryDate = expiryDate
        self.cardholderName = cardholderName
        self.initialSchemeTransactionID = initialSchemeTransactionID
        self.createdAt = createdAt
        self.deletedAt = deletedAt
    }

    /// The token itself (a UUID, as the platform's).
    public let token: String
    public let merchantID: String
    public let paymentProductID: Int
    /// `************1111`.
    public let maskedCardNumber: String
    public let bin: String
    /// MMYY.
    public let expiryDate: String
    public let cardholderName: String?
    /// The scheme id of the series' first payment, once one was approved with this token.
    public let initialSchemeTransactionID: String?
    public let createdAt: Int64
    public let deletedAt: Int64?
}

/// What storing a card as a token did (`tokenStatus`): a new token, the merchant's token for
/// that card as it was, or that token with a new expiry date or name.
public enum WorldlineTokenStatus: String, Sendable, Equatable {
    case created = "CREATED", unchanged = "UNCHANGED", updated = "UPDATED"
}

/// A token's card, unsealed for one authorisation: held in memory only.
public struct WorldlineVaultedCard: Sendable {
    public let pan: String
    public let expiryDate: String
    public let cardholderName: String?

    public init(pan: String, expiryDate: String, cardholderName: String?) {
        self.pan = pan
        self.expiryDate = expiryDate
        self.cardholderName = cardholderName
    }
}

/// A hosted checkout's status, as `GET …/hostedcheckouts/{id}` names it.
public enum WorldlineHostedCheckoutStatus: String, Sendable, Codable, CaseIterable {
    case inProgress = "IN_PROGRESS"
    case paymentCreated = "PAYMENT_CREATED"
    case cancelledByConsumer = "CANCELLED_BY_CONSUMER"
    case clientNotEligible = "CLIENT_NOT_ELIGIBLE_FOR_SELECTED_PAYMENT_PRODUCT"
}

/// A hosted checkout of the emulated Worldline platform: what the merchant asked for, the page
/// the consumer pays on (reached by a token stored as its hash), and the payment it created.
public struct WorldlineHostedCheckout: Sendable, Equatable, Codable {
    /// Set by the ledger when it is stored.
    public var id: String = ""
    public var merchantID: String
    public var status: WorldlineHostedCheckoutStatus = .inProgress
    public var amount: Int64
    public var currency: String
    public var merchantReference: String?
    public var returnURL: String?
    public var returnMAC: String
    /// `en_GB`; the page's language.
    public var locale: String?
    public var variant: String?
    /// Show the platform's result page before sending the consumer back (the default).
    public var showResultPage: Bool = true
    /// SALE, FINAL_AUTHORIZATION or PRE_AUTHORIZATION, for the payment it creates.
    public var authorizationMode: String
    public var tokenize: Bool = false
    public var isRecurring: Bool = false
    /// The payment products the page offers (empty: every card product).
    public var products: [Int] = []
    /// The merchant's tokens offered as saved cards. In memory only: stored sealed (`sealedTokens`).
    public var tokens: [String] = []
    public var sealedTokens: String? = nil
    /// The SHA-256 of the page's token.
    public var pageTokenHash: String
    /// The payments it created, the latest last.
    public var paymentIDs: [String] = []
    /// How many payments the consumer may try.
    public var allowedAttempts: Int = 10
    public var createdAt: Int64
    public var expiresAt: Int64

    enum CodingKeys: String, CodingKey {
        case id, merchantID, status, amount, currency, merchantReference, returnURL, returnMAC, locale, variant, showResultPage,
             authorizationMode, tokenize, isRecurring, products, sealedTokens, pageTokenHash, paymentIDs, allowedAttempts, createdAt, expiresAt
    }

    public init(merchantID: String, amount: Int64, currency: String, merchantReference: String?, returnURL: String?, returnMAC: String,
                authorizationMode: String, pageTokenHash: String, createdAt: Int64, expiresAt: Int64) {
        self.merchantID = merchantID
        self.amount = amount
        self.currency = currency
        self.merchantReference = merchantReference
        self.returnURL = returnURL
        self.returnMAC = returnMAC
        self.authorizationMode = authorizationMode
        self.pageTokenHash = pageTokenHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A hosted tokenization session of the emulated Worldline platform: the card form a merchant
/// puts in an iframe, and the token the consumer's card became.
public struct WorldlineHostedTokenization: Sendable, Equatable, Codable {
    /// Set by the ledger when it is stored.
    public var id: String = ""
    public var merchantID: String
    public var locale: String?
    public var variant: String?
    /// The payment products the form takes.
    public var products: [Int]
    /// The SHA-256 of the form page's token.
    public var pageTokenHash: String
    /// The token the form made or found. In memory only: stored sealed (`sealedToken`).
    public var token: String? = nil
    public var sealedToken: String? = nil
    /// CREATED, UNCHANGED or UPDATED, once the form was sent.
    public var tokenStatus: String? = nil
    /// A payment used the session already.
    public var used: Bool = false
    public var createdAt: Int64
    public var expiresAt: Int64

    enum CodingKeys: String, CodingKey {
        case id, merchantID, locale, variant, products, pageTokenHash, sealedToken, tokenStatus, used, createdAt, expiresAt
    }

    public init(merchantID: String, products: [Int], pageTokenHash: String, createdAt: Int64, expiresAt: Int64) {
        self.merchantID = merchantID
        self.products = products
        self.pageTokenHash = pageTokenHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
