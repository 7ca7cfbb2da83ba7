import CardIO
import EMV

// The T=1 block protocol (T1Transport: block decoding, chaining, R- and S-blocks, recovery and
// resynchronisation) driven through a CardLine whose card answers with the fuzz input.
//
// Input: byte 0 chooses the EDC (bit 1), whether IFSD is negotiated first (bit 2) and the IFSC
// (bits 3–8, 1 to 63 with 0 meaning 254); byte 1 how many data bytes follow the 4-byte header of
// the C-APDU, which is sent up to 3 times.
// The rest is the card's answers: a length byte, then that many bytes, which arrive after the
// terminal's next write (a length of 0: the card stays silent). Bytes the terminal does not read
// before its next write are discarded, as a reader discards stale input.
//
// Properties:
// - every block the terminal writes is well formed: NAD 00, a PCB that codes a block, LEN
//   matching the information field, no more in an I-block than the largest IFSC the card has had
//   (a retransmitted block keeps its size after an S(IFS) shrinks it), a right EDC;
// - a response handed back holds at least SW1 SW2.
final class ReplayLine: CardLine {
    var answers: ArraySlice<UInt8>
    var pending: ArraySlice<UInt8> = []
    let edc: ISO7816.EDC
    let input: [UInt8]
    /// The transport's IFSC now; every block is checked as it is written.
    var currentIFSC: () -> Int = { 254 }
    /// The largest IFSC so far: a retransmitted I-block keeps the size it was cut to.
    var largestIFSC = 1

    init(_ input: [UInt8], edc: ISO7816.EDC) {
        self.input = input
        self.answers = input[2...]
        self.edc = edc
    }

    var readerName: String { "fuzz" }

    func write(_ block: [UInt8]) throws(CardIOError) {
        check(block)
        guard let count = answers.popFirst() else { return }
        let n = min(Int(count), answers.count)
        pending = answers.prefix(n)
        answers = answers.dropFirst(n)
    }

    func read(timeout: Duration) throws(CardIOError) -> UInt8 {
        guard let byte = pending.popFirst() else { throw .timeout(reader: readerName, seconds: 0) }
        return byte
    }

    func discardInput() { pending = [] }

    func check(_ block: [UInt8]) {
        largestIFSC = max(largestIFSC, currentIFSC())
        let context = "block \(hex(block)) for input \(hex(input))"
        require(block.count >= 3 + edc.size, "short \(context)")
        let body = Array(block.dropLast(edc.size))
        let len = Int(block[2])
        require(block[0] == 0, "NAD not 00 in \(context)")
        require(len == body.count - 3 && len <= 254, "wrong LEN in \(context)")
        require(edc.compute(body) == Array(block.suffix(edc.size)), "wrong EDC in \(context)")
        let pcb = block[1]
        switch pcb & 0xC0 {
        case 0x80: require(pcb & 0x20 == 0 && pcb & 0x0F <= 2 && len == 0, "bad R-block: \(context)")
        case 0xC0: require(pcb & 0x1F <= 3 && len == (pcb & 0x1F == 1 || pcb & 0x1F == 3 ? 1 : 0), "bad S-block: \(context)")
        default: require(pcb & 0x1F == 0 && len <= largestIFSC, "I-block over IFSC \(largestIFSC): \(context)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = bytes(data, size)
    guard input.count >= 2 else { return 0 }
    let edc: ISO7816.EDC = input[0] & 1 == 0 ? .lrc : .crc
    let ifsc = Int(input[0] >> 2) == 0 ? 254 : Int(input[0] >> 2)
    let apdu: [UInt8] = [0x00, 0xB2, 0x01, 0x0C] + (0..<Int(input[1])).map { UInt8(truncatingIfNeeded: $0) }
    let line = ReplayLine(input, edc: edc)
    let t1 = T1Transport(line: line, ifsc: ifsc, edc: edc, blockWaitingTime: .milliseconds(1),
                         characterWaitingTime: .milliseconds(1), guardTime: .zero, slack: .zero)
    line.currentIFSC = { [unowned t1] in t1.ifsc }
    if input[0] & 2 != 0 {
        do { try t1.negotiateIFSD(254) } catch { return 0 }
    }
    for _ in 0..<3 {
        let response: [UInt8]
        do { response = try t1.transmit(apdu) } catch { return 0 }
        require(response.count >= 2, "response \(hex(response)) has no SW1 SW2 (input \(hex(input)))")
        if line.answers.isEmpty { break }
    }
    return 0
}
