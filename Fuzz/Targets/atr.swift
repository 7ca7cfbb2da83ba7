import EMV
import Foundation

// Answers-To-Reset (ATR.parse), their summary and their JSON.
//
// Properties:
// - encode∘decode: TS, T0, the interface bytes of each group in order, the historical bytes and
//   TCK put back together are the ATR's bytes (the input, or its direct-convention form for TS 03);
// - parsing those bytes again gives the same ATR;
// - TCK is present exactly when a protocol other than T=0 is indicated, and then checks out.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard let atr = try? ATR.parse(input) else { return 0 }

    if input.first != 0x03 { require(atr.bytes == input, "ATR \(hex(input)) keeps \(hex(atr.bytes))") }
    var rebuilt = [atr.bytes[0], atr.t0]
    for group in atr.interfaceGroups {
        rebuilt += [group.ta, group.tb, group.tc, group.td].compactMap { $0 }
    }
    rebuilt += atr.historicalBytes
    if let tck = atr.tck { rebuilt.append(tck) }
    require(rebuilt == atr.bytes, "ATR \(hex(input)) rebuilds as \(hex(rebuilt))")
    require((try? ATR.parse(atr.bytes)) == atr, "ATR \(hex(input)) does not read back")

    let needsTCK = atr.interfaceGroups.contains { ($0.td ?? 0) & 0x0F != 0 }
    require((atr.tck != nil) == needsTCK, "ATR \(hex(input)): TCK present \(atr.tck != nil), needed \(needsTCK)")
    if let tck = atr.tck {
        require(atr.bytes.dropFirst().dropLast().reduce(0, ^) == tck, "ATR \(hex(input)): TCK does not check out")
    }
    require(!atr.protocols.isEmpty && !atr.protocols.contains(15), "ATR \(hex(input)) offers \(atr.protocols)")

    _ = atr.summary
    _ = (atr.fi, atr.di, atr.fMax, atr.extraGuardTime, atr.waitingIntegerWI, atr.specificMode)
    _ = (atr.ifsc, atr.bwi, atr.cwi, atr.checksumMode)
    require((try? JSONEncoder().encode(atr)) != nil, "ATR \(hex(input)) does not encode as JSON")
    return 0
}
