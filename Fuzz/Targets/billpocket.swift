import Fronts

// The Billpocket request parser (BillpocketRequest.parse) and the callbacks answering what it
// returns.
//
// Properties:
// - a request that names a urlScheme renders its failure callback (BillpocketResult(failing:with:)
//   through BillpocketCallback.url) and, for a sale, its approval with every value the request
//   carries; RenderedCallback.fields reads each URL back to the fields rendered, after whatever
//   query a webhook's own URL carries;
// - a refused request whose error names a urlScheme renders its `result=error` callback the same way;
// - the parsed request keeps what the URL said: no parameter twice, a venta with a urlScheme and
//   an amount above 0, amount plus tip within 12 digits.
func checkCallback(_ scheme: BillpocketURLScheme, _ result: BillpocketResult, request: String) {
    let url = BillpocketCallback.url(urlScheme: scheme, result: result)
    let rendered = BillpocketCallback.fields(result)
    let read = RenderedCallback.fields(of: url)
    let context = "callback \(url.debugDescription) for request \(request.debugDescription)"
    require(!url.contains("#"), "\(context) has a fragment")
    if case .app = scheme { require(read.count == rendered.count, "\(context) reads back \(read.count) fields, rendered \(rendered.count)") }
    require(read.count >= rendered.count, "\(context) reads back \(read.count) fields, rendered \(rendered.count)")
    let tail = read.suffix(rendered.count)
    require(zip(tail, rendered).allSatisfy { $0.name == $1.name && $0.value == $1.value },
            "\(context) reads back \(Array(tail)), rendered \(rendered)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let url = text(data, size)
    let request: BillpocketRequest
    do { request = try BillpocketRequest.parse(url) } catch {
        if let scheme = error.urlScheme {
            checkCallback(scheme, BillpocketResult(rejecting: error), request: url)
            require(error.callbackURL == BillpocketCallback.url(urlScheme: scheme, result: BillpocketResult(rejecting: error)),
                    "callbackURL differs for \(url.debugDescription)")
        }
        return 0
    }

    let keys = request.parameters.map { $0.name.lowercased() }
    require(Set(keys).count == keys.count, "a repeated name accepted from \(url.debugDescription)")
    switch request.command {
    case .venta(let sale):
        require(request.urlScheme != nil, "a venta without urlScheme accepted from \(url.debugDescription)")
        require(sale.amount > 0 && sale.tip >= 0 && sale.amount + sale.tip <= 999_999_999_999,
                "sale \(sale) accepted from \(url.debugDescription)")
        if let scheme = request.urlScheme {
            let approved = BillpocketResult(approving: sale, identifier: request.identifier, transactionId: "123456",
                                            authorization: "A1B2C3", creditCard: "411111******1111", cardType: "VISA",
                                            url: "https://example.com/r?x=1&y=2", bank: "BANCO", accountType: .credit,
                                            arqc: "0123456789ABCDEF", aid: "A0000000031010", appLabel: "VISA CRÉDITO")
            checkCallback(scheme, approved, request: url)
        }
    case .devolucion:
        break
    }
    if let scheme = request.urlScheme {
        for failure: BillpocketFailure in [.declinedByCard, .userCancel, .photoRequired] {
            checkCallback(scheme, BillpocketResult(failing: request, with: failure), request: url)
        }
    }
    return 0
}
