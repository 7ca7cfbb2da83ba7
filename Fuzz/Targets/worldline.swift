import CryptoExtras
import EMV
import Fronts

// The Worldline platform's request readers: payment, capture and refund bodies
// (WorldlineJSON, WorldlineCreatePayment/Capture/RefundRequest.parse), decrypted customer input
// (WorldlineCustomerInput.parse), JWE compact serialisation (WorldlineJWE.decrypt, with a key
// made once), and the Authorization and Date values (WorldlineAuth).
//
// Properties:
// - every refusal is a 400 (413-free: bodies are capped) naming a property, or the body itself
//   (INVALID_REQUEST_BODY), and never repeats a card number of the input;
// - a payment that parses has an amount in range, a known currency, and a card whose masked
//   form shows only its last four digits;
// - a JWE that is not this key's never opens (the key is made here; no input carries its
//   ciphertexts);
// - the string to sign ends with the path line, whatever the header values hold.
// libFuzzer calls the target from one thread; the key is only read.
nonisolated(unsafe) let key = try! _RSA.Encryption.PrivateKey(keySize: .bits2048)

func checkRefusal(_ e: WorldlineError, _ input: String) {
    require(e.httpStatus == 400, "refusal \(e) is not a 400")
    require(e.propertyName.map { !$0.isEmpty } ?? (e.id == "INVALID_REQUEST_BODY"), "refusal \(e) names nothing")
    if let range = PAN.likelyPANRange(in: e.message) {
        require(!input.contains(String(e.message[range])), "refusal \(e) repeats a card number of its input")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    let textInput = text(data, size)
    do {
        let json = try WorldlineJSON.parse(input)
        do {
            let p = try WorldlineCreatePayment.parse(json)
            require((1...999_999_999_999).contains(p.amount), "amount \(p.amount)")
            require(ISO4217.numbers[p.currency] == p.currencyNumeric, "currency \(p.currency)")
            if let card = p.card {
                require(card.masked.filter(\.isNumber) == String(card.pan.suffix(4)), "masked \(card.masked)")
                require(card.masked.count == card.pan.count, "masked \(card.masked) is not as long as the number")
            }
        } catch { checkRefusal(error, textInput) }
        do { _ = try WorldlineCapture.parse(json) } catch { checkRefusal(error, textInput) }
        do { _ = try WorldlineRefundRequest.parse(json) } catch { checkRefusal(error, textInput) }
    } catch {
        checkRefusal(error, textInput)
    }
    do {
        let customer = try WorldlineCustomerInput.parse(input)
        require(!customer.nonce.isEmpty, "an empty nonce was taken")
    } catch { checkRefusal(error, textInput) }
    do {
        _ = try WorldlineJWE.decrypt(textInput) { $0.isEmpty ? nil : key }
        require(false, "a JWE opened with a key made in this process: \(textInput.prefix(200))")
    } catch {
        require(!error.reason.isEmpty, "a JWE refusal with no reason")
    }
    _ = WorldlineAuth.parseHMAC(textInput)
    _ = WorldlineAuth.parseClient(textInput)
    _ = WorldlineAuth.parseDate(textInput)
    let signed = WorldlineAuth.stringToSign(method: "POST", contentType: "application/json", date: "d",
                                            gcsHeaders: [(name: "X-GCS-Fuzz", value: textInput)], pathAndQuery: "/v2/m/payments")
    require(signed.hasSuffix("\n/v2/m/payments\n"), "the string to sign lost its path line")
    return 0
}
