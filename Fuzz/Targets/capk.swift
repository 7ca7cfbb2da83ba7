import EMV
import VirtualCard
import Yams

// CAPK files (CAPKFile.parse(yaml:file:)): what a terminal's CA keys are loaded from, often typed
// in from a scheme's document by hand.
//
// Properties: every key the parser accepts has the check value its file gave, as Yams reads that
// field on its own (a mistyped key never loads; the text itself cannot be searched for it, as YAML
// folds lines and expands escapes in a quoted value), an odd modulus of 64–248 bytes and exponent 3 or 65537; the file cardbench writes from
// them (CAPKFile.render) parses back to the same keys; recovering a certificate of the key's own
// length never crashes, whatever the bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let yaml = text(data, size)
    guard let keys = try? CAPKFile.parse(yaml: yaml, file: "fuzz.yaml") else { return 0 }
    let fields = try? Yams.compose(yaml: yaml)?["keys"]?.sequence
    require(fields?.count == keys.count, "\(keys.count) keys loaded from a file whose keys list Yams reads as \(fields?.count ?? -1) entries")
    for (i, k) in keys.enumerated() {
        require((64...248).contains(k.key.modulus.count) && k.key.modulus.last! & 1 == 1, "key \(hex([k.index])) has modulus \(hex(k.key.modulus))")
        require(k.key.exponent == [3] || k.key.exponent == [1, 0, 1], "key \(hex([k.index])) has exponent \(hex(k.key.exponent))")
        // Hex fields skip spaces (a check value typed in groups, as scheme documents print it).
        let given = fields?[i]["checksum"]?.string.map { String($0.uppercased().filter { $0 != " " }) }
        require(given == hex(k.checksum), "key \(hex([k.index])) loaded with check value \(hex(k.checksum)) while its file gives \(given ?? "none")")
        let garbage = Array((hex(k.key.modulus) + yaml).utf8.prefix(k.key.modulus.count))
        if garbage.count == k.key.modulus.count {
            _ = try? ODA.recoverIssuerKey(certificate: garbage, remainder: nil, exponent: [3], ca: k, pan: "4761739001010010",
                                          today: ODADate(year: 2026, month: 1, day: 1))
        }
    }
    let again = try? CAPKFile.parse(yaml: CAPKFile.render(keys, header: "fuzz"), file: "again.yaml")
    require(again == keys, "the rendered file of \(keys.count) keys does not parse back to them")
    return 0
}
