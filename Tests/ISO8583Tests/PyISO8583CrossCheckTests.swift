import EMV
import Foundation
import Testing
@testable import ISO8583

/// pyiso8583 (PyPI) packs and unpacks the same messages: its bytes must be cardbench's, and each
/// reads what the other wrote, for both of its specs.
@Suite struct PyISO8583CrossCheckTests {
    struct Message: Codable, Equatable {
        let t: String
        let fields: [String: String]
    }

    struct Request: Encodable {
        let spec: String
        let encode: [Message]
        let decode: [String]
    }

    struct Reply: Decodable {
        let encoded: [String]
        let decoded: [Message]
    }

    static func json(_ m: ISOMessage) -> Message {
        Message(t: m.mti, fields: Dictionary(uniqueKeysWithValues: m.fields.map { (String($0.key), $0.value.description) }))
    }

    static func messages() -> [ISOMessage] {
        var echo = ISOMessage(mti: "0800")
        echo[7] = "1125093015"
        echo[11] = "000001"
        echo[70] = "301"
        var answer = ISOMessage(mti: "0210")
        answer[11] = "000042"
        answer[38] = "A1B2C3"
        answer[39] = "00"
        answer.fields[55] = .bytes(TLV(0x91, [1, 2, 3, 4, 5, 6, 7, 8, 0x30, 0x30]).encoded()
            + TLV(0x72, children: [TLV(0x9F18, [0, 0, 0, 1]), TLV(0x86, [0x84, 0x1E, 0, 0, 0])]).encoded())
        return [PackerTests.sale(), PackerTests.sale(secondary: true), echo, answer]
    }

    @Test(arguments: [("default", Packager.pyiso8583Default), ("default_ascii", Packager.pyiso8583DefaultASCII)])
    func sameBytesBothWays(spec: String, packager: Packager) throws {
        let ours = try Self.messages().map { try packager.pack($0) }
        let reply = try Self.run(Request(spec: spec, encode: Self.messages().map(Self.json), decode: ours.map { Hex.encode($0) }))
        #expect(reply.encoded == ours.map { Hex.encode($0) })
        #expect(reply.decoded == Self.messages().map(Self.json))
        for hex in reply.encoded { #expect(try Self.messages().contains(packager.unpack(Hex.decode(hex)))) }
    }

    static func run(_ request: Request) throws -> Reply {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let python = ProcessInfo.processInfo.environment["CARDBENCH_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
            ?? root.appendingPathComponent(".venv/bin/python").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root.appendingPathComponent("Tests/Oracle/iso8583_oracle.py").path]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(try JSONEncoder().encode(request))
        try stdin.fileHandleForWriting.close()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            struct Failed: Error, CustomStringConvertible { let description: String }
            throw Failed(description: "iso8583_oracle.py exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Reply.self, from: out)
    }
}
