// The build tool of the EmbedDefaults plugin: writes a Swift file holding the text of each file
// given. Usage: cardbench-embed OUTPUT.swift CAPK.yaml PROFILE.yaml... [--console FILE...]
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: cardbench-embed OUTPUT.swift CAPK.yaml PROFILE.yaml...\n".utf8))
    exit(64)
}
let output = arguments.first!
let capk = arguments.dropFirst().first!
// Profiles, then after `--console` the console's files (HTML, CSS, JavaScript, SVG).
let rest = Array(arguments.dropFirst(2))
let split = rest.firstIndex(of: "--console") ?? rest.endIndex
let profiles = rest[..<split]
let consoleFiles = split < rest.endIndex ? Array(rest[(split + 1)...]) : []

func read(_ path: String) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        FileHandle.standardError.write(Data("cardbench-embed: cannot read \(path) as UTF-8\n".utf8))
        exit(1)
    }
    return text
}

/// A raw multi-line string literal holding `text` exactly: enough `#`s that no `"""#…` inside
/// can end it, the closing delimiter at column 0 so no indentation is stripped, and the final
/// line break kept (a literal drops the one before its closing delimiter).
func literal(_ text: String) -> String {
    var hashes = 1
    while text.contains("\"" + String(repeating: "#", count: hashes)) { hashes += 1 }
    let h = String(repeating: "#", count: hashes)
    return "\(h)\"\"\"\n\(text)\n\"\"\"\(h)"
}

func stem(_ path: String) -> String { ((path as NSString).lastPathComponent as NSString).deletingPathExtension }

var swift = """
// Generated at build time by the EmbedDefaults plugin (Plugins/EmbedDefaults) from
// Scenarios/ca/capk.yaml, Scenarios/cards/*.yaml and Console/*. Not in git; edit those files instead.

extension EmbeddedDefaults {
    static let generatedCAPK: String = \(literal(read(capk)))

    static let generatedCardProfiles: [(name: String, yaml: String)] = [

"""
for path in profiles {
    swift += "        (\(String(reflecting: stem(path))), \(literal(read(path)))),\n"
}
swift += "    ]\n\n    static let generatedConsoleFiles: [(name: String, text: String)] = [\n"
for path in consoleFiles {
    swift += "        (\(String(reflecting: (path as NSString).lastPathComponent)), \(literal(read(path)))),\n"
}
swift += "    ]\n}\n"
do { try swift.write(toFile: output, atomically: true, encoding: .utf8) } catch {
    FileHandle.standardError.write(Data("cardbench-embed: cannot write \(output): \(error)\n".utf8))
    exit(1)
}
