@testable import ISO8583
import EMV

// The ISO 8583 unpacker (Packager.unpack) in each of its formats, the framing headers, and the
// trace's masked description. The first byte picks the packager, the second the framing; the rest
// is the message (after a frame header when the framing byte asks for one).
//
// Properties:
// - what unpacks packs again, and that unpacks to the same message (the packer accepts everything
//   the unpacker produces);
// - a frame header's announced length is never negative and never over the framing's maximum;
// - the description of fields 2 and 35 never holds field 2's card number whole (when it is long
//   enough to be one), and the PIN block is always withheld.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard input.count >= 2 else { return 0 }
    let packager = Packager.all[Int(input[0]) % Packager.all.count]
    var message = Array(input.dropFirst(2))
    if input[1] & 0x80 != 0 {
        let framing = Framing.allCases[Int(input[1] & 0x7F) % Framing.allCases.count]
        guard message.count >= framing.headerLength,
              let length = try? framing.bodyLength(Array(message.prefix(framing.headerLength))) else { return 0 }
        require(length >= 0 && length <= 65_535, "frame length \(length) from \(hex(Array(message.prefix(4))))")
        message = framing.split(Array(message.dropFirst(framing.headerLength))).message
    }
    guard let unpacked = try? packager.unpack(message) else { return 0 }
    let packed: [UInt8]
    do { packed = try packager.pack(unpacked) } catch {
        require(false, "\(packager.name): \(hex(message)) unpacks but does not pack: \(error)")
        return 0
    }
    do {
        let again = try packager.unpack(packed)
        require(again == unpacked, "\(packager.name): unpack(pack(unpack(\(hex(message))))) differs")
    } catch {
        require(false, "\(packager.name): the packing of \(hex(message)) does not unpack: \(error)")
    }
    let described = unpacked.described(direction: "in", packager: packager)
    if let pan = unpacked[2], pan.count >= 12 {
        for f in described.fields where f.field == 2 || f.field == 35 {
            require(!f.value.contains(pan), "\(packager.name): field \(f.field)'s description of \(hex(message)) holds the PAN \(pan)")
        }
    }
    if unpacked.fields[52] != nil {
        require(described.fields.first { $0.field == 52 }?.value == "(PIN block withheld)", "\(packager.name): field 52 is described")
    }
    return 0
}
