import Foundation
import Hummingbird

/// The HTTP API, the same on the Unix socket and on TCP (docs/openapi.yaml): the access check,
/// the request metrics, and a route collection per area. A front with routes of its own (the
/// Billpocket admin API and vouchers) brings its collection (`FrontRoutes`).
public struct API: Sendable {
    let bench: Bench
    let requests: OpenRequests
    let scenarioRuns: ScenarioRuns

    /// `scenarios` runs the console's scenario runs (nil: the routes say it cannot).
    public init(bench: Bench, scenarios: (any ScenarioService)? = nil) {
        self.bench = bench
        requests = OpenRequests()
        let clock = bench.clock
        scenarioRuns = ScenarioRuns(directory: bench.configuration.scenariosDirectory, service: scenarios, events: bench.events,
                                    clock: { clock.nowMicroseconds() })
    }

    /// The routes, behind `policy`'s access check (`.socket` for the control socket).
    public func router(policy: ListenerPolicy = .socket) -> Router<APIContext> {
        let router = Router(context: APIContext.self)
        router.add(middleware: AccessMiddleware(policy: policy, bench: bench))
        router.add(middleware: RequestMetricsMiddleware(metrics: bench.metrics))
        router.addRoutes(ServiceRoutes(bench: bench).collection)
        router.addRoutes(TransactionRoutes(bench: bench, requests: requests).collection)
        router.addRoutes(NotificationRoutes(bench: bench).collection)
        router.addRoutes(TerminalRoutes(bench: bench).collection)
        router.addRoutes(HostRoutes(bench: bench).collection)
        router.addRoutes(EventRoutes(bench: bench).collection)
        router.addRoutes(CardRoutes(bench: bench).collection)
        router.addRoutes(ScenarioRoutes(runs: scenarioRuns).collection)
        router.addRoutes(ConsoleRoutes().collection)
        for case let front as any FrontRoutes in bench.fronts { router.addRoutes(front.routes(on: bench)) }
        router.addRoutes(WorldlineAdminRoutes(bench: bench).collection)
        router.addRoutes(CitconAdminRoutes(bench: bench).collection)
        return router
    }
}

/// A front with HTTP routes of its own (an admin API, the pages its callbacks point at, a
/// vendor's platform API): the router adds them for every front of the bench that has them.
protocol FrontRoutes {
    func routes(on bench: Bench) -> RouteCollection<APIContext>
}

/// Counts every routed request by its route's name and its answer's status
/// (`cardbench_api_requests_total`); an error is first turned into the `DaemonError` the client
/// gets, so its status is the one counted.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let metrics: BenchMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.recordRequest(route: Self.name(context.endpointPath), status: Int(response.status.code))
            return response
        } catch let error as HTTPError {
            // No such route or method: the access middleware answers and counts it.
            throw error
        } catch {
            let refused = DaemonError(any: error)
            metrics.recordRequest(route: Self.name(context.endpointPath), status: refused.statusCode)
            throw refused
        }
    }

    /// A route's name in the metrics: the names they have always had, the path for any other.
    static func name(_ path: String?) -> String {
        guard let path else { return "unrouted" }
        return names[path] ?? path
    }

    static let names: [String: String] = [
        "/v1/health": "health", "/metrics": "metrics", "/v1/open": "open", "/v1/requests/{id}": "requests",
        "/v1/transactions": "transactions", "/v1/transactions/{id}": "transaction", "/v1/terminals": "terminals",
        "/v1/terminals/{name}": "terminal", "/v1/readers": "readers", "/v1/terminals/{name}/card": "card",
        "/v1/terminals/{name}/reset": "reset", "/v1/terminals/{name}/keypad": "keypad", "/v1/terminals/{name}/abort": "abort",
        "/v1/terminals/{name}/host-queue": "host-queue", "/v1/terminals/{name}/iso8583/echo": "iso8583-echo", "/v1/host/accounts": "accounts", "/v1/clock": "clock", "/v1/events": "events",
        "/v1/billpocket/users": "billpocket-users", "/v1/billpocket/users/{id}/rotate": "billpocket-users",
        "/v1/billpocket/users/{id}/invalidate": "billpocket-users", "/v1/billpocket/device-tokens": "billpocket-device-tokens",
        "/v1/vouchers/{id}": "vouchers", "/v1/worldline/api-keys": "worldline-api-keys",
        "/v1/worldline/api-keys/{id}/revoke": "worldline-api-keys", "/v1/worldline/merchants/{id}/webhook": "worldline-webhooks",
        "/v1/worldline/crypto-keys/rotate": "worldline-crypto-keys", "/v1/worldline/payments/{id}/challenge": "worldline-challenge",
        "/v1/worldline/payments/{id}": "worldline-payment", "/v1/citcon/merchants": "citcon-merchants",
        "/v1/citcon/merchants/{id}/host-queue": "citcon-host-queue", "/v1/citcon/charges/{id}/payer": "citcon-payer",
        "/v1/citcon/charges/{id}/challenge": "citcon-challenge", "/v1/citcon/charges/{id}": "citcon-charge", "/v1/citcon/requests": "citcon-requests",
        "/v1/cards": "cards", "/v1/host": "host", "/v1/scenarios": "scenarios", "/v1/scenario-runs": "scenario-runs",
        "/v1/scenario-runs/{id}": "scenario-runs", "/v1/scenario-runs/{id}/junit": "scenario-runs", "/": "console", "/console": "console",
        "/console/{file}": "console",
    ]
}
