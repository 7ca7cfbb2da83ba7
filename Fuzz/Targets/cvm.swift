import EMV

// The CVM list (CVMList.parse), its rules' descriptions and CVM Results.
//
// Property: encode∘decode. The list re-encodes to its input except bit 8 of each method byte,
// which is RFU and not kept (EMV Book 3 Annex C3); parsing the re-encoding gives the same list.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let list = try? CVMList.parse(input) else { return 0 }

    var expected = input
    for i in stride(from: 8, to: expected.count, by: 2) { expected[i] &= 0x7F }
    require(list.bytes == expected, "CVM list \(hex(input)) re-encodes as \(hex(list.bytes))")
    require((try? CVMList.parse(list.bytes)) == list, "CVM list \(hex(input)) does not read back")
    require(list.rules.count == (input.count - 8) / 2, "CVM list \(hex(input)) has \(list.rules.count) rules")

    for rule in list.rules {
        _ = rule.description
        require(CVMethod(code: rule.method.code) == rule.method, "method \(rule.method) does not read back from its code")
        require(CVMCondition(code: rule.condition.code) == rule.condition, "condition \(rule.condition) does not read back")
        let results = CVMResults(rule: rule, result: .successful)
        require(results.bytes.count == 3 && Array(results.bytes.prefix(2)) == rule.bytes, "CVM Results of \(rule) are \(hex(results.bytes))")
    }
    return 0
}
