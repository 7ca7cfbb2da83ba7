import EMV

/// The card as the kernel sees it: an ATR at power-on, then raw C-APDU in, raw R-APDU out. A
/// CardIO channel or an in-process virtual card adapts to it; failures are already kernel errors.
public protocol CardLink {
    /// Powers the card on (or resets it) and returns its answer to reset.
    func powerOn() throws(KernelError) -> [UInt8]
    func transmit(_ command: [UInt8]) throws(KernelError) -> [UInt8]
    /// The tracks, when the card was swiped rather than inserted or tapped.
    var magneticStripe: MagneticStripe? { get }
}

extension CardLink {
    public var magneticStripe: MagneticStripe? { nil }
}

/// The cardholder's side of the terminal: prompts with answers. Each prompt carries how long the
/// cardholder has; a keypad that gets no answer in that time throws `KernelError.promptTimeout`.
public protocol Keypad {
    /// Offers the applications' labels; returns the chosen index.
    func selectApplication(_ labels: [String], timeout: Duration) throws(KernelError) -> Int
    /// Asks for a PIN; `triesLeft` is the card's counter for offline PIN, nil for online PIN.
    func enterPIN(online: Bool, triesLeft: Int?, timeout: Duration) throws(KernelError) -> String
}

/// The host as the kernel sees it; `EmulatedHost` is one.
public protocol AuthorisationHost {
    func authorise(_ request: AuthorisationRequest) throws(HostError) -> AuthorisationResponse
    /// Undoes an approval the terminal could not complete.
    func reverse(_ request: AuthorisationRequest, approval: AuthorisationResponse)
}

extension EmulatedHost: AuthorisationHost {}

/// Why a transaction ended without an outcome from the card.
public enum KernelError: Error, Equatable, Sendable, CustomStringConvertible {
    case cardRemoved(step: String)
    case readerError(step: String, detail: String)
    case promptTimeout(prompt: String)
    case cancelled(step: String)
    /// The transaction was stopped from outside (the API's abort, the daemon stopping), not by
    /// the cardholder.
    case aborted(step: String)
    case noApplication
    /// The card answered a command with a status word the flow cannot go on from.
    case cardError(step: String, status: String)
    case invalidCardData(String)
    /// The terminal asks the cardholder to present the card again: another interface (a tap
    /// that must be inserted, a chip card swiped, a chip that failed and may be swiped) or the
    /// same one (a tap too short, "See Phone"). The transaction waits for it.
    case presentAgain(CardInterface, reason: String)
    /// The contactless outcome "End Application" (Book A): the tap cannot go on.
    case endApplication(String)

    public var description: String {
        switch self {
        case .cardRemoved(let step): "card removed during \(step)"
        case .readerError(let step, let detail): "reader error during \(step): \(detail)"
        case .promptTimeout(let prompt): "no answer to the \(prompt) prompt in time"
        case .cancelled(let step): "cancelled on the keypad during \(step)"
        case .aborted(let step): "aborted during \(step) (stopped through the API or by the daemon stopping)"
        case .noApplication: "the card has no application this terminal supports"
        case .cardError(let step, let status): "the card answered \(step) with \(status)"
        case .invalidCardData(let detail): "invalid card data: \(detail)"
        case .presentAgain(let interface, let reason): "\(reason); \(interface.verb) the card"
        case .endApplication(let reason): "end application: \(reason)"
        }
    }
}

/// The terminal's configuration: what EMV calls terminal data.
public struct TerminalConfiguration: Sendable {
    public var countryCode: Int = 484
    public var currencyCode: Int = 484
    /// 9F35: 22 = attended, online with offline capability, merchant-operated.
    public var terminalType: UInt8 = 0x22
    /// 9F33: manual key entry, magstripe, IC; plaintext PIN, enciphered online PIN, signature, no
    /// CVM; SDA, DDA and CDA (byte 3 bits 8, 7 and 4).
    public var capabilities: [UInt8] = [0xE0, 0xE8, 0xC8]
    /// 9F40.
    public var additionalCapabilities: [UInt8] = [0x60, 0x00, 0xF0, 0x50, 0x01]
    public var tacDefault: [UInt8] = [0xDC, 0x40, 0x00, 0xA8, 0x00]
    public var tacDenial: [UInt8] = [0x00, 0x10, 0x00, 0x00, 0x00]
    public var tacOnline: [UInt8] = [0xDC, 0x40, 0x04, 0xF8, 0x00]
    /// Minor units; at or above it a transaction goes online.
    public var floorLimit: Int = 0
    /// Random transaction selection (EMV Book 3 §10.6.2) below the floor limit; nil turns it off.
    public var randomSelection: RandomSelection? = nil
    /// Purchases are of services rather than goods, for the application usage control check.
    public var sellsServices = false
    /// How long the cardholder has to answer a prompt (application choice, PIN).
    public var promptTimeout: Duration = .seconds(30)
    /// Supported AIDs, matched as prefixes of the card's (partial selection).
    public var aids: [[UInt8]] = [
        [0xA0, 0, 0, 0, 0x03], [0xA0, 0, 0, 0, 0x04], [0xA0, 0, 0, 0, 0x25], [0xA0, 0, 0, 0x06, 0x72],
    ]
    /// The key online PIN blocks are enciphered under (format 0).
    public var pinKey: TDESKey
    /// CA public keys and the revocation list for offline data authentication.
    public var oda = ODAConfiguration()
    /// Entry Point's combinations and limits, the TTQ and Kernel 2's settings.
    public var contactless = ContactlessConfiguration()
    /// A chip that cannot be read may be swiped instead (POS entry mode 80). Off: the
    /// transaction ends with the chip's failure.
    public var fallback = false

    public init(pinKey: TDESKey) { self.pinKey = pinKey }
}

/// Random transaction selection parameters (EMV Book 3 §10.6.2): below `threshold` a transaction
/// goes online with `targetPercentage` probability; between the threshold and the floor limit the
/// probability rises linearly towards `maximumTargetPercentage`.
public struct RandomSelection: Sendable, Equatable {
    public var targetPercentage: Int
    public var maximumTargetPercentage: Int
    /// Minor units.
    public var threshold: Int

    public init(targetPercentage: Int, maximumTargetPercentage: Int, threshold: Int) {
        self.targetPercentage = targetPercentage
        self.maximumTargetPercentage = maximumTargetPercentage
        self.threshold = threshold
    }
}

/// One transaction to run.
public struct TransactionRequest: Sendable {
    public var amount: Int
    /// Cashback or other amount (9F03), minor units.
    public var otherAmount: Int = 0
    /// 9C: 00 purchase, 01 cash, 09 purchase with cashback, 20 refund.
    public var transactionType: UInt8 = 0x00
    public var date: UTCDateParts
    /// Allocated (durably) by the caller before the transaction starts; the host sees it.
    public var stan: STAN
    /// What the host is asked for: a purchase or a pre-authorisation (refunds follow 9C = 20).
    public var kind: AuthorisationRequest.Kind = .purchase
    /// The presentations before this one in the same transaction, as the entry report's path.
    public var earlierPresentations: [String] = []
    /// The chip failed on an earlier presentation and the terminal allows fallback: a swipe is
    /// a fallback (POS entry mode 80).
    public var chipFailed = false

    public init(amount: Int, date: UTCDateParts, stan: STAN) {
        self.amount = amount
        self.date = date
        self.stan = stan
    }
}

/// An approval the host gave and the kernel had to take back: the issuer state is already
/// restored through `AuthorisationHost.reverse`; the ledger records it.
public struct Reversal: Sendable, Equatable {
    public let responseCode: ResponseCode
    public let authorisationCode: String?
    public let amount: Int
    /// Why: "card removed during second GENERATE AC", "declined by the card after host approval", ….
    public let reason: String
}

/// A transaction that ended without an outcome: the error, what was learnt of the card, the trace so
/// far, and the reversal when the host had already approved.
public struct TransactionFailure: Error, Sendable, CustomStringConvertible {
    public let error: KernelError
    public let reversal: Reversal?
    /// Masked; nil when the card was gone before its PAN was read.
    public let maskedPAN: String?
    /// The full PAN, for the ledger's keyed hash only: never stored or shown.
    public let pan: String?
    public let aid: [UInt8]?
    public let trace: [(command: String, response: String)]
    /// What offline data authentication had done before the transaction ended; nil when it had not begun.
    public var oda: ODAReport? = nil
    /// How the card was read so far; nil when no card was presented.
    public var entry: EntryReport? = nil
    /// The TVR the transaction ended with, once the card was asked for a cryptogram (GENERATE AC,
    /// or Kernel 3's GPO); nil before.
    public var tvr: TVR? = nil

    /// A failure before or without a card: nothing read, nothing reversed.
    public init(error: KernelError, reversal: Reversal? = nil, maskedPAN: String? = nil, pan: String? = nil, aid: [UInt8]? = nil,
                trace: [(command: String, response: String)] = []) {
        self.error = error
        self.reversal = reversal
        self.maskedPAN = maskedPAN
        self.pan = pan
        self.aid = aid
        self.trace = trace
    }

    public var description: String {
        reversal.map { "\(error); the host's approval \($0.authorisationCode ?? "") was reversed" } ?? error.description
    }
}

/// The card as read before cardholder verification: what a front needs to decide on prompts
/// (installments) or to find the card's earlier transactions (cancel).
public struct CardRead: Sendable, Equatable {
    /// The full PAN, for hashing and issuer lookups only: never stored or shown.
    public let pan: String
    public let maskedPAN: String
    public let brand: CardBrand?
    public let aid: [UInt8]
    public let applicationLabel: String
    /// YYMM.
    public let expiry: String
    public let cardholderName: String?
}

/// What a front needs from a finished transaction.
public struct TransactionOutcome: Sendable {
    public enum Decision: String, Sendable { case approved, declined }
    public let decision: Decision
    public let responseCode: ResponseCode
    public let authorisationCode: String?
    public let hostMessage: String
    public let aid: [UInt8]
    public let applicationLabel: String
    public let maskedPAN: String
    public let brand: CardBrand?
    public let cardholderName: String?
    /// YYMM.
    public let expiry: String?
    public let arqc: [UInt8]?
    public let atc: [UInt8]?
    public let tvr: TVR
    public let tsi: TSI
    public let cvm: CVMethod?
    public let cvmResults: CVMResults
    public let entryMode: EntryMode
    /// The card's answer to reset.
    public let atr: [UInt8]
    public let stan: STAN
    /// 12 digits: Y DDD HH (UTC) and the STAN.
    public let rrn: String
    /// Set when the host approved but the card declined at the second GENERATE AC.
    public let reversal: Reversal?
    /// The full PAN, for the ledger's keyed hash only: never stored or shown.
    public let pan: String
    /// The APDUs of the transaction, PAN masked and PIN blocks withheld.
    public let trace: [(command: String, response: String)]
    /// What offline data authentication did.
    public let oda: ODAReport
    /// How the card was read: interface, POS entry mode, kernel, the path of presentations, limits.
    public var entry = EntryReport()
}

/// A contact EMV kernel (EMV Book 3 and 4): application selection, GPO, records, processing
/// restrictions, cardholder verification, terminal risk management, terminal action analysis,
/// GENERATE AC, online authorisation, issuer authentication, second GENERATE AC.
public struct Kernel {
    public let configuration: TerminalConfiguration
    let card: CardLink
    let keypad: Keypad
    let host: AuthorisationHost
    let unpredictableNumber: () -> [UInt8]
    /// 1–99, for random transaction selection.
    let randomPercent: () -> Int
    /// Called once the card's records are read, before cardholder verification: a front asks its
    /// own prompts here (installments); throwing ends the transaction with that error.
    public var onCardRead: ((CardRead) throws(KernelError) -> Void)? = nil

    var trace: [(command: String, response: String)] = []
    var pan: String? = nil
    var atr: [UInt8] = []
    var data: [EMVTag: [UInt8]] = [:]
    var tvr = TVR()
    var tsi = TSI()
    /// Offline data authentication: the report so far, the ICC key CDA checks GENERATE AC with,
    /// the records marked for ODA as read, and the PDOL and CDOL data a CDA signature hashes.
    var odaReport = ODAReport()
    var cdaKey: RSAPublicKey? = nil
    /// Whether the transaction reached offline data authentication (a failure report carries it then).
    var odaBegun = false
    var odaRecords: [(sfi: Int, record: [UInt8])] = []
    var pdolData: [UInt8] = []
    private var cdolData: [[UInt8]] = []
    /// How the card is being read, for the outcome and the ledger.
    var entry = EntryReport()
    /// Kernel 2's CVM capability (9F33 byte 2) for this tap, in place of the configuration's.
    var cvmCapability: UInt8? = nil
    /// Whether a GENERATE AC (or a qVSDC GPO) has been sent: after it the card has answered for
    /// the transaction and a failure is no longer the chip's to fall back from.
    var cryptogramRequested = false
    /// The host's approval while the card has yet to confirm it; reversed if the card never does.
    private var pendingApproval: (request: AuthorisationRequest, response: AuthorisationResponse)? = nil

    public init(configuration: TerminalConfiguration, card: CardLink, keypad: Keypad, host: AuthorisationHost,
                unpredictableNumber: @escaping () -> [UInt8] = { SecureRandom.bytes(4) },
                randomPercent: @escaping () -> Int = { Int(SecureRandom.bytes(1)[0]) % 99 + 1 }) {
        self.configuration = configuration
        self.card = card
        self.keypad = keypad
        self.host = host
        self.unpredictableNumber = unpredictableNumber
        self.randomPercent = randomPercent
    }

    private func exchange(_ command: CommandAPDU, step: String) throws(KernelError) -> ResponseAPDU {
        let bytes = try card.transmit(command.bytes)
        do { return try ResponseAPDU(bytes: bytes) } catch { throw .readerError(step: step, detail: error.rule) }
    }

    mutating func send(_ command: CommandAPDU, step: String) throws(KernelError) -> ResponseAPDU {
        var response = try exchange(command, step: step)
        // T=0 cards ask for the right Le (6Cxx) or hand the data over in further exchanges (61xx).
        if let length = response.status.correctLength {
            response = try exchange(CommandAPDU(cla: command.cla, ins: command.ins, p1: command.p1, p2: command.p2,
                                                data: command.data, le: length), step: step)
        }
        var collected = response.data
        while let available = response.status.bytesAvailable {
            response = try exchange(.getResponse(available), step: step)
            collected += response.data
        }
        let final = ResponseAPDU(data: collected, status: response.status)
        let shownResponse = pan.map { TraceRedaction.masking(pan: $0, in: Hex.encode(final.bytes)) } ?? Hex.encode(final.bytes)
        trace.append((TraceRedaction.command(command.bytes), shownResponse))
        return final
    }

    /// Runs one transaction to its outcome. When it ends early (card removed, reader error, prompt
    /// timeout, cancel) the failure carries the trace so far, and a host approval already given is
    /// reversed at the host before this returns.
    public mutating func run(_ request: TransactionRequest) throws(TransactionFailure) -> TransactionOutcome {
        trace = []
        tvr = TVR()
        tsi = TSI()
        pan = nil
        pendingApproval = nil
        odaReport = ODAReport()
        odaBegun = false
        cdaKey = nil
        odaRecords = []
        pdolData = []
        cdolData = []
        atr = []
        entry = EntryReport()
        entry.path = request.earlierPresentations
        let pathStart = entry.path.count
        cvmCapability = nil
        cryptogramRequested = false
        do {
            if let stripe = card.magneticStripe { return try swipe(request, stripe) }
            atr = try card.powerOn()
            if ATR.isContactless(atr) { return try tap(request) }
            entry.interface = .contact
            entry.posEntryMode = "05"
            var outcome = try perform(request)
            entry.path.append("insert: chip read")
            outcome.entry = entry
            return outcome
        } catch {
            var error = error
            if entry.interface == .contact, configuration.fallback, pendingApproval == nil, !cryptogramRequested, Self.chipFault(error) {
                // The chip could not be read: the terminal offers the stripe (EMV fallback).
                entry.path.append("insert: chip failed (\(error))")
                error = .presentAgain(.magstripe, reason: "the chip could not be read (\(error)); fallback to the stripe")
            } else if case .presentAgain = error {
                // The kernel wrote the step.
            } else if entry.path.count > pathStart {
                // The kernel wrote the step (end application, a card error it named).
            } else if entry.interface == .contactless, pendingApproval == nil, Self.leftTheField(error) {
                // Book A "Try Again": the card left the field before the kernel was done.
                entry.outcome = "try again"
                entry.path.append("tap: \(error), try again")
                error = .presentAgain(.contactless, reason: "the card left the field too soon (\(error))")
            } else {
                entry.path.append("\(entry.interface.verb): \(error)")
            }
            var reversal: Reversal? = nil
            if let (hostRequest, approval) = pendingApproval {
                host.reverse(hostRequest, approval: approval)
                reversal = Reversal(responseCode: approval.responseCode, authorisationCode: approval.authorisationCode,
                                    amount: hostRequest.amount, reason: error.description)
                pendingApproval = nil
            }
            var failure = TransactionFailure(error: error, reversal: reversal, maskedPAN: pan.map(PAN.masked), pan: pan,
                                             aid: data[0x9F06], trace: trace)
            failure.oda = odaBegun ? odaReport : nil
            failure.entry = entry
            failure.tvr = cryptogramRequested ? tvr : nil
            throw failure
        }
    }

    /// The card stopped answering: out of the field, for a tap (Book A's "Try Again").
    static func leftTheField(_ error: KernelError) -> Bool {
        switch error {
        case .cardRemoved, .readerError: true
        default: false
        }
    }

    /// A failure of the chip itself (no usable ATR, an error status, unreadable data, no common
    /// application) rather than of the cardholder or the transaction: what EMV fallback is for.
    static func chipFault(_ error: KernelError) -> Bool {
        switch error {
        case .readerError, .noApplication, .cardError, .invalidCardData: true
        default: false
        }
    }

    private mutating func perform(_ request: TransactionRequest) throws(KernelError) -> TransactionOutcome {
        data = terminalData(request)
        let (aid, label, aip, expiry) = try readApplication()
        let cardPAN = pan!
        if let onCardRead {
            try onCardRead(CardRead(pan: cardPAN, maskedPAN: PAN.masked(cardPAN), brand: CardBrand.detect(pan: cardPAN), aid: aid,
                                    applicationLabel: label, expiry: String(Hex.encode(expiry).prefix(4)), cardholderName: holderName))
        }
        // 4a. Offline data authentication (Book 3 §10.3).
        try offlineDataAuthentication(today: request.date.emvDate)
        // 5. Processing restrictions.
        processingRestrictions(request, expiry: expiry)
        // 6. Cardholder verification.
        let (cvm, cvmResults, pinBlock) = try cardholderVerification(request)
        data[0x9F34] = cvmResults.bytes
        // 7. Terminal risk management.
        try terminalRiskManagement(amount: request.amount)
        // 8–9. Terminal action analysis and the first GENERATE AC.
        data[0x95] = tvr.bytes
        let requested = terminalActionAnalysis()
        let cdol1 = try Self.dol(data[0x8C]!, "CDOL1")
        // CDA is asked for with a TC or an ARQC, when the keys were recovered (Book 2 §6.6).
        let first = try generateAC(requested, cdol: cdol1, step: "first GENERATE AC", cda: cdaKey != nil && requested != .aac)
        if cdaKey != nil, requested == .aac { odaReport.reason = "keys recovered; no signature to check: the terminal asked for an AAC" }
        tsi.set(TSI.cardRiskManagementPerformed)

        var responseCode: ResponseCode
        var authCode: String? = nil
        var message: String
        var decision: TransactionOutcome.Decision
        var reversal: Reversal? = nil
        if first.cdaFailed {
            // Book 3 §10.8: a TC or ARQC whose CDA signature fails is an offline decline; an
            // ARQC's transaction is closed at the card with a second GENERATE AC asking for an AAC.
            if first.type == .arqc {
                data[0x8A] = ResponseCode("Z1").bytes
                data[0x95] = tvr.bytes
                _ = try generateAC(.aac, cdol: try Self.dol(data[0x8D] ?? [], "CDOL2"), step: "second GENERATE AC", cda: false)
            }
            decision = .declined
            responseCode = "Z1"
            message = "offline declined: CDA failed (\(odaReport.failedCheck ?? ""))"
        } else if first.type == .arqc {
            // 10. Online authorisation.
            let cryptogramData = CryptogramData(tags: data, issuerApplicationData: first.iad)
            let hostRequest = AuthorisationRequest(pan: pan!, aid: aid, kind: request.transactionType == 0x20 ? .refund : request.kind,
                                                   amount: request.amount, currency: configuration.currencyCode, arqc: first.cryptogram,
                                                   cryptogramData: cryptogramData, pinBlock: pinBlock, date: request.date)
            var issuerData: [UInt8]? = nil
            var scripts: [[UInt8]] = []
            do {
                let answer = try host.authorise(hostRequest)
                scripts = answer.issuerScripts
                if answer.isApproved { pendingApproval = (hostRequest, answer) }
                responseCode = answer.responseCode
                authCode = answer.authorisationCode
                message = answer.message
                issuerData = answer.issuerAuthenticationData
            } catch {
                // Unable to go online: the TACs/IACs "default" decide, as Y3 or Z3.
                responseCode = defaultActionDenies() ? "Z3" : "Y3"
                message = "\(error)"
            }
            data[0x8A] = responseCode.bytes
            // 11. Issuer authentication, then the second GENERATE AC.
            if let issuerData {
                data[0x91] = issuerData
                if aip.contains(AIP.issuerAuthenticationSupported) {
                    let r = try send(.externalAuthenticate(issuerData), step: "EXTERNAL AUTHENTICATE")
                    tsi.set(TSI.issuerAuthenticationPerformed)
                    if !r.status.isSuccess { tvr.set(TVR.issuerAuthenticationFailed) }
                }
            }
            // Issuer scripts (Book 3 §10.10): 71 before the final GENERATE AC, 72 after.
            var scriptResults = runIssuerScripts(scripts, template: 0x71)
            data[0x95] = tvr.bytes
            let cdol2 = try Self.dol(data[0x8D] ?? [], "CDOL2")
            let second = try generateAC(responseCode.isApproval ? .tc : .aac, cdol: cdol2, step: "second GENERATE AC",
                                        cda: cdaKey != nil && responseCode.isApproval)
            scriptResults += runIssuerScripts(scripts, template: 0x72)
            if !scriptResults.isEmpty { data[0x9F5B] = scriptResults }
            decision = second.type == .tc && !second.cdaFailed ? .approved : .declined
            if decision == .declined, responseCode.isApproval {
                // Approved by the host (or offline as Y3), declined by the card: take the approval back.
                message = second.cdaFailed
                    ? "CDA failed at the second GENERATE AC after \(responseCode == "Y3" ? "offline" : "host") approval"
                    : "declined by the card after \(responseCode == "Y3" ? "offline" : "host") approval"
                if let (hostRequest, approval) = pendingApproval {
                    host.reverse(hostRequest, approval: approval)
                    reversal = Reversal(responseCode: approval.responseCode, authorisationCode: approval.authorisationCode,
                                        amount: hostRequest.amount, reason: message)
                }
                responseCode = responseCode == "Y3" ? "Z3" : "05"
                authCode = nil
            }
            pendingApproval = nil
        } else {
            decision = first.type == .tc ? .approved : .declined
            responseCode = first.type == .tc ? "Y1" : "Z1"
            message = responseCode.meaning
        }

        let holder = holderName
        return TransactionOutcome(
            decision: decision, responseCode: responseCode, authorisationCode: authCode, hostMessage: message, aid: aid,
            applicationLabel: label, maskedPAN: PAN.masked(pan!), brand: CardBrand.detect(pan: pan!), cardholderName: holder,
            expiry: String(Hex.encode(expiry).prefix(4)), arqc: first.cryptogram.isEmpty ? nil : first.cryptogram, atc: first.atc, tvr: tvr, tsi: tsi, cvm: cvm,
            cvmResults: cvmResults, entryMode: .chip, atr: atr, stan: request.stan, rrn: RRN.make(stan: request.stan, at: request.date),
            reversal: reversal, pan: pan!, trace: trace, oda: odaReport)
    }

    /// Runs the issuer's scripts of one template (71 or 72) on the card and returns their Issuer
    /// Script Results (9F5B, Book 4 Annex A5): per script a result byte (high nibble 2 performed,
    /// 1 failed; low nibble the failed command's number, 1–15) and the script's identifier (9F18,
    /// zeros without one). A command the card refuses (an error status, not 90xx/62xx/63xx) ends
    /// its script and sets the TVR's script bit; a card gone during a script fails only the script.
    mutating func runIssuerScripts(_ templates: [[UInt8]], template tag: UInt32) -> [UInt8] {
        var results: [UInt8] = []
        for template in templates {
            guard let item = (try? TLV.parse(template))?.first, item.tag.value == tag else { continue }
            let id = item.first(0x9F18)?.value ?? []
            var result: UInt8 = 0x20
            tsi.set(TSI.scriptProcessingPerformed)
            for (i, command) in item.children.filter({ $0.tag == 0x86 }).enumerated() {
                var ok = false
                if let apdu = try? CommandAPDU(bytes: command.value) {
                    do throws(KernelError) {
                        let r = try send(apdu, step: "issuer script")
                        ok = r.status.sw1 == 0x90 || r.status.isWarning
                    } catch {
                        ok = false
                    }
                }
                if !ok {
                    result = 0x10 | UInt8(min(i + 1, 15))
                    tvr.set(tag == 0x71 ? TVR.scriptFailedBeforeFinalGenerateAC : TVR.scriptFailedAfterFinalGenerateAC)
                    break
                }
            }
            results += [result] + (id.count == 4 ? id : [0, 0, 0, 0])
        }
        return results
    }

    /// Steps 1–4: power on and ATR, application selection, GET PROCESSING OPTIONS, READ RECORD.
    private mutating func readApplication() throws(KernelError) -> (aid: [UInt8], label: String, aip: AIP, expiry: [UInt8]) {
        // 1. Power on (done by the caller): an ATR EMV can work with (Book 1 §8), T=0 or T=1.
        do {
            let parsed = try ATR.parse(atr)
            guard parsed.protocols.contains(where: { $0 == 0 || $0 == 1 }) else {
                throw KernelError.invalidCardData("ATR \(Hex.encode(atr)) offers neither T=0 nor T=1")
            }
        } catch let error as KernelError {
            throw error
        } catch {
            throw .invalidCardData("ATR \(Hex.encode(atr)): \(error)")
        }
        // 2–3. Application selection, SELECT.
        let (aid, label) = try selectApplication()
        data[0x9F06] = aid
        // 3. GPO with the PDOL.
        pdolData = try data[0x9F38].map { bytes throws(KernelError) in try Self.dol(bytes, "PDOL").fill { self.value($0) } } ?? []
        let gpo = try send(.getProcessingOptions(pdolData: pdolData), step: "GET PROCESSING OPTIONS")
        guard gpo.status.isSuccess else { throw .cardError(step: "GET PROCESSING OPTIONS", status: gpo.status.description) }
        let (aip, afl) = try Self.parseGPO(gpo.data)
        data[0x82] = aip.bytes
        // 4. READ RECORD per AFL.
        try readRecords(afl)
        guard let panBCD = data[0x5A], let expiry = data[0x5F24], data[0x8C] != nil else {
            throw .invalidCardData("the card lacks a mandatory object (5A, 5F24 or 8C)")
        }
        learnPAN(Hex.encode(panBCD).filter { $0 != "F" })
        return (aid, label, aip, expiry)
    }

    /// Keeps the card's PAN and masks it in the trace so far (records were traced before it was known).
    mutating func learnPAN(_ cardPAN: String) {
        pan = cardPAN
        trace = trace.map { ($0.command, TraceRedaction.masking(pan: cardPAN, in: $0.response)) }
    }

    /// READ RECORD for every record the AFL names; the ODA records kept for authentication.
    mutating func readRecords(_ afl: [AFLEntry]) throws(KernelError) {
        for entry in afl {
            for record in entry.records {
                let r = try send(.readRecord(sfi: entry.sfi, record: record), step: "READ RECORD")
                guard r.status.isSuccess else { throw .cardError(step: "READ RECORD SFI \(entry.sfi) record \(record)", status: r.status.description) }
                let items: [TLV]
                do { items = try TLV.parse(r.data) } catch { throw .invalidCardData(error.description) }
                guard items.first?.tag == 0x70 else { throw .invalidCardData("record SFI \(entry.sfi) \(record) is not a 70 template") }
                if record < entry.firstRecord + entry.offlineAuthenticationRecords { odaRecords.append((entry.sfi, r.data)) }
                for (tag, value) in items.primitives() where data[tag] == nil || tag == 0x5A { data[tag] = value }
            }
        }
    }

    var holderName: String? {
        data[0x5F20].map { String(decoding: $0, as: UTF8.self).trimmingTrailingSpaces() }
    }

    /// Reads the card without a transaction (steps 1–4), as a terminal does to find what to cancel:
    /// the card's PAN (for the ledger's hash only), masked PAN, application and expiry.
    public mutating func readCard(_ request: TransactionRequest) throws(TransactionFailure) -> CardRead {
        trace = []
        tvr = TVR()
        tsi = TSI()
        pan = nil
        pendingApproval = nil
        do throws(KernelError) {
            if let stripe = card.magneticStripe {
                return CardRead(pan: stripe.pan, maskedPAN: PAN.masked(stripe.pan), brand: CardBrand.detect(pan: stripe.pan), aid: [],
                                applicationLabel: "", expiry: stripe.expiry, cardholderName: stripe.cardholderName)
            }
            atr = try card.powerOn()
            data = terminalData(request)
            if ATR.isContactless(atr) { return try readTappedCard(request) }
            let (aid, label, _, expiry) = try readApplication()
            return CardRead(pan: pan!, maskedPAN: PAN.masked(pan!), brand: CardBrand.detect(pan: pan!), aid: aid,
                            applicationLabel: label, expiry: String(Hex.encode(expiry).prefix(4)), cardholderName: holderName)
        } catch {
            throw TransactionFailure(error: error, reversal: nil, maskedPAN: pan.map(PAN.masked), pan: pan, aid: data[0x9F06], trace: trace)
        }
    }

    func terminalData(_ request: TransactionRequest) -> [EMVTag: [UInt8]] {
        [
            0x9F02: Self.bcd(request.amount, bytes: 6), 0x9F03: Self.bcd(request.otherAmount, bytes: 6),
            0x9F1A: Self.bcd(configuration.countryCode, bytes: 2), 0x5F2A: Self.bcd(configuration.currencyCode, bytes: 2),
            0x9A: request.date.emvDate, 0x9C: [request.transactionType], 0x9F35: [configuration.terminalType],
            0x9F33: configuration.capabilities, 0x9F40: configuration.additionalCapabilities, 0x9F37: unpredictableNumber(),
            0x9F45: [0, 0], 0x9F66: [0x36, 0, 0, 0],
        ]
    }

    func value(_ tag: EMVTag) -> [UInt8]? { data[tag] }

    // MARK: Steps

    private mutating func selectApplication() throws(KernelError) -> (aid: [UInt8], label: String) {
        struct Candidate { let aid: [UInt8]; let label: String; let priority: Int; let confirm: Bool }
        var candidates: [Candidate] = []
        let pse = try send(.selectPSE, step: "SELECT PSE")
        if pse.status.isSuccess {
            for record in 1...16 {
                let r = try send(.readRecord(sfi: 1, record: record), step: "READ RECORD (directory)")
                if !r.status.isSuccess { break }
                guard let items = try? TLV.parse(r.data) else { break }
                for entry in items.first.map({ $0.children.filter { $0.tag == 0x61 } }) ?? [] {
                    guard let aid = entry.first(0x4F)?.value, configuration.aids.contains(where: { aid.starts(with: $0) }) else { continue }
                    let api = entry.first(0x87)?.value.first ?? 0
                    candidates.append(Candidate(aid: aid, label: entry.first(0x50).map { String(decoding: $0.value, as: UTF8.self) } ?? Hex.encode(aid),
                                                priority: Int(api & 0x0F), confirm: api & 0x80 != 0))
                }
            }
        } else {
            // No PSE: try each supported AID, with next occurrences.
            for prefix in configuration.aids {
                var next = false
                while true {
                    let r = try send(.select(name: prefix, next: next), step: "SELECT")
                    guard r.status.isSuccess || r.status == StatusWord(0x6283), let fci = try? TLV.parse(r.data),
                          let aid = fci.first(0x84)?.value else { break }
                    if r.status.isSuccess {
                        let api = fci.first(0x87)?.value.first ?? 0
                        candidates.append(Candidate(aid: aid, label: fci.first(0x50).map { String(decoding: $0.value, as: UTF8.self) } ?? Hex.encode(aid),
                                                    priority: Int(api & 0x0F), confirm: api & 0x80 != 0))
                    }
                    next = true
                }
            }
        }
        // Final selection: try candidates in priority order, skipping blocked ones (6283).
        candidates.sort { ($0.priority == 0 ? 16 : $0.priority) < ($1.priority == 0 ? 16 : $1.priority) }
        while !candidates.isEmpty {
            var index = 0
            if candidates.count > 1 || candidates[0].confirm {
                index = try keypad.selectApplication(candidates.map(\.label), timeout: configuration.promptTimeout)
                guard candidates.indices.contains(index) else { throw .cancelled(step: "application selection") }
            }
            let chosen = candidates[index]
            let r = try send(.select(name: chosen.aid), step: "SELECT")
            if r.status.isSuccess, let fci = try? TLV.parse(r.data) {
                for (tag, value) in fci.primitives() { data[tag] = value }
                return (chosen.aid, chosen.label)
            }
            candidates.remove(at: index)
        }
        throw .noApplication
    }

    /// EMV Book 3 §10.4: application version, usage control, effective and expiry dates.
    mutating func processingRestrictions(_ request: TransactionRequest, expiry: [UInt8]) {
        let today = request.date.emvDate
        if today.lexicographicallyPrecedes(expiry) == false, today != expiry { tvr.set(TVR.expiredApplication) }
        if let effective = data[0x5F25], today.lexicographicallyPrecedes(effective) { tvr.set(TVR.applicationNotYetEffective) }
        if let cardVersion = data[0x9F08], let terminalVersion = data[0x9F09], cardVersion != terminalVersion {
            tvr.set(TVR.differentApplicationVersions)
        }
        if let auc = data[0x9F07], auc.count >= 2,
           !Self.usageAllowed(auc: auc, issuerCountry: data[0x5F28], terminalCountry: data[0x9F1A]!,
                              transactionType: request.transactionType, terminalType: configuration.terminalType,
                              additionalCapabilities: configuration.additionalCapabilities, services: configuration.sellsServices) {
            tvr.set(TVR.serviceNotAllowed)
        }
    }

    /// The application usage control check (EMV Book 3 §10.4.2). AUC byte 1: b8 domestic cash,
    /// b7 international cash, b6 domestic goods, b5 international goods, b4 domestic services,
    /// b3 international services, b2 valid at ATMs, b1 valid at other terminals; byte 2: b8
    /// domestic cashback, b7 international cashback.
    static func usageAllowed(auc: [UInt8], issuerCountry: [UInt8]?, terminalCountry: [UInt8], transactionType: UInt8,
                             terminalType: UInt8, additionalCapabilities: [UInt8], services: Bool) -> Bool {
        func bit(_ byte: Int, _ b: Int) -> Bool { auc[byte - 1] & (1 << (b - 1)) != 0 }
        // An ATM is an unattended, financial-institution terminal (types 14–16) able to dispense cash.
        let atm = [0x14, 0x15, 0x16].contains(terminalType) && (additionalCapabilities.first ?? 0) & 0x80 != 0
        guard atm ? bit(1, 2) : bit(1, 1) else { return false }
        // Without the issuer country the domestic/international checks cannot be made.
        guard let issuerCountry else { return true }
        let domestic = issuerCountry == terminalCountry
        switch transactionType {
        case 0x01: return domestic ? bit(1, 8) : bit(1, 7)
        case 0x00, 0x09:
            let purchase = services ? (domestic ? bit(1, 4) : bit(1, 3)) : (domestic ? bit(1, 6) : bit(1, 5))
            guard transactionType == 0x09 else { return purchase }
            return purchase && (domestic ? bit(2, 8) : bit(2, 7))
        default: return true
        }
    }

    /// EMV Book 3 §10.6: floor limit, random transaction selection, velocity checking.
    private mutating func terminalRiskManagement(amount: Int) throws(KernelError) {
        let floor = configuration.floorLimit
        if amount >= floor {
            tvr.set(TVR.exceedsFloorLimit)
        } else if let random = configuration.randomSelection {
            let target: Int
            if amount < random.threshold || floor <= random.threshold {
                target = random.targetPercentage
            } else {
                // The probability rises with the amount, from the target at the threshold to the maximum at the floor limit.
                let interpolation = (random.maximumTargetPercentage - random.targetPercentage) * (amount - random.threshold)
                    / (floor - random.threshold)
                target = random.targetPercentage + interpolation
            }
            if randomPercent() <= target { tvr.set(TVR.randomlySelectedOnline) }
        }
        if let lower = data[0x9F14]?.first, let upper = data[0x9F23]?.first {
            let atc = try counter(0x9F36, step: "GET DATA ATC")
            let lastOnline = try counter(0x9F13, step: "GET DATA last online ATC register")
            if let atc, let lastOnline {
                let offline = atc - lastOnline
                if offline > Int(lower) { tvr.set(TVR.lowerOfflineLimitExceeded) }
                if offline > Int(upper) { tvr.set(TVR.upperOfflineLimitExceeded) }
                if lastOnline == 0 { tvr.set(TVR.newCard) }
            } else {
                // Counters the card will not give count as exceeded (Book 3 §10.6.3).
                tvr.set(TVR.lowerOfflineLimitExceeded)
                tvr.set(TVR.upperOfflineLimitExceeded)
            }
        }
        tsi.set(TSI.terminalRiskManagementPerformed)
    }

    /// A two-byte counter read with GET DATA; nil when the card does not give it.
    private mutating func counter(_ tag: EMVTag, step: String) throws(KernelError) -> Int? {
        let r = try send(.getData(tag), step: step)
        guard r.status.isSuccess, let value = (try? TLV.parse(r.data))?.first(tag)?.value, value.count == 2 else { return nil }
        return Int(value[0]) << 8 | Int(value[1])
    }

    /// EMV Book 3 §10.5: the first rule whose condition holds and whose method the terminal
    /// supports decides; a failed method goes on to the next rule only when the rule says so.
    mutating func cardholderVerification(_ request: TransactionRequest) throws(KernelError) -> (CVMethod?, CVMResults, [UInt8]?) {
        let amount = request.amount
        let aip = AIP(uncheckedBytes: data[0x82] ?? [0, 0])
        guard aip.contains(AIP.cardholderVerificationSupported), let listBytes = data[0x8E],
              let list = try? CVMList.parse(listBytes), !list.rules.isEmpty else {
            return (nil, CVMResults(rule: nil, result: .unknown), nil)
        }
        tsi.set(TSI.cardholderVerificationPerformed)
        let sameCurrency = data[0x9F42] == data[0x5F2A]
        let cash = request.transactionType == 0x01
        let cashback = request.transactionType == 0x09
        // Terminal types x4–x6 are unattended.
        let unattended = (4...6).contains(configuration.terminalType & 0x0F)
        // CVM Results report the last rule tried when verification fails (EMV Book 4 §6.3.4.5).
        var lastTried: CVMRule? = nil
        for rule in list.rules {
            let applies: Bool
            switch rule.condition {
            case .always: applies = true
            case .terminalSupportsCVM: applies = terminalSupports(rule.method)
            case .unattendedCash: applies = unattended && cash
            case .manualCash: applies = !unattended && cash
            case .purchaseWithCashback: applies = cashback
            case .notUnattendedCashNotManualCashNotCashback: applies = !cash && !cashback
            case .underX: applies = sameCurrency && amount < Int(list.amountX)
            case .overX: applies = sameCurrency && amount > Int(list.amountX)
            case .underY: applies = sameCurrency && amount < Int(list.amountY)
            case .overY: applies = sameCurrency && amount > Int(list.amountY)
            default: applies = false
            }
            guard applies else { continue }
            lastTried = rule
            // A method the terminal does not support fails; the rule says whether to go on.
            guard terminalSupports(rule.method) else {
                if case .other = rule.method { tvr.set(TVR.unrecognisedCVM) }
                if rule.method == .plaintextPINByICC || rule.method == .encipheredPINOnline { tvr.set(TVR.pinPadNotPresent) }
                if rule.applyNextIfUnsuccessful { continue } else { break }
            }
            switch rule.method {
            case .plaintextPINByICC, .plaintextPINByICCAndSignature:
                if try offlinePIN() {
                    return (rule.method, CVMResults(rule: rule, result: rule.method == .plaintextPINByICC ? .successful : .unknown), nil)
                }
            case .encipheredPINOnline:
                let pin = try keypad.enterPIN(online: true, triesLeft: nil, timeout: configuration.promptTimeout)
                let block: [UInt8]
                do { block = try PINBlock.format0(pin: pin, pan: pan!, key: configuration.pinKey) } catch {
                    throw .cancelled(step: "online PIN entry (\(error.rule))")
                }
                tvr.set(TVR.onlinePINEntered)
                return (rule.method, CVMResults(rule: rule, result: .unknown), block)
            case .signature:
                return (rule.method, CVMResults(rule: rule, result: .unknown), nil)
            case .noCVMRequired:
                return (rule.method, CVMResults(rule: rule, result: .successful), nil)
            case .failCVM:
                break
            default:
                tvr.set(TVR.unrecognisedCVM)
            }
            if !rule.applyNextIfUnsuccessful { break }
        }
        tvr.set(TVR.cardholderVerificationNotSuccessful)
        return (nil, CVMResults(rule: lastTried, result: .failed), nil)
    }

    /// Whether 9F33 byte 2 says the terminal can perform the method.
    private func terminalSupports(_ method: CVMethod) -> Bool {
        let byte = cvmCapability ?? (configuration.capabilities.count > 1 ? configuration.capabilities[1] : 0)
        switch method {
        case .plaintextPINByICC: return byte & 0x80 != 0
        case .encipheredPINOnline: return byte & 0x40 != 0
        case .signature: return byte & 0x20 != 0
        case .plaintextPINByICCAndSignature: return byte & 0xA0 == 0xA0
        case .encipheredPINByICC: return byte & 0x10 != 0
        case .encipheredPINByICCAndSignature: return byte & 0x30 == 0x30
        case .noCVMRequired: return byte & 0x08 != 0
        case .failCVM: return true
        default: return false
        }
    }

    /// Offline plaintext PIN: asks until the card accepts, blocks, or the cardholder gives up.
    private mutating func offlinePIN() throws(KernelError) -> Bool {
        let counter = try send(.getData(0x9F17), step: "GET DATA PIN try counter")
        // Cards that do not answer GET DATA 9F17 simply give no count to show.
        var triesLeft: Int? = nil
        if counter.status.isSuccess, let items = try? TLV.parse(counter.data), let count = items.first(0x9F17)?.value.first {
            triesLeft = Int(count)
        }
        if triesLeft == 0 {
            tvr.set(TVR.pinTryLimitExceeded)
            return false
        }
        while true {
            let pin = try keypad.enterPIN(online: false, triesLeft: triesLeft, timeout: configuration.promptTimeout)
            let block: [UInt8]
            do { block = try PlaintextPINBlock.encode(pin: pin) } catch { throw .cancelled(step: "PIN entry (\(error.rule))") }
            let r = try send(.verify(pinBlock: block), step: "VERIFY")
            if r.status.isSuccess { return true }
            if r.status == StatusWord(0x6983) || r.status.retriesLeft == 0 {
                tvr.set(TVR.pinTryLimitExceeded)
                return false
            }
            guard let left = r.status.retriesLeft else { throw .cardError(step: "VERIFY", status: r.status.description) }
            triesLeft = left
        }
    }

    private func codes(_ tag: EMVTag, _ terminal: [UInt8]) -> [UInt8] {
        let issuer = data[tag] ?? (tag == 0x9F0E ? [0, 0, 0, 0, 0] : [0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        return zip(issuer, terminal).map { $0 | $1 }
    }

    private func matches(_ codes: [UInt8]) -> Bool { zip(codes, tvr.bytes).contains { $0 & $1 != 0 } }

    /// EMV Book 3 §10.7: denial codes → AAC; online codes (terminal can go online) → ARQC; else TC.
    func terminalActionAnalysis() -> CryptogramType {
        if matches(codes(0x9F0E, configuration.tacDenial)) { return .aac }
        // Offline-only terminals (types x3, x6) cannot act on the online codes.
        if [3, 6].contains(configuration.terminalType & 0x0F) { return .tc }
        return matches(codes(0x9F0F, configuration.tacOnline)) ? .arqc : .tc
    }

    func defaultActionDenies() -> Bool { matches(codes(0x9F0D, configuration.tacDefault)) }

    mutating func generateAC(_ type: CryptogramType, cdol: DOL, step: String, cda: Bool)
        throws(KernelError) -> (type: CryptogramType, cryptogram: [UInt8], atc: [UInt8], iad: [UInt8], cdaFailed: Bool) {
        let cdolBytes = cdol.fill { self.value($0) }
        cdolData.append(cdolBytes)
        cryptogramRequested = true
        let r = try send(.generateAC(type, cdolData: cdolBytes, cda: cda), step: step)
        guard r.status.isSuccess, let tlv = (try? TLV.parse(r.data))?.first else {
            throw .cardError(step: step, status: r.status.description)
        }
        let cid: UInt8, atc: [UInt8], iad: [UInt8]
        var cryptogram: [UInt8]?
        if tlv.tag == 0x80 {
            guard tlv.value.count >= 11 else { throw .invalidCardData("\(step) format 1 response is \(tlv.value.count) bytes") }
            (cid, atc, cryptogram, iad) = (tlv.value[0], Array(tlv.value[1..<3]), Array(tlv.value[3..<11]), Array(tlv.value[11...]))
        } else {
            guard let c = tlv.first(0x9F27)?.value.first, let a = tlv.first(0x9F36)?.value else {
                throw .invalidCardData("\(step) response lacks 9F27 or 9F36")
            }
            (cid, atc, cryptogram, iad) = (c, a, tlv.first(0x9F26)?.value, tlv.first(0x9F10)?.value ?? [])
        }
        let returned: CryptogramType = cid & 0xC0 == 0x80 ? .arqc : cid & 0xC0 == 0x40 ? .tc : .aac
        var cdaFailed = false
        // Book 2 §6.6.2: a TC or ARQC asked for with CDA must come signed; an AAC never is. Kernel 2
        // has no keys yet: it recovers them with the signature (C-2 S910.4).
        if cda, returned != .aac {
            do throws(ODAFailure) {
                guard tlv.tag == 0x77, let signature = tlv.first(0x9F4B)?.value else {
                    throw ODAFailure("CDA signature", "the card returned \(returned) at the \(step) without signed dynamic application data (9F4B)",
                                     missingData: true)
                }
                let key: RSAPublicKey
                if let known = cdaKey { key = known } else { key = try recoverKernel2CDAKey() }
                let hashInput = pdolData + cdolData.joined() + tlv.children.filter { $0.tag != 0x9F4B }.flatMap { $0.encoded() }
                let signed = try ODA.verifyCombinedSignature(signature, icc: key, unpredictableNumber: data[0x9F37] ?? [], cid: cid,
                                                             hashInput: hashInput)
                cryptogram = signed.cryptogram
                data[0x9F4B] = signature
                data[0x9F4C] = signed.dynamicNumber
                odaReport.dynamicNumber = Hex.encode(signed.dynamicNumber)
                odaReport.result = .passed
                odaReport.reason = "signature verified at the \(step)"
            } catch {
                cdaFailed = true
                odaReport.reason = nil
                tvr.set(TVR.cdaFailed)
                if error.missingData { tvr.set(TVR.iccDataMissing) }
                if let issuer = error.issuer { odaReport.record(issuer) }
                if let icc = error.icc { odaReport.record(icc) }
                odaReport.result = .failed
                odaReport.failedCheck = error.check
                odaReport.failure = "\(error.detail) (at the \(step))"
            }
        }
        // A failed CDA signature leaves no cryptogram to trust: none is recorded.
        guard let cryptogram = cryptogram ?? (cdaFailed ? [] : nil) else {
            throw .invalidCardData("\(step) response lacks 9F26")
        }
        data[0x9F27] = [cid]
        data[0x9F36] = atc
        data[0x9F26] = cryptogram.isEmpty ? nil : cryptogram
        data[0x9F10] = iad
        // Kernel 2: POS cardholder interaction information ("See Phone").
        data[0xDF4B] = tlv.tag == 0x77 ? tlv.first(0xDF4B)?.value : nil
        return (returned, cryptogram, atc, iad, cdaFailed)
    }

    // MARK: Helpers

    static func bcd(_ value: Int, bytes: Int) -> [UInt8] {
        var digits = String(value).utf8.map { $0 - 0x30 }
        while digits.count < bytes * 2 { digits.insert(0, at: 0) }
        return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }

    static func dol(_ bytes: [UInt8], _ name: String) throws(KernelError) -> DOL {
        do { return try DOL.parse(bytes, field: name) } catch { throw .invalidCardData(error.description) }
    }

    static func parseGPO(_ bytes: [UInt8]) throws(KernelError) -> (AIP, [AFLEntry]) {
        guard let tlv = (try? TLV.parse(bytes))?.first else { throw .invalidCardData("GPO response is not TLV") }
        let aipBytes: [UInt8], aflBytes: [UInt8]
        if tlv.tag == 0x80 {
            guard tlv.value.count >= 6 else { throw .invalidCardData("GPO format 1 response is too short") }
            (aipBytes, aflBytes) = (Array(tlv.value[0..<2]), Array(tlv.value[2...]))
        } else {
            guard let a = tlv.first(0x82)?.value, let f = tlv.first(0x94)?.value else { throw .invalidCardData("GPO response lacks 82 or 94") }
            (aipBytes, aflBytes) = (a, f)
        }
        do { return (try AIP(bytes: aipBytes), try AFLEntry.parseList(aflBytes)) } catch { throw .invalidCardData(error.description) }
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
