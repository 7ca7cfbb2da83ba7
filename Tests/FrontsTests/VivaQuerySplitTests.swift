import EMV
@testable import Fronts
import Testing

@Suite("Viva query items: the byte split of ASCII queries is the character split")
struct VivaQuerySplitTests {
    @Test("random ASCII queries split the same by bytes and by characters")
    func sameItems() {
        var random = SplitMix64(state: 0x717A)
        let alphabet = Array("ab=&&==%2Z0 .-")
        for _ in 0..<20_000 {
            let text = String((0..<Int(random.next() % 24)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            let query = Substring(text)
            let bytes = VivaRequest.Parser.itemsByBytes(query), characters = VivaRequest.Parser.itemsByCharacters(query)
            #expect(bytes.map { [String($0.name), String($0.value)] } == characters.map { [String($0.name), String($0.value)] }, "\(text)")
            #expect(bytes.map { $0.name.startIndex } == characters.map { $0.name.startIndex }, "\(text)")
        }
    }
}
