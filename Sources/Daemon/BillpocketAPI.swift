import Foundation
import Hummingbird
import NIOCore
import Ledger
import Workflows

/// `POST /v1/billpocket/users`: a name, and the user's installment plans as months to minimum
/// amount in cents (`{"3": 30000}`); without `msi`, `BillpocketUserBody.defaultPlans`.
public struct BillpocketUserBody: Codable, Sendable {
    public let name: String
    public let msi: [String: Int64]?

    public init(name: String, msi: [String: Int64]? = nil) {
        self.name = name
        self.msi = msi
    }

    /// The plans a user gets when none are given: each of 3, 6, 9 and 12 months, from 300.00,
    /// 600.00, 900.00 and 1,200.00 pesos (cardbench's choice: 100 pesos a month).
    public static let defaultPlans: [Int: Int64] = [3: 30_000, 6: 60_000, 9: 90_000, 12: 120_000]

    func plans() throws(DaemonError) -> [Int: Int64] {
        guard let msi else { return Self.defaultPlans }
        var plans: [Int: Int64] = [:]
        for (key, minimum) in msi {
            guard let months = Int(key) else { throw .badRequest(field: "msi", rule: "keys are months (3, 6, 9, 12), got \"\(key)\"") }
            plans[months] = minimum
        }
        return plans
    }
}

/// `POST /v1/billpocket/device-tokens`.
public struct DeviceTokenBody: Codable, Sendable {
    public let user: Int64
    public let alias: String?

    public init(user: Int64, alias: String? = nil) {
        self.user = user
        self.alias = alias
    }
}

/// A Billpocket user as the API shows it; `token` only in the answer that made it.
public struct BillpocketUserView: Codable, Sendable, Equatable {
    public let id: Int64
    public let name: String
    public let state: String
    /// Months to minimum amount in cents.
    public let msi: [String: Int64]
    public let createdAt: Int64
    public let updatedAt: Int64
    public let token: String?

    init(_ user: BillpocketUser, token: String? = nil) {
        id = user.id; name = user.name; state = user.state.rawValue; createdAt = user.createdAt; updatedAt = user.updatedAt
        msi = Dictionary(uniqueKeysWithValues: user.msiMinimums.map { (String($0.key), $0.value) })
        self.token = token
    }
}

/// A device token as the API shows it; `token` only in the answer that issued it.
public struct DeviceTokenView: Codable, Sendable, Equatable {
    public let id: Int64
    public let user: Int64
    public let alias: String?
    /// `alive` until it configures a device, then `dead`.
    public let state: String
    public let device: String?
    public let createdAt: Int64
    public let boundAt: Int64?
    public let token: String?

    init(_ d: BillpocketDeviceToken, token: String? = nil) {
        id = d.id; user = d.userID; alias = d.alias; state = d.isAlive ? "alive" : "dead"; device = d.device
        createdAt = d.createdAt; boundAt = d.boundAt
        self.token = token
    }
}

/// The Billpocket front's routes: its admin API (users, device tokens) and the vouchers its
/// callbacks point at.
extension BillpocketFront: FrontRoutes {
    func routes(on bench: Bench) -> RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let front = self
        // Who gets credentials: the socket's callers, or TCP's with http.admin.
        let admin = routes.group().add(middleware: AdminOnlyMiddleware(bench: bench))
        admin.post("/v1/billpocket/users") { request, context in
            let body = try await decode(BillpocketUserBody.self, request, context)
            let (user, token) = try front.createUser(name: body.name, msiMinimums: try body.plans())
            return json(BillpocketUserView(user, token: token), status: .created)
        }
        admin.get("/v1/billpocket/users") { _, _ in json(try front.users().map { BillpocketUserView($0) }) }
        admin.post("/v1/billpocket/users/:id/rotate") { _, context in
            let (user, token) = try front.rotateUser(id: try userID(context))
            return json(BillpocketUserView(user, token: token))
        }
        admin.post("/v1/billpocket/users/:id/invalidate") { _, context in
            json(BillpocketUserView(try front.invalidateUser(id: try userID(context))))
        }
        admin.post("/v1/billpocket/device-tokens") { request, context in
            let body = try await decode(DeviceTokenBody.self, request, context)
            let (issued, token) = try front.issueDeviceToken(userID: body.user, alias: body.alias)
            return json(DeviceTokenView(issued, token: token), status: .created)
        }
        admin.get("/v1/billpocket/device-tokens") { request, _ in
            let user = try request.uri.queryParameters.get("user").map { Int64(try intParameter(String($0), "user", 1...Int.max)) }
            return json(try front.deviceTokens(userID: user).map { DeviceTokenView($0) })
        }
        routes.get("/v1/vouchers/:id") { _, context in
            let text = try front.voucher(context.parameters.get("id") ?? "")
            return Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        return routes
    }
}

private func userID(_ context: APIContext) throws -> Int64 {
    Int64(try intParameter(context.parameters.get("id") ?? "", "id", 1...Int.max))
}
