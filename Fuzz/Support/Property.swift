// Shared by every fuzz target (compiled into each one).
import EMV

/// Stops the run when a property fails. A fatalError is a crash to libFuzzer, so the input that
/// broke the property is saved as crash-<sha1> and reported like any other crash.
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
             file: StaticString = #fileID, line: UInt = #line) {
    if !condition() {
        fatalError("property failed: \(message())", file: file, line: line)
    }
}

/// The fuzz input as Swift bytes.
func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// The fuzz input as text. Invalid UTF-8 becomes U+FFFD, which the text parsers must handle anyway.
func text(_ data: UnsafePointer<UInt8>?, _ size: Int) -> String {
    String(decoding: bytes(data, size), as: UTF8.self)
}

func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
