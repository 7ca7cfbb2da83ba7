@testable import Fronts

// The percent decoder both fronts read query values with (PercentEncoding.decode), and the two
// encoders their callbacks are written with.
//
// Properties:
// - a decoded value never re-encodes differently: encoding it (Viva's or Billpocket's rule) and
//   decoding the result gives the value back, and that encoding is a fixed point;
// - an encoding holds only the bytes its rule keeps and %XX escapes in upper-case hex;
// - the input itself, taken as a value, survives both encoders and the decoder;
// - RenderedCallback.fields reads a callback built from the encoded value back to the value.
let upperHex = Array("0123456789ABCDEF".utf8)

func checkRoundTrip(_ value: String, input: [UInt8]) {
    let encoders: [(String, (String) -> String, (UInt8) -> Bool)] = [
        ("Viva", PercentEncoding.encodeValue, PercentEncoding.isKeptInValue),
        ("Billpocket", BillpocketCallback.encode, BillpocketCallback.isKept),
    ]
    for (name, encode, isKept) in encoders {
        let encoded = encode(value)
        let utf8 = Array(encoded.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "%") {
                require(i + 2 < utf8.count && upperHex.contains(utf8[i + 1]) && upperHex.contains(utf8[i + 2]),
                        "\(name) encoding \(encoded.debugDescription) has a bad escape (input \(hex(input)))")
                i += 3
            } else {
                require(isKept(utf8[i]), "\(name) encoding \(encoded.debugDescription) keeps byte \(utf8[i]) (input \(hex(input)))")
                i += 1
            }
        }
        let decoded: String
        do { decoded = try PercentEncoding.decode(encoded[...]) } catch {
            require(false, "\(name) encoding \(encoded.debugDescription) does not decode: \(error.rule) (input \(hex(input)))")
            return
        }
        require(decoded == value, "\(name): \(value.debugDescription) → \(encoded.debugDescription) → \(decoded.debugDescription) (input \(hex(input)))")
        require(encode(decoded) == encoded, "\(name) encoding of \(value.debugDescription) is not a fixed point (input \(hex(input)))")
        let fields = RenderedCallback.fields(of: "fuzz://result?v=" + encoded + "&" + encoded + "=x")
        require(fields.count == 2 && fields[0].name == "v" && fields[0].value == value && fields[1].name == value && fields[1].value == "x",
                "\(name): RenderedCallback read \(fields) for \(value.debugDescription) (input \(hex(input)))")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = text(data, size)
    let raw = bytes(data, size)
    checkRoundTrip(input, input: raw)
    if let decoded = try? PercentEncoding.decode(input[...]) {
        checkRoundTrip(decoded, input: raw)
        // Three characters stand for one byte and every other byte for itself.
        require(decoded.utf8.count <= input.utf8.count, "decoding grew \(input.debugDescription) (input \(hex(raw)))")
    }
    _ = RenderedCallback.fields(of: input)
    return 0
}
