import EMV

// BER-TLV (TLV.parse) and what is built on its result: rendering, tag lookup, tag text.
//
// Properties:
// - encode∘decode: re-encoding what was parsed and parsing that again gives the same objects
//   (padding and long-form lengths are the only things a re-encoding may drop);
// - the re-encoding is canonical: encoding it once more changes nothing, and it is never longer
//   than the input;
// - every parsed tag reads back from its own hex (EMVTag(hex:)).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let parsed = try? TLV.parse(input) else { return 0 }

    let encoded = parsed.flatMap { $0.encoded() }
    require(encoded.count <= input.count, "re-encoding grew \(hex(input)) to \(hex(encoded))")
    let reparsed: [TLV]
    do { reparsed = try TLV.parse(encoded) } catch {
        require(false, "re-encoding of \(hex(input)) does not parse: \(error)")
        return 0
    }
    require(reparsed == parsed, "parse(encode(parse(\(hex(input))))) differs")
    require(reparsed.flatMap { $0.encoded() } == encoded, "re-encoding of \(hex(input)) is not canonical")

    var stack = parsed
    while let item = stack.popLast() {
        require((try? EMVTag(hex: item.tag.description)) == item.tag, "tag \(item.tag) does not read back from its hex")
        require(item.tag.isConstructed || item.children.isEmpty, "primitive \(item.tag) has children")
        stack += item.children
    }
    _ = parsed.primitives()
    _ = parsed.first(0x9F02)
    for item in parsed {
        _ = item.treeLines()
        _ = item.jsonObject
    }
    return 0
}
