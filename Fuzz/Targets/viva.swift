import Fronts

// The Viva request parser (VivaRequest.parse) and the callbacks answering what it returns.
//
// Properties:
// - a request that parses renders its failure callback (VivaResult(failing:with:) through
//   VivaCallback.url), and RenderedCallback.fields reads that URL back to the fields rendered,
//   after whatever query the request's own callback carries;
// - a refused request whose error names a callback renders the rejection the same way;
// - the parsed request keeps what the URL said: a callback with no '#', its parameters in order
//   with no name twice, and amounts inside their documented ranges.
func checkCallback(_ callback: String, _ result: VivaResult, request: String) {
    let url = VivaCallback.url(callback: callback, result: result)
    let rendered = VivaCallback.fields(result)
    let read = RenderedCallback.fields(of: url)
    let context = "callback \(url.debugDescription) for request \(request.debugDescription)"
    require(!url.contains("#"), "\(context) has a fragment")
    require(read.count >= rendered.count, "\(context) reads back \(read.count) fields, rendered \(rendered.count)")
    let tail = read.suffix(rendered.count)
    require(zip(tail, rendered).allSatisfy { $0.name == $1.name && $0.value == $1.value },
            "\(context) reads back \(Array(tail)), rendered \(rendered)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let url = text(data, size)
    let request: VivaRequest
    do { request = try VivaRequest.parse(url) } catch {
        if let callback = error.callback {
            checkCallback(callback, VivaResult(rejecting: error), request: url)
        }
        return 0
    }

    require(!request.callback.isEmpty && !request.callback.contains("#"), "callback \(request.callback.debugDescription) accepted from \(url.debugDescription)")
    require(Set(request.parameters.map(\.name)).count == request.parameters.count, "a repeated name accepted from \(url.debugDescription)")
    require(request.parameter("callback") == request.callback, "callback differs from its parameter in \(url.debugDescription)")
    switch request.command {
    case .sale(let sale), .preAuth(let sale):
        require((1...VivaRequest.maximumAmount).contains(sale.amount) && (0...sale.amount).contains(sale.tipAmount),
                "sale \(sale) accepted from \(url.debugDescription)")
        require((sale.preferredInstallments ?? 0) <= VivaRequest.maximumPreferredInstallments, "sale \(sale) from \(url.debugDescription)")
    case .capturePreAuth(let capture):
        require(capture.referenceNumber.utf8.count == 6 && capture.referenceNumber != "000000", "capture \(capture) from \(url.debugDescription)")
    case .cancel(let cancel):
        require(cancel.referenceNumber.map { $0.utf8.count == 6 } ?? true, "cancel \(cancel) from \(url.debugDescription)")
    case .abort, .batch, .transactionDetails:
        break
    }

    for failure: VivaFailure in [.declinedByCard, .userCancel, .badRequest(field: "amount", rule: "a rule with & = # % and ü")] {
        let result = VivaResult(failing: request, with: failure)
        checkCallback(request.callback, result, request: url)
    }
    return 0
}
