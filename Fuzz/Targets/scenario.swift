// Compiled together with Sources/Scenario/ScenarioFile.swift (the Scenario module itself needs the
// whole daemon), so `Scenario.parse` here is the parser the runner uses, not a copy.

// Scenario YAML (Scenario.parse(_:file:)).
//
// Property: every line a scenario or its error names is a line of the text (1 to the number of
// lines), so a message always points somewhere real. An error may also name 0 (the file as a
// whole) or the line after the last (libyaml's end of stream, when the text does not end in a
// line break).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let yaml = text(data, size)
    // libyaml breaks lines at LF, CR, CR LF, NEL, LS and PS; counting each break (CR LF twice)
    // gives an upper bound.
    let lines = 1 + yaml.unicodeScalars.filter { ["\n", "\r", "\u{85}", "\u{2028}", "\u{2029}"].contains($0) }.count
    // Relative to the repository root, where `make fuzz` runs: card names then resolve to the
    // profiles in Scenarios/cards, as the library's own scenarios do.
    let scenario: Scenario
    do { scenario = try Scenario.parse(yaml, file: "Scenarios/fuzz/fuzz.yaml") } catch {
        require((0...lines + 1).contains(error.line), "error line \(error.line) of \(lines) lines: \(error) for \(yaml.debugDescription)")
        return 0
    }
    require(!scenario.steps.isEmpty, "a scenario without steps accepted from \(yaml.debugDescription)")
    for step in scenario.steps {
        require((1...lines).contains(step.line), "step line \(step.line) of \(lines) lines for \(yaml.debugDescription)")
        if let expect = step.expect {
            require((1...lines).contains(expect.line), "expect line \(expect.line) of \(lines) lines for \(yaml.debugDescription)")
            for item in expect.callback {
                require((1...lines).contains(item.line), "callback.\(item.field) line \(item.line) of \(lines) lines for \(yaml.debugDescription)")
            }
        }
    }
    return 0
}
