import Testing
@testable import ISO8583

@Suite("MTIs read")
struct MTITests {
    @Test("class, function and repeat of the MTIs cardbench sends and answers", arguments: [
        ("0100", MTI.Class.authorisation, MTI.Function.request, false, "authorisation request"),
        ("0101", .authorisation, .request, true, "authorisation request"),
        ("0210", .financial, .response, false, "financial response"),
        ("0220", .financial, .advice, false, "financial advice"),
        ("0221", .financial, .advice, true, "financial advice"),
        ("0421", .reversal, .advice, true, "reversal advice"),
        ("0430", .reversal, .adviceResponse, false, "reversal advice response"),
        ("0810", .networkManagement, .response, false, "network management response"),
    ])
    func read(text: String, messageClass: MTI.Class, function: MTI.Function, isRepeat: Bool, meaning: String) {
        let mti = MTI(text)
        #expect(mti.messageClass == messageClass && mti.function == function && mti.isRepeat == isRepeat)
        #expect(mti.meaning == meaning && ISOMessage.meaning(of: text) == meaning)
    }

    @Test("what is not a known MTI has no class or function, and says which digit")
    func unknown() {
        #expect(MTI("0900").messageClass == nil && MTI("0900").meaning == "class 9 request")
        #expect(MTI("01x0").function == nil && MTI("01x0").messageClass == nil)
        #expect(MTI("010").meaning == "unknown" && !MTI("010").isRepeat)
        #expect(MTI.Function.advice.wantsAnswer && !MTI.Function.response.wantsAnswer)
    }
}
