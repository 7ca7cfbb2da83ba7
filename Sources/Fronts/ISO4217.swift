/// ISO 4217 alphabetic codes and their numbers, for the currencies the card-not-present platforms
/// take (the ledger keeps the number; the platforms speak the code). Amounts are in each
/// currency's minor units, as the platforms send them.
public enum ISO4217 {
    public static let numbers: [String: Int] = [
        "EUR": 978, "USD": 840, "GBP": 826, "MXN": 484, "CHF": 756, "CAD": 124, "AUD": 36, "SEK": 752, "NOK": 578,
        "DKK": 208, "PLN": 985, "CZK": 203, "HUF": 348, "RON": 946, "JPY": 392, "CNY": 156, "HKD": 344, "SGD": 702,
        "BRL": 986, "INR": 356, "KRW": 410, "NZD": 554, "ZAR": 710, "TRY": 949, "PHP": 608, "IDR": 360, "MYR": 458,
        "THB": 764,
    ]
}
