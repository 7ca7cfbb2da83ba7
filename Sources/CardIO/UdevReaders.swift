#if canImport(Glibc)
import Glibc
#endif
import CLibUDev
import Foundation

/// A serial reader udev marked with `ENV{CARDBENCH_READER}="1"` (udev-rules/70-cardbench.rules).
public struct DiscoveredReader: Sendable, Equatable, Codable {
    /// `ENV{CARDBENCH_NAME}`: what `udev:<name>` in the configuration refers to.
    public let name: String
    /// The tty's device node, e.g. /dev/ttyUSB0.
    public let devnode: String
    public let syspath: String
    /// The USB bridge's serial number, when it has one.
    public let serial: String?
}

/// A reader arriving or leaving.
public enum ReaderHotplug: Sendable, Equatable {
    case added(DiscoveredReader)
    case removed(DiscoveredReader)
}

/// Finds marked readers through libudev, and follows udev's events for them.
///
/// Both read what udevd has recorded (the rules' properties live in its database and its
/// events), so without a running udevd (a container, a chroot) the list is empty and nothing
/// arrives; a reader can always be named by its path in the configuration instead.
public final class UdevReaders: @unchecked Sendable {
    // Unchecked: `udev` and `monitor` are touched by the monitor thread, and by `stop()` only
    // after that thread has ended.
    private let udev: OpaquePointer
    private var monitor: OpaquePointer?
    private var wake: (read: Int32, write: Int32) = (-1, -1)
    private let finished = DispatchSemaphore(value: 0)
    private var running = false

    public init() throws(CardIOError) {
        guard let udev = udev_new() else { throw .io(reader: "udev", detail: "udev_new failed: \(Socket.errorText(errno))") }
        self.udev = udev
    }

    deinit {
        stop()
        udev_unref(udev)
    }

    /// The marked readers present now.
    public func enumerate() throws(CardIOError) -> [DiscoveredReader] {
        guard let enumerate = udev_enumerate_new(udev) else { throw .io(reader: "udev", detail: "udev_enumerate_new failed") }
        defer { udev_enumerate_unref(enumerate) }
        udev_enumerate_add_match_subsystem(enumerate, "tty")
        udev_enumerate_add_match_property(enumerate, "CARDBENCH_READER", "1")
        guard udev_enumerate_scan_devices(enumerate) >= 0 else { throw .io(reader: "udev", detail: "scanning tty devices failed") }
        var found: [DiscoveredReader] = []
        var entry = udev_enumerate_get_list_entry(enumerate)
        while let current = entry {
            if let path = udev_list_entry_get_name(current), let device = udev_device_new_from_syspath(udev, path) {
                if let reader = Self.reader(device) { found.append(reader) }
                udev_device_unref(device)
            }
            entry = udev_list_entry_get_next(current)
        }
        return found.sorted { $0.name < $1.name }
    }

    /// Starts following udev's tty events on a thread of its own; `handler` hears of each marked
    /// reader added or removed.
    public func follow(_ handler: @escaping @Sendable (ReaderHotplug) -> Void) throws(CardIOError) {
        guard !running else { return }
        guard let monitor = udev_monitor_new_from_netlink(udev, "udev") else {
            throw .io(reader: "udev", detail: "cannot listen to udev events: \(Socket.errorText(errno))")
        }
        udev_monitor_filter_add_match_subsystem_devtype(monitor, "tty", nil)
        guard udev_monitor_enable_receiving(monitor) >= 0 else {
            udev_monitor_unref(monitor)
            throw .io(reader: "udev", detail: "cannot receive udev events: \(Socket.errorText(errno))")
        }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            udev_monitor_unref(monitor)
            throw .io(reader: "udev", detail: "pipe: \(Socket.errorText(errno))")
        }
        self.monitor = monitor
        wake = (fds[0], fds[1])
        running = true
        let fd = udev_monitor_get_fd(monitor)
        let thread = Thread { [self] in
            defer { finished.signal() }
            var polls = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            while true {
                polls[0].revents = 0
                polls[1].revents = 0
                guard poll(&polls, 2, -1) >= 0 || errno == EINTR else { return }
                if polls[1].revents != 0 { return }
                guard polls[0].revents != 0, let monitor = self.monitor, let device = udev_monitor_receive_device(monitor) else { continue }
                defer { udev_device_unref(device) }
                guard let reader = Self.reader(device), let action = udev_device_get_action(device).map({ String(cString: $0) }) else { continue }
                switch action {
                case "add": handler(.added(reader))
                case "remove": handler(.removed(reader))
                default: break
                }
            }
        }
        thread.name = "cardbench udev"
        thread.start()
    }

    /// Stops following; idempotent.
    public func stop() {
        guard running else { return }
        running = false
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
        finished.wait()
        Glibc.close(wake.read)
        Glibc.close(wake.write)
        if let monitor { udev_monitor_unref(monitor) }
        monitor = nil
    }

    static func reader(_ device: OpaquePointer) -> DiscoveredReader? {
        func property(_ name: String) -> String? {
            udev_device_get_property_value(device, name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        guard property("CARDBENCH_READER") == "1", let node = udev_device_get_devnode(device).map({ String(cString: $0) }) else { return nil }
        let syspath = udev_device_get_syspath(device).map { String(cString: $0) } ?? ""
        let kernelName = (node as NSString).lastPathComponent
        return DiscoveredReader(name: property("CARDBENCH_NAME") ?? kernelName, devnode: node, syspath: syspath,
                                serial: property("ID_SERIAL_SHORT"))
    }
}
