import EMV
import VirtualCard

// Card profile YAML (CardProfile.parse(yaml:file:)), and the card a profile it accepts makes.
//
// Property: a profile the parser accepts personalises a VirtualCard, and that card goes through
// a transaction's commands (SELECT of each application, GET PROCESSING OPTIONS, READ RECORD of
// each record, INTERNAL AUTHENTICATE, GENERATE AC with CDA when it offers it) answering each with
// at least SW1 SW2, and with well-formed BER-TLV whenever it answers 9000 — inserted, and tapped
// (PPSE, and GPO with TTQs asking for online, for a CVM, or neither) when it can be; and a card
// that can be swiped has tracks that parse back to themselves.
func send(_ card: inout VirtualCard, _ apdu: [UInt8], _ yaml: String) -> [UInt8]? {
    let response = card.respond(to: apdu)
    require(response.count >= 2, "\(hex(apdu)) answered \(hex(response)) by the card of \(yaml.debugDescription)")
    guard response.suffix(2) == [0x90, 0x00] else { return nil }
    let data = Array(response.dropLast(2))
    do { _ = try TLV.parse(data) } catch {
        require(false, "\(hex(apdu)) answered malformed TLV \(hex(data)) (\(error)) by the card of \(yaml.debugDescription)")
        return nil
    }
    return data
}

/// A short C-APDU, or nil when the data does not fit one.
func apdu(_ header: [UInt8], _ data: [UInt8]) -> [UInt8]? {
    guard data.count <= 255 else { return nil }
    return header + (data.isEmpty ? [] : [UInt8(data.count)] + data) + [0x00]
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let yaml = text(data, size)
    guard let profile = try? CardProfile.parse(yaml: yaml, file: "fuzz.yaml") else { return 0 }
    guard var card = try? VirtualCard(profile: profile) else { return 0 }

    for app in profile.applications {
        card.reset()
        guard let select = apdu([0x00, 0xA4, 0x04, 0x00], app.aid), send(&card, select, yaml) != nil else { continue }
        let pdolData = app.pdol?.fill { _ in nil } ?? []
        guard let gpo = apdu([0x80, 0xA8, 0x00, 0x00], [0x83] + TLV.encodeLength(pdolData.count) + pdolData),
              send(&card, gpo, yaml) != nil else { continue }
        for layout in app.records {
            _ = send(&card, [0x00, 0xB2, UInt8(truncatingIfNeeded: layout.record), UInt8(truncatingIfNeeded: layout.sfi << 3 | 4), 0x00], yaml)
        }
        // DDA's INTERNAL AUTHENTICATE, then CDA's signed GENERATE AC (P1 90) when the card has the keys.
        _ = send(&card, [0x00, 0x88, 0x00, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04, 0x00], yaml)
        if let generateAC = apdu([0x80, 0xAE, app.oda?.methods.contains(.cda) == true ? 0x90 : 0x80, 0x00], app.cdol1.fill { _ in nil }) {
            _ = send(&card, generateAC, yaml)
        }
    }
    if profile.interfaces.contains(.contactless) {
        for ttq: [UInt8] in [[0x36, 0x00, 0x40, 0x80], [0x36, 0xC0, 0x40, 0x80], [0x28, 0x00, 0x00, 0x00]] {
            for app in profile.applications where app.contactless != nil {
                let atr = card.powerOn(.contactless)
                require(ATR.isContactless(atr), "a tapped card answered the ATR \(hex(atr)), not a PC/SC part 3 one: \(yaml.debugDescription)")
                _ = send(&card, [0x00, 0xA4, 0x04, 0x00, 0x0E] + Array("2PAY.SYS.DDF01".utf8) + [0x00], yaml)
                guard let select = apdu([0x00, 0xA4, 0x04, 0x00], app.aid), send(&card, select, yaml) != nil else { continue }
                let pdolData = (app.contactless?.pdol ?? app.pdol)?.fill { $0 == 0x9F66 ? ttq : nil } ?? []
                guard let gpo = apdu([0x80, 0xA8, 0x00, 0x00], [0x83] + TLV.encodeLength(pdolData.count) + pdolData),
                      send(&card, gpo, yaml) != nil else { continue }
                for layout in app.records {
                    _ = send(&card, [0x00, 0xB2, UInt8(truncatingIfNeeded: layout.record), UInt8(truncatingIfNeeded: layout.sfi << 3 | 4), 0x00], yaml)
                }
                if let generateAC = apdu([0x80, 0xAE, 0x80, 0x00], app.cdol1.fill { _ in nil }) { _ = send(&card, generateAC, yaml) }
            }
        }
    }
    if profile.interfaces.contains(.magstripe) {
        guard let stripe = profile.magneticStripe else {
            require(false, "a card that can be swiped has no tracks that parse: \(yaml.debugDescription)")
            return 0
        }
        let again = try? MagneticStripe(track1: stripe.track1, track2: stripe.track2)
        require(again == stripe && stripe.pan == profile.pan, "the tracks \(stripe.track2) do not read back: \(yaml.debugDescription)")
    }
    return 0
}
