import Terminal

/// Why a Billpocket request ended without approval: the callback's `result` (`rechazada` or
/// `error`) and `statusinfo` (at most 40 characters), and a longer `detail` for the API and logs.
///
/// `rechazada` is what the document says it is, a decline by the issuer bank, and cardbench also
/// uses it for the card's own decline (an AAC, PIN tries exhausted), since the cardholder must
/// try another card either way. Everything else is `error`: the request, the tokens, the
/// user's plans, the refund rules, the reader or the terminal stopped the transaction, and
/// trying again (differently) may work. The table is in docs/billpocket.md.
public enum BillpocketFailure: Sendable, Equatable {
    /// The issuer declined with `code`. `statusinfo` is `message` when given (the host's words),
    /// else `BillpocketIssuerMessage.forCode(code).english`, cut to 40 characters.
    case declinedByHost(ResponseCode, message: String? = nil)
    /// The card declined: an AAC at the first GENERATE AC (Z1), or at the second after the host
    /// approved (the approval is reversed).
    case declinedByCard
    /// The card's PIN try counter ran out.
    case pinTriesExceeded
    /// The host could not be reached and the terminal declined offline (Z3).
    case hostUnavailable
    /// The card left the reader before the transaction finished.
    case cardRemoved
    /// The reader failed.
    case readerError
    /// The card answered with an error or with data the kernel cannot use.
    case cardError
    /// The card has no application the terminal supports, or a brand Billpocket does not take
    /// (`BillpocketFormat.cardType(brand:)` is nil).
    case cardNotAccepted
    /// The cardholder or the operator cancelled on the keypad.
    case userCancel
    /// Nobody answered a prompt in time.
    case promptTimeout
    /// Another transaction is in progress on this terminal.
    case terminalBusy
    /// `mandatoryPhoto`: the sale needs a photo and none was attached.
    case photoRequired
    /// The request broke a rule.
    case badRequest(BillpocketFieldError)
    /// No user has this token.
    case userTokenUnknown
    /// The user token was invalidated ("Future calls with this invalidated token will be taken
    /// as errors").
    case userTokenInvalidated
    /// The user token was replaced by a newer one (rotated); the user has a working token.
    case userTokenRotated
    /// No device of this user has this device token.
    case deviceTokenUnknown
    /// The device token is dead: it configured another device, and "will continue working for
    /// that device only".
    case deviceTokenInUse
    /// The user may not sell in the requested months without interest.
    case msi(BillpocketMSIRefusal)
    /// The refund is refused.
    case refund(BillpocketRefundRefusal)

    /// The failure for a request error.
    public init(_ error: BillpocketRequestError) {
        self = .badRequest(BillpocketFieldError(field: error.field, statusInfo: error.statusInfo, rule: error.rule))
    }

    /// The failure for a kernel error: a transaction that ended without an outcome from the card.
    public init(_ error: KernelError) {
        switch error {
        case .cardRemoved: self = .cardRemoved
        case .readerError: self = .readerError
        case .promptTimeout: self = .promptTimeout
        case .cancelled, .aborted: self = .userCancel
        case .noApplication: self = .cardNotAccepted
        // A contactless "end application", or a card presented again and again without an end.
        case .cardError, .invalidCardData, .endApplication, .presentAgain: self = .cardError
        }
    }

    /// The failure for a declined outcome, nil for an approved one.
    public init?(_ outcome: TransactionOutcome) {
        guard outcome.decision == .declined else { return nil }
        self = Self.declined(responseCode: outcome.responseCode, reversed: outcome.reversal != nil)
    }

    /// The failure for a decline with `responseCode`: Z1 is the card's own decline, Z3 the
    /// terminal's when the host is unreachable, anything else the issuer's. `reversed` says the
    /// host approved and the card then declined, which is the card's doing.
    public static func declined(responseCode: ResponseCode, reversed: Bool) -> BillpocketFailure {
        switch Decline(responseCode: responseCode, reversed: reversed) {
        case .byCard: .declinedByCard
        case .hostUnavailable: .hostUnavailable
        case .byHost(let code): .declinedByHost(code)
        }
    }

    /// The callback's `result`.
    public var result: BillpocketResult.Status {
        switch self {
        case .declinedByHost, .declinedByCard, .pinTriesExceeded: .rechazada
        default: .error
        }
    }

    /// The callback's `statusinfo`, at most 40 characters, in English.
    public var statusInfo: String { statusInfo(.en) }

    /// The callback's `statusinfo` in `language`, at most 40 characters. The Spanish texts avoid
    /// `&`, `=`, `/` and `@`, which receivers that decode before they split (or read `URL.host`)
    /// stumble on; a request's rule errors stay `<field>: <rule>` in English, for the developer.
    public func statusInfo(_ language: BillpocketCallbackStyle.Language) -> String {
        guard language == .es else { return english }
        switch self {
        case .declinedByHost(let code, let message):
            return BillpocketText.truncated(message ?? BillpocketIssuerMessage.forCode(code).spanishStatusInfo, to: BillpocketResult.statusInfoLimit)
        case .declinedByCard: return "Transacción rechazada por la tarjeta"
        case .pinTriesExceeded: return "Intentos de NIP excedidos"
        case .hostUnavailable: return "Emisor no disponible. Intente de nuevo"
        case .cardRemoved: return "Tarjeta retirada antes de terminar"
        case .readerError: return "Error en el lector de tarjetas"
        case .cardError: return "Error al leer la tarjeta"
        case .cardNotAccepted: return "Tarjeta no aceptada. Intente con otra"
        // The one text seen from the real app (a cancelled sale, result=error).
        case .userCancel: return "La transacción fue cancelada"
        case .promptTimeout: return "Tiempo de espera agotado"
        case .terminalBusy: return "Hay otra transacción en curso"
        case .photoRequired: return "photo: la foto es obligatoria"
        case .badRequest(let error): return error.statusInfo
        case .userTokenUnknown: return "userToken: desconocido"
        case .userTokenInvalidated: return "userToken: invalidado"
        case .userTokenRotated: return "userToken: reemplazado, use el nuevo"
        case .deviceTokenUnknown: return "devicetoken: desconocido"
        case .deviceTokenInUse: return "devicetoken: en uso en otro dispositivo"
        case .msi(let refusal): return refusal.statusInfo(.es)
        case .refund(let refusal): return refusal.statusInfo(.es)
        }
    }

    var english: String {
        switch self {
        case .declinedByHost(let code, let message):
            BillpocketText.truncated(message ?? BillpocketIssuerMessage.forCode(code).english, to: BillpocketResult.statusInfoLimit)
        case .declinedByCard: "Declined by card"
        case .pinTriesExceeded: "PIN tries exceeded"
        case .hostUnavailable: "Issuer unavailable. Try again"
        case .cardRemoved: "Card removed"
        case .readerError: "Card reader error"
        case .cardError: "Card error"
        case .cardNotAccepted: "Card not accepted"
        case .userCancel: "Cancelled by user"
        case .promptTimeout: "Timeout: no answer from cardholder"
        case .terminalBusy: "Terminal busy"
        case .photoRequired: "photo: required (mandatoryPhoto)"
        case .badRequest(let error): error.statusInfo
        case .userTokenUnknown: "userToken: unknown"
        case .userTokenInvalidated: "userToken: invalidated"
        case .userTokenRotated: "userToken: rotated; use the new token"
        case .deviceTokenUnknown: "devicetoken: unknown"
        case .deviceTokenInUse: "devicetoken: in use on another device"
        case .msi(let refusal): refusal.statusInfo
        case .refund(let refusal): refusal.statusInfo
        }
    }

    /// What happened, at length, for the API's answer and the logs.
    public var detail: String {
        switch self {
        case .declinedByHost(let code, let message):
            "the issuer declined with response code \(code.code): " + (message ?? BillpocketIssuerMessage.forCode(code).english)
        case .declinedByCard: "the card declined the transaction"
        case .pinTriesExceeded: "the card's PIN try counter is exhausted"
        case .hostUnavailable: "the issuer could not be reached and the terminal declined offline"
        case .cardRemoved: "the card left the reader before the transaction finished"
        case .readerError: "the card reader failed"
        case .cardError: "the card answered with an error or with data the terminal cannot use"
        case .cardNotAccepted: "the card has no application or brand Billpocket takes (VISA, MASTERCARD, CARNET, AMERICAN EXPRESS)"
        case .userCancel: "cancelled on the keypad"
        case .promptTimeout: "no answer to a prompt in time"
        case .terminalBusy: "another transaction is in progress on this terminal"
        case .photoRequired: "the sale asks for a photo (showPhotoButton=true and mandatoryPhoto=true) and none was attached"
        case .badRequest(let error): error.description
        case .userTokenUnknown: "userToken: no user has this token"
        case .userTokenInvalidated: "userToken: the token was invalidated; no request with it will work until the user's token is rotated"
        case .userTokenRotated: "userToken: the token was rotated; the user has a newer token, use that one"
        case .deviceTokenUnknown: "devicetoken: no device of this user has this token"
        case .deviceTokenInUse: "devicetoken: the token is dead, it configured another device and works only there"
        case .msi(let refusal): "msi: " + refusal.rule
        case .refund(let refusal): refusal.rule
        }
    }
}

extension BillpocketFieldError {
    /// Rebuilds an error whose `statusInfo` is already made.
    init(field: String, statusInfo: String, rule: String) {
        self.field = field
        self.rule = rule
        self.statusInfo = statusInfo
    }
}
