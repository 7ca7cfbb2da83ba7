import Foundation
import Terminal

/// What the terminal is asking the cardholder or the operator.
public enum PromptKind: Sendable, Equatable {
    case pin(online: Bool, triesLeft: Int?)
    /// Pick one of `options` (answered with a 1-based number): an application, installments, a
    /// transaction to cancel.
    case select(title: String, options: [String])
    /// Yes (confirm) or no (cancel).
    case confirm(question: String)
    /// Billpocket's photo button: confirm when a photo was taken, cancel when none was.
    case photo(mandatory: Bool)

    /// What kind of answer the prompt wants: `pin`, `select`, `confirm` or `photo`.
    public var kind: String {
        switch self {
        case .pin: "pin"
        case .select: "select"
        case .confirm: "confirm"
        case .photo: "photo"
        }
    }

    /// The options of a selection, in order (numbered from 1); nil for other prompts.
    public var options: [String]? {
        if case .select(_, let options) = self { options } else { nil }
    }

    /// The prompt's name in events, errors and the API.
    public var name: String {
        switch self {
        case .pin(let online, _): online ? "online PIN" : "PIN"
        case .select(let title, _): title
        case .confirm(let question): question
        case .photo(let mandatory): mandatory ? "photo (mandatory)" : "photo"
        }
    }
}

/// A keypad answer: from the API, the CLI, a scenario, or demo mode.
public enum KeypadInput: Sendable, Equatable, CustomStringConvertible {
    case pin(String)
    /// 1-based.
    case select(Int)
    case confirm
    case cancel

    /// Shown in events and errors: a PIN as its length only.
    public var description: String {
        switch self {
        case .pin(let digits): "PIN (\(digits.count) digits)"
        case .select(let n): "select \(n)"
        case .confirm: "confirm"
        case .cancel: "cancel"
        }
    }

    /// Whether this input can answer `prompt`; cancel answers anything.
    public func fits(_ prompt: PromptKind) -> Bool {
        switch (self, prompt) {
        case (.cancel, _), (.pin, .pin), (.select, .select), (.confirm, .confirm), (.confirm, .photo): true
        default: false
        }
    }
}

/// The prompts of a terminal: the kernel's (application, PIN) and the fronts' (installments, a
/// transaction to cancel, a photo), all answered with keypad inputs.
public protocol Prompts: Keypad, Sendable {
    /// Shows `kind` and waits up to `timeout` for a fitting answer; `step` names the moment in
    /// errors ("PIN entry").
    func ask(_ kind: PromptKind, timeout: Duration, step: String) throws(KernelError) -> KeypadInput
    /// The prompts of the current transaction, in order, with their waits and answers.
    var answered: [PromptRecord] { get }
}

extension Prompts {
    public var answered: [PromptRecord] { [] }

    public func selectApplication(_ labels: [String], timeout: Duration) throws(KernelError) -> Int {
        switch try ask(.select(title: "application", options: labels), timeout: timeout, step: "application selection") {
        case .select(let n) where (1...labels.count).contains(n): return n - 1
        case .select(let n): throw .invalidCardData("application \(n) is not one of 1 to \(labels.count)")
        default: throw .cancelled(step: "application selection")
        }
    }

    public func enterPIN(online: Bool, triesLeft: Int?, timeout: Duration) throws(KernelError) -> String {
        switch try ask(.pin(online: online, triesLeft: triesLeft), timeout: timeout, step: "PIN entry") {
        case .pin(let digits): return digits
        default: throw .cancelled(step: "PIN entry")
        }
    }
}

/// A terminal's keypad, the one keypad of the daemon, the scenarios and `cardbench sale`. The kernel's thread blocks in a prompt until an answer arrives from the
/// API, the prompt times out, or the transaction is aborted. Answers given while no prompt is up
/// wait in a queue and answer the next prompts of the current or next transaction, so a test can
/// enter its PIN before it opens the URL.
public final class TerminalKeypad: Prompts, @unchecked Sendable {
    public struct Snapshot: Sendable, Equatable {
        public let prompt: PromptKind?
        public let queued: [KeypadInput]
    }

    /// A queued input and how long after its prompt it is given (a cardholder who takes 12 s).
    struct Queued {
        let input: KeypadInput
        let after: Duration?
    }

    private let condition = NSCondition()
    private var prompt: PromptKind?
    private var answer: KeypadInput?
    private var queued: [Queued] = []
    /// The current transaction's prompts (`answered`).
    private var log: [PromptRecord] = []
    private var aborted = false
    private let onPrompt: @Sendable (PromptKind) -> Void
    /// Demo mode: answers PIN prompts (and photo prompts) by itself.
    private let autoPIN: String?
    /// Where a prompt's timeout is waited (virtual on a manual clock, `WaitKind.input`).
    private let clock: any Clock

    public init(autoPIN: String? = nil, clock: any Clock = SystemClock(), onPrompt: @escaping @Sendable (PromptKind) -> Void = { _ in }) {
        self.autoPIN = autoPIN
        self.clock = clock
        self.onPrompt = onPrompt
    }

    public var snapshot: Snapshot {
        condition.lock()
        defer { condition.unlock() }
        return Snapshot(prompt: prompt, queued: queued.map(\.input))
    }

    /// Answers the prompt that is up, or queues the input for the next one — given `after` that
    /// long once its prompt shows, on the bench clock, when `after` is set. Refuses an input that
    /// cannot answer the prompt that is up, naming both.
    public func enter(_ input: KeypadInput, after: Duration? = nil) throws(WorkflowError) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if let prompt, answer == nil, after == nil {
            guard input.fits(prompt) else {
                throw .conflict("the keypad is asking for \(prompt.name); \(input) does not answer it")
            }
            if case .select(let n) = input, case .select(_, let options) = prompt, !(1...max(1, options.count)).contains(n) {
                throw .badRequest(field: "select", rule: "must be 1 to \(options.count) for the \(prompt.name) prompt, got \(n)")
            }
            answer = input
            condition.broadcast()
            return true
        }
        guard queued.count < 16 else { throw .conflict("16 keypad inputs are already queued") }
        queued.append(Queued(input: input, after: after))
        return false
    }

    /// Starts a transaction: clears a previous abort (queued inputs stay: they were entered for it).
    public func begin() {
        condition.lock()
        aborted = false
        log = []
        condition.unlock()
    }

    public var answered: [PromptRecord] {
        condition.lock()
        defer { condition.unlock() }
        return log
    }

    /// Forgets queued inputs (a new scenario starts clean).
    public func clearQueue() {
        condition.lock()
        queued = []
        condition.unlock()
    }

    /// Ends a transaction: forgets what it did not use.
    public func end() {
        condition.lock()
        queued = []
        prompt = nil
        answer = nil
        aborted = false
        condition.unlock()
    }

    /// Wakes a waiting prompt with a cancel (the transaction was aborted).
    public func abort() {
        condition.lock()
        aborted = true
        condition.broadcast()
        condition.unlock()
    }

    /// Shows `kind` and waits for a fitting answer.
    public func ask(_ kind: PromptKind, timeout: Duration, step: String) throws(KernelError) -> KeypadInput {
        condition.lock()
        defer {
            prompt = nil
            answer = nil
            condition.unlock()
        }
        if aborted { throw .aborted(step: step) }
        let shown = clock.nowMicroseconds()
        func note(_ answer: String) {
            log.append(PromptRecord(prompt: kind.kind, waitedMilliseconds: Int(max(0, clock.nowMicroseconds() - shown) / 1000), answer: answer))
        }
        if let index = queued.firstIndex(where: { $0.input.fits(kind) }) {
            let next = queued.remove(at: index)
            guard let after = next.after, after > .zero else {
                note(Self.logged(next.input))
                return next.input
            }
            // A cardholder who answers late: the prompt shows, and the answer comes `after` on
            // the bench clock, or the prompt times out first.
            prompt = kind
            condition.unlock()
            onPrompt(kind)
            clock.sleep(for: min(after, timeout))
            condition.lock()
            if aborted { note("aborted"); throw .aborted(step: step) }
            // Someone at the console answered first.
            if let answer { note(Self.logged(answer)); return answer }
            guard after < timeout else { note("timeout"); throw .promptTimeout(prompt: kind.name) }
            note(Self.logged(next.input))
            return next.input
        }
        if case .pin = kind, let autoPIN { note("auto"); return .pin(autoPIN) }
        // Demo mode takes the photo a sale asks for, as an operator would.
        if case .photo = kind, autoPIN != nil { note("auto"); return .confirm }
        prompt = kind
        answer = nil
        let wait = clock.waitFor(.input, timeout: timeout)
        defer { wait.end() }
        condition.unlock()
        onPrompt(kind)
        condition.lock()
        while answer == nil && !aborted && !wait.isOver {
            _ = condition.wait(until: Date(timeIntervalSinceNow: wait.slice.realSeconds))
        }
        if let answer { note(Self.logged(answer)); return answer }
        if aborted { note("aborted"); throw .aborted(step: step) }
        note("timeout")
        throw .promptTimeout(prompt: kind.name)
    }

    /// An answer as the prompt log keeps it: a PIN as `pin`, never its digits.
    static func logged(_ input: KeypadInput) -> String {
        switch input {
        case .pin: "pin"
        case .select(let n): "select \(n)"
        case .confirm: "confirm"
        case .cancel: "cancel"
        }
    }
}

/// What a terminal is busy with: one transaction at a time, and whether it was stopped from
/// outside. It takes the terminal's keypad along: a new transaction clears an earlier abort, its
/// end forgets the inputs it did not use, an abort wakes a waiting prompt.
public final class TerminalActivity: @unchecked Sendable {
    // Unchecked: `activity` and `aborted` are under `lock`.
    private let lock = NSLock()
    private var activity: String?
    private var aborted = false
    private let terminal: String
    private let keypad: TerminalKeypad

    public init(terminal: String, keypad: TerminalKeypad) {
        self.terminal = terminal
        self.keypad = keypad
    }

    /// What the terminal is doing, or nil when idle.
    public var current: String? { lock.withLock { activity } }

    /// Whether the transaction in progress was stopped from outside.
    public var isAborted: Bool { lock.withLock { aborted } }

    /// Takes the terminal for `what`; a second caller gets "terminal busy".
    public func acquire(_ what: String) throws(WorkflowError) {
        let busy: String? = lock.withLock {
            if let activity { return activity }
            activity = what
            aborted = false
            return nil
        }
        if let busy { throw .conflict("terminal \(terminal) is busy: \(busy) in progress") }
        keypad.begin()
    }

    public func release() {
        keypad.end()
        lock.withLock {
            activity = nil
            aborted = false
        }
    }

    /// Stops the transaction in progress: the card wait and any prompt end at once. Returns false
    /// when the terminal was idle.
    public func abort() -> Bool {
        let busy = lock.withLock {
            guard activity != nil else { return false }
            aborted = true
            return true
        }
        if busy { keypad.abort() }
        return busy
    }
}
