import EMV
import Terminal
import Testing
@testable import Fronts

@Suite("BillpocketFormat, amount table and failures")
struct BillpocketFormatTests {
    // MARK: Amounts

    @Test("amounts have a point and exactly 2 decimals: 100 -> 100.00, 0.5 -> 0.50")
    func amount() {
        #expect(BillpocketFormat.amount(cents: 10000) == "100.00")
        #expect(BillpocketFormat.amount(cents: 50) == "0.50")
        #expect(BillpocketFormat.amount(cents: 5) == "0.05")
        #expect(BillpocketFormat.amount(cents: 0) == "0.00")
        #expect(BillpocketFormat.amount(cents: 123_456_789) == "1234567.89")
        #expect(BillpocketFormat.amount(cents: 999_999_999_999) == "9999999999.99")
        #expect(BillpocketFormat.amount(cents: -150) == "-1.50")
    }

    @Test("parsing and formatting agree for every amount the parser accepts in a sample")
    func amountRoundTrip() {
        for cents in [1, 9, 10, 99, 100, 101, 1050, 100_200, 999_999_999_999] {
            #expect(BillpocketFormat.cents(BillpocketFormat.amount(cents: cents)) == .success(cents))
        }
    }

    @Test("money for people: $ and thousands separators")
    func money() {
        #expect(BillpocketFormat.money(cents: 123_456) == "$1,234.56")
        #expect(BillpocketFormat.money(cents: 50) == "$0.50")
        #expect(BillpocketFormat.money(cents: 100_000) == "$1,000.00")
        #expect(BillpocketFormat.money(cents: 99_999) == "$999.99")
        #expect(BillpocketFormat.money(cents: 100_000_000) == "$1,000,000.00")
        #expect(BillpocketFormat.money(cents: -123_456) == "-$1,234.56")
    }

    // MARK: Card

    @Test("cardtype: the four Billpocket types, Maestro as MASTERCARD, other brands not accepted")
    func cardType() {
        #expect(BillpocketFormat.cardType(brand: .visa) == "VISA")
        #expect(BillpocketFormat.cardType(brand: .mastercard) == "MASTERCARD")
        #expect(BillpocketFormat.cardType(brand: .maestro) == "MASTERCARD")
        #expect(BillpocketFormat.cardType(brand: .carnet) == "CARNET")
        #expect(BillpocketFormat.cardType(brand: .americanExpress) == "AMERICAN EXPRESS")
        for brand: CardBrand? in [.discover, .jcb, .unionPay, nil] {
            #expect(BillpocketFormat.cardType(brand: brand) == nil)
        }
        // varchar(16) holds the longest.
        #expect(CardBrand.allCases.compactMap { BillpocketFormat.cardType(brand: $0) }.allSatisfy { $0.count <= 16 })
    }

    @Test("creditcard is the last 4 of a full or masked PAN; hex is upper case")
    func card() {
        #expect(BillpocketFormat.creditCard(pan: "4761739001010119") == "0119")
        #expect(BillpocketFormat.creditCard(pan: "476173******0119") == "0119")
        #expect(BillpocketFormat.hex([0xA0, 0, 0, 0, 0x03, 0x10, 0x10]) == "A0000000031010")
    }

    // MARK: Amount table

    @Test("10XX.00 answers XX; 1000.00, other cents and other thousands approve")
    func amountTable() {
        #expect(BillpocketAmountTable.responseCode(amount: 100_200) == "02")
        #expect(BillpocketAmountTable.responseCode(amount: 100_500) == "05")
        #expect(BillpocketAmountTable.responseCode(amount: 105_100) == "51")
        #expect(BillpocketAmountTable.responseCode(amount: 109_900) == "99")
        for cents in [100_000, 100_201, 110_000, 99_900, 200_200, 10_200, 1002] {
            #expect(BillpocketAmountTable.responseCode(amount: cents) == nil, "\(cents)")
        }
        #expect(BillpocketAmountTable.hostTable == .billpocket)
        for code in BillpocketAmountTable.documentedCodes {
            let cents = (1000 + Int(code.code)!) * 100
            #expect(BillpocketAmountTable.responseCode(amount: cents) == code)
            #expect(BillpocketAmountTable.hostTable.code(for: cents) == code)
        }
    }

    @Test("issuer messages: the vendor's words for 02 and 03, cardbench's for the rest, a fallback for unknown codes")
    func issuerMessages() {
        #expect(BillpocketIssuerMessage.forCode("02").english == "Transaction not processed. Bank declined, contact the issuer")
        #expect(BillpocketIssuerMessage.forCode("02").source == .vendor)
        #expect(BillpocketIssuerMessage.forCode("03").english == "Card not accepted. Please try a different card.")
        #expect(BillpocketIssuerMessage.forCode("14").english == "Card blocked. Contact the issuer")
        #expect(BillpocketIssuerMessage.forCode("36").spanish == "Tarjeta inactiva. Contacte al emisor")
        #expect(BillpocketIssuerMessage.forCode("41").english == BillpocketIssuerMessage.forCode("43").english)
        #expect(BillpocketIssuerMessage.table.filter { $0.source == .vendor }.map(\.code) == ["02", "03"])
        let unknown = BillpocketIssuerMessage.forCode("77")
        #expect(unknown.english == "Transaction declined (77)")
        #expect(unknown.spanish == "Transacción rechazada (77)")
        // Every documented code has a message of its own; codes are unique and in order.
        let codes = BillpocketIssuerMessage.table.map(\.code.code)
        #expect(BillpocketAmountTable.documentedCodes.allSatisfy { codes.contains($0.code) })
        #expect(codes == codes.sorted() && Set(codes).count == codes.count)
    }

    // MARK: Failures

    @Test("a decline's statusinfo is the issuer's message cut to 40 characters")
    func declineStatusInfo() {
        #expect(BillpocketFailure.declinedByHost("02").statusInfo == "Transaction not processed. Bank declined")
        #expect(BillpocketFailure.declinedByHost("03").statusInfo == "Card not accepted. Please try a differen")
        #expect(BillpocketFailure.declinedByHost("51").statusInfo == "Insufficient funds")
        #expect(BillpocketFailure.declinedByHost("05", message: "Do not honour").statusInfo == "Do not honour")
        #expect(BillpocketFailure.declinedByHost("05", message: String(repeating: "m", count: 41)).statusInfo.count == 40)
        #expect(BillpocketFailure.declinedByHost("51").detail == "the issuer declined with response code 51: Insufficient funds")
    }

    @Test("every failure's statusinfo fits 40 characters; declines are rechazada, the rest error")
    func failures() {
        let all: [BillpocketFailure] = [
            .declinedByHost("02"), .declinedByCard, .pinTriesExceeded, .hostUnavailable, .cardRemoved, .readerError, .cardError,
            .cardNotAccepted, .userCancel, .promptTimeout, .terminalBusy, .photoRequired,
            .badRequest(BillpocketFieldError(field: "amount", shortRule: "max 2 decimals", rule: "…")),
            .userTokenUnknown, .userTokenInvalidated, .userTokenRotated, .deviceTokenUnknown, .deviceTokenInUse,
            .msi(.planNotEnabled(months: 12)), .msi(.belowMinimum(months: 12, minimumAmount: 999_999_999_999)),
        ] + BillpocketRefundRefusal.allCases.map { .refund($0) }
        for failure in all {
            #expect(failure.statusInfo.unicodeScalars.count <= 40, "\(failure.statusInfo)")
            #expect(!failure.statusInfo.isEmpty)
            #expect(!failure.detail.isEmpty)
        }
        #expect(all.filter { $0.result == .rechazada } == [.declinedByHost("02"), .declinedByCard, .pinTriesExceeded])
        #expect(BillpocketFailure.userTokenInvalidated.statusInfo == "userToken: invalidated")
        #expect(BillpocketFailure.userTokenRotated.statusInfo == "userToken: rotated; use the new token")
        #expect(BillpocketFailure.deviceTokenInUse.statusInfo == "devicetoken: in use on another device")
    }

    @Test("kernel errors and declined outcomes map like Viva's: Z1 and reversals are the card's, Z3 the host's absence")
    func mappings() {
        #expect(BillpocketFailure(KernelError.cardRemoved(step: "GPO")) == .cardRemoved)
        #expect(BillpocketFailure(KernelError.readerError(step: "x", detail: "y")) == .readerError)
        #expect(BillpocketFailure(KernelError.promptTimeout(prompt: "PIN")) == .promptTimeout)
        #expect(BillpocketFailure(KernelError.cancelled(step: "PIN")) == .userCancel)
        #expect(BillpocketFailure(KernelError.noApplication) == .cardNotAccepted)
        #expect(BillpocketFailure(KernelError.invalidCardData("x")) == .cardError)
        #expect(BillpocketFailure.declined(responseCode: "Z1", reversed: false) == .declinedByCard)
        #expect(BillpocketFailure.declined(responseCode: "Z3", reversed: false) == .hostUnavailable)
        #expect(BillpocketFailure.declined(responseCode: "05", reversed: true) == .declinedByCard)
        #expect(BillpocketFailure.declined(responseCode: "51", reversed: false) == .declinedByHost("51"))
    }

    @Test("a request error becomes a bad-request failure with the same statusinfo")
    func requestErrorFailure() {
        do {
            _ = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=t&amount=1.005&identifier=i&urlScheme=myapp")
        } catch {
            let failure = BillpocketFailure(error)
            #expect(failure.statusInfo == "amount: max 2 decimals")
            #expect(failure.result == .error)
            #expect(failure.detail == error.description)
        }
    }
}
