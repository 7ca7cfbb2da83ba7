import CLibPCSCLite
import Foundation

// The few calls of libpcsclite cardbench needs, with Linux's types: DWORD and LONG are 64-bit
// (`UInt`/`Int` in Swift), SCARD_READERSTATE is 80 bytes, the protocol control information 16.
// The wrappers stay thin; the policy (what an error means for a reader) lives in PCSCReader.

/// A status code from libpcsclite that is not success, with the call that returned it.
public struct PCSCError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `SCARD_*` code (a positive `LONG` on Linux, such as 0x8010000B).
    public let code: Int
    /// The call, such as `SCardConnect`.
    public let call: String

    public init(code: Int, call: String) {
        self.code = code
        self.call = call
    }

    /// The code's name from pcsclite.h, such as `SCARD_E_SHARING_VIOLATION`.
    public var name: String { Self.names[code] ?? String(format: "0x%08lX", code) }

    /// `SCardConnect: SCARD_E_SHARING_VIOLATION (Sharing violation.)`
    public var description: String {
        // pcsc_stringify_error returns a per-thread buffer: copied at once.
        let text = String(cString: pcsc_stringify_error(code))
        return "\(call): \(name) (\(text))"
    }

    /// pcscd went away: it stopped or restarted, and every context and handle from before is dead
    /// for good (pcsc-lite invalidates them; `SCardIsValidContext` still says they are fine).
    public var isServiceGone: Bool {
        code == SCARD_F_COMM_ERROR || code == SCARD_E_NO_SERVICE || code == SCARD_E_SERVICE_STOPPED
            || code == SCARD_E_INVALID_HANDLE
    }

    /// The card left, or the reader with it: what the kernel calls a removed card.
    public var isCardGone: Bool {
        code == SCARD_W_REMOVED_CARD || code == SCARD_E_NO_SMARTCARD || code == SCARD_W_RESET_CARD
            || code == SCARD_E_READER_UNAVAILABLE || code == SCARD_E_UNKNOWN_READER
    }

    static let names: [Int: String] = [
        SCARD_E_CANCELLED: "SCARD_E_CANCELLED", SCARD_E_INVALID_HANDLE: "SCARD_E_INVALID_HANDLE",
        SCARD_E_INVALID_PARAMETER: "SCARD_E_INVALID_PARAMETER", SCARD_E_NO_MEMORY: "SCARD_E_NO_MEMORY",
        SCARD_E_INSUFFICIENT_BUFFER: "SCARD_E_INSUFFICIENT_BUFFER", SCARD_E_UNKNOWN_READER: "SCARD_E_UNKNOWN_READER",
        SCARD_E_TIMEOUT: "SCARD_E_TIMEOUT", SCARD_E_SHARING_VIOLATION: "SCARD_E_SHARING_VIOLATION",
        SCARD_E_NO_SMARTCARD: "SCARD_E_NO_SMARTCARD", SCARD_E_PROTO_MISMATCH: "SCARD_E_PROTO_MISMATCH",
        SCARD_E_NOT_READY: "SCARD_E_NOT_READY", SCARD_F_COMM_ERROR: "SCARD_F_COMM_ERROR",
        SCARD_F_INTERNAL_ERROR: "SCARD_F_INTERNAL_ERROR", SCARD_E_NOT_TRANSACTED: "SCARD_E_NOT_TRANSACTED",
        SCARD_E_READER_UNAVAILABLE: "SCARD_E_READER_UNAVAILABLE", SCARD_E_NO_SERVICE: "SCARD_E_NO_SERVICE",
        SCARD_E_SERVICE_STOPPED: "SCARD_E_SERVICE_STOPPED", SCARD_E_NO_READERS_AVAILABLE: "SCARD_E_NO_READERS_AVAILABLE",
        SCARD_E_UNSUPPORTED_FEATURE: "SCARD_E_UNSUPPORTED_FEATURE", SCARD_W_UNSUPPORTED_CARD: "SCARD_W_UNSUPPORTED_CARD",
        SCARD_W_UNRESPONSIVE_CARD: "SCARD_W_UNRESPONSIVE_CARD", SCARD_W_UNPOWERED_CARD: "SCARD_W_UNPOWERED_CARD",
        SCARD_W_RESET_CARD: "SCARD_W_RESET_CARD", SCARD_W_REMOVED_CARD: "SCARD_W_REMOVED_CARD",
    ]

    static func check(_ rv: Int, _ call: String) throws(PCSCError) {
        if rv != SCARD_S_SUCCESS { throw PCSCError(code: rv, call: call) }
    }
}

/// `SCARD_STATE_*` bits of a reader as `SCardGetStatusChange` reports them; the high 16 bits of
/// the raw value count the reader's insertions and removals.
public struct PCSCReaderState: OptionSet, Sendable, Hashable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let changed = Self(rawValue: UInt(SCARD_STATE_CHANGED))
    public static let unknown = Self(rawValue: UInt(SCARD_STATE_UNKNOWN))
    public static let unavailable = Self(rawValue: UInt(SCARD_STATE_UNAVAILABLE))
    public static let empty = Self(rawValue: UInt(SCARD_STATE_EMPTY))
    public static let present = Self(rawValue: UInt(SCARD_STATE_PRESENT))
    public static let exclusive = Self(rawValue: UInt(SCARD_STATE_EXCLUSIVE))
    public static let inUse = Self(rawValue: UInt(SCARD_STATE_INUSE))
    public static let mute = Self(rawValue: UInt(SCARD_STATE_MUTE))

    /// The reader's event counter (insertions plus removals so far).
    public var eventCount: UInt { rawValue >> 16 }
}

/// One reader's entry of an `SCardGetStatusChange` call.
struct PCSCWatch {
    /// A reader name, or `PCSCContext.plugAndPlay`.
    var reader: String
    /// What the caller last saw (`UNAWARE`, 0, to learn the state at once).
    var current: UInt = 0
    /// What the call found.
    var event = PCSCReaderState()
    var atr: [UInt8] = []
}

/// An `SCARDCONTEXT`: a session with pcscd. Calls on one context are serialised by libpcsclite
/// (each holds the context's lock for its whole length), so a watcher blocked in
/// `SCardGetStatusChange` needs a context of its own.
final class PCSCContext: @unchecked Sendable {
    // Unchecked: `handle` never changes; libpcsclite locks the context itself, and `cancel()` is
    // documented for use from another thread.
    let handle: SCARDCONTEXT
    private let released = Locked(false)

    /// The special reader name that reports readers appearing and disappearing.
    static let plugAndPlay = "\\\\?PnP?\\Notification"

    init() throws(PCSCError) {
        var context: SCARDCONTEXT = 0
        try PCSCError.check(SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &context), "SCardEstablishContext")
        handle = context
    }

    deinit { release() }

    /// Frees the context (also when pcscd is gone: the library drops it locally anyway).
    func release() {
        guard released.withLock({ let was = $0; $0 = true; return !was }) else { return }
        _ = SCardReleaseContext(handle)
    }

    /// The names of the readers pcscd has, in its order; none is not an error.
    func listReaders() throws(PCSCError) -> [String] {
        var length = DWORD(0)
        var rv = SCardListReaders(handle, nil, nil, &length)
        if rv == SCARD_E_NO_READERS_AVAILABLE { return [] }
        try PCSCError.check(rv, "SCardListReaders")
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        rv = SCardListReaders(handle, nil, &buffer, &length)
        if rv == SCARD_E_NO_READERS_AVAILABLE { return [] }
        try PCSCError.check(rv, "SCardListReaders")
        // A multi-string: names ended by NUL, the list by an empty name.
        return buffer.prefix(Int(length)).split(separator: 0).map { chars in
            String(decoding: chars.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// Waits up to `milliseconds` for any entry's state to differ from its `current`; returns
    /// false on a timeout. Each entry's `event` and `atr` are filled in either way.
    /// - Throws: on anything but success and a timeout.
    func waitForChange(_ watches: inout [PCSCWatch], milliseconds: UInt) throws(PCSCError) -> Bool {
        let names = watches.map { strdup($0.reader) }
        defer { names.forEach { free($0) } }
        var states = watches.enumerated().map { index, watch in
            var state = SCARD_READERSTATE()
            state.szReader = UnsafePointer(names[index])
            state.dwCurrentState = watch.current
            return state
        }
        let rv = SCardGetStatusChange(handle, milliseconds, &states, DWORD(states.count))
        if rv != SCARD_E_TIMEOUT { try PCSCError.check(rv, "SCardGetStatusChange") }
        // On a timeout too: the states are current, and who holds a reader (EXCLUSIVE, INUSE)
        // is not a change the call wakes up for.
        for index in watches.indices {
            let state = states[index]
            watches[index].event = PCSCReaderState(rawValue: state.dwEventState)
            let count = min(Int(state.cbAtr), Int(MAX_ATR_SIZE))
            watches[index].atr = withUnsafeBytes(of: state.rgbAtr) { Array($0.prefix(count)) }
        }
        return rv != SCARD_E_TIMEOUT
    }

    /// Ends a `waitForChange` in progress on this context (from another thread); a no-op when
    /// none is in progress, so waits are bounded as well.
    func cancel() { _ = SCardCancel(handle) }

    /// Connects to the card in `reader`: exclusively, with only the protocols in `protocols`.
    func connect(reader: String, protocols: DWORD) throws(PCSCError) -> PCSCCardHandle {
        var card: SCARDHANDLE = 0
        var active = DWORD(0)
        try PCSCError.check(SCardConnect(handle, reader, DWORD(SCARD_SHARE_EXCLUSIVE), protocols, &card, &active), "SCardConnect")
        return PCSCCardHandle(handle: card, activeProtocol: active)
    }
}

/// An `SCARDHANDLE`: a connection to one card, held exclusively.
final class PCSCCardHandle: @unchecked Sendable {
    // Unchecked: used by one thread at a time (the reader's session serialises it).
    let handle: SCARDHANDLE
    private(set) var activeProtocol: DWORD

    init(handle: SCARDHANDLE, activeProtocol: DWORD) {
        self.handle = handle
        self.activeProtocol = activeProtocol
    }

    /// 0 for T=0, 1 for T=1 (`nil` for anything else, which cardbench does not ask for).
    var transmissionProtocol: Int? {
        switch activeProtocol {
        case DWORD(SCARD_PROTOCOL_T0): 0
        case DWORD(SCARD_PROTOCOL_T1): 1
        default: nil
        }
    }

    /// Sends bytes as they are (a TPDU under T=0, an APDU under T=1) and returns the answer.
    func transmit(_ bytes: [UInt8]) throws(PCSCError) -> [UInt8] {
        // MAX_BUFFER_SIZE_EXTENDED (4 + 3 + 65536 + 2 + 3), a macro Swift does not import.
        var answer = [UInt8](repeating: 0, count: 65_548)
        var length = DWORD(answer.count)
        let pci = activeProtocol == DWORD(SCARD_PROTOCOL_T1) ? cardbench_pci_t1() : cardbench_pci_t0()
        try PCSCError.check(SCardTransmit(handle, pci, bytes, DWORD(bytes.count), nil, &answer, &length), "SCardTransmit")
        return Array(answer.prefix(Int(length)))
    }

    /// Warm-resets the card, keeping the exclusive connection; returns the new ATR.
    func reset(protocols: DWORD) throws(PCSCError) -> [UInt8] {
        var active = DWORD(0)
        try PCSCError.check(SCardReconnect(handle, DWORD(SCARD_SHARE_EXCLUSIVE), protocols, DWORD(SCARD_RESET_CARD), &active), "SCardReconnect")
        activeProtocol = active
        return try atr()
    }

    /// The card's ATR from its latest reset.
    func atr() throws(PCSCError) -> [UInt8] {
        var name = [CChar](repeating: 0, count: Int(MAX_READERNAME) + 1)
        var nameLength = DWORD(name.count)
        var state = DWORD(0), proto = DWORD(0)
        var atr = [UInt8](repeating: 0, count: Int(MAX_ATR_SIZE))
        var atrLength = DWORD(atr.count)
        try PCSCError.check(SCardStatus(handle, &name, &nameLength, &state, &proto, &atr, &atrLength), "SCardStatus")
        return Array(atr.prefix(Int(atrLength)))
    }

    /// Ends the connection, powering the card off (an EMV terminal deactivates the card after a
    /// transaction; a virtual card forgets its selection as a real one would), or leaving it as
    /// it is when it is known to be gone (powering off a card that left only confuses pcscd).
    func disconnect(unpower: Bool = true) {
        _ = SCardDisconnect(handle, DWORD(unpower ? SCARD_UNPOWER_CARD : SCARD_LEAVE_CARD))
    }
}

/// An exclusive connection and nothing else: `SCardTransmit` as pcsc-lite gives it, with no T=0
/// layer, no session and no watcher. The floor `cardbench bench pcsc` measures the reader's
/// channel against.
public final class PCSCRawConnection: @unchecked Sendable {
    // Unchecked: one thread uses it (the benchmark's).
    private let context: PCSCContext
    private let handle: PCSCCardHandle

    /// Connects to the card in the reader named `reader` (its full PC/SC name).
    public init(reader: String) throws(PCSCError) {
        context = try PCSCContext()
        do throws(PCSCError) {
            handle = try context.connect(reader: reader, protocols: PCSCReader.anyProtocol)
        } catch {
            context.release()
            throw error
        }
    }

    /// Sends bytes as they are.
    public func transmit(_ bytes: [UInt8]) throws(PCSCError) -> [UInt8] { try handle.transmit(bytes) }

    public func close() {
        handle.disconnect()
        context.release()
    }
}
