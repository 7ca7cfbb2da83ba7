import Testing
@testable import Fronts

@Suite("BillpocketTokens")
struct BillpocketTokensTests {
    @Test("a user token is 64 lower-case hex digits, two per random byte")
    func userToken() throws {
        let token = BillpocketTokens.userToken(randomBytes: (0..<32).map { UInt8($0 * 8) })
        #expect(token == "0008101820283038404850586068707880889098a0a8b0b8c0c8d0d8e0e8f0f8")
        #expect(BillpocketTokens.userToken(randomBytes: Array(repeating: 0xFF, count: 32)) == String(repeating: "f", count: 64))
        #expect(token.count == BillpocketTokens.userTokenLength)
        try BillpocketTokens.validateUserToken(token)
        // It is accepted as a request's user token.
        let request = try BillpocketRequest.parse("billpocket://transaction=venta&usertoken=\(token)&amount=1&identifier=i&urlScheme=a")
        #expect(request.userToken == token)
    }

    @Test("no modulo bias: over every byte value, each symbol comes up equally often")
    func unbiased() {
        var user: [Character: Int] = [:]
        var device: [Character: Int] = [:]
        let everyByte = (0...255).map { UInt8($0) }
        for chunk in stride(from: 0, to: 256, by: 32) {
            for c in BillpocketTokens.userToken(randomBytes: Array(everyByte[chunk..<chunk + 32])) { user[c, default: 0] += 1 }
        }
        for chunk in stride(from: 0, to: 250, by: 10) {
            for c in BillpocketTokens.deviceToken(randomBytes: Array(everyByte[chunk..<chunk + 10])) { device[c, default: 0] += 1 }
        }
        for c in BillpocketTokens.deviceToken(randomBytes: Array(everyByte[246..<256])).suffix(6) { device[c, default: 0] += 1 }
        #expect(user.count == 16 && Set(user.values) == [32])
        #expect(device.count == 32 && Set(device.values) == [8])
    }

    @Test("a device token is 10 characters of Crockford's base 32, the low 5 bits of each byte")
    func deviceToken() throws {
        #expect(BillpocketTokens.deviceToken(randomBytes: Array(0..<10)) == "0123456789")
        #expect(BillpocketTokens.deviceToken(randomBytes: [10, 17, 18, 20, 21, 26, 27, 31, 32, 255]) == "AHJMNTVZ0Z")
        let token = BillpocketTokens.deviceToken(randomBytes: [0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB])
        try BillpocketTokens.validateDeviceToken(token)
        #expect(BillpocketRequest.deviceTokenLengths.contains(token.count))
        #expect(!BillpocketTokens.deviceTokenAlphabet.contains { "ILOU".contains($0) })
    }

    @Test("validators name the field and the rule")
    func validators() {
        func userError(_ token: String) -> BillpocketFieldError? {
            do { try BillpocketTokens.validateUserToken(token); return nil } catch { return error }
        }
        func deviceError(_ token: String) -> BillpocketFieldError? {
            do { try BillpocketTokens.validateDeviceToken(token); return nil } catch { return error }
        }
        #expect(userError(String(repeating: "a", count: 63))?.statusInfo == "userToken: must be 64 characters")
        #expect(userError(String(repeating: "a", count: 65))?.rule == "must be 64 characters (lower-case hex); got 65")
        #expect(userError(String(repeating: "A", count: 64))?.statusInfo == "userToken: must be lower-case hex")
        #expect(userError(String(repeating: "g", count: 64))?.field == "userToken")
        #expect(deviceError("ABCDEFGHJ")?.statusInfo == "devicetoken: must be 10 characters")
        #expect(deviceError("ABCDEFGHJKM")?.statusInfo == "devicetoken: must be 10 characters")
        #expect(deviceError("ABCDEFGHIJ")?.statusInfo == "devicetoken: letters/digits, no I L O U")
        #expect(deviceError("abcdefghjk")?.field == "devicetoken")
        #expect(deviceError("ABCDEFGHJK") == nil)
    }
}
