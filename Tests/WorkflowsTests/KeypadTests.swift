import Foundation
import Terminal
import Testing
@testable import Workflows

@Suite("terminal keypad")
struct KeypadTests {
    /// Runs a prompt on its own thread, as the kernel does, and hands back its answer.
    func ask(_ keypad: TerminalKeypad, _ kind: PromptKind, timeout: Duration = .seconds(5)) -> Task<Result<KeypadInput, KernelError>, Never> {
        Task.detached {
            await withCheckedContinuation { c in
                Thread.detachNewThread {
                    do throws(KernelError) { c.resume(returning: .success(try keypad.ask(kind, timeout: timeout, step: "test"))) } catch {
                        c.resume(returning: .failure(error))
                    }
                }
            }
        }
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
