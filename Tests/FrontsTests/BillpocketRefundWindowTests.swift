import Foundation
import Testing
@testable import Fronts

/// An instant given in UTC: `utc(2024, 11, 16, 4, 59, 58)`.
func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int, _ fraction: Double = 0) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let date = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
    return date.addingTimeInterval(fraction)
}

private func check(_ sale: Date, _ now: Date) -> BillpocketRefundRefusal? {
    BillpocketRefundWindow.check(authorisedAt: sale, now: now)
}

// November 2024: Mexico City is UTC-6 all year (no DST since October 2022), so local 12:00 on
// the 15th is 18:00Z on the 15th and local 22:59:59 on the 15th is 04:59:59Z on the 16th.
private let noon = utc(2024, 11, 15, 18, 0, 0)

@Suite("BillpocketRefundWindow")
struct BillpocketRefundWindowTests {
    @Test("at least 60 s after the authorisation: 59 s is too soon, 60 s is fine")
    func minimumDelay() {
        #expect(check(noon, noon.addingTimeInterval(59)) == .tooSoon)
        #expect(check(noon, noon.addingTimeInterval(59.999)) == .tooSoon)
        #expect(check(noon, noon.addingTimeInterval(60)) == nil)
        #expect(check(noon, noon) == .tooSoon)
        // A clock that puts now before the sale: too soon too.
        #expect(check(noon, noon.addingTimeInterval(-30)) == .tooSoon)
    }

    @Test("the closing second: 22:59:58 (and .999) CDMX allowed, 22:59:59 refused, up to midnight")
    func closing() {
        #expect(check(noon, utc(2024, 11, 16, 4, 59, 58)) == nil)
        #expect(check(noon, utc(2024, 11, 16, 4, 59, 58, 0.999)) == nil)
        #expect(check(noon, utc(2024, 11, 16, 4, 59, 59)) == .afterHours)
        #expect(check(noon, utc(2024, 11, 16, 5, 30, 0)) == .afterHours)
        #expect(check(noon, utc(2024, 11, 16, 5, 59, 59, 0.999)) == .afterHours)
    }

    @Test("the same calendar day in Mexico City, not in UTC; across midnight is another day")
    func sameDay() {
        // 17:00 and 19:00 local are on different UTC days (23:00Z and 01:00Z) but the same local day.
        #expect(check(utc(2024, 11, 15, 23, 0, 0), utc(2024, 11, 16, 1, 0, 0)) == nil)
        // 23:59:30 local, then 00:00:40 local the next day: 70 s later, another day.
        #expect(check(utc(2024, 11, 16, 5, 59, 30), utc(2024, 11, 16, 6, 0, 40)) == .anotherDay)
        // The same UTC day but not the same local day: 05:00Z is 23:00 on the 15th, 07:00Z is 01:00 on the 16th.
        #expect(check(utc(2024, 11, 16, 5, 0, 0), utc(2024, 11, 16, 7, 0, 0)) == .anotherDay)
        #expect(check(noon, noon.addingTimeInterval(86_400)) == .anotherDay)
        #expect(check(noon, noon.addingTimeInterval(-86_400)) == .anotherDay)
    }

    @Test("the lasting refusals come first: after hours and another day win over too soon")
    func order() {
        // 22:59:30 local, then 23:00:10: 40 s, after hours.
        #expect(check(utc(2024, 11, 16, 4, 59, 30), utc(2024, 11, 16, 5, 0, 10)) == .afterHours)
        // A sale after hours cannot be refunded that day at all.
        #expect(check(utc(2024, 11, 16, 5, 10, 0), utc(2024, 11, 16, 5, 20, 0)) == .afterHours)
    }

    @Test("the time zone database, not a fixed offset: July 2021 had DST (UTC-5), July 2023 did not (UTC-6)")
    func daylightSaving() {
        // 2021-07-01 local 12:00 CDT is 17:00Z; local 22:59:58 is 03:59:58Z on the 2nd.
        let sale2021 = utc(2021, 7, 1, 17, 0, 0)
        #expect(check(sale2021, utc(2021, 7, 2, 3, 59, 58)) == nil)
        #expect(check(sale2021, utc(2021, 7, 2, 3, 59, 59)) == .afterHours)
        // 2023-07-01 local 12:00 CST is 18:00Z; 03:59:59Z on the 2nd is only 21:59:59 local.
        let sale2023 = utc(2023, 7, 1, 18, 0, 0)
        #expect(check(sale2023, utc(2023, 7, 2, 3, 59, 59)) == nil)
        #expect(check(sale2023, utc(2023, 7, 2, 4, 59, 58)) == nil)
        #expect(check(sale2023, utc(2023, 7, 2, 4, 59, 59)) == .afterHours)
        #expect(BillpocketRefundWindow.timeZone.identifier == "America/Mexico_City")
        #expect(BillpocketRefundWindow.timeZone.secondsFromGMT(for: sale2021) == -5 * 3600)
        #expect(BillpocketRefundWindow.timeZone.secondsFromGMT(for: sale2023) == -6 * 3600)
    }

    @Test("the window: from 60 s after the sale to 22:59:59 local; empty for a sale from 22:58:59 on")
    func window() throws {
        let range = try #require(BillpocketRefundWindow.window(authorisedAt: noon))
        #expect(range.lowerBound == noon.addingTimeInterval(60))
        #expect(range.upperBound == utc(2024, 11, 16, 4, 59, 59))
        #expect(BillpocketRefundWindow.window(authorisedAt: utc(2024, 11, 16, 4, 58, 59)) == nil)
        #expect(BillpocketRefundWindow.window(authorisedAt: utc(2024, 11, 16, 4, 58, 58)) != nil)
        // check agrees with the window at its edges.
        #expect(check(noon, range.lowerBound) == nil)
        #expect(check(noon, range.upperBound.addingTimeInterval(-0.001)) == nil)
        #expect(check(noon, range.upperBound) != nil)
    }

    @Test("refusal texts fit statusinfo")
    func texts() {
        for refusal in BillpocketRefundRefusal.allCases {
            #expect(refusal.statusInfo.count <= 40)
            #expect(BillpocketFailure.refund(refusal).result == .error)
        }
        #expect(BillpocketRefundRefusal.afterHours.statusInfo == "Refunds close at 22:59:59 (CDMX)")
    }
}
