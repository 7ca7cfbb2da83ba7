#if canImport(Glibc)
import Glibc
#endif
import Logging

/// The process's limit on open descriptors. A service starts with a soft limit of 1024 (systemd's
/// default, and most shells'), below what the ISO 8583 listener's connection limit asks for; the
/// hard limit is usually far higher, and a process may raise its soft limit up to it.
enum FileLimit {
    /// Raises the soft limit to `wanted` (or the hard limit, if lower), and warns when even the
    /// hard limit is below what is wanted: connections past it fail at accept, not at the limit.
    static func raise(toAtLeast wanted: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let soft = Int(clamping: limit.rlim_cur), hard = Int(clamping: limit.rlim_max)
        guard soft < wanted else { return }
        limit.rlim_cur = rlim_t(min(wanted, hard))
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 || hard < wanted {
            logger.warning("open files limited to \(min(wanted, hard)) (hard limit \(hard)): fewer connections than host.iso8583.max_connections asks can be open (raise LimitNOFILE)")
        }
    }
}
