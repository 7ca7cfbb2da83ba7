import EMV

// Data Object Lists (DOL.parse) and the Application File Locator (AFLEntry.parseList); each input
// goes to both.
//
// Properties:
// - a DOL re-encodes to exactly its input (one encoding per tag and one-byte lengths);
// - filling a DOL gives `dataLength` bytes and `split` takes them apart again;
// - an AFL re-encodes to exactly its input, and every entry keeps the ranges its parser promises.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)

    if let dol = try? DOL.parse(input) {
        require(dol.bytes == input, "DOL \(hex(input)) re-encodes as \(hex(dol.bytes))")
        require((try? DOL.parse(dol.bytes)) == dol, "DOL \(hex(input)) does not read back")
        // A source that gives values of every length: shorter, equal and longer than asked.
        let filled = dol.fill { tag in
            let n = Int(tag.value % 7)
            return n == 0 ? nil : Array(repeating: UInt8(truncatingIfNeeded: tag.value), count: n * 3)
        }
        require(filled.count == dol.dataLength, "DOL \(hex(input)) filled \(filled.count) bytes, not \(dol.dataLength)")
        let split: [EMVTag: [UInt8]]
        do { split = try dol.split(filled) } catch {
            require(false, "DOL \(hex(input)) cannot split its own data: \(error)")
            return 0
        }
        for entry in dol.entries {
            require(split[entry.tag] != nil, "DOL \(hex(input)): split lost \(entry.tag)")
        }
    }

    if let afl = try? AFLEntry.parseList(input) {
        require(afl.flatMap(\.bytes) == input, "AFL \(hex(input)) re-encodes differently")
        for entry in afl {
            require((1...30).contains(entry.sfi) && entry.firstRecord >= 1 && entry.lastRecord >= entry.firstRecord
                    && entry.offlineAuthenticationRecords <= entry.records.count,
                    "AFL \(hex(input)) accepted an entry out of range: \(entry)")
        }
    }
    return 0
}
