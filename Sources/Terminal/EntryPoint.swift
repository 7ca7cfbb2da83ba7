import EMV

/// How the card was read in one transaction, for the ledger, `cardbench tx show` and the fronts:
/// the interface, the POS entry mode, the contactless kernel and Book A outcome, the path of
/// presentations (a tap that had to be inserted, a chip that fell back to the stripe), and for a
/// tap the limits that decided online and CVM. Stored as JSON beside the transaction.
public struct EntryReport: Sendable, Equatable, Codable {
    public var interface: CardInterface = .contact
    /// ISO 8583 field 22 positions 1–2 / 9F39: 05 chip, 07 contactless, 80 fallback, 90 stripe.
    public var posEntryMode = "05"
    /// The contactless kernel (2 Mastercard, 3 Visa); nil for an insert or a swipe.
    public var kernel: Int? = nil
    /// Each presentation in order: "tap: kernel 3, try another interface (…)", "insert: chip read".
    public var path: [String] = []
    /// The contactless outcome as Book A names it: approved, declined, online request, try another
    /// interface, end application, try again.
    public var outcome: String? = nil
    /// The TTQ the reader sent (after pre-processing) and the CTQ the card returned, hex.
    public var ttq: String? = nil
    public var ctq: String? = nil
    /// The CVM the contactless outcome asked for: no CVM, online PIN, signature, consumer device CVM.
    public var cvm: String? = nil
    /// The combination's limits, minor units (nil: not set), and what the amount crossed.
    public var limits: ContactlessLimits? = nil
    /// The Transaction Status Information (9B) and CVM Results (9F34) the terminal ended with, hex:
    /// filled in when the ledger records the outcome, so a trace can be explained later.
    public var tsi: String? = nil
    public var cvmResults: String? = nil
    /// The prompts the transaction showed, in order, with how long each waited and what answered
    /// it (never a PIN): what a recording needs to answer them as they were (docs/recording.md).
    public var prompts: [PromptRecord]? = nil

    public init() {}

    /// One line per fact, as `tx show` prints them.
    public var lines: [String] {
        var out = ["\(interface.verb) (POS entry mode \(posEntryMode))" + (kernel.map { ", kernel \($0)" } ?? "")
                   + (outcome.map { ": \($0)" } ?? "")]
        if !path.isEmpty { out.append("path: " + path.joined(separator: " → ")) }
        if let ttq { out.append("TTQ \(ttq)" + (ctq.map { ", CTQ \($0)" } ?? "")) }
        if let cvm { out.append("contactless CVM: \(cvm)") }
        if let limits { out.append(limits.line) }
        return out
    }
}

/// The limits of the contactless combination that ran, and what the amount crossed.
public struct ContactlessLimits: Sendable, Equatable, Codable {
    public var aid: String
    public var transactionLimit: Int?
    public var floorLimit: Int?
    public var cvmRequiredLimit: Int?
    public var floorLimitExceeded: Bool
    public var cvmRequired: Bool

    var line: String {
        func money(_ v: Int?) -> String { v.map { String($0 / 100) + "." + (($0 % 100) < 10 ? "0" : "") + String($0 % 100) } ?? "none" }
        let floor = "floor \(money(floorLimit))" + (floorLimitExceeded ? " (exceeded: online)" : "")
        let cvm = "CVM required \(money(cvmRequiredLimit))" + (cvmRequired ? " (reached: CVM required)" : "")
        return "limits for \(aid): transaction \(money(transactionLimit)), \(floor), \(cvm)"
    }
}

/// One Entry Point combination (Book B §3.1): an AID prefix, the kernel that runs it, and the
/// reader limits for it. Amounts in minor units; nil: no such limit.
public struct ContactlessCombination: Sendable, Equatable {
    public var aid: [UInt8]
    public var kernel: Int
    /// At or above it the combination is not allowed (Book B 3.1.1.5).
    public var transactionLimit: Int?
    /// Kernel 2 with on-device CVM (DF8125): the limit for a phone or watch that verifies its holder.
    public var deviceTransactionLimit: Int?
    /// Above it the transaction goes online (3.1.1.6); nil: the terminal's floor limit.
    public var floorLimit: Int?
    /// At or above it a CVM is required (3.1.1.8).
    public var cvmRequiredLimit: Int?
    /// An amount of one currency unit asks for online authorisation (3.1.1.3).
    public var statusCheck = false
    /// A zero amount is allowed (online) (3.1.1.4).
    public var zeroAmountAllowed = true

    public init(aid: [UInt8], kernel: Int, transactionLimit: Int?, deviceTransactionLimit: Int? = nil, floorLimit: Int?, cvmRequiredLimit: Int?) {
        self.aid = aid
        self.kernel = kernel
        self.transactionLimit = transactionLimit
        self.deviceTransactionLimit = deviceTransactionLimit
        self.floorLimit = floorLimit
        self.cvmRequiredLimit = cvmRequiredLimit
    }
}

/// The contactless side of a terminal: Entry Point's combinations, the TTQ, Kernel 2's settings.
public struct ContactlessConfiguration: Sendable {
    /// Visa (Kernel 3) and Mastercard (Kernel 2), in minor units of the transaction's currency:
    /// transaction limit 20,000.00, floor 50.00, CVM required from 400.00; a phone verifying its
    /// holder may go to 100,000.00. (Scaled for pesos; `terminal.<name>.contactless` sets others.)
    public var combinations: [ContactlessCombination] = [
        ContactlessCombination(aid: [0xA0, 0, 0, 0, 0x03], kernel: 3, transactionLimit: 2_000_000, floorLimit: 5_000, cvmRequiredLimit: 40_000),
        ContactlessCombination(aid: [0xA0, 0, 0, 0, 0x04], kernel: 2, transactionLimit: 2_000_000, deviceTransactionLimit: 10_000_000,
                               floorLimit: 5_000, cvmRequiredLimit: 40_000),
    ]
    /// 9F66 as configured: EMV mode, contact chip, online PIN, signature; CDCVM; fDDA v01. Byte 2's
    /// "online cryptogram required" and "CVM required" are set per transaction by pre-processing.
    public var ttq: [UInt8] = [0x36, 0x00, 0x40, 0x80]
    /// Kernel 2: 9F33 byte 2 at or above the CVM required limit (DF8118: online PIN, signature)
    /// and below it (DF8119: no CVM).
    public var cvmCapabilityRequired: UInt8 = 0x60
    public var cvmCapabilityNotRequired: UInt8 = 0x08
    /// Kernel 2 configuration (DF811B) bit 6: on-device cardholder verification supported.
    public var onDeviceCVMSupported = true

    public init() {}

    /// The kernel Book B §3.3.2.5 assigns by RID when the card's directory entry names none.
    public static func defaultKernel(aid: [UInt8]) -> Int {
        switch Array(aid.prefix(5)) {
        case [0xA0, 0, 0, 0, 0x04]: 2
        case [0xA0, 0, 0, 0, 0x03]: 3
        case [0xA0, 0, 0, 0, 0x25]: 4
        case [0xA0, 0, 0, 0, 0x65]: 5
        case [0xA0, 0, 0, 0x01, 0x52]: 6
        case [0xA0, 0, 0, 0x03, 0x33]: 7
        default: 0
        }
    }
}

/// A combination after pre-processing (Book B §3.1.1): allowed or not, and its TTQ.
struct PreprocessedCombination {
    let combination: ContactlessCombination
    let allowed: Bool
    let reason: String?
    let ttq: [UInt8]
    let floorLimitExceeded: Bool
    let cvmRequired: Bool

    var limits: ContactlessLimits {
        ContactlessLimits(aid: Hex.encode(combination.aid), transactionLimit: combination.transactionLimit, floorLimit: floorLimit,
                          cvmRequiredLimit: combination.cvmRequiredLimit, floorLimitExceeded: floorLimitExceeded, cvmRequired: cvmRequired)
    }
    let floorLimit: Int?
}

/// Entry Point's pre-processing (Book B v2.11 §3.1.1), pure: for each combination, whether the
/// amount allows it and the TTQ it runs with. Comparisons follow v2.11: transaction and CVM
/// required limits at or above, floor limit above.
func preprocess(_ c: ContactlessCombination, amount: Int, baseTTQ: [UInt8], terminalFloorLimit: Int) -> PreprocessedCombination {
    var ttq = baseTTQ
    if ttq.count > 1 { ttq[1] &= 0x3F }  // 3.1.1.2
    var allowed = true, reason: String? = nil
    let statusCheck = c.statusCheck && amount == 100
    var zero = false
    if amount == 0 {
        if c.zeroAmountAllowed { zero = true } else { (allowed, reason) = (false, "a zero amount is not allowed contactlessly") }
    }
    // Kernel 2 applies its own transaction limits (DF8124/DF8125), after GPO.
    if c.kernel != 2, let limit = c.transactionLimit, amount >= limit {
        (allowed, reason) = (false, "the amount is at or above the contactless transaction limit")
    }
    let floor = c.floorLimit ?? terminalFloorLimit
    let floorExceeded = amount > floor
    let cvmRequired = c.cvmRequiredLimit.map { amount >= $0 } ?? false
    if ttq.count > 1 {
        if floorExceeded || statusCheck || zero { ttq[1] |= TTQ.onlineCryptogramRequired.mask }
        if cvmRequired { ttq[1] |= TTQ.cvmRequired.mask }
    }
    if zero, TTQ.has(ttq, TTQ.offlineOnlyReader) { (allowed, reason) = (false, "an offline-only reader cannot take a zero amount") }
    return PreprocessedCombination(combination: c, allowed: allowed, reason: reason, ttq: ttq, floorLimitExceeded: floorExceeded,
                                   cvmRequired: cvmRequired, floorLimit: floor)
}

/// A candidate of Entry Point's combination selection (Book B §3.3.2).
struct ContactlessCandidate {
    let aid: [UInt8]
    let label: String
    let priority: Int
    let preprocessed: PreprocessedCombination
}

/// Combination selection from the PPSE's directory entries (Book B §3.3.2.5), pure: each entry's
/// AID against every allowed combination whose prefix it starts with and whose kernel it asks
/// for (9F2A, or the RID's default). Also says whether an entry matched only a combination the
/// amount did not allow.
func candidates(ppse: TLV, combinations: [PreprocessedCombination]) -> (candidates: [ContactlessCandidate], blockedByAmount: [String]) {
    var out: [ContactlessCandidate] = [], blocked: [String] = []
    guard let directory = ppse.first(0xBF0C) else { return ([], []) }
    for entry in directory.children where entry.tag == 0x61 {
        guard let aid = entry.first(0x4F)?.value, (5...16).contains(aid.count) else { continue }
        var requested = ContactlessConfiguration.defaultKernel(aid: aid)
        if let kernelID = entry.first(0x9F2A)?.value.first, kernelID & 0xC0 == 0 || kernelID & 0xC0 == 0x40, kernelID & 0x3F != 0 {
            requested = Int(kernelID & 0x3F)
        }
        let label = entry.first(0x50).map { String(decoding: $0.value, as: UTF8.self) } ?? Hex.encode(aid)
        let priority = Int((entry.first(0x87)?.value.first ?? 0) & 0x0F)
        for p in combinations where aid.starts(with: p.combination.aid) && (requested == 0 || requested == p.combination.kernel) {
            if p.allowed {
                out.append(ContactlessCandidate(aid: aid, label: label, priority: priority, preprocessed: p))
            } else {
                blocked.append("\(Hex.encode(aid)): \(p.reason ?? "not allowed")")
            }
        }
    }
    out.sort { ($0.priority == 0 ? 16 : $0.priority) < ($1.priority == 0 ? 16 : $1.priority) }
    return (out, blocked)
}

/// One prompt of a transaction as the keypad saw it.
public struct PromptRecord: Sendable, Equatable, Codable {
    /// `pin`, `select`, `confirm` or `photo`.
    public var prompt: String
    /// From the prompt shown to its answer (or to its timeout), on the bench clock.
    public var waitedMilliseconds: Int
    /// What answered it: `pin`, `select N`, `confirm`, `cancel`, `timeout`, `aborted`, or `auto`
    /// (demo mode). A PIN's digits are never kept.
    public var answer: String

    public init(prompt: String, waitedMilliseconds: Int, answer: String) {
        self.prompt = prompt
        self.waitedMilliseconds = waitedMilliseconds
        self.answer = answer
    }
}
