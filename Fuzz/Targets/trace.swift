import EMV

// Trace decoding (TraceDecoding.decode): what the console shows of a recorded transaction. The
// responses are whatever the card answered, a hostile card's included, as the ledger keeps them
// (hex with `*` for masked digits). Input: one exchange per line, "COMMAND RESPONSE".
//
// Properties: one decoded step per exchange; every TLV value shown is read from the response (or
// the command) as recorded, so a masked digit can never come out unmasked or as something else;
// a step's status is the response's last two bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let lines = text(data, size).split(separator: "\n", omittingEmptySubsequences: false).prefix(64)
    let exchanges = lines.map { line in
        let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        return TraceDecoding.Exchange(command: String(parts[0]), response: parts.count > 1 ? String(parts[1]) : "")
    }
    let decoded = TraceDecoding.decode(exchanges, .init(tvr: "0000008000", tsi: "E800", cvmResults: "410302"))
    require(decoded.steps.count == exchanges.count, "\(exchanges.count) exchanges decoded to \(decoded.steps.count) steps")
    for (step, exchange) in zip(decoded.steps, exchanges) {
        let response = String(exchange.response.uppercased().filter { $0 != " " })
        let command = String(exchange.command.uppercased().filter { $0 != " " })
        var stack = (step.tlv ?? []) + (step.commandData ?? [])
        while let node = stack.popLast() {
            if let value = node.value {
                require(response.contains(value) || command.contains(value), "value \(value) of tag \(node.tag) is not in the exchange as recorded")
            }
            stack += node.children ?? []
        }
        if !step.status.isEmpty { require(response.hasSuffix(step.status) || response.count % 2 == 1, "status \(step.status) is not the end of \(response)") }
    }
    return 0
}
