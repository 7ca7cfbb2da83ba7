import Testing
@testable import Fronts

@Suite("VivaInstallments")
struct VivaInstallmentsTests {
    @Test("withInstallments=false never asks, whatever the card and the preference")
    func notOffered() {
        for preferred in [nil, 0, 1, 2, 10, 999] as [Int?] {
            for supports in [false, true] {
                #expect(VivaInstallments.decide(withInstallments: false, preferred: preferred, cardSupports: supports,
                                                cardMaximum: 12) == .none)
            }
        }
    }

    @Test("a preference within 2 ... the card's maximum is used without a prompt", arguments: [2, 3, 10, 12])
    func used(preferred: Int) {
        #expect(VivaInstallments.decide(withInstallments: true, preferred: preferred, cardSupports: true, cardMaximum: 12)
                == .use(preferred))
    }

    @Test("no preference, 0, 1 or above the maximum asks on the keypad within 2 ... maximum",
          arguments: [nil, 0, 1, 13, 999] as [Int?])
    func prompted(preferred: Int?) {
        #expect(VivaInstallments.decide(withInstallments: true, preferred: preferred, cardSupports: true, cardMaximum: 12)
                == .prompt(range: 2...12))
    }

    @Test("a card without instalments asks whether to continue without, even with a valid preference")
    func cardWithout() {
        for preferred in [nil, 0, 2, 10] as [Int?] {
            #expect(VivaInstallments.decide(withInstallments: true, preferred: preferred, cardSupports: false,
                                            cardMaximum: 12) == .askContinueWithout)
        }
    }

    @Test("a card whose maximum is below 2 has no instalment plan to offer")
    func maximumBelowTwo() {
        #expect(VivaInstallments.decide(withInstallments: true, preferred: 2, cardSupports: true, cardMaximum: 1)
                == .askContinueWithout)
        #expect(VivaInstallments.decide(withInstallments: true, preferred: nil, cardSupports: true, cardMaximum: 0)
                == .askContinueWithout)
        // Exactly 2: the only plan is 2.
        #expect(VivaInstallments.decide(withInstallments: true, preferred: 2, cardSupports: true, cardMaximum: 2) == .use(2))
        #expect(VivaInstallments.decide(withInstallments: true, preferred: 3, cardSupports: true, cardMaximum: 2)
                == .prompt(range: 2...2))
    }
}
