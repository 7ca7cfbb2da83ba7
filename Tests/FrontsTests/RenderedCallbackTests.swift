import Testing
import Fronts

@Suite("Reading back a rendered callback")
struct RenderedCallbackTests {
    func pairs(_ url: String) -> [String] { RenderedCallback.fields(of: url).map { "\($0.name)=\($0.value)" } }

    @Test func vivaFormFieldsInOrderDecodedOnce() {
        #expect(pairs("pos://result?status=success&message=Transaction%20successful.&accountNumber=476173******0010&transactionDate=2026-11-23T18:18:08.0258630+00:00&note=%2520")
                == ["status=success", "message=Transaction successful.", "accountNumber=476173******0010",
                    "transactionDate=2026-11-23T18:18:08.0258630+00:00", "note=%20"])
    }

    @Test func billpocketAppSchemeFormHasItsFieldsAfterTheScheme() {
        #expect(pairs("myapp://result=aprobada&amount=12.00&statusinfo=Venta%20aprobada") == ["result=aprobada", "amount=12.00", "statusinfo=Venta aprobada"])
    }

    @Test func emptyValuesNoQueryAndMalformedEscapes() {
        #expect(pairs("pos://result?referenceNumber=&authorisationCode") == ["referenceNumber=", "authorisationCode="])
        #expect(pairs("not a url").isEmpty)
        #expect(pairs("pos://r?bad=%zz&ok=%41") == ["bad=%zz", "ok=A"], "a malformed escape is kept as it is")
    }
}
