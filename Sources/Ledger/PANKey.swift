import LedgerModel
import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Ledger {
    /// The length of a PAN key: the HMAC-SHA256 block of security, 256 bits.
    public static let panKeyLength = 32

    /// Where a ledger's PAN key lives unless configured otherwise: beside the database, so the
    /// daemon and every `cardbench` tool opening the same file find the same key.
    public static func defaultPANKeyPath(database path: String) -> String { path + ".pan-key" }

    /// Reads the ledger's PAN key from `path`, or creates it there with 32 random bytes and mode
    /// 0600 when the file does not exist.
    ///
    /// The key turns PANs into the hashes the ledger searches by; whoever holds it and the
    /// database can test guesses of a PAN, so a key file readable by group or others, or of the
    /// wrong length, is refused rather than used.
    public static func loadOrCreatePANKey(at path: String) throws -> [UInt8] {
        try KeyFile.loadOrCreate(at: path)
    }

    /// The stored form of a PAN: lower-case hex HMAC-SHA256 of its digits under the PAN key.
    /// Keyed, because PANs are few enough (a BIN, a few account digits, a Luhn digit) that a
    /// plain hash is reversed by enumeration.
    public func panHash(_ pan: String) throws -> String {
        try Validate.pan(pan)
        return Self.hexHMAC(key: panKey, pan)
    }

    static func hexHMAC(key: SymmetricKey, _ text: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: key)
        return Validate.lowerHex(Array(mac))
    }
}

/// The key file and the database file are made with POSIX calls so their mode is 0600 from the
/// first instant (a chmod after creation leaves a window).
enum KeyFile {
    static func loadOrCreate(at path: String) throws -> [UInt8] {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            return try createKey(fd: fd, path: path)
        }
        guard errno == EEXIST else {
            throw LedgerError.invalid(field: "panKey", rule: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        return try readKey(path: path)
    }

    /// Creates `path` empty with mode 0600 unless it exists; SQLite treats an empty file as a
    /// new database and gives its -wal and -shm files the same mode.
    static func createPrivateFile(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
    }

    private static func createKey(fd: Int32, path: String) throws -> [UInt8] {
        defer { close(fd) }
        let key = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        // The umask may only take bits away from 0600, but a file system may have given more.
        guard fchmod(fd, 0o600) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw LedgerError.invalid(field: "panKey", rule: "cannot set mode 0600 on \(path): \(reason)")
        }
        let written = key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        // A key lost in a power cut would orphan every stored hash, so it is on disk before use.
        guard written == key.count, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw LedgerError.invalid(field: "panKey", rule: "cannot write \(path): \(reason)")
        }
        return key
    }

    private static func readKey(path: String) throws -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw LedgerError.invalid(field: "panKey", rule: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw LedgerError.invalid(field: "panKey", rule: "\(path) is not a regular file")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw LedgerError.invalid(field: "panKey", rule: "\(path) has mode \(String(mode, radix: 8)); it must not be readable or writable by group or others (chmod 600)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LedgerError.invalid(field: "panKey", rule: "cannot read \(path)")
        }
        guard data.count == Ledger.panKeyLength else {
            throw LedgerError.invalid(field: "panKey", rule: "\(path) holds \(data.count) bytes; a PAN key is exactly \(Ledger.panKeyLength)")
        }
        return Array(data)
    }
}
