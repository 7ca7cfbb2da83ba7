/// What the binaries carry so that they work from any directory with no files: the shipped card
/// profiles (`Scenarios/cards`) and the CA public keys (`Scenarios/ca/capk.yaml`), compiled in at
/// build time by the EmbedDefaults plugin. Pure data: reading and parsing is the caller's.
public enum EmbeddedDefaults {
    /// The name an embedded file goes by in messages, where a path would stand.
    public static let capkName = "(embedded) capk.yaml"

    /// The CAPK file's text.
    public static var capk: String { generatedCAPK }

    /// The profile the demo card and `cardbench sale` use unless told otherwise.
    public static let demoCard = "visa-credit-cvn10"

    /// Every embedded profile's YAML by its name: the file name without `.yaml`.
    public static let cardProfiles: [String: String] = Dictionary(
        generatedCardProfiles.map { ($0.name, $0.yaml) }, uniquingKeysWith: { first, _ in first })

    /// The embedded profiles' names, sorted.
    public static var cardProfileNames: [String] { generatedCardProfiles.map(\.name) }

    /// The profile named `name`, which may carry its `.yaml`/`.yml` extension; nil for any other
    /// name (a path is never a name).
    public static func cardProfile(named name: String) -> String? {
        cardProfiles[profileName(name)]
    }

    /// The name a profile goes by: `name` without a `.yaml`/`.yml` extension, as embedded and
    /// configured profiles are named after their files.
    public static func profileName(_ name: String) -> String {
        for ext in [".yaml", ".yml"] where name.hasSuffix(ext) { return String(name.dropLast(ext.count)) }
        return name
    }

    /// How an embedded profile is named where a path would be: `(embedded) visa-credit-cvn10`.
    public static func displayName(_ name: String) -> String { "(embedded) \(name)" }
}

/// The bench console's files (`Console/`: the page, its style sheet, its JavaScript modules),
/// compiled in like the profiles so the daemon serves them with no files installed.
public enum EmbeddedConsole {
    /// Each file's text by its name (`index.html`, `console.js`).
    public static let files: [String: String] = Dictionary(
        EmbeddedDefaults.generatedConsoleFiles.map { ($0.name, $0.text) }, uniquingKeysWith: { first, _ in first })

    /// The media type a file is served with, by its extension.
    public static func contentType(_ name: String) -> String {
        switch name.split(separator: ".").last.map(String.init) ?? "" {
        case "html": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js": "text/javascript; charset=utf-8"
        case "svg": "image/svg+xml"
        default: "application/octet-stream"
        }
    }
}
