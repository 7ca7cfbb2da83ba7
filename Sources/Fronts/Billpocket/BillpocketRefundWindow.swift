import Foundation

/// Why a `devolucion` is refused. The first three are the document's time rules
/// (`BillpocketRefundWindow.check` decides them); the daemon decides the others from its ledger.
public enum BillpocketRefundRefusal: Sendable, Equatable, Error, CaseIterable {
    /// Less than 60 seconds since the sale was authorised ("1 minute must have passed").
    case tooSoon
    /// The sale was authorised on another calendar day, Mexico City time.
    case anotherDay
    /// It is 22:59:59 or later, Mexico City time ("before 23hrs (22:59:59) CDMX time").
    case afterHours
    /// No sale has that `transactionId`, or it belongs to another user. One refusal for both, so
    /// that a token cannot be used to learn which ids exist.
    case originalNotFound
    /// The transaction is not an approved `venta` (a declined or failed sale, or a refund).
    case notAnApprovedSale
    /// The sale was already refunded.
    case alreadyRefunded

    /// The callback's `statusinfo` in `language`, at most 40 characters.
    public func statusInfo(_ language: BillpocketCallbackStyle.Language) -> String {
        guard language == .es else { return statusInfo }
        return switch self {
        case .tooSoon: "Devolución: espere 1 minuto"
        case .anotherDay: "Devolución solo el día de la venta"
        case .afterHours: "Devoluciones hasta las 22:59:59 (CDMX)"
        case .originalNotFound: "transactionId: no encontrada"
        case .notAnApprovedSale: "transactionId: no es una venta aprobada"
        case .alreadyRefunded: "transactionId: ya fue devuelta"
        }
    }

    /// The callback's `statusinfo`, at most 40 characters.
    public var statusInfo: String {
        switch self {
        case .tooSoon: "Refund too soon: wait 1 minute"
        case .anotherDay: "Refund only on the sale's day (CDMX)"
        case .afterHours: "Refunds close at 22:59:59 (CDMX)"
        case .originalNotFound: "transactionId: not found"
        case .notAnApprovedSale: "transactionId: not an approved sale"
        case .alreadyRefunded: "transactionId: already refunded"
        }
    }

    /// The same at length, for the API and the logs.
    public var rule: String {
        switch self {
        case .tooSoon: "a sale can be refunded from 60 seconds after it was authorised"
        case .anotherDay: "a sale can be refunded only on the calendar day it was authorised, America/Mexico_City time"
        case .afterHours: "refunds are taken until 22:59:58 America/Mexico_City time; from 22:59:59 to midnight they are refused"
        case .originalNotFound: "no sale of this user has this transactionId"
        case .notAnApprovedSale: "the transaction with this transactionId is not an approved venta"
        case .alreadyRefunded: "the sale with this transactionId was already refunded"
        }
    }
}

/// The document's refund time rules: "1 minute must have passed after the sale was authorized",
/// and "the same day of the sale before 23hrs (22:59:59) CDMX time". Pure: the caller passes both
/// instants; the time zone comes from the system's time zone database, never a fixed offset
/// (Mexico City kept daylight saving time until October 2022).
public enum BillpocketRefundWindow {
    /// America/Mexico_City, the document's "CDMX time".
    public static let timeZone = TimeZone(identifier: "America/Mexico_City")!

    /// Seconds that must pass between the sale's authorisation and its refund: exactly 60.0 is
    /// allowed, 59.999 is not.
    public static let minimumDelay: TimeInterval = 60

    /// The first local time of day at which refunds are refused, as seconds after midnight:
    /// 22:59:59. 22:59:58.999 is still allowed; 22:59:59.000 is not. The document writes
    /// "before 23hrs (22:59:59)", and its parenthesis names the last second shown on a clock that
    /// is already too late, so the window closes when 22:59:59 begins.
    public static let closingSecondOfDay = 22 * 3600 + 59 * 60 + 59

    /// The Gregorian calendar in Mexico City time.
    static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }()

    /// Whether a sale authorised at `authorisedAt` can be refunded at `now`.
    ///
    /// The rules are checked with the lasting ones first, so `tooSoon` means that waiting can
    /// help: another day (the local calendar dates differ), after hours (now is at or past
    /// 22:59:59 local), then too soon (less than 60 s since the authorisation, or a clock that
    /// puts now before it).
    ///
    /// - Returns: nil when the refund may go ahead, else the refusal.
    public static func check(authorisedAt: Date, now: Date) -> BillpocketRefundRefusal? {
        let sale = calendar.dateComponents([.year, .month, .day], from: authorisedAt)
        let today = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: now)
        guard sale.year == today.year, sale.month == today.month, sale.day == today.day else { return .anotherDay }
        let secondOfDay = today.hour! * 3600 + today.minute! * 60 + today.second!
        guard secondOfDay < closingSecondOfDay else { return .afterHours }
        guard now.timeIntervalSince(authorisedAt) >= minimumDelay else { return .tooSoon }
        return nil
    }

    /// The instants at which a sale authorised at `authorisedAt` can be refunded: from 60 s after
    /// it until (not including) 22:59:59 local time on its day; nil when that is empty (a sale
    /// authorised from 22:58:59 on). For the API to show; `check` is the rule.
    public static func window(authorisedAt: Date) -> Range<Date>? {
        let opens = authorisedAt.addingTimeInterval(minimumDelay)
        let day = calendar.dateComponents([.year, .month, .day], from: authorisedAt)
        var closing = DateComponents()
        closing.year = day.year
        closing.month = day.month
        closing.day = day.day
        closing.hour = 22
        closing.minute = 59
        closing.second = 59
        guard let closes = calendar.date(from: closing), opens < closes else { return nil }
        return opens..<closes
    }
}
