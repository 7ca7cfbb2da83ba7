import EMV
import Foundation
import Hummingbird
import Ledger
import NIOCore
import Terminal
import Workflows

/// Health and metrics.
struct ServiceRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.get("/v1/health") { _, _ in
            json(HealthView(status: "ok", terminals: bench.terminals.count, clock: bench.manualClock == nil ? "system" : "manual",
                            now: bench.clock.nowMicroseconds(), recovered: bench.recovered.count))
        }
        routes.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                     body: .init(byteBuffer: ByteBuffer(string: bench.metrics.text())))
        }
        return routes
    }
}

/// Opening URLs (now, or later with `"wait": false`) and the recorded transactions.
struct TransactionRoutes {
    let bench: Bench
    let requests: OpenRequests

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        let requests = self.requests
        routes.post("/v1/open") { request, context in
            let body = try await decode(OpenRequest.self, request, context)
            if body.wait == false {
                let id = requests.start { () async throws(DaemonError) -> OpenResult in try await bench.open(body.url, terminal: body.terminal) }
                return json(["id": id, "status": "pending"], status: .accepted)
            }
            return json(try await bench.open(body.url, terminal: body.terminal))
        }
        routes.get("/v1/requests/:id") { request, context in
            let id = context.parameters.get("id") ?? ""
            let wait = request.uri.queryParameters.get("wait").map { $0 != "false" && $0 != "0" } ?? true
            switch try await requests.outcome(id, wait: wait) {
            case nil: return json(["id": id, "status": "pending"], status: .accepted)
            case .answer(let result)?: return json(result)
            case .failure(let error)?: throw error
            case .transaction(let transactionID, let status, let message, let replayed)?:
                guard var result = try bench.storedAnswer(transactionID: transactionID) else {
                    throw DaemonError.failure("transaction \(transactionID) of request \(id) has no stored callback")
                }
                result.status = status
                result.message = message
                result.replayed = replayed
                return json(result)
            }
        }
        routes.get("/v1/transactions") { request, _ in
            let q = request.uri.queryParameters
            let limit = try q.get("limit").map { try intParameter(String($0), "limit", 1...1000) } ?? 50
            let before = try q.get("before").map { Int64(try intParameter(String($0), "before", 1...Int.max)) }
            let terminal = q.get("terminal").map { String($0) }
            return json(try bench.transactions(terminal: terminal, limit: limit, before: before, filter: try transactionFilter(q)).map { TransactionView($0) })
        }
        routes.get("/v1/transactions/:id/scenario") { _, context in
            json(try bench.recordScenario(context.parameters.get("id") ?? ""))
        }
        routes.get("/v1/transactions/:id") { request, context in
            let key = context.parameters.get("id") ?? ""
            let decode = request.uri.queryParameters.get("decode").map { $0 == "true" || $0 == "1" } ?? false
            guard let (t, trace, outbox) = try bench.transaction(key) else {
                throw DaemonError.notFound("no transaction with id or transactionId \"\(key)\"")
            }
            var view = TransactionView(t)
            view.trace = trace.map(TraceView.init)
            let messages = try bench.hostMessages(transactionID: t.id)
            if !messages.isEmpty { view.hostMessages = messages.map(HostMessageView.init) }
            view.callbacks = outbox.map(OutboxView.init)
            if decode { view.decoded = DecodedTrace(t, trace: trace, profile: bench.profileName(panHash: t.panHash)) }
            return json(view)
        }
        return routes
    }
}

/// The terminals, their readers and cards, their keypads and their host queues.
struct TerminalRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.get("/v1/terminals") { _, _ in json(try bench.terminals.map { try TerminalView($0, bench) }) }
        routes.get("/v1/terminals/:name") { _, context in json(try TerminalView(try bench.terminal(context.parameters.get("name")), bench)) }
        routes.get("/v1/readers") { _, _ in json(bench.terminals.map(ReaderView.init)) }
        let admin = routes.group().add(middleware: AdminOnlyMiddleware(bench: bench))
        admin.post("/v1/terminals") { request, context in
            if let refusal = bench.scenarioSetupRefusal { throw refusal }
            let body = try await decode(TerminalBody.self, request, context)
            let (settings, timeout) = try TerminalBody.settings(body, bench: bench)
            let made = try bench.makeTerminal(settings, hostTimeout: timeout)
            return json(try TerminalView(made, bench), status: .created)
        }
        admin.delete("/v1/terminals/:name") { _, context in
            try bench.removeTerminal(try context.parameters.require("name"))
            return Response(status: .noContent)
        }
        routes.post("/v1/terminals/:name/card") { request, context in
            let body = try await decode(CardBody.self, request, context)
            try bench.insertCard(terminal: context.parameters.get("name"), profile: try ProfileSource(name: body.profile, yaml: body.profileYAML),
                                 removeAfter: body.removeAfter, pinTries: body.pinTries, corruptCryptogram: body.corruptCryptogram ?? false,
                                 presentations: try body.presentations())
            return json(["result": "inserted"], status: .created)
        }
        routes.delete("/v1/terminals/:name/card") { _, context in
            json(["result": try bench.removeCard(terminal: context.parameters.get("name")) ? "removed" : "none"])
        }
        routes.post("/v1/terminals/:name/reset") { _, context in
            try bench.resetTerminal(context.parameters.get("name"))
            return json(["result": "reset"])
        }
        routes.post("/v1/terminals/:name/keypad") { request, context in
            let terminal = try bench.terminal(context.parameters.get("name"))
            let body = try await decode(KeypadBody.self, request, context)
            let input = try body.input()
            let delivered = try terminal.keypad.enter(input, after: try body.after())
            bench.publish(delivered ? .promptAnswered(input) : .keypadQueued(input), terminal: terminal.settings.name)
            return json(["result": delivered ? "answered" : "queued"])
        }
        routes.post("/v1/terminals/:name/abort") { _, context in
            json(["result": try bench.terminal(context.parameters.get("name")).abort() ? "aborting" : "idle"])
        }
        routes.get("/v1/terminals/:name/host-queue") { _, context in
            json(try bench.hostQueue(terminal: context.parameters.get("name")).map(HostOutcomeBody.init))
        }
        routes.post("/v1/terminals/:name/host-queue") { request, context in
            let outcome = try await decode(HostOutcomeBody.self, request, context).outcome()
            return json(try bench.enqueueHostOutcome(outcome, terminal: context.parameters.get("name")).map(HostOutcomeBody.init), status: .created)
        }
        routes.delete("/v1/terminals/:name/host-queue") { _, context in
            json(try bench.clearHostQueue(terminal: context.parameters.get("name")).map(HostOutcomeBody.init))
        }
        routes.post("/v1/terminals/:name/iso8583/echo") { request, context in
            let body = try await decode(ISO8583EchoBody.self, request, context)
            let name = context.parameters.get("name")
            // Off the event loops: the 0800 waits for the host up to its timeout.
            let result: Result<ISO8583EchoView, DaemonError> = await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    do throws(DaemonError) { continuation.resume(returning: .success(try bench.iso8583Echo(terminal: name, signOn: body.signOn ?? false))) } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            }
            return json(try result.get())
        }
        return routes
    }
}

/// The issuer's accounts and the bench's clock.
struct HostRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.post("/v1/host/accounts") { request, context in
            let body = try await decode(AccountBody.self, request, context)
            return json(["result": "registered", "account": try bench.registerAccount(profile: try ProfileSource(name: body.profile, yaml: body.profileYAML))],
                        status: .created)
        }
        routes.get("/v1/clock") { _, _ in json(ClockView(bench)) }
        routes.post("/v1/clock") { request, context in
            let body = try await decode(ClockBody.self, request, context)
            if let mode = body.mode {
                guard mode == "manual" || mode == "system" else {
                    throw DaemonError.badRequest(field: "mode", rule: "must be manual or system, got \(mode.prefix(40).debugDescription)")
                }
                if (mode == "manual") != bench.benchClock.isManual {
                    if let refusal = bench.scenarioSetupRefusal { throw refusal }
                    bench.benchClock.use(manual: mode == "manual")
                }
                if body.set == nil && body.advanceSeconds == nil && body.peersSilent == nil && body.waits == nil { return json(ClockView(bench)) }
            }
            guard let manual = bench.manualClock else {
                throw DaemonError.conflict("the clock is the system clock; start the daemon with clock.mode: manual (or send mode: manual) to set it")
            }
            if let waits = body.waits {
                guard let mode = WaitMode(rawValue: waits) else {
                    throw DaemonError.badRequest(field: "waits", rule: "must be virtual, scripted or real, got \(waits.prefix(40).debugDescription)")
                }
                manual.waits = mode
                if body.set == nil && body.advanceSeconds == nil && body.peersSilent == nil { return json(ClockView(bench)) }
            }
            if body.peersSilent == true {
                guard body.set == nil && body.advanceSeconds == nil else {
                    throw DaemonError.badRequest(field: "peersSilent", rule: "comes alone (or with waits), not with set or advanceSeconds")
                }
                manual.peersSilent()
                return json(ClockView(bench))
            }
            switch (body.set, body.advanceSeconds) {
            case (let set?, nil):
                guard let micros = ISO8601.microseconds(set), micros >= 0, micros < 253_402_300_800_000_000 else {
                    throw DaemonError.badRequest(field: "set", rule: "must be an ISO 8601 date and time with a zone from 1970 to 9999, e.g. 2026-11-23T10:00:00Z")
                }
                manual.set(secondsSince1970: micros / 1_000_000)
            case (nil, let seconds?):
                guard seconds >= 0, seconds <= 10 * 366 * 86_400 else {
                    throw DaemonError.badRequest(field: "advanceSeconds", rule: "must be 0 to 316224000 (the clock does not go back by advancing)")
                }
                manual.advance(seconds: seconds)
            default:
                throw DaemonError.badRequest(field: "set", rule: "give exactly one of set (ISO 8601) and advanceSeconds, or waits, or peersSilent")
            }
            bench.publish(.clock(now: bench.clock.nowMicroseconds()), terminal: nil)
            // What the moved clock makes due happens now, before the next request sees it.
            let worldline = bench.worldline
            _ = try await offPool { worldline.settleDue() }
            return json(ClockView(bench))
        }
        return routes
    }
}

/// The event stream (server-sent events).
struct EventRoutes {
    let bench: Bench

    var collection: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let bench = self.bench
        routes.get("/v1/events") { request, _ in
            let only = request.uri.queryParameters.get("terminal").map { String($0) }
            let stream = bench.events.subscribe()
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-cache"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // A comment line first, so a client knows it is subscribed before any event.
                try await writer.write(ByteBuffer(string: ": subscribed\n\n"))
                for await event in stream where only == nil || event.terminal == only {
                    let data = (try? encoder.encode(event)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                    try await writer.write(ByteBuffer(string: "event: \(event.type)\ndata: \(data)\n\n"))
                }
                try await writer.finish(nil)
            })
        }
        return routes
    }
}
