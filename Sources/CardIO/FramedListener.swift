import Foundation
import ISO8583
import NIOCore
import NIOPosix
import Synchronization

/// Cuts a TCP stream into ISO 8583 frames of one framing: each frame's TPDU (NAC) and message.
/// A header that is not one of the framing's ends the connection (`HostLinkError.frame`): a stream
/// out of step cannot be read on. The listener and `cardbench bench iso8583`'s load generator
/// both read with it.
public struct ISO8583FrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = (tpdu: [UInt8]?, message: [UInt8])
    public let framing: Framing

    public init(framing: Framing) { self.framing = framing }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let headerLength = framing.headerLength
        guard let header = buffer.getBytes(at: buffer.readerIndex, length: headerLength) else { return .needMoreData }
        let length: Int
        do { length = try framing.bodyLength(header) } catch { throw HostLinkError.frame(error.description) }
        guard buffer.readableBytes >= headerLength + length else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: headerLength)
        let body = buffer.readBytes(length: length) ?? []
        context.fireChannelRead(wrapInboundOut(framing.split(body)))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A part of a frame left at the end is dropped with the connection.
        try decode(context: context, buffer: &buffer)
    }
}

/// A TCP listener for framed ISO 8583 messages on SwiftNIO's event loop: connections cost a
/// descriptor and a little memory, not a thread, so a slow or silent peer holds nothing else.
/// `handle` may block (the issuer records each authorisation durably): it runs on a pool of
/// threads, one message of a connection at a time and in the order they came, so a terminal that
/// pipelines gets its answers in order and its reversal never overtakes the authorisation it
/// reverses, while other connections' messages run beside it (and share the ledger's group commit).
public final class FramedListener: @unchecked Sendable {
    /// The port bound (the configured one, or the kernel's choice for 0).
    public let port: UInt16
    public let address: String
    private let group: MultiThreadedEventLoopGroup
    private let server: any Channel
    private struct Setup {
        var framing: Framing
        var maximumConnections: Int
        var idleTimeout: Duration
        var onError: @Sendable (String, HostLinkError) -> Void
        var handle: @Sendable (_ peer: String, _ message: [UInt8]) -> [UInt8]?
        var pool: NIOThreadPool
    }
    private struct State {
        var setup: Setup?
        var stopped = false
        var connections: [ObjectIdentifier: any Channel] = [:]
    }
    private let state = Locked(State())

    /// Binds `address:port` (an IPv4 or IPv6 literal). Connections wait in the backlog until `start`.
    public init(address: String, port: UInt16) throws(HostLinkError) {
        let socketAddress: SocketAddress
        do { socketAddress = try SocketAddress(ipAddress: address, port: Int(port)) } catch {
            throw .connect("\(address) is not an IP address")
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = self.state
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // Nothing is accepted before `start` says how to serve it.
            .serverChannelOption(.autoRead, value: false)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let key = ObjectIdentifier(channel)
                    let (setup, admitted) = state.withLock { s -> (Setup?, Bool) in
                        guard let setup = s.setup, !s.stopped, s.connections.count < setup.maximumConnections else { return (s.setup, false) }
                        s.connections[key] = channel
                        return (setup, true)
                    }
                    let peer = Self.describe(channel.remoteAddress)
                    guard let setup, admitted else {
                        if let setup, !state.withLock({ $0.stopped }) { setup.onError(peer, .refused(limit: setup.maximumConnections)) }
                        channel.close(promise: nil)
                        return
                    }
                    channel.closeFuture.whenComplete { _ in _ = state.withLock { $0.connections.removeValue(forKey: key) } }
                    let seconds = max(1, Int64(setup.idleTimeout.components.seconds))
                    try channel.pipeline.syncOperations.addHandlers([
                        IdleStateHandler(readTimeout: .seconds(seconds)),
                        ByteToMessageHandler(ISO8583FrameDecoder(framing: setup.framing)),
                        FramedServerHandler(peer: peer, framing: setup.framing, pool: setup.pool, onError: setup.onError, handle: setup.handle),
                    ])
                }
            }
        do {
            server = try bootstrap.bind(to: socketAddress).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw .connect("cannot listen on \(address):\(port): \(error)")
        }
        self.group = group
        self.port = UInt16(server.localAddress?.port ?? Int(port))
        self.address = address
    }

    /// Starts accepting; `handle` runs with each frame's message and returns the answer (nothing
    /// is sent when it returns nil). At most `maximumConnections` are open at once: one more is
    /// closed as it comes, and `onError` says so. A connection that sends nothing for
    /// `idleTimeout` is closed. `threads` handle messages at once (each connection's in order).
    public func start(framing: Framing, maximumConnections: Int = 4096, idleTimeout: Duration = .seconds(300), threads: Int = 32,
                      onError: @escaping @Sendable (String, HostLinkError) -> Void,
                      handle: @escaping @Sendable (_ peer: String, _ message: [UInt8]) -> [UInt8]?) {
        let pool = NIOThreadPool(numberOfThreads: max(1, threads))
        let started = state.withLock { s -> Bool in
            guard s.setup == nil, !s.stopped else { return false }
            s.setup = Setup(framing: framing, maximumConnections: maximumConnections, idleTimeout: idleTimeout, onError: onError,
                            handle: handle, pool: pool)
            return true
        }
        guard started else { return }
        pool.start()
        _ = server.setOption(.autoRead, value: true)
        server.read()
    }

    /// Stops accepting (the port is closed when this returns) and ends every connection. It does
    /// not wait for a message being handled: a handler may be waiting on a peer for a long time,
    /// and its caller (a scenario's end, on one of the few cooperative threads) must not. The
    /// pool's threads and the event loop end once those messages are done, and their answers go
    /// nowhere.
    public func stop() {
        let (first, open, pool) = state.withLock { s -> (Bool, [any Channel], NIOThreadPool?) in
            defer { s.stopped = true }
            return (!s.stopped, Array(s.connections.values), s.setup?.pool)
        }
        guard first else { return }
        try? server.close().wait()
        for c in open { c.close(promise: nil) }
        let group = self.group
        // The loop last: the pool's work completes its futures on it.
        if let pool {
            pool.shutdownGracefully { _ in group.shutdownGracefully { _ in } }
        } else {
            group.shutdownGracefully { _ in }
        }
    }

    /// How many connections are open now.
    public var openConnections: Int { state.withLock { $0.connections.count } }

    /// "127.0.0.1:5000", "[::1]:5000".
    static func describe(_ address: SocketAddress?) -> String {
        guard let address, let ip = address.ipAddress, let port = address.port else { return "unknown peer" }
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }
}

/// One connection's messages: queued as they arrive, handled one at a time on the pool, each
/// answer written before the next is handled. While `maximumQueued` wait, reading stops, so a peer
/// that sends faster than it is answered is slowed by TCP, not buffered without end.
private final class FramedServerHandler: ChannelDuplexHandler {
    typealias InboundIn = (tpdu: [UInt8]?, message: [UInt8])
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maximumQueued = 256

    let peer: String
    let framing: Framing
    let pool: NIOThreadPool
    let onError: @Sendable (String, HostLinkError) -> Void
    let handle: @Sendable (String, [UInt8]) -> [UInt8]?
    private var queue: CircularBuffer<(tpdu: [UInt8]?, message: [UInt8])> = []
    private var busy = false
    private var readHeld = false
    private var closed = false

    init(peer: String, framing: Framing, pool: NIOThreadPool, onError: @escaping @Sendable (String, HostLinkError) -> Void,
         handle: @escaping @Sendable (String, [UInt8]) -> [UInt8]?) {
        self.peer = peer
        self.framing = framing
        self.pool = pool
        self.onError = onError
        self.handle = handle
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        queue.append(unwrapInboundIn(data))
        next(context)
    }

    func read(context: ChannelHandlerContext) {
        if queue.count >= Self.maximumQueued { readHeld = true } else { context.read() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        queue.removeAll()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            // Idle, unless a message of its own is still being handled.
            if !busy, queue.isEmpty { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HostLinkError {
            onError(peer, error)
        } else if let error = error as? IOError, error.errnoCode == ECONNRESET || error.errnoCode == EPIPE {
            // The peer left; nothing to say.
        } else {
            onError(peer, .io("\(error)"))
        }
        context.close(promise: nil)
    }

    /// Handles the next queued message when none is being handled.
    private func next(_ context: ChannelHandlerContext) {
        guard !busy, !closed, let frame = queue.popFirst() else { return }
        busy = true
        let (peer, handle) = (self.peer, self.handle)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        pool.runIfActive(eventLoop: context.eventLoop) { handle(peer, frame.message) }.whenComplete { result in
            let (handler, context) = bound.value
            handler.busy = false
            if handler.closed { return }
            if case .success(let answer?) = result {
                do {
                    let bytes = try handler.framing.frame(answer, tpdu: frame.tpdu.map(Framing.replyTPDU) ?? Framing.defaultTPDU)
                    context.writeAndFlush(handler.wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
                } catch {
                    handler.onError(handler.peer, .frame("\(error)"))
                }
            }
            if handler.readHeld, handler.queue.count < Self.maximumQueued {
                handler.readHeld = false
                context.read()
            }
            handler.next(context)
        }
    }
}
