import Foundation
import Terminal
import Testing
@testable import Workflows

@Suite("terminal keypad")
struct KeypadTests {
    /// Runs a prompt on a thread of its own, started at once (as the kernel's is), and hands back
    /// its answer. The prompt waits a minute by default: a test task can be kept off the 2-core
    /// machine's cooperative threads for tens of seconds by tests blocking them beside it, and the
    /// prompt must still be up when it looks.
    func ask(_ keypad: TerminalKeypad, _ kind: PromptKind, timeout: Duration = .seconds(60)) -> PromptRun {
        let run = PromptRun()
        Thread.detachNewThread {
            do throws(KernelError) { run.finish(.success(try keypad.ask(kind, timeout: timeout, step: "test"))) } catch {
                run.finish(.failure(error))
            }
        }
        return run
    }

    func waitForPrompt(_ keypad: TerminalKeypad) async throws {
        for _ in 0..<2000 where keypad.snapshot.prompt == nil { try await Task.sleep(for: .milliseconds(5)) }
        #expect(keypad.snapshot.prompt != nil)
    }

    @Test("an answer that does not fit the prompt is refused and the prompt stays up; a fitting one answers it")
    func fitting() async throws {
        let keypad = TerminalKeypad()
        let prompt = ask(keypad, .select(title: "application", options: ["VISA", "ELECTRON"]))
        try await waitForPrompt(keypad)
        #expect(throws: WorkflowError.conflict("the keypad is asking for application; PIN (4 digits) does not answer it")) { try keypad.enter(.pin("1234")) }
        #expect(throws: WorkflowError.self) { try keypad.enter(.select(3)) }
        #expect(try keypad.enter(.select(2)) == true)
        #expect(await prompt.value == .success(.select(2)))
    }

    @Test("answers given early wait for their prompt, in order; what a transaction leaves is dropped at its end")
    func queued() async throws {
        let keypad = TerminalKeypad()
        keypad.begin()
        #expect(try keypad.enter(.pin("1111")) == false)
        #expect(try keypad.enter(.pin("2222")) == false)
        #expect(try keypad.enter(.confirm) == false)
        #expect(await ask(keypad, .pin(online: false, triesLeft: 3)).value == .success(.pin("1111")))
        #expect(await ask(keypad, .confirm(question: "continue?")).value == .success(.confirm), "the first input that fits")
        #expect(keypad.snapshot.queued == [.pin("2222")])
        keypad.end()
        #expect(keypad.snapshot.queued.isEmpty)
    }

    @Test("no answer in time is a prompt timeout; an abort ends a waiting prompt as aborted, not as a keypad cancel")
    func timeoutAndAbort() async throws {
        let keypad = TerminalKeypad()
        #expect(await ask(keypad, .pin(online: true, triesLeft: nil), timeout: .milliseconds(50)).value == .failure(.promptTimeout(prompt: "online PIN")))
        keypad.begin()
        let waiting = ask(keypad, .pin(online: false, triesLeft: 3))
        try await waitForPrompt(keypad)
        keypad.abort()
        #expect(await waiting.value == .failure(.aborted(step: "test")))
    }

    @Test("demo mode answers PIN prompts by itself and nothing else")
    func demo() async throws {
        let keypad = TerminalKeypad(autoPIN: "4321")
        #expect(await ask(keypad, .pin(online: false, triesLeft: 3)).value == .success(.pin("4321")))
        #expect(await ask(keypad, .confirm(question: "continue?"), timeout: .milliseconds(30)).value == .failure(.promptTimeout(prompt: "continue?")))
    }
}

/// A prompt's answer, once its thread has it.
final class PromptRun: @unchecked Sendable {
    // Unchecked: both under `lock`.
    private let lock = NSLock()
    private var result: Result<KeypadInput, KernelError>?
    private var waiter: CheckedContinuation<Result<KeypadInput, KernelError>, Never>?

    func finish(_ r: Result<KeypadInput, KernelError>) {
        let w: CheckedContinuation<Result<KeypadInput, KernelError>, Never>? = lock.withLock {
            result = r
            defer { waiter = nil }
            return waiter
        }
        w?.resume(returning: r)
    }

    var value: Result<KeypadInput, KernelError> {
        get async {
            await withCheckedContinuation { c in
                let done: Result<KeypadInput, KernelError>? = lock.withLock {
                    if let result { return result }
                    waiter = c
                    return nil
                }
                if let done { c.resume(returning: done) }
            }
        }
    }

    @Test("an answer queued with a delay comes that long after its prompt on the bench clock, or the prompt times out first; the log keeps each wait and never a PIN")
    func delayed() async throws {
        let start: Int64 = 1_700_000_000
        let clock = ManualClock(secondsSince1970: start)
        let keypad = TerminalKeypad(clock: clock)
        keypad.begin()
        _ = try keypad.enter(.select(2), after: .milliseconds(2500))
        _ = try keypad.enter(.pin("1234"), after: .seconds(12))
        #expect(try keypad.ask(.select(title: "application", options: ["A", "B"]), timeout: .seconds(30), step: "t") == .select(2))
        #expect(clock.nowMicroseconds() == (start * 1_000_000) + 2_500_000, "the clock moved the 2.5 s the answer took")
        #expect(try keypad.ask(.pin(online: false, triesLeft: 3), timeout: .seconds(30), step: "t") == .pin("1234"))
        _ = try keypad.enter(.pin("1234"), after: .seconds(40))
        #expect(throws: KernelError.promptTimeout(prompt: "PIN")) { try keypad.ask(.pin(online: false, triesLeft: 3), timeout: .seconds(30), step: "t") }
        #expect(clock.now() == start + 2 + 12 + 30, "a late answer leaves the prompt to its timeout")
        #expect(keypad.answered == [PromptRecord(prompt: "select", waitedMilliseconds: 2500, answer: "select 2"),
                                    PromptRecord(prompt: "pin", waitedMilliseconds: 12_000, answer: "pin"),
                                    PromptRecord(prompt: "pin", waitedMilliseconds: 30_000, answer: "timeout")])
        keypad.begin()
        #expect(keypad.answered.isEmpty, "a new transaction starts a new log")
    }
}
