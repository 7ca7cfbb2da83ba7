/// The system trace audit number (ISO 8583 field 11): 6 digits, 000001–999999, then back to
/// 000001. Allocation is durable (the ledger's job); this type only knows the arithmetic.
public struct STAN: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let value: Int

    /// Makes a STAN; 1–999999.
    public init?(_ value: Int) {
        guard (1...999_999).contains(value) else { return nil }
        self.value = value
    }

    /// The first STAN a new terminal uses.
    public static let first = STAN(1)!

    /// The STAN after this one; 999999 wraps to 000001 (000000 is never used).
    public var next: STAN { STAN(value == 999_999 ? 1 : value + 1)! }

    public var description: String { String(repeating: "0", count: 6 - String(value).count) + String(value) }

    public static func < (a: STAN, b: STAN) -> Bool { a.value < b.value }
}

/// The retrieval reference number (ISO 8583 field 37): 12 digits, Y DDD HH (UTC year's last
/// digit, day of year, hour) followed by the 6-digit STAN — the shape Viva's app reports.
public enum RRN {
    /// The RRN for a STAN allocated at `date`.
    public static func make(stan: STAN, at date: UTCDateParts) -> String {
        let day = String(date.dayOfYear)
        let hour = String(date.hour)
        return String(date.year % 10) + String(repeating: "0", count: 3 - day.count) + day
            + (hour.count == 1 ? "0" : "") + hour + stan.description
    }
}

/// The calendar parts of an instant in UTC that EMV and ISO 8583 fields are built from.
public struct UTCDateParts: Hashable, Sendable {
    public let year: Int
    public let month: Int
    public let day: Int
    public let hour: Int
    public let minute: Int
    public let second: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// Splits seconds since 1970 (UTC) into calendar parts (proleptic Gregorian; Howard Hinnant's
    /// days-from-civil inverse, so no Foundation calendar or time zone database is involved).
    public init(secondsSince1970 t: Int64) {
        let days = t >= 0 ? t / 86_400 : (t - 86_399) / 86_400
        let secs = Int(t - days * 86_400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        let y = Int(yoe + era * 400) + (m <= 2 ? 1 : 0)
        self.init(year: y, month: m, day: d, hour: secs / 3600, minute: secs % 3600 / 60, second: secs % 60)
    }

    /// Seconds since 1970 (UTC): the inverse of `init(secondsSince1970:)` (days-from-civil).
    public var secondsSince1970: Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64(month > 2 ? month - 3 : month + 9)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + Int64(hour) * 3600 + Int64(minute) * 60 + Int64(second)
    }

    var isLeapYear: Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    /// Day of the year, 1–366.
    public var dayOfYear: Int {
        let before = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month - 1]
        return before + day + (month > 2 && isLeapYear ? 1 : 0)
    }

    /// Tag 9A: YYMMDD in BCD.
    public var emvDate: [UInt8] { [year % 100, month, day].map { UInt8(($0 / 10) << 4 | $0 % 10) } }
}
