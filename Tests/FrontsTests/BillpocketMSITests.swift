import Testing
@testable import Fronts

/// A user with 3 months from 300.00, 6 from 600.00 and 12 from 1,200.00 (no 9).
private let plans = [
    BillpocketInstallmentPlan(months: 3, minimumAmount: 30_000),
    BillpocketInstallmentPlan(months: 6, minimumAmount: 60_000),
    BillpocketInstallmentPlan(months: 12, minimumAmount: 120_000),
]

@Suite("BillpocketMSI")
struct BillpocketMSITests {
    @Test("msi 0 is one payment: always allowed, even with no plans")
    func onePayment() {
        #expect(BillpocketMSI.check(msi: 0, amount: 1, userPlans: []) == nil)
        #expect(BillpocketMSI.check(msi: 0, amount: 1, userPlans: plans) == nil)
    }

    @Test("a plan the user does not have is refused, naming the months")
    func notEnabled() {
        #expect(BillpocketMSI.check(msi: 9, amount: 500_000, userPlans: plans) == .planNotEnabled(months: 9))
        #expect(BillpocketMSI.check(msi: 3, amount: 500_000, userPlans: []) == .planNotEnabled(months: 3))
        #expect(BillpocketMSIRefusal.planNotEnabled(months: 9).statusInfo == "msi: 9 not enabled for this user")
    }

    @Test("the minimum: exactly the minimum passes, a cent less fails; the tip counts toward it")
    func minimum() {
        #expect(BillpocketMSI.check(msi: 3, amount: 30_000, userPlans: plans) == nil)
        #expect(BillpocketMSI.check(msi: 3, amount: 29_999, userPlans: plans) == .belowMinimum(months: 3, minimumAmount: 30_000))
        #expect(BillpocketMSI.check(msi: 3, amount: 29_000, tip: 1_000, userPlans: plans) == nil)
        #expect(BillpocketMSI.check(msi: 12, amount: 119_999, userPlans: plans) == .belowMinimum(months: 12, minimumAmount: 120_000))
        #expect(BillpocketMSI.check(msi: 6, amount: 1, userPlans: [BillpocketInstallmentPlan(months: 6)]) == nil)
        let refusal = BillpocketMSIRefusal.belowMinimum(months: 12, minimumAmount: 120_000)
        #expect(refusal.statusInfo == "msi: 12 needs amount >= 1200.00")
        #expect(BillpocketFailure.msi(refusal).result == .error)
        #expect(BillpocketFailure.msi(refusal).detail == "msi: the 12-month plan takes sales of 1200.00 or more, tip included")
    }

    @Test("the plans the document names")
    func planValues() {
        #expect(BillpocketMSI.plans == [0, 3, 6, 9, 12])
    }
}
