import EMV
import Terminal

/// How the card was read, as the Viva app words it in `verificationMethod`.
public enum VivaEntryMode: String, Sendable, Equatable, CaseIterable {
    /// Contact chip: "CHIP-PIN", "CHIP-NO CVM", … (the document's form).
    case chip
    /// Contactless: "CONTACTLESS - NO CVM", … (the form seen in the field).
    case contactless
    /// A swiped stripe: "MAGSTRIPE - SIGNATURE", … (a choice: no public callback shows the form).
    case magstripe
    /// A stripe swiped after the chip failed (POS entry mode 80): worded as a swipe.
    case fallback

    /// The mode from the kernel's or the ledger's `entryMode` text ("chip", "contactless"; any
    /// case); nil for anything else.
    public init?(entryMode: String) {
        self.init(rawValue: entryMode.lowercased())
    }

    /// The mode of a card read (nil for the platforms' modes, which Viva never sees).
    public init?(_ mode: EntryMode) {
        self.init(rawValue: mode.rawValue)
    }
}

/// The values of the Viva callback that are computed from transaction data. Pure: callers pass
/// the clock's reading, the terminal's offset and the kernel's results.
public enum VivaFormat {
    // MARK: transactionDate

    /// ISO 8601 local time with 7 fractional digits and a numeric offset, as the app writes it:
    /// `2019-09-13T12:14:19.8703452+03:00`. The clock gives microseconds, so the 7th digit is 0.
    /// UTC is written `+00:00`, never `Z`. The offset is taken in whole minutes (truncated toward
    /// zero), which every time zone in use since 1972 is; the same minutes shift the time and
    /// are printed, so the two always agree. Calendar arithmetic is proleptic Gregorian, done
    /// here without the system's clock or time zone database.
    public static func transactionDate(microsecondsSince1970: Int64, utcOffsetSeconds: Int) -> String {
        let offsetMinutes = utcOffsetSeconds / 60
        // Floor division, so instants before 1970 keep a fraction in 0..<1 s.
        var seconds = microsecondsSince1970 / 1_000_000
        var micros = microsecondsSince1970 % 1_000_000
        if micros < 0 {
            micros += 1_000_000
            seconds -= 1
        }
        let local = UTCDateParts(secondsSince1970: seconds + Int64(offsetMinutes) * 60)
        let sign = offsetMinutes < 0 ? "-" : "+"
        let magnitude = abs(offsetMinutes)
        return pad(local.year, 4) + "-" + pad(local.month, 2) + "-" + pad(local.day, 2)
            + "T" + pad(local.hour, 2) + ":" + pad(local.minute, 2) + ":" + pad(local.second, 2)
            + "." + pad(Int(micros), 6) + "0"
            + sign + pad(magnitude / 60, 2) + ":" + pad(magnitude % 60, 2)
    }

    /// `value` in decimal, left-padded with zeros to `width`; a negative value keeps its sign in front.
    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value.magnitude)
        let padded = digits.count < width ? String(repeating: "0", count: width - digits.count) + digits : digits
        return value < 0 ? "-" + padded : padded
    }

    // MARK: orderCode

    /// The 16-digit order code: the 12-digit RRN (Y DDD HH + STAN) followed by the last 4 digits
    /// of the TID. The code seen in the field starts with Y DDD and ends with the TID's last 4; what
    /// lies between is not derivable from public data, so cardbench uses the rest of the RRN, which
    /// makes the code unique per terminal and STAN. A TID of fewer than 4 digits is left-padded with
    /// zeros; non-digits in it are ignored.
    public static func orderCode(rrn: String, tid: String) -> String {
        let digits = tid.filter { $0.isASCII && $0.isWholeNumber }
        let last4 = String(digits.suffix(4))
        return rrn + String(repeating: "0", count: 4 - last4.count) + last4
    }

    /// The first 10 digits of an order code, as the app's `shortOrderCode`.
    public static func shortOrderCode(orderCode: String) -> String {
        String(orderCode.prefix(10))
    }

    // MARK: verificationMethod

    /// The `verificationMethod` for the CVM the kernel performed.
    ///
    /// Chip: "CHIP-PIN" for any PIN (offline plaintext, offline enciphered, online enciphered),
    /// "CHIP-PIN-SIGNATURE" for a combined PIN-and-signature method, "CHIP-SIGNATURE", and
    /// "CHIP-NO CVM" for no CVM required, no CVM performed (nil), "fail CVM" and methods the app
    /// has no word for. Contactless writes " - " between the words, as in the field's
    /// "CONTACTLESS - NO CVM" ("CONTACTLESS - PIN", …).
    public static func verificationMethod(cvm: CVMethod?, entryMode: VivaEntryMode = .chip) -> String {
        let method: String
        switch cvm {
        case .plaintextPINByICC, .encipheredPINByICC, .encipheredPINOnline:
            method = "PIN"
        case .plaintextPINByICCAndSignature, .encipheredPINByICCAndSignature:
            method = "PIN-SIGNATURE"
        case .signature:
            method = "SIGNATURE"
        case .consumerDevice:
            method = "DEVICE"
        case .noCVMRequired, .failCVM, .notAvailable, .other, nil:
            method = "NO CVM"
        }
        switch entryMode {
        case .chip: return "CHIP-" + method
        case .contactless: return "CONTACTLESS - " + method
        case .magstripe, .fallback: return "MAGSTRIPE - " + method
        }
    }

    // MARK: cardType

    /// The `cardType`: the scheme in capitals, as the document's 'VISA': "VISA", "MASTERCARD",
    /// "AMEX", "MAESTRO", "DISCOVER", "JCB", "UNIONPAY", "CARNET"; "" when the brand is unknown.
    /// (Apps seen in the field sometimes send the application label, e.g. "Debit Mastercard";
    /// cardbench follows the document.)
    public static func cardType(brand: CardBrand?) -> String {
        switch brand {
        case .visa: "VISA"
        case .mastercard: "MASTERCARD"
        case .americanExpress: "AMEX"
        case .maestro: "MAESTRO"
        case .discover: "DISCOVER"
        case .jcb: "JCB"
        case .unionPay: "UNIONPAY"
        case .carnet: "CARNET"
        case nil: ""
        }
    }

    // MARK: message

    /// The message of an approved transaction, with the period the document's URLs show.
    public static let successMessage = "Transaction successful."

    /// The `message` for a result: ``successMessage`` when `failure` is nil, else the failure's.
    public static func message(_ failure: VivaFailure?) -> String {
        failure?.message ?? successMessage
    }
}
