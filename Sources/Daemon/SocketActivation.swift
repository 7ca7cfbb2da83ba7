import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle
#if canImport(Glibc)
import Glibc
#endif

/// systemd socket activation (sd_listen_fds(3)) read without libsystemd, as gpsd does:
/// `cardbenchd.socket` binds the control socket and passes it as file descriptor 3 with
/// `LISTEN_PID` (this process) and `LISTEN_FDS`; clients that connect before the daemon is ready
/// wait in the socket's backlog instead of failing.
public enum SocketActivation {
    /// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
    static let firstDescriptor: CInt = 3

    /// The control socket systemd passed, or nil when the daemon was not socket-activated. The
    /// variables are removed from the environment, so that nothing the daemon runs (a callback
    /// command) takes the socket for its own, and the descriptor is closed on exec.
    public static func controlSocket(environment: [String: String] = ProcessInfo.processInfo.environment,
                                     unsetEnvironment: Bool = true) throws(ConfigurationError) -> CInt? {
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"] else { return nil }
        defer {
            if unsetEnvironment { for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) } }
        }
        // Meant for another process (a parent that exec'd us without clearing them): not ours.
        guard Int32(pidText) == getpid() else { return nil }
        guard let count = Int(countText), count >= 1, count <= 64 else {
            throw ConfigurationError(key: "LISTEN_FDS", rule: "must be the number of sockets systemd passed (1 for cardbenchd.socket), got \"\(countText)\"")
        }
        let names = environment["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        let index: Int
        if let named = names.firstIndex(of: "control"), named < count {
            index = named
        } else if count == 1 {
            index = 0
        } else {
            throw ConfigurationError(key: "LISTEN_FDS", rule: "systemd passed \(count) sockets and none is named control (FileDescriptorName=control in cardbenchd.socket)")
        }
        let fd = firstDescriptor + CInt(index)
        for i in 0..<CInt(count) { _ = fcntl(firstDescriptor + i, F_SETFD, FD_CLOEXEC) }
        guard isListeningUnixStream(fd) else {
            throw ConfigurationError(key: "LISTEN_FDS", rule: "descriptor \(fd) is not a listening Unix stream socket (cardbenchd.socket must have ListenStream=/run/cardbench/control.sock)")
        }
        return fd
    }

    /// Whether `fd` is a Unix-domain stream socket in the listening state.
    static func isListeningUnixStream(_ fd: CInt) -> Bool {
        func option(_ name: CInt) -> CInt? {
            var value: CInt = 0
            var length = socklen_t(MemoryLayout<CInt>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        return option(SO_DOMAIN) == AF_UNIX && option(SO_TYPE) == CInt(SOCK_STREAM.rawValue) && option(SO_ACCEPTCONN) == 1
    }

    /// The path a Unix socket is bound to, for messages.
    static func path(of fd: CInt) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafeBytes(of: address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }
}

/// The API served on a socket systemd passed: Hummingbird's HTTP/1 channel and the router, on a
/// server channel NIO builds around the descriptor (Hummingbird binds only addresses and paths).
/// On shutdown it stops accepting, lets the requests in progress finish, and leaves the socket
/// file to systemd.
struct ActivatedSocketServer<Responder: HTTPResponder>: Service where Responder.Context: RequestContext,
    Responder.Context.Source == ApplicationRequestContextSource {
    let descriptor: CInt
    let responder: Responder
    let logger: Logger
    let onRunning: @Sendable () async -> Void

    func run() async throws {
        let responder = self.responder
        let logger = self.logger
        let http = HTTP1Channel(responder: { request, writer, channel in
            let context = Responder.Context(source: ApplicationRequestContextSource(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch {
                response = Response(status: .internalServerError)
            }
            try await writer.write(response: response.head, body: response.body)
        })
        let group = MultiThreadedEventLoopGroup.singleton
        let quiescing = ServerQuiescingHelper(group: group)
        let server = try await ServerBootstrap(group: group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                }
            }
            .bind(NIOBSDSocket.Handle(descriptor)) { channel in http.setup(channel: channel, logger: logger) }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { connections in
                do {
                    try await server.executeThenClose { inbound in
                        await onRunning()
                        for try await connection in inbound {
                            connections.addTask { await http.handle(value: connection, logger: logger) }
                        }
                    }
                } catch {
                    logger.error("control socket: \(error)")
                }
            }
        } onGracefulShutdown: {
            quiescing.initiateShutdown(promise: nil)
        }
    }
}
