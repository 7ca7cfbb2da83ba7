import EMV
import Foundation
import ISO8583
import Ledger
import Terminal
import Testing
import Yams
@testable import Daemon
import Workflows

// docs/openapi.yaml against the code: the routes the route collections register, the JSON its types encode,
// the document's own structure, and a running daemon's replies.

// MARK: - JSON values

/// A JSON value, decoded strictly (a boolean is never a number).
enum JSONValue: Codable, Equatable, Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// From what Yams loads; nil for anything JSON cannot hold (e.g. a mapping key that is not a string).
    init?(yaml: Any) {
        switch yaml {
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .int(Int64(i))
        case let d as Double: self = .double(d)
        case let s as String: self = .string(s)
        case let a as [Any]:
            var items: [JSONValue] = []
            for element in a {
                guard let v = JSONValue(yaml: element) else { return nil }
                items.append(v)
            }
            self = .array(items)
        case let m as [AnyHashable: Any]:
            var object: [String: JSONValue] = [:]
            for (key, element) in m {
                guard let k = key.base as? String, let v = JSONValue(yaml: element) else { return nil }
                object[k] = v
            }
            self = .object(object)
        default:
            if yaml is NSNull { self = .null } else { return nil }
        }
    }

    static func parse(_ data: Data) throws -> JSONValue { try JSONDecoder().decode(JSONValue.self, from: data) }

    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    var object: [String: JSONValue]? { if case .object(let o) = self { return o } else { return nil } }
    var array: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    var string: String? { if case .string(let s) = self { return s } else { return nil } }

    var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
    }
}

// MARK: - The document

struct OpenAPIDocument {
    let root: JSONValue

    static func load() throws -> OpenAPIDocument {
        let text = try String(contentsOf: Locations.file("docs/openapi.yaml"), encoding: .utf8)
        guard let loaded = try Yams.load(yaml: text), let root = JSONValue(yaml: loaded) else {
            throw DocumentError("docs/openapi.yaml is not a JSON-compatible YAML document (a key that is not a string?)")
        }
        return OpenAPIDocument(root: root)
    }

    struct DocumentError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    static let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

    var paths: [String: JSONValue] { root["paths"]?.object ?? [:] }
    var schemas: [String: JSONValue] { root["components"]?["schemas"]?.object ?? [:] }

    /// Every (method, path) the document describes, e.g. "GET /v1/terminals/{name}".
    var operations: Set<String> {
        var set = Set<String>()
        for (path, item) in paths {
            for method in Self.methods where item[method] != nil { set.insert("\(method.uppercased()) \(path)") }
        }
        return set
    }

    /// A JSON pointer `#/a/b` in this document.
    func resolve(_ reference: String) -> JSONValue? {
        guard reference.hasPrefix("#/") else { return nil }
        var node: JSONValue? = root
        for token in reference.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            if case .array(let a)? = node, let i = Int(key), a.indices.contains(i) { node = a[i] } else { node = node?[key] }
        }
        return node
    }

    /// Follows `$ref`s to the node they name.
    func dereference(_ node: JSONValue) -> JSONValue {
        var current = node, hops = 0
        while let ref = current["$ref"]?.string, let target = resolve(ref), hops < 32 {
            current = target
            hops += 1
        }
        return current
    }

    /// The JSON schema of an operation's response for `status`, when it is JSON.
    func responseSchema(_ method: String, _ path: String, status: Int) -> JSONValue? {
        guard let responses = paths[path]?[method.lowercased()]?["responses"],
              let response = responses["\(status)"].map(dereference) else { return nil }
        return response["content"]?["application/json"]?["schema"]
    }

    /// An object schema's properties and required names, `allOf` merged.
    func objectShape(_ schema: JSONValue) -> (properties: [String: JSONValue], required: Set<String>, additional: JSONValue?)? {
        let s = dereference(schema)
        if let parts = s["allOf"]?.array {
            var properties: [String: JSONValue] = [:], required = Set<String>(), additional: JSONValue?
            for part in parts {
                guard let shape = objectShape(part) else { continue }
                properties.merge(shape.properties) { a, _ in a }
                required.formUnion(shape.required)
                additional = additional ?? shape.additional
            }
            return (properties, required, additional)
        }
        guard s["type"]?.string == "object" || s["properties"] != nil || s["required"] != nil else { return nil }
        return (s["properties"]?.object ?? [:], Set(s["required"]?.array?.compactMap(\.string) ?? []), s["additionalProperties"])
    }

    /// What is wrong with `value` as an instance of `schema`: undeclared or missing properties,
    /// wrong types, values outside an enum, pattern or range.
    func problems(_ value: JSONValue, _ schema: JSONValue, at path: String = "$") -> [String] {
        let s = dereference(schema)
        if s["allOf"] != nil || s["type"]?.string == "object" {
            guard case .object(let object) = value else { return ["\(path): expected an object, got \(value)"] }
            guard let shape = objectShape(s) else { return ["\(path): unusable object schema"] }
            var found: [String] = []
            for name in shape.required.sorted() where object[name] == nil { found.append("\(path).\(name): required but absent") }
            for (key, v) in object.sorted(by: { $0.key < $1.key }) {
                if let property = shape.properties[key] {
                    found += problems(v, property, at: "\(path).\(key)")
                } else if let additional = shape.additional, additional != .bool(false) {
                    if additional != .bool(true) { found += problems(v, additional, at: "\(path).\(key)") }
                } else {
                    found.append("\(path).\(key): not declared in the schema")
                }
            }
            return found
        }
        switch s["type"]?.string {
        case "array":
            guard case .array(let items) = value else { return ["\(path): expected an array, got \(value)"] }
            guard let itemSchema = s["items"] else { return [] }
            return items.enumerated().flatMap { problems($0.element, itemSchema, at: "\(path)[\($0.offset)]") }
        case "string":
            guard case .string(let text) = value else { return ["\(path): expected a string, got \(value)"] }
            if let options = s["enum"]?.array, !options.contains(value) { return ["\(path): \"\(text)\" is not one of \(options)"] }
            if let pattern = s["pattern"]?.string, text.range(of: pattern, options: .regularExpression) == nil {
                return ["\(path): \"\(text)\" does not match \(pattern)"]
            }
            return []
        case "integer":
            guard case .int(let n) = value else { return ["\(path): expected an integer, got \(value)"] }
            if case .int(let low)? = s["minimum"], n < low { return ["\(path): \(n) is below \(low)"] }
            if case .int(let high)? = s["maximum"], n > high { return ["\(path): \(n) is above \(high)"] }
            return []
        case "number":
            switch value {
            case .int, .double: return []
            default: return ["\(path): expected a number, got \(value)"]
            }
        case "boolean":
            guard case .bool = value else { return ["\(path): expected a boolean, got \(value)"] }
            return []
        case nil where s["$ref"] == nil && s.object?.isEmpty == true:
            return []
        default:
            return ["\(path): the schema has no type this check knows: \(s)"]
        }
    }

    /// An instance of `schema` with every property present (enums take their first value,
    /// numbers their minimum or 1, strings "x").
    /// A recursive schema (a TLV node's children) is sampled a few levels deep, then its arrays are empty.
    func sample(_ schema: JSONValue, depth: Int = 0) -> JSONValue {
        let s = dereference(schema)
        if let shape = objectShape(s) {
            var object: [String: JSONValue] = [:]
            for (name, property) in shape.properties { object[name] = sample(property, depth: depth + 1) }
            if object.isEmpty, let additional = shape.additional, additional != .bool(false) {
                object["key"] = additional == .bool(true) ? .string("x") : sample(additional, depth: depth + 1)
            }
            return .object(object)
        }
        if let first = s["enum"]?.array?.first { return first }
        switch s["type"]?.string {
        case "array": return .array(depth > 8 ? [] : s["items"].map { [sample($0, depth: depth + 1)] } ?? [])
        case "integer": return s["minimum"] ?? .int(1)
        case "number": return .double(1.5)
        case "boolean": return .bool(true)
        case "string":
            if s["pattern"]?.string == "^[0-9]{6}$" { return .string("000001") }
            if s["pattern"]?.string == "^[0-9]{4,12}$" { return .string("1234") }
            if s["pattern"]?.string == "^[A-Za-z0-9]{2}$" { return .string("51") }
            return .string("x")
        default: return .null
        }
    }
}

// MARK: - The Swift types behind the schemas

/// Decodes a value of the bound Swift type, and gives its stored property names and its JSON.
struct SchemaBinding: Sendable {
    let type: String
    let roundTrip: @Sendable (Data) throws -> (properties: [String], encoded: Data)

    static func of<T: Codable & Sendable>(_ type: T.Type) -> SchemaBinding {
        SchemaBinding(type: "\(T.self)") { data in
            let value = try JSONDecoder().decode(T.self, from: data)
            return (Mirror(reflecting: value).children.compactMap(\.label), try apiEncoder().encode(value))
        }
    }
}

/// The API's own encoder settings (`json(_:status:)`).
func apiEncoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}

func apiJSON<T: Encodable>(_ value: T) throws -> JSONValue { try JSONValue.parse(try apiEncoder().encode(value)) }

let schemaBindings: [String: SchemaBinding] = [
    "ErrorBody": .of(ErrorBody.self),
    "HealthView": .of(HealthView.self),
    "OpenRequest": .of(OpenRequest.self),
    "OpenResult": .of(OpenResult.self),
    "OpenResultField": .of(OpenResult.Field.self),
    "TransactionView": .of(TransactionView.self),
    "TraceView": .of(TraceView.self),
    "HostMessageView": .of(HostMessageView.self),
    "DescribedField": .of(DescribedField.self),
    "DescribedTag": .of(DescribedTag.self),
    "ISO8583View": .of(ISO8583View.self),
    "ISO8583EchoBody": .of(ISO8583EchoBody.self),
    "ISO8583EchoView": .of(ISO8583EchoView.self),
    "ODAReport": .of(ODAReport.self),
    "EntryReport": .of(EntryReport.self),
    "OutboxView": .of(OutboxView.self),
    "NotificationView": .of(NotificationView.self),
    "AttemptView": .of(AttemptView.self),
    "ResendView": .of(ResendView.self),
    "CaptureBody": .of(CaptureBody.self),
    "CaptureView": .of(CaptureView.self),
    "RecordedScenario": .of(RecordedScenario.self),
    "PromptRecord": .of(PromptRecord.self),
    "RecordedCard": .of(RecordedCard.self),
    "TerminalView": .of(TerminalView.self),
    "ReaderView": .of(ReaderView.self),
    "KeypadBody": .of(KeypadBody.self),
    "HostOutcomeBody": .of(HostOutcomeBody.self),
    "ClockView": .of(ClockView.self),
    "ClockBody": .of(ClockBody.self),
    "TerminalBody": .of(TerminalBody.self),
    "DaemonEvent": .of(DaemonEvent.self),
    "BillpocketUserBody": .of(BillpocketUserBody.self),
    "BillpocketUserView": .of(BillpocketUserView.self),
    "DeviceTokenBody": .of(DeviceTokenBody.self),
    "DeviceTokenView": .of(DeviceTokenView.self),
    "CardBody": .of(CardBody.self),
    "AccountBody": .of(AccountBody.self),
    "WorldlineAPIKeyBody": .of(WorldlineAPIKeyBody.self),
    "WorldlineAPIKeyView": .of(WorldlineAPIKeyView.self),
    "WorldlineWebhookBody": .of(WorldlineWebhookBody.self),
    "WorldlineWebhookView": .of(WorldlineWebhookView.self),
    "WorldlineChallengeBody": .of(WorldlineChallengeBody.self),
    "WorldlineRequestBody": .of(WorldlineRequestBody.self),
    "WorldlineCheckoutPageBody": .of(WorldlineCheckoutPageBody.self),
    "WorldlineWalletDataBody": .of(WorldlineWalletDataBody.self),
    "WorldlineRedirectBody": .of(WorldlineRedirectBody.self),
    "CitconChargebackBody": .of(CitconChargebackBody.self),
    "WorldlineWalletDataView": .of(WorldlineWalletDataView.self),
    "WorldlineWalletDataDecrypted": .of(WorldlineWalletDataView.Decrypted.self),
    "CitconMerchantBody": .of(CitconMerchantBody.self),
    "CitconMerchantView": .of(CitconMerchantView.self),
    "CitconAnswerBody": .of(CitconAnswerBody.self),
    "CitconRequestBody": .of(CitconRequestBody.self),
    "DecodedTrace": .of(DecodedTrace.self),
    "DecodedStep": .of(DecodedStep.self),
    "TLVNode": .of(TLVJSON.self),
    "ExplainedBits": .of(ExplainedBits.self),
    "CryptogramSummary": .of(CryptogramSummary.self),
    "CardProfileView": .of(CardProfileView.self),
    "AccountView": .of(AccountView.self),
    "CardSlotView": .of(CardSlotView.self),
    "HostView": .of(HostView.self),
    "ScenarioListView": .of(ScenarioListView.self),
    "ScenarioFolder": .of(ScenarioListView.Folder.self),
    "ScenarioRunBody": .of(ScenarioRunBody.self),
    "ScenarioRunView": .of(ScenarioRunView.self),
    "ScenarioRunResult": .of(ScenarioRunView.Result.self),
]

/// Bodies the routes write as dictionary literals (`json(["result": …])`): checked against a
/// running daemon in `liveReplies`.
let literalSchemas: Set<String> = ["PendingRequest", "KeypadResult", "AbortResult", "ActionResult", "AccountResult"]

// MARK: - Tests

@Suite("OpenAPI document")
struct OpenAPITests {
    let document: OpenAPIDocument

    init() throws { document = try OpenAPIDocument.load() }

    /// `routes.get("/v1/terminals/:name")` (or `admin.get`, the admin routes' group) →
    /// "GET /v1/terminals/{name}", from the route collections' text.
    static func routesInSource() throws -> Set<String> {
        let source = try ["API/Routes.swift", "API/CardRoutes.swift", "API/ScenarioRuns.swift", "API/ConsoleRoutes.swift", "API/NotificationRoutes.swift", "BillpocketAPI.swift",
                          "Worldline/WorldlineAdmin.swift", "Citcon/CitconAdmin.swift"].map {
            try String(contentsOf: Locations.file("Sources/Daemon/\($0)"), encoding: .utf8)
        }.joined(separator: "\n")
        var routes = Set<String>()
        for match in source.matches(of: #/(?:routes|admin)\.(get|post|put|patch|delete|head|on)\(\s*"([^"]*)"/#) {
            let path = String(match.output.2).replacing(#/:([A-Za-z_][A-Za-z0-9_]*)/#) { "{\($0.output.1)}" }
            routes.insert("\(match.output.1.uppercased()) \(path)")
        }
        return routes
    }

    @Test("the document describes exactly the routes the route collections register")
    func routes() throws {
        let source = try Self.routesInSource()
        #expect(source.count >= 17, "the route pattern found only \(source.sorted())")
        let missing = source.subtracting(document.operations)
        #expect(missing.isEmpty, "in the routes, not in the document: \(missing.sorted())")
        let extra = document.operations.subtracting(source)
        #expect(extra.isEmpty, "in the document, not in the routes: \(extra.sorted())")
    }

    @Test("every schema is bound to a Swift type or to a dictionary literal checked live")
    func everySchemaIsChecked() {
        let documented = Set(document.schemas.keys)
        let checked = Set(schemaBindings.keys).union(literalSchemas)
        #expect(documented == checked, "unchecked: \(documented.subtracting(checked).sorted()), missing: \(checked.subtracting(documented).sorted())")
        // The Mirror check below needs JSON keys to be property names: no custom CodingKeys.
        let source = (try? String(contentsOf: Locations.file("Sources/Daemon/API/Views.swift"), encoding: .utf8)) ?? ""
        #expect(source.contains("TransactionView") && !source.contains("CodingKeys"))
    }

    @Test("each schema's properties are exactly the Swift type's, and a full sample round-trips", arguments: schemaBindings.keys.sorted())
    func schemaMatchesType(_ name: String) throws {
        let schema = try #require(document.schemas[name])
        let binding = try #require(schemaBindings[name])
        let shape = try #require(document.objectShape(schema))
        let sample = document.sample(schema)
        let (properties, encoded) = try binding.roundTrip(try apiEncoder().encode(sample))
        // Every stored property of the type is documented, and nothing more.
        #expect(Set(properties) == Set(shape.properties.keys),
                "\(binding.type): undocumented \(Set(properties).subtracting(shape.properties.keys).sorted()), not in the type \(Set(shape.properties.keys).subtracting(properties).sorted())")
        // Decoding the documented shape and encoding it again gives it back: names and types agree.
        let again = try JSONValue.parse(encoded)
        #expect(again == sample, "\(binding.type): \(sample) came back as \(again)")
        // A required property is one the type always encodes: a non-optional one. Decoding the
        // sample without it must fail, and without any optional one must not.
        for property in shape.properties.keys.sorted() {
            guard case .object(var partial) = sample else { continue }
            partial[property] = nil
            let decodes = (try? binding.roundTrip(try apiEncoder().encode(JSONValue.object(partial)))) != nil
            #expect(decodes != shape.required.contains(property),
                    "\(binding.type).\(property): \(shape.required.contains(property) ? "required in the document but optional in Swift" : "optional in the document but required in Swift")")
        }
    }

    @Test("a transaction from a real ledger, with trace and callbacks, encodes as the schema says")
    func transactionFromLedger() throws {
        let directory = try TemporaryDirectory()
        let ledger = try Ledger.openFile(directory.url.appendingPathComponent("ledger.sqlite").path)
        _ = try ledger.ensureTerminal(name: "bench1", tid: "10000001")
        let now: Int64 = 1_767_225_600_000_000
        let sale = try ledger.begin(NewTransaction(terminal: "bench1", provider: .viva, action: .sale, amount: 1200, tipAmount: 200,
                                                   currency: 978, clientReference: "order-1", installments: 3, createdAt: now))
        var completion = Completion(status: .approved, responseCode: "00", message: "Approved", authorisationCode: "123456",
                                    maskedPAN: "476173******0010", pan: "4761739001010010", brand: "Visa", aid: "A0000000031010",
                                    applicationLabel: "VISA CREDIT", cardholderName: "TEST/CARD", arqc: "29CCA15AE665FA2E",
                                    atc: "001C", tvr: "0000008000", cvm: "online PIN", entryMode: .chip, completedAt: now + 1_500_000)
        completion.installments = 3
        completion.oda = #"{"caIndex":"B0","method":"dda","result":"passed","rid":"A000000003","dynamicNumber":"0102030405060708"}"#
        completion.cardEntry = #"{"interface":"contactless","posEntryMode":"07","kernel":3,"path":["tap: kernel 3, online request, approved 00"],"outcome":"online request","ttq":"36C04080","ctq":"8000","cvm":"online PIN","limits":{"aid":"A000000003","transactionLimit":2000000,"floorLimit":5000,"cvmRequiredLimit":40000,"floorLimitExceeded":true,"cvmRequired":true}}"#
        let stored = try ledger.complete(id: sale.id, completion,
                                         trace: [TraceEntry(command: "00A404000E315041592E5359532E444446303100", response: "9000")],
                                         outbox: [OutboxMessage(kind: .callback, target: "pos://result",
                                                                payload: "pos://result?status=success&message=Transaction%20successful")])
        let cancel = try ledger.begin(NewTransaction(terminal: "bench1", provider: .viva, action: .cancel, amount: 1200, currency: 978,
                                                     clientReference: "order-1", originalID: stored.id, createdAt: now + 2_000_000))
        let cancelled = try ledger.complete(id: cancel.id, Completion(status: .approved, responseCode: "00", completedAt: now + 2_000_000))

        var view = TransactionView(stored)
        view.trace = try ledger.trace(transactionID: stored.id).map(TraceView.init)
        view.callbacks = try ledger.outbox(transactionID: stored.id).map(OutboxView.init)
        view.decoded = DecodedTrace(stored, trace: try ledger.trace(transactionID: stored.id))
        var echo = ISOMessage(mti: "0810")
        echo[39] = "00"
        echo.fields[55] = .bytes([0x91, 0x02, 0xAA, 0xBB])
        view.hostMessages = [HostMessageView(HostMessageEntry(direction: .incoming, mti: "0810",
                                                              fields: ISO8583UpstreamSession.json(echo.described(direction: "in", packager: .pyiso8583Default).fields)))]
        let detailSchema = try #require(document.responseSchema("GET", "/v1/transactions/{id}", status: 200))
        let detail = try apiJSON(view)
        let detailProblems = document.problems(detail, detailSchema)
        #expect(detailProblems.isEmpty, "\(detailProblems)")
        // Filled in every way it can be: each property but none of the optional ones left out.
        let transactionSchema = try #require(document.schemas["TransactionView"])
        let declared = try #require(document.objectShape(transactionSchema)).properties.keys
        #expect(Set(detail.object?.keys.map { $0 } ?? []) == Set(declared).subtracting(["originalId"]))
        #expect(detail["trace"]?.array?.first?["name"] == .string("SELECT"))

        let listSchema = try #require(document.responseSchema("GET", "/v1/transactions", status: 200))
        let list = try apiJSON([TransactionView(cancelled), TransactionView(stored)])
        let listProblems = document.problems(list, listSchema)
        #expect(listProblems.isEmpty, "\(listProblems)")
        #expect(list.array?.first?["originalId"] == .int(stored.id))
        // The list leaves trace and callbacks out; the detail route requires them.
        #expect(list.array?.first?["trace"] == nil)
        let withoutTrace = document.problems(list.array![1], detailSchema)
        #expect(withoutTrace == ["$.callbacks: required but absent", "$.trace: required but absent"])
    }

    @Test("views of a real bench (health, clock, terminals, readers, results, events, errors) encode as the schemas say")
    func benchViews() throws {
        let directory = try TemporaryDirectory()
        var configuration = DaemonConfiguration()
        configuration.stateDirectory = directory.url.appendingPathComponent("state").path
        configuration.runtimeDirectory = directory.url.appendingPathComponent("run").path
        configuration.cardProfiles = [Locations.file("Scenarios/cards").path]
        configuration.manualClock = true
        var second = TerminalSettings(name: "bench2", tid: "10000002", reader: .virtual(name: "bench2"))
        second.readerTCPPort = 0
        configuration.terminals.append(second)
        let bench = try Bench(configuration: configuration)
        _ = try bench.ledger.begin(NewTransaction(terminal: "bench1", provider: .viva, action: .sale, amount: 100, currency: 978,
                                                  createdAt: bench.clock.nowMicroseconds()))

        func check<T: Encodable>(_ value: T, _ method: String, _ path: String, status: Int = 200) throws {
            let schema = try #require(document.responseSchema(method, path, status: status), "\(method) \(path) \(status)")
            let json = try apiJSON(value)
            let problems = document.problems(json, schema)
            #expect(problems.isEmpty, "\(method) \(path): \(problems) in \(json)")
        }
        try check(HealthView(status: "ok", terminals: bench.terminals.count, clock: "manual", now: bench.clock.nowMicroseconds(),
                             recovered: bench.recovered.count), "GET", "/v1/health")
        try check(ClockView(bench), "GET", "/v1/clock")
        try check(ClockView(bench), "POST", "/v1/clock")
        let terminals = try bench.terminals.map { try TerminalView($0, bench) }
        try check(terminals, "GET", "/v1/terminals")
        try check(terminals[0], "GET", "/v1/terminals/{name}")
        #expect(terminals[0].lastSTAN == "000001")
        try check(bench.terminals.map(ReaderView.init), "GET", "/v1/readers")
        try check([HostOutcomeBody(.respond(ResponseCode("51"))), HostOutcomeBody(.unavailable), HostOutcomeBody(.delay(milliseconds: 1500))],
                  "GET", "/v1/terminals/{name}/host-queue")
        let result = OpenResult(callback: "pos://r?status=failed&message=Aborted", fields: [.init(name: "status", value: "failed")],
                                status: "failed", message: "Aborted", transaction: nil)
        try check(result, "POST", "/v1/open")
        try check(result, "GET", "/v1/requests/{id}")
        for status in [400, 404, 409, 413, 500] {
            try check(ErrorBody(error: "limit: must be a whole number from 1 to 1000", field: "limit", rule: "must be a whole number from 1 to 1000"),
                      "POST", "/v1/open", status: status)
        }
        try check(ErrorBody(error: "the clock is the system clock", field: nil, rule: nil), "POST", "/v1/clock", status: 409)
        let eventSchema = try #require(document.schemas["DaemonEvent"])
        for event in [DaemonEvent(type: "prompt", terminal: "bench1", at: 1, data: ["prompt": "PIN", "triesLeft": "3"]),
                      DaemonEvent(type: "clock", terminal: nil, at: 1, data: ["now": "1"])] {
            let problems = document.problems(try apiJSON(event), eventSchema)
            #expect(problems.isEmpty, "\(problems)")
        }
    }

    @Test("every event the bench publishes (BenchEvent.Name, and the scenario runs' two) is documented, and only those")
    func eventTypes() throws {
        let published = Set(BenchEvent.Name.allCases.map(\.rawValue) + ScenarioRuns.eventNames)
        let documented = Set(document.schemas["DaemonEvent"]?["properties"]?["type"]?["enum"]?.array?.compactMap(\.string) ?? [])
        #expect(published.count >= 9, "\(published.sorted())")
        #expect(published == documented, "published only: \(published.subtracting(documented).sorted()); documented only: \(documented.subtracting(published).sorted())")
        let description = document.paths["/v1/events"]?["get"]?["description"]?.string ?? ""
        for type in published { #expect(description.contains("`\(type)`"), "GET /v1/events does not describe \(type)") }
    }

    @Test("the document is structurally valid OpenAPI 3.1")
    func structure() throws {
        let root = document.root
        let version = try #require(root["openapi"]?.string)
        #expect(version.wholeMatch(of: #/3\.1\.\d+/#) != nil, "openapi: \(version)")
        #expect(root["info"]?["title"]?.string?.isEmpty == false)
        #expect(root["info"]?["version"]?.string?.isEmpty == false)
        let pathCount = document.paths.count
        #expect(pathCount > 0)

        // Every $ref resolves.
        func references(_ node: JSONValue, _ at: String) -> [(String, String)] {
            switch node {
            case .object(let o):
                return o.flatMap { key, value -> [(String, String)] in
                    if key == "$ref", case .string(let r) = value { return [(at, r)] }
                    return references(value, "\(at)/\(key)")
                }
            case .array(let a): return a.enumerated().flatMap { references($0.element, "\(at)/\($0.offset)") }
            default: return []
            }
        }
        let refs = references(root, "#")
        #expect(refs.count > 20)
        let unresolved = refs.filter { document.resolve($0.1) == nil }.map { "\($0.0): \($0.1)" }
        #expect(unresolved.isEmpty, "$refs that do not resolve: \(unresolved)")

        var operationIds = Set<String>()
        for (path, item) in document.paths {
            #expect(path.hasPrefix("/"), "\(path)")
            let templated = Set(path.matches(of: #/\{([^}]+)\}/#).map { String($0.output.1) })
            let shared = item["parameters"]?.array ?? []
            for method in OpenAPIDocument.methods {
                guard let operation = item[method] else { continue }
                let where_ = "\(method.uppercased()) \(path)"
                if let id = operation["operationId"]?.string { #expect(operationIds.insert(id).inserted, "\(where_): operationId \(id) twice") }
                // Path templates and path parameters agree.
                let parameters = (shared + (operation["parameters"]?.array ?? [])).map(document.dereference)
                let inPath = Set(parameters.filter { $0["in"]?.string == "path" }.compactMap { $0["name"]?.string })
                #expect(inPath == templated, "\(where_): path parameters \(inPath.sorted()) vs template \(templated.sorted())")
                for p in parameters {
                    #expect(p["name"]?.string != nil && p["in"]?.string != nil && p["schema"] != nil, "\(where_): parameter \(p)")
                    if p["in"]?.string == "path" { #expect(p["required"] == .bool(true), "\(where_): path parameters are required") }
                }
                if let body = operation["requestBody"].map(document.dereference) {
                    #expect(body["content"]?.object?.isEmpty == false, "\(where_): requestBody without content")
                }
                // Responses: status codes as strings, each with a description.
                let responses = try #require(operation["responses"]?.object, "\(where_): no responses")
                #expect(!responses.isEmpty)
                for (status, response) in responses {
                    #expect(status.wholeMatch(of: #/[1-5][0-9][0-9]|[1-5]XX|default/#) != nil, "\(where_): response key \(status)")
                    let description = document.dereference(response)["description"]?.string
                    #expect(description != nil, "\(where_) \(status): no description")
                    for (media, content) in document.dereference(response)["content"]?.object ?? [:] {
                        #expect(content["schema"] != nil, "\(where_) \(status) \(media): no schema")
                    }
                }
            }
        }
        // Schemas are objects with properties, and every required property is declared.
        for (name, schema) in document.schemas {
            let shape = try #require(document.objectShape(schema), "\(name) is not an object schema")
            #expect(shape.required.isSubset(of: Set(shape.properties.keys)), "\(name): required but not declared: \(shape.required.subtracting(shape.properties.keys).sorted())")
        }
    }
}

// MARK: - Against a running daemon

@Suite("OpenAPI document against cardbenchd", .serialized)
struct OpenAPILiveTests {
    @Test("a running daemon's replies on every route match the document")
    func liveReplies() throws {
        let document = try OpenAPIDocument.load()
        let daemon = try DaemonUnderTest.ready()

        /// Calls a route and checks the reply's status and JSON against the document.
        @discardableResult
        func call(_ method: String, _ target: String, _ documented: String? = nil, body: String? = nil, expect status: Int) throws -> JSONValue? {
            let path = documented ?? String(target.split(separator: "?").first ?? "")
            let reply = try daemon.http(method, target, body: body)
            #expect(reply.status == status, "\(method) \(target): \(reply.status) \(reply.text)")
            guard reply.status == status else { return nil }
            guard let schema = document.responseSchema(method, path, status: status) else {
                Issue.record("\(method) \(path): the document has no JSON response for \(status)")
                return nil
            }
            #expect(reply.headers["content-type"] == "application/json", "\(method) \(target)")
            let json = try JSONValue.parse(reply.body)
            let problems = document.problems(json, schema)
            #expect(problems.isEmpty, "\(method) \(target) \(status): \(problems) in \(json)")
            return json
        }

        try call("GET", "/v1/health", expect: 200)
        try call("GET", "/v1/clock", expect: 200)
        try call("GET", "/v1/terminals", expect: 200)
        try call("GET", "/v1/terminals/bench1", "/v1/terminals/{name}", expect: 200)
        try call("GET", "/v1/readers", expect: 200)
        try call("GET", "/v1/transactions", expect: 200)
        try call("GET", "/v1/transactions?terminal=bench1&limit=5&before=100", expect: 200)

        // Errors: ErrorBody with the documented status.
        let badLimit = try call("GET", "/v1/transactions?limit=0", expect: 400)
        #expect(badLimit?["field"] == .string("limit"))
        try call("GET", "/v1/transactions?terminal=nope", expect: 404)
        try call("GET", "/v1/transactions?provider=viva&status=approved&from=2026-01-01&to=2026-12-31T00:00:00Z", expect: 200)
        let badStatus = try call("GET", "/v1/transactions?status=ok", expect: 400)
        #expect(badStatus?["field"] == .string("status"))

        // The console's data: profiles, the card slot, the host, scenarios (none configured here).
        let cards = try call("GET", "/v1/cards", expect: 200)
        #expect((cards?.array?.count ?? 0) > 10)
        try call("GET", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card", expect: 200)
        try call("GET", "/v1/terminals/nope/card", "/v1/terminals/{name}/card", expect: 404)
        try call("GET", "/v1/host", expect: 200)
        try call("GET", "/v1/scenarios", expect: 200)
        try call("GET", "/v1/scenario-runs", expect: 200)
        try call("POST", "/v1/scenario-runs", body: #"{"path": "."}"#, expect: 409)
        try call("GET", "/v1/scenario-runs/nope", "/v1/scenario-runs/{id}", expect: 404)
        try call("GET", "/v1/scenario-runs/nope/junit", "/v1/scenario-runs/{id}/junit", expect: 404)
        let page = try daemon.http("GET", "/console/")
        #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
        let module = try daemon.http("GET", "/console/console.js")
        #expect(module.status == 200 && module.headers["content-type"] == "text/javascript; charset=utf-8")
        try call("GET", "/console/nope.css", "/console/{file}", expect: 404)
        try call("GET", "/v1/transactions/999", "/v1/transactions/{id}", expect: 404)
        try call("GET", "/v1/terminals/nope", "/v1/terminals/{name}", expect: 404)
        try call("GET", "/v1/requests/nope", "/v1/requests/{id}", expect: 404)
        try call("POST", "/v1/clock", body: #"{"advanceSeconds": 5}"#, expect: 409)
        let billpocket = try call("POST", "/v1/open", body: #"{"url": "billpocket://transaction=venta&amount=1.00"}"#, expect: 400)
        #expect(billpocket?["field"] == .string("urlScheme"), "no urlScheme: nobody to call back")
        let otherScheme = try call("POST", "/v1/open", body: #"{"url": "otherapp://pay?x=1"}"#, expect: 400)
        #expect(otherScheme?["field"] == .string("url"))

        // Billpocket users, device tokens, a sale's voucher.
        let user = try call("POST", "/v1/billpocket/users", body: #"{"name": "Live", "msi": {"3": 30000}}"#, expect: 201)
        let token = try #require(user?["token"]?.string)
        guard case .int(let userID)? = user?["id"] else { Issue.record("no user id in \(String(describing: user))"); return }
        try call("GET", "/v1/billpocket/users", expect: 200)
        try call("POST", "/v1/billpocket/users", body: #"{"name": ""}"#, expect: 400)
        try call("POST", "/v1/billpocket/users", body: #"{"name": "x", "msi": {"4": 1}}"#, expect: 400)
        try call("POST", "/v1/billpocket/device-tokens", body: #"{"user": \#(userID), "alias": "caja"}"#, expect: 201)
        try call("POST", "/v1/billpocket/device-tokens", body: #"{"user": 999}"#, expect: 404)
        try call("GET", "/v1/billpocket/device-tokens?user=\(userID)", "/v1/billpocket/device-tokens", expect: 200)
        try call("POST", "/v1/billpocket/users/\(userID)/invalidate", "/v1/billpocket/users/{id}/invalidate", expect: 200)
        try call("POST", "/v1/billpocket/users/\(userID)/invalidate", "/v1/billpocket/users/{id}/invalidate", expect: 400)
        let rotated = try call("POST", "/v1/billpocket/users/\(userID)/rotate", "/v1/billpocket/users/{id}/rotate", expect: 200)
        #expect(rotated?["token"]?.string != token)
        #expect(rotated?["state"] == .string("active"))
        try call("POST", "/v1/billpocket/users/999/rotate", "/v1/billpocket/users/{id}/rotate", expect: 404)
        try call("GET", "/v1/vouchers/nope", "/v1/vouchers/{id}", expect: 404)

        // Daemon-held cards, terminal reset, issuer accounts.
        let profile = "visa-credit-cvn10"
        let account = try call("POST", "/v1/host/accounts", body: #"{"profile": "\#(profile)"}"#, expect: 201)
        #expect(account?["account"] == .string("476173******0010"))
        let inline = try String(contentsOf: repositoryRoot.appendingPathComponent("Scenarios/cards/visa-credit-cvn10.yaml"), encoding: .utf8)
        let inlineBody = String(decoding: try JSONEncoder().encode(["profileYAML": inline]), as: UTF8.self)
        #expect(try call("POST", "/v1/host/accounts", body: inlineBody, expect: 201)?["account"] == .string("476173******0010"))
        try call("POST", "/v1/host/accounts", body: #"{"profile": "/nonexistent.yaml"}"#, expect: 400)
        let inserted = try call("POST", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card",
                                body: #"{"profile": "\#(profile)", "removeAfter": "GENERATE AC#2", "pinTries": 3}"#, expect: 201)
        #expect(inserted?["result"] == .string("inserted"))
        try call("POST", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card", body: #"{"profile": "\#(profile)"}"#, expect: 409)
        let badPoint = try call("POST", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card",
                                body: #"{"profile": "\#(profile)", "removeAfter": "DANCE"}"#, expect: 400)
        #expect(badPoint?["field"] == .string("removeAfter"))
        let removed = try call("DELETE", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card", expect: 200)
        #expect(removed?["result"] == .string("removed"))
        #expect(try call("DELETE", "/v1/terminals/bench1/card", "/v1/terminals/{name}/card", expect: 200)?["result"] == .string("none"))
        #expect(try call("POST", "/v1/terminals/bench1/reset", "/v1/terminals/{name}/reset", expect: 200)?["result"] == .string("reset"))
        let oversize = try call("POST", "/v1/open", body: #"{"url": ""# + String(repeating: "x", count: 1_100_000) + #""}"#, expect: 413)
        #expect(oversize?["error"] == .string("the request body is over 1 MiB"))
        let notJSON = try call("POST", "/v1/open", body: "not json", expect: 400)
        #expect(notJSON?["field"] == .string("body"))
        let noURL = try call("POST", "/v1/open", body: "{}", expect: 400)
        #expect(noURL?["field"] == .string("url"))
        // A rule broken after the callback is read is answered with the app's failure callback.
        let refused = try call("POST", "/v1/open", body: #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=-5"}"#, expect: 200)
        #expect(refused?["status"] == .string("failed"))

        // Host queue: add, list, clear.
        try call("POST", "/v1/terminals/bench1/host-queue", "/v1/terminals/{name}/host-queue", body: #"{"code": "51"}"#, expect: 201)
        try call("POST", "/v1/terminals/bench1/host-queue", "/v1/terminals/{name}/host-queue", body: #"{"delayMs": 10}"#, expect: 201)
        let queue = try call("GET", "/v1/terminals/bench1/host-queue", "/v1/terminals/{name}/host-queue", expect: 200)
        #expect(queue?.array?.count == 2)
        let badCode = try call("POST", "/v1/terminals/bench1/host-queue", "/v1/terminals/{name}/host-queue", body: #"{"code": "5"}"#, expect: 400)
        #expect(badCode?["field"] == .string("code"))
        let cleared = try call("DELETE", "/v1/terminals/bench1/host-queue", "/v1/terminals/{name}/host-queue", expect: 200)
        #expect(cleared?.array?.count == 2)
        try call("GET", "/v1/terminals/nope/host-queue", "/v1/terminals/{name}/host-queue", expect: 404)

        // Events: subscribe, queue a PIN, see keypad-queued.
        let events = try UnixConnection(daemon.controlSocket)
        try events.send(UnixConnection.request("GET", "/v1/events?terminal=bench1", body: nil))
        let subscribed = try events.read(until: { String(decoding: $0, as: UTF8.self).contains(": subscribed\n\n") }, timeout: .seconds(10))
        #expect(subscribed, "no subscription comment: \(String(decoding: events.received, as: UTF8.self))")
        let head = String(decoding: events.received, as: UTF8.self)
        #expect(head.lowercased().contains("content-type: text/event-stream"), "\(head)")
        let keypad = try call("POST", "/v1/terminals/bench1/keypad", "/v1/terminals/{name}/keypad", body: #"{"pin": "1234"}"#, expect: 200)
        #expect(keypad?["result"] == .string("queued"))
        try call("POST", "/v1/terminals/bench1/keypad", "/v1/terminals/{name}/keypad", body: #"{"pin": "12"}"#, expect: 400)
        try call("POST", "/v1/terminals/bench1/keypad", "/v1/terminals/{name}/keypad", body: #"{"pin": "1234", "cancel": true}"#, expect: 400)
        let gotEvent = try events.read(until: { data in
            let text = String(decoding: data, as: UTF8.self)
            guard let start = text.range(of: "event: ") else { return false }
            return text[start.lowerBound...].contains("\n\n")
        }, timeout: .seconds(10))
        #expect(gotEvent)
        let stream = String(decoding: events.received, as: UTF8.self)
        if let start = stream.range(of: "event: ") {
            let message = stream[start.lowerBound...].components(separatedBy: "\n\n")[0].split(separator: "\n")
            #expect(message.first == "event: keypad-queued", "\(message)")
            let data = try #require(message.first { $0.hasPrefix("data: ") }).dropFirst("data: ".count)
            let event = try JSONValue.parse(Data(data.utf8))
            let problems = document.problems(event, try #require(document.schemas["DaemonEvent"]))
            #expect(problems.isEmpty, "\(problems) in \(event)")
            #expect(event["type"] == .string("keypad-queued"))
            #expect(event["data"]?["input"] == .string("PIN (4 digits)"))
        }

        // A sale without waiting: 202, still pending, busy terminal, aborted, then its result.
        let pending = try call("POST", "/v1/open",
                               body: #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=1200&clientTransactionId=live-1", "wait": false}"#,
                               expect: 202)
        let id = try #require(pending?["id"]?.string)
        #expect(pending?["status"] == .string("pending"))
        // wait=false answers 202 at once while the sale waits for its card.
        let peek = try unixHTTP(daemon.controlSocket, "GET", "/v1/requests/\(id)?wait=false", timeout: .seconds(2))
        #expect(peek.status == 202)
        let peekProblems = document.problems(try JSONValue.parse(peek.body), try #require(document.responseSchema("GET", "/v1/requests/{id}", status: 202)))
        #expect(peekProblems.isEmpty, "\(peekProblems)")
        var busy: JSONValue?
        for _ in 0..<100 {
            busy = try call("GET", "/v1/terminals/bench1", "/v1/terminals/{name}", expect: 200)
            if busy?["activity"] != nil { break }
            usleep(20_000)
        }
        #expect(busy?["activity"] == .string("sale of 1200"), "\(String(describing: busy))")
        let second = try call("POST", "/v1/open", body: #"{"url": "vivapayclient://pay/v1?callback=pos://r&action=sale&amount=100", "terminal": "bench1"}"#,
                              expect: 409)
        #expect(second?["error"]?.string?.contains("busy") == true)
        let abort = try call("POST", "/v1/terminals/bench1/abort", "/v1/terminals/{name}/abort", expect: 200)
        #expect(abort?["result"] == .string("aborting"))
        let result = try call("GET", "/v1/requests/\(id)", "/v1/requests/{id}", expect: 200)
        #expect(result?["status"] == .string("failed"))
        let transactionId = try #require(result?["transaction"]?["transactionId"]?.string)
        let idle = try call("POST", "/v1/terminals/bench1/abort", "/v1/terminals/{name}/abort", expect: 200)
        #expect(idle?["result"] == .string("idle"))

        let decoded = try call("GET", "/v1/transactions/\(transactionId)?decode=true", "/v1/transactions/{id}", expect: 200)
        #expect(decoded?["decoded"]?["steps"]?.array != nil, "an aborted sale read no card: no steps, but the field")
        let detail = try call("GET", "/v1/transactions/\(transactionId.uppercased())", "/v1/transactions/{id}", expect: 200)
        #expect(detail?["callbacks"]?.array?.count == 1)
        if case .int(let rowID)? = detail?["id"] {
            try call("GET", "/v1/transactions/\(rowID)", "/v1/transactions/{id}", expect: 200)
        }
        let list = try call("GET", "/v1/transactions?terminal=bench1", expect: 200)
        #expect(list?.array?.first?["transactionId"] == .string(transactionId))

        // Metrics: the Prometheus text.
        let metrics = try daemon.http("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        #expect(metrics.text.contains("cardbench_api_requests_total"), "\(metrics.text)")

        // A route the router does not know: 404 with an ErrorBody naming it.
        let unknown = try daemon.http("GET", "/v1/nope")
        #expect(unknown.status == 404)
        #expect((try? unknown.json() as? [String: Any])?["error"] as? String == #"no route GET "/v1/nope" (docs/openapi.yaml lists them)"#, "\(unknown.text)")

        // Stopping with an event stream open: the stream ends and the daemon still exits 0.
        let (stopping, exited) = daemon.stop()
        #expect(stopping && exited, "log:\n\(daemon.log)")
        #expect(daemon.process.terminationStatus == 0)
        try events.read(until: { _ in false }, timeout: .seconds(5))
        #expect(events.closedByPeer)
    }
}
