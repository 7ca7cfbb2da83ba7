import Terminal

/// An issuer's message for a response code, in the two languages a Mexican bench meets.
public struct BillpocketIssuerMessage: Sendable, Equatable {
    /// Where a message's words come from.
    public enum Source: String, Sendable, Equatable {
        /// Billpocket's development environment, as recorded in the project's field notes.
        case vendor
        /// cardbench's own words, where the vendor's are not known.
        case cardbench
    }

    /// The response code.
    public let code: ResponseCode
    /// The English message, what `statusinfo` carries (cut to 40 characters there).
    public let english: String
    /// The Spanish message, for a daemon that answers in Spanish and for vouchers.
    public let spanish: String
    /// Whose the English words are. The Spanish ones are always cardbench's.
    public let source: Source

    /// Makes a message.
    public init(code: ResponseCode, english: String, spanish: String, source: Source) {
        self.code = code
        self.english = english
        self.spanish = spanish
        self.source = source
    }

    /// The Spanish message as `statusinfo` carries it: within 40 characters whole, for the two
    /// vendor texts whose Spanish runs longer.
    public var spanishStatusInfo: String {
        switch code.code {
        case "02": "Declinada por el banco. Contacte emisor"
        case "03": "Tarjeta no aceptada. Intente con otra"
        default: spanish
        }
    }

    /// The message for `code`: the table's, or for a code it lacks "Transaction declined (XX)" /
    /// "Transacción rechazada (XX)", cardbench's.
    public static func forCode(_ code: ResponseCode) -> BillpocketIssuerMessage {
        table.first { $0.code == code }
            ?? BillpocketIssuerMessage(code: code, english: "Transaction declined (\(code.code))",
                                       spanish: "Transacción rechazada (\(code.code))", source: .cardbench)
    }

    /// Every code with a message of its own, in code order: the codes the vendor's development
    /// environment is known to answer (02, 03, 04, 05, 14, 36, 41, 43), then the ones cardbench's
    /// host gives for a card's issuer state and the common ISO 8583 declines.
    public static let table: [BillpocketIssuerMessage] = [
        .init(code: "01", english: "Refer to card issuer", spanish: "Consulte a su banco emisor", source: .cardbench),
        .init(code: "02", english: "Transaction not processed. Bank declined, contact the issuer",
              spanish: "Transacción no procesada. Declinada por el banco, contacte al emisor", source: .vendor),
        .init(code: "03", english: "Card not accepted. Please try a different card.",
              spanish: "Tarjeta no aceptada. Intente con otra tarjeta.", source: .vendor),
        .init(code: "04", english: "Card retained. Contact the issuer", spanish: "Tarjeta retenida. Contacte al emisor", source: .cardbench),
        .init(code: "05", english: "Declined by the issuer", spanish: "Rechazada por el banco emisor", source: .cardbench),
        .init(code: "14", english: "Card blocked. Contact the issuer", spanish: "Tarjeta bloqueada. Contacte al emisor", source: .cardbench),
        .init(code: "36", english: "Inactive card. Contact the issuer", spanish: "Tarjeta inactiva. Contacte al emisor", source: .cardbench),
        .init(code: "41", english: "Reported card. Contact the issuer", spanish: "Tarjeta reportada. Contacte al emisor", source: .cardbench),
        .init(code: "43", english: "Reported card. Contact the issuer", spanish: "Tarjeta reportada. Contacte al emisor", source: .cardbench),
        .init(code: "51", english: "Insufficient funds", spanish: "Fondos insuficientes", source: .cardbench),
        .init(code: "54", english: "Expired card", spanish: "Tarjeta vencida", source: .cardbench),
        .init(code: "55", english: "Incorrect PIN", spanish: "NIP incorrecto", source: .cardbench),
        .init(code: "57", english: "Transaction not permitted to card", spanish: "Transacción no permitida a la tarjeta", source: .cardbench),
        .init(code: "61", english: "Amount limit exceeded", spanish: "Excede el límite de importe", source: .cardbench),
        .init(code: "62", english: "Restricted card", spanish: "Tarjeta restringida", source: .cardbench),
        .init(code: "65", english: "Frequency limit exceeded", spanish: "Excede el límite de operaciones", source: .cardbench),
        .init(code: "75", english: "PIN tries exceeded", spanish: "Intentos de NIP excedidos", source: .cardbench),
        .init(code: "91", english: "Issuer unavailable. Try again", spanish: "Emisor no disponible. Intente de nuevo", source: .cardbench),
        .init(code: "96", english: "System error. Try again", spanish: "Error del sistema. Intente de nuevo", source: .cardbench),
    ]
}

/// The declines by amount of Billpocket's development environment: a sale of 10XX.00 is answered
/// with response code XX (1002.00 -> 02, 1051.00 -> 51). 1000.00 is answered 00 and approves.
public enum BillpocketAmountTable {
    /// The table as the emulated host takes it: hand it to `EmulatedHost.authorise(_:queue:amountTable:)`.
    /// The host looks up the amount it authorises, which for a sale with a tip is amount plus tip;
    /// see ``responseCode(amount:)``.
    public static let hostTable = AmountTable.billpocket

    /// The codes the vendor's development environment is known to answer.
    public static let documentedCodes: [ResponseCode] = ["02", "03", "04", "05", "14", "36", "41", "43"]

    /// The code the table gives `amount` (cents), nil when it gives none: 10XX.00 for XX in
    /// 01 ... 99; any other amount, 1000.00 and 10XX.YY with YY not 00 included, is approved.
    ///
    /// Pass the request's `amount`, tip excluded: it is the figure a tester writes
    /// ("amount=1005.00 declines with 05"), and the document's `amount` is "the amount without
    /// tip". The daemon has the host read ``hostTable`` with this amount too
    /// (`EmulatedHost.authorise(_:queue:amountTable:tableAmount:)`), not with the total it
    /// authorises.
    public static func responseCode(amount: Int) -> ResponseCode? {
        hostTable.code(for: amount)
    }
}
