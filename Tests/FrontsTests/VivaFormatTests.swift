import EMV
import Foundation
import Terminal
import Testing
@testable import Fronts

@Suite("VivaFormat")
struct VivaFormatTests {
    // MARK: transactionDate

    @Test("the document's example instant, from microseconds: the 7th fractional digit is 0")
    func documentExample() {
        // 2019-09-13T09:14:19.870345Z
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 1_568_366_059_870_345, utcOffsetSeconds: 3 * 3600)
                == "2019-09-13T12:14:19.8703450+03:00")
    }

    @Test("UTC is +00:00, never Z")
    func utc() {
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 0, utcOffsetSeconds: 0) == "1970-01-01T00:00:00.0000000+00:00")
    }

    @Test("the field example: a +02:00 offset carries a late UTC evening into the next local day")
    func fieldExample() {
        // 2024-11-16T22:16:11.404332Z is 00:16 on the 17th in Athens.
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 1_731_795_371_404_332, utcOffsetSeconds: 7200)
                == "2024-11-17T00:16:11.4043320+02:00")
    }

    @Test("offsets that cross midnight and the end of the year, both ways", arguments: [
        (1_704_078_000_000_000, -6 * 3600, "2023-12-31T21:00:00.0000000-06:00"),
        (1_704_061_800_123_456, 2 * 3600, "2024-01-01T00:30:00.1234560+02:00"),
        (1_704_061_800_123_456, -10 * 3600, "2023-12-31T12:30:00.1234560-10:00"),
        (1_704_078_000_000_000, 14 * 3600, "2024-01-01T17:00:00.0000000+14:00"),
    ] as [(Int64, Int, String)])
    func crossingMidnight(micros: Int64, offset: Int, expected: String) {
        #expect(VivaFormat.transactionDate(microsecondsSince1970: micros, utcOffsetSeconds: offset) == expected)
    }

    @Test("leap years: 29 February in 2024 and 2000, none in 2100")
    func leapYears() {
        // 2024-02-28T23:59:59.999999Z, one hour east: 29 February exists.
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 1_709_164_799_999_999, utcOffsetSeconds: 3600)
                == "2024-02-29T00:59:59.9999990+01:00")
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 951_825_600_000_001, utcOffsetSeconds: 0)
                == "2000-02-29T12:00:00.0000010+00:00")
        // 2100-02-28T20:00Z, five hours east: 2100 is not a leap year, so it is 1 March.
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 4_107_528_000_000_000, utcOffsetSeconds: 5 * 3600)
                == "2100-03-01T01:00:00.0000000+05:00")
    }

    @Test("offsets with minutes, and seconds beyond whole minutes dropped", arguments: [
        (19_800, "1970-01-01T05:30:00.0000000+05:30"),
        (19_830, "1970-01-01T05:30:00.0000000+05:30"),
        (20_700, "1970-01-01T05:45:00.0000000+05:45"),
        (-12_600, "1969-12-31T20:30:00.0000000-03:30"),
        (-12_630, "1969-12-31T20:30:00.0000000-03:30"),
        (-59, "1970-01-01T00:00:00.0000000+00:00"),
    ] as [(Int, String)])
    func minuteOffsets(offset: Int, expected: String) {
        #expect(VivaFormat.transactionDate(microsecondsSince1970: 0, utcOffsetSeconds: offset) == expected)
    }

    @Test("instants before 1970 keep a fraction between 0 and 1 second")
    func before1970() {
        #expect(VivaFormat.transactionDate(microsecondsSince1970: -1, utcOffsetSeconds: 0) == "1969-12-31T23:59:59.9999990+00:00")
        #expect(VivaFormat.transactionDate(microsecondsSince1970: -1_000_000, utcOffsetSeconds: 0) == "1969-12-31T23:59:59.0000000+00:00")
    }

    @Test("agrees with Foundation's calendar on 2000 random instants and offsets")
    func matchesFoundation() {
        var rng = SplitMix64(state: 0x5EED_DA7E)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.calendar = Calendar(identifier: .gregorian)
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss"
        for _ in 0..<2000 {
            // 1950 ... 2150, offsets -12:00 ... +14:00 in quarter hours.
            let micros = Int64.random(in: -631_152_000_000_000...5_680_281_600_000_000, using: &rng)
            let offset = Int.random(in: -48...56, using: &rng) * 900
            formatter.timeZone = TimeZone(secondsFromGMT: offset)
            let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
            let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            let fraction = Int(micros - seconds * 1_000_000)
            let sign = offset < 0 ? "-" : "+"
            let suffix = "." + pad(fraction, 6) + "0" + sign + pad(abs(offset) / 3600, 2) + ":" + pad(abs(offset) % 3600 / 60, 2)
            #expect(VivaFormat.transactionDate(microsecondsSince1970: micros, utcOffsetSeconds: offset) == expected + suffix)
        }
    }

    private func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    // MARK: orderCode

    @Test("orderCode is the RRN and the TID's last 4 digits; shortOrderCode its first 10")
    func orderCode() {
        let code = VivaFormat.orderCode(rrn: "432122575537", tid: "16009303")
        #expect(code == "4321225755379303")
        #expect(code.count == 16)
        #expect(VivaFormat.shortOrderCode(orderCode: code) == "4321225755")
        // Starts with Y DDD and ends with the TID's last 4, as the field's codes do.
        #expect(code.hasPrefix("4321") && code.hasSuffix("9303"))
    }

    @Test("a short TID is padded with zeros; non-digits in it are ignored")
    func shortTID() {
        #expect(VivaFormat.orderCode(rrn: "123456833121", tid: "12") == "1234568331210012")
        #expect(VivaFormat.orderCode(rrn: "123456833121", tid: " 16016684") == "1234568331216684")
        #expect(VivaFormat.orderCode(rrn: "123456833121", tid: "") == "1234568331210000")
    }

    @Test("orderCode from the kernel's RRN for a STAN and a date")
    func orderCodeFromKernelRRN() throws {
        let stan = try #require(STAN(575_537))
        let rrn = RRN.make(stan: stan, at: UTCDateParts(year: 2024, month: 11, day: 16, hour: 22))
        #expect(rrn == "432122575537")
        #expect(VivaFormat.orderCode(rrn: rrn, tid: "16009303") == "4321225755379303")
    }

    // MARK: verificationMethod

    @Test("chip CVMs", arguments: [
        (CVMethod.plaintextPINByICC, "CHIP-PIN"),
        (.encipheredPINByICC, "CHIP-PIN"),
        (.encipheredPINOnline, "CHIP-PIN"),
        (.plaintextPINByICCAndSignature, "CHIP-PIN-SIGNATURE"),
        (.encipheredPINByICCAndSignature, "CHIP-PIN-SIGNATURE"),
        (.signature, "CHIP-SIGNATURE"),
        (.noCVMRequired, "CHIP-NO CVM"),
        (.failCVM, "CHIP-NO CVM"),
        (.notAvailable, "CHIP-NO CVM"),
        (.other(0x20), "CHIP-NO CVM"),
    ] as [(CVMethod, String)])
    func chip(cvm: CVMethod, expected: String) {
        #expect(VivaFormat.verificationMethod(cvm: cvm) == expected)
        #expect(VivaFormat.verificationMethod(cvm: cvm, entryMode: .chip) == expected)
    }

    @Test("no CVM performed is NO CVM")
    func noCVM() {
        #expect(VivaFormat.verificationMethod(cvm: nil) == "CHIP-NO CVM")
    }

    @Test("contactless uses the field's ' - ' form")
    func contactless() {
        #expect(VivaFormat.verificationMethod(cvm: .noCVMRequired, entryMode: .contactless) == "CONTACTLESS - NO CVM")
        #expect(VivaFormat.verificationMethod(cvm: .encipheredPINOnline, entryMode: .contactless) == "CONTACTLESS - PIN")
        #expect(VivaFormat.verificationMethod(cvm: .signature, entryMode: .contactless) == "CONTACTLESS - SIGNATURE")
    }

    @Test("entry modes from the kernel's and the ledger's text")
    func entryModes() {
        #expect(VivaEntryMode(entryMode: "chip") == .chip)
        #expect(VivaEntryMode(entryMode: "Contactless") == .contactless)
        #expect(VivaEntryMode(entryMode: "swipe") == nil)
    }

    // MARK: cardType

    @Test("cardType for every brand")
    func cardTypes() {
        let expected: [CardBrand: String] = [
            .visa: "VISA", .mastercard: "MASTERCARD", .americanExpress: "AMEX", .maestro: "MAESTRO",
            .discover: "DISCOVER", .jcb: "JCB", .unionPay: "UNIONPAY", .carnet: "CARNET",
        ]
        for brand in CardBrand.allCases {
            #expect(VivaFormat.cardType(brand: brand) == expected[brand])
        }
        #expect(VivaFormat.cardType(brand: nil) == "")
        #expect(VivaFormat.cardType(brand: CardBrand.detect(pan: "4792750000009999")) == "VISA")
    }

    // MARK: messages

    @Test("success has the document's period")
    func success() {
        #expect(VivaFormat.successMessage == "Transaction successful.")
        #expect(VivaFormat.message(nil) == "Transaction successful.")
        #expect(VivaFormat.message(.aborted) == "(-57) Aborted")
    }

    @Test("the message table", arguments: [
        (VivaFailure.declinedByHost(nil), "Transaction declined by host."),
        (.declinedByHost("51"), "Transaction declined by host. (51) Insufficient funds"),
        (.declinedByHost("75"), "Transaction declined by host. (75) Allowable number of PIN tries exceeded"),
        (.declinedByCard, "Transaction declined by card."),
        (.hostUnavailable, "Host unavailable. Transaction declined."),
        (.cardRemoved, "Card removed."),
        (.readerError, "Card reader error."),
        (.cardError, "Card error."),
        (.cardNotSupported, "Card not supported."),
        (.pinTriesExceeded, "PIN tries exceeded."),
        (.userCancel, "(-4) USER_CANCEL"),
        (.promptTimeout, "Timeout. No answer from the cardholder."),
        (.aborted, "(-57) Aborted"),
        (.terminalBusy, "Terminal busy. Another transaction is in progress."),
        (.badRequest(field: "amount", rule: "is required"), "Invalid request. amount: is required"),
        (.transactionNotFound, "Transaction not found."),
        (.alreadyCancelled, "Transaction already cancelled."),
        (.notApproved, "Transaction was not approved."),
        (.noTransactionsForCard, "No transactions found for this card."),
        (.amountTooHigh, "Amount exceeds the transaction's amount."),
        (.alreadyCaptured, "Pre-authorisation already captured."),
        (.noTransactionInProgress, "No transaction in progress."),
        (.batchAlreadyOpen, "A batch is already open."),
        (.noOpenBatch, "No open batch."),
    ] as [(VivaFailure, String)])
    func messages(failure: VivaFailure, expected: String) {
        #expect(failure.message == expected)
        #expect(VivaFormat.message(failure) == expected)
    }

    @Test("declines: Z1 and a reversed approval are the card's, Z3 the unreachable host's, the rest the host's")
    func declines() {
        #expect(VivaFailure.declined(responseCode: "Z1", reversed: false) == .declinedByCard)
        #expect(VivaFailure.declined(responseCode: "Z3", reversed: false) == .hostUnavailable)
        #expect(VivaFailure.declined(responseCode: "05", reversed: true) == .declinedByCard)
        #expect(VivaFailure.declined(responseCode: "Z3", reversed: true) == .declinedByCard)
        #expect(VivaFailure.declined(responseCode: "51", reversed: false) == .declinedByHost("51"))
        #expect(VivaFailure.declined(responseCode: "91", reversed: false) == .declinedByHost("91"))
    }

    @Test("kernel errors", arguments: [
        (KernelError.cardRemoved(step: "READ RECORD"), VivaFailure.cardRemoved),
        (.readerError(step: "SELECT", detail: "EIO"), .readerError),
        (.promptTimeout(prompt: "PIN"), .promptTimeout),
        (.cancelled(step: "PIN entry"), .userCancel),
        (.noApplication, .cardNotSupported),
        (.cardError(step: "GPO", status: "6985"), .cardError),
        (.invalidCardData("no 8C"), .cardError),
    ] as [(KernelError, VivaFailure)])
    func kernelErrors(error: KernelError, expected: VivaFailure) {
        #expect(VivaFailure(error) == expected)
    }

    @Test("a request error becomes badRequest with its field and rule")
    func requestError() {
        let error = VivaRequestError(callback: "x://y", action: "sale", field: "amount", rule: "must be greater than 0")
        #expect(VivaFailure(error) == .badRequest(field: "amount", rule: "must be greater than 0"))
        #expect(VivaFailure(error).message == "Invalid request. amount: must be greater than 0")
    }
}
