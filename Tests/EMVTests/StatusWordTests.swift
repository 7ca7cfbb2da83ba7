import Testing
@testable import EMV

@Suite("StatusWord")
struct StatusWordTests {
    // Case-insensitive, so the table states the words that matter, not the capitalisation.
    @Test("meanings of the ISO 7816-4 and EMV codes", arguments: [
        (UInt16(0x9000), "normal processing"),
        (0x6200, "no information given"),
        (0x6281, "corrupted"),
        (0x6282, "end of file or record"),
        (0x6283, "selected file invalidated"),
        (0x6283, "application blocked"),
        (0x6284, "not formatted"),
        (0x6300, "authentication failed"),
        (0x6400, "execution error"),
        (0x6581, "memory failure"),
        (0x6700, "wrong length"),
        (0x6800, "functions in cla not supported"),
        (0x6881, "logical channel not supported"),
        (0x6882, "secure messaging not supported"),
        (0x6900, "command not allowed"),
        (0x6981, "incompatible with file structure"),
        (0x6982, "security status not satisfied"),
        (0x6983, "authentication method blocked"),
        (0x6984, "referenced data invalidated"),
        (0x6985, "conditions of use not satisfied"),
        (0x6986, "no current ef"),
        (0x6A80, "incorrect parameters in the data field"),
        (0x6A81, "function not supported"),
        (0x6A82, "file or application not found"),
        (0x6A83, "record not found"),
        (0x6A84, "not enough memory space"),
        (0x6A86, "incorrect parameters p1-p2"),
        (0x6A88, "referenced data not found"),
        (0x6B00, "wrong parameters p1-p2"),
        (0x6D00, "instruction code not supported"),
        (0x6E00, "class not supported"),
        (0x6F00, "no precise diagnosis"),
    ])
    func meaning(value: UInt16, words: String) {
        #expect(StatusWord(value).meaning.lowercased().contains(words))
    }

    @Test("unknown codes fall back to their SW1 group", arguments: [
        (UInt16(0x6410), "Execution error"),
        (0x6699, "Execution error"),
        (0x6A99, "Checking error"),
        (0x6F12, "Checking error"),
        (0x6299, "Warning"),
        (0x6399, "Warning"),
        (0x9F10, "Unknown status"),
        (0x0000, "Unknown status"),
    ])
    func groupFallback(value: UInt16, expected: String) {
        #expect(StatusWord(value).meaning.hasPrefix(expected))
    }

    @Test("61xx gives the bytes available, 00 meaning 256", arguments: [
        (UInt16(0x6100), 256), (0x6101, 1), (0x611A, 26), (0x61FF, 255),
    ])
    func bytesAvailable(value: UInt16, expected: Int) {
        let sw = StatusWord(value)
        #expect(sw.bytesAvailable == expected)
        #expect(sw.correctLength == nil)
        #expect(sw.meaning.contains("\(expected)"))
    }

    @Test("6Cxx gives the correct Le, 00 meaning 256", arguments: [
        (UInt16(0x6C00), 256), (0x6C10, 16), (0x6CFF, 255),
    ])
    func correctLength(value: UInt16, expected: Int) {
        let sw = StatusWord(value)
        #expect(sw.correctLength == expected)
        #expect(sw.bytesAvailable == nil)
        #expect(sw.meaning.contains("\(expected)"))
    }

    @Test("63Cx gives the tries left", arguments: [
        (UInt16(0x63C0), 0), (0x63C1, 1), (0x63C2, 2), (0x63CF, 15),
    ])
    func retriesLeft(value: UInt16, expected: Int) {
        let sw = StatusWord(value)
        #expect(sw.retriesLeft == expected)
        #expect(sw.meaning.hasPrefix("Verification failed, \(expected) tr"))
    }

    @Test("parameters are nil outside their ranges", arguments: [UInt16(0x9000), 0x6300, 0x6A82, 0x6283, 0x62C2])
    func parametersNil(value: UInt16) {
        let sw = StatusWord(value)
        #expect(sw.bytesAvailable == nil)
        #expect(sw.correctLength == nil)
        #expect(sw.retriesLeft == nil)
    }

    @Test("description is hex then meaning", arguments: [
        (UInt16(0x9000), "9000 (Normal processing)"),
        (0x63C2, "63C2 (Verification failed, 2 tries left)"),
        (0x63C1, "63C1 (Verification failed, 1 try left)"),
        (0x6A82, "6A82 (File or application not found)"),
        (0x6D00, "6D00 (Instruction code not supported or invalid)"),
    ])
    func descriptionFormat(value: UInt16, expected: String) {
        #expect(StatusWord(value).description == expected)
        #expect("\(StatusWord(value))" == expected)
    }

    @Test("only 9000 is success")
    func success() {
        #expect(StatusWord.success.isSuccess)
        #expect(StatusWord.success == StatusWord(0x90, 0x00))
        #expect(!StatusWord(0x6100).isSuccess)
        #expect(!StatusWord(0x9001).isSuccess)
        #expect(!StatusWord(0x6283).isSuccess)
    }

    @Test("62xx and 63xx are warnings", arguments: [
        (UInt16(0x6200), true), (0x6283, true), (0x6300, true), (0x63C1, true),
        (0x9000, false), (0x6100, false), (0x6400, false), (0x6A82, false),
    ])
    func warning(value: UInt16, expected: Bool) {
        #expect(StatusWord(value).isWarning == expected)
    }

    @Test("the two initialisers and value agree")
    func initialisers() {
        let sw = StatusWord(0x6A, 0x82)
        #expect(sw == StatusWord(0x6A82))
        #expect(sw.sw1 == 0x6A)
        #expect(sw.sw2 == 0x82)
        #expect(sw.value == 0x6A82)
    }
}
