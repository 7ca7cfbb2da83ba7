#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open descriptors. A service starts with a soft limit of 1024 (systemd's
/// default, and most shells'), below what the ISO 8583 listener's connection limit asks for; the
/// hard limit is usually far higher, and a process may raise its soft limit up to it.
public enum FileLimit {
    /// Raises the soft limit to `wanted` (or the hard limit, if lower); returns the soft limit
    /// now in force. Connections past it fail at accept (or connect), not at a limit of ours.
    @discardableResult
    public static func raise(to wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return wanted }
        let soft = Int(clamping: limit.rlim_cur), hard = Int(clamping: limit.rlim_max)
        guard soft < wanted else { return soft }
        limit.rlim_cur = rlim_t(min(wanted, hard))
        return setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? min(wanted, hard) : soft
    }
}
