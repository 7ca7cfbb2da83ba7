import EMV
import Foundation
import Hummingbird
import Ledger
import NIOCore
import Terminal
import Workflows

/// An API error: the HTTP status it maps to and a message naming the field and rule.
public enum DaemonError: Error, Sendable, Equatable, CustomStringConvertible {
    case badRequest(field: String, rule: String)
    case notFound(String)
    /// The terminal is busy, or the keypad is asking for something else.
    case conflict(String)
    /// A request body over the API's limit.
    case payloadTooLarge(String)
    /// A transaction whose outcome the ledger refused: taken back at the host and recorded as
    /// failed; the request gets this instead of a callback.
    case unrecordable(String)
    /// The request's body is not JSON (`Content-Type`).
    case unsupportedMediaType(String)
    /// A request from somewhere the listener does not let in (another site, a bad token).
    case forbidden(String)
    case unauthorized(String)
    case failure(String)

    /// The HTTP status code it answers with.
    public var statusCode: Int {
        switch self {
        case .badRequest: 400
        case .notFound: 404
        case .conflict: 409
        case .payloadTooLarge: 413
        case .unrecordable: 422
        case .unsupportedMediaType: 415
        case .forbidden: 403
        case .unauthorized: 401
        case .failure: 500
        }
    }

    public var description: String {
        switch self {
        case .badRequest(let field, let rule): "\(field): \(rule)"
        case .notFound(let what), .conflict(let what), .payloadTooLarge(let what), .failure(let what), .unrecordable(let what),
             .unsupportedMediaType(let what), .forbidden(let what), .unauthorized(let what): what
        }
    }
}

extension DaemonError {
    /// A workflow's refusal as the API answers it.
    public init(_ error: WorkflowError) {
        switch error {
        case .badRequest(let field, let rule): self = .badRequest(field: field, rule: rule)
        case .notFound(let what): self = .notFound(what)
        case .conflict(let what): self = .conflict(what)
        case .unrecordable(let what): self = .unrecordable(what)
        case .failure(let what): self = .failure(what)
        }
    }

    /// A ledger failure as the API answers it: a value that broke one of the ledger's rules is the
    /// request's fault (400, naming the field), anything else the daemon's (500) — the workflows'
    /// rule (`WorkflowError(ledger:)`).
    init(ledger error: any Error, _ doing: String) {
        if let error = error as? DaemonError { self = error } else { self.init(WorkflowError(ledger: error, doing)) }
    }
}

extension DaemonError: HTTPResponseError {
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: statusCode) }

    /// The JSON body every refusal has.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var field: String? = nil, rule: String? = nil
        if case .badRequest(let f, let r) = self { field = f; rule = r }
        return json(ErrorBody(error: description, field: field, rule: rule), status: status)
    }

    /// Whatever a handler threw, as the client is answered: a ledger rule broken is the request's
    /// 400, a workflow's refusal its status, anything else a 500 with the error's text (the daemon
    /// stays up either way).
    public init(any error: any Error) {
        switch error {
        case let error as DaemonError: self = error
        case let error as WorkflowError: self.init(error)
        case let error as LedgerError: self.init(ledger: error, "ledger")
        default: self = .failure("\(error)")
        }
    }
}

/// An error body: `{"error": "...", "field": "...", "rule": "..."}`.
struct ErrorBody: Codable {
    let error: String
    let field: String?
    let rule: String?
}
