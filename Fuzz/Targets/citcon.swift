import EMV
import Fronts

// The Citcon platform's request readers (CitconChargeRequest.parse under both document
// versions, CitconOperationRequest.parse) and the IPN signature (CitconSign).
//
// Properties:
// - every refusal is a 4000 (HTTP 400) whose message repeats no card number of the input;
// - a charge that parses has its amount in range, an upper-case currency and country, a method
//   of its version's list (2.1.0's a subset of 2.2.0's), and a card only for `card`;
// - the input taken as a notification's field values signs to 64 hex digits, the same twice, and
//   changes with the secret.
func checkRefusal(_ e: CitconError, _ input: String) {
    require(e.httpStatus == 400 && e.code == "4000", "refusal \(e) is not a 4000")
    if let range = PAN.likelyPANRange(in: e.message) {
        require(!input.contains(String(e.message[range])), "refusal \(e) repeats a card number of its input")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    let textInput = text(data, size)
    var parsed21: CitconChargeRequest? = nil
    for version in ["2.1.0", "2.2.0"] {
        do {
            let r = try CitconChargeRequest.parse(input, version: version)
            if version == "2.1.0" { parsed21 = r }
            require((1...999_999_999_999).contains(r.amount), "amount \(r.amount)")
            require(r.currency.count == 3 && r.currency.allSatisfy(\.isUppercase), "currency \(r.currency)")
            require(r.country.count == 2 && r.country.allSatisfy(\.isUppercase), "country \(r.country)")
            if let m = r.method { require(CitconMethod.offered(version: version).contains(m), "method \(m) under \(version)") }
            require((r.card != nil) == (r.method == "card"), "a card for method \(r.method ?? "none")")
        } catch {
            checkRefusal(error, textInput)
            require(parsed21 == nil, "2.2.0 refused what 2.1.0 took: \(error)")
        }
    }
    do { _ = try CitconOperationRequest.parse(input) } catch { checkRefusal(error, textInput) }
    let values = ["fields": "id,reference", "id": textInput, "reference": String(textInput.reversed())]
    let sign = CitconSign.sign(values, secret: "s")
    require(sign.count == 64 && sign.allSatisfy(\.isHexDigit), "sign \(sign)")
    require(sign == CitconSign.sign(values, secret: "s"), "the sign is not deterministic")
    require(sign != CitconSign.sign(values, secret: "t"), "the sign does not depend on the secret")
    return 0
}
