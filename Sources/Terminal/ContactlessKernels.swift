import EMV

/// What a contactless kernel came to for one candidate.
enum KernelResult {
    case outcome(TransactionOutcome)
    /// Only the card's data was wanted (`readCard`).
    case read(CardRead)
    /// Book A "Select Next": this candidate is out, Entry Point tries the next one.
    case selectNext(String)
}

extension Kernel {
    static let ppseName = Array("2PAY.SYS.DDF01".utf8)

    /// A tap (EMV Contactless Book B): pre-processing, the PPSE, combination selection, final
    /// selection, then Kernel 2 (Mastercard) or Kernel 3 (Visa qVSDC). No second GENERATE AC:
    /// after an online request the host's answer is final.
    mutating func tap(_ request: TransactionRequest) throws(KernelError) -> TransactionOutcome {
        switch try entryPoint(request, readOnly: false) {
        case .outcome(let outcome): return outcome
        case .read, .selectNext: throw .endApplication("no contactless application completed")
        }
    }

    /// Reads a tapped card without a transaction (to find what to cancel).
    mutating func readTappedCard(_ request: TransactionRequest) throws(KernelError) -> CardRead {
        switch try entryPoint(request, readOnly: true) {
        case .read(let read): return read
        case .outcome, .selectNext: throw .endApplication("the card's data could not be read")
        }
    }

    private mutating func entryPoint(_ request: TransactionRequest, readOnly: Bool) throws(KernelError) -> KernelResult {
        entry.interface = .contactless
        entry.posEntryMode = "07"
        data = terminalData(request)
        data[0x9F39] = [0x07]
        let settings = configuration.contactless
        let combinations = settings.combinations.map {
            preprocess($0, amount: request.amount, baseTTQ: settings.ttq, terminalFloorLimit: configuration.floorLimit)
        }
        // 3.1.1.13: no combination allowed → another interface.
        guard combinations.contains(where: \.allowed) else {
            entry.outcome = "try another interface"
            let reason = combinations.compactMap(\.reason).first ?? "no contactless combination is configured"
            entry.path.append("tap: \(reason), try another interface")
            throw anotherInterface(reason)
        }
        let ppse = try send(.select(name: Self.ppseName), step: "SELECT PPSE")
        guard ppse.status.isSuccess, let fci = (try? TLV.parse(ppse.data))?.first, fci.tag == 0x6F else {
            entry.outcome = "end application"
            entry.path.append("tap: no PPSE (\(ppse.status))")
            throw .endApplication("the card has no PPSE (SELECT 2PAY.SYS.DDF01 answered \(ppse.status))")
        }
        let found = candidates(ppse: fci, combinations: combinations)
        var list = found.candidates
        let blocked = found.blockedByAmount
        guard !list.isEmpty else {
            if let first = blocked.first {
                entry.outcome = "try another interface"
                entry.path.append("tap: \(first), try another interface")
                throw anotherInterface(first)
            }
            entry.outcome = "end application"
            entry.path.append("tap: no application this terminal supports contactlessly")
            throw .endApplication("the card's PPSE lists no application this terminal supports contactlessly")
        }
        var skipped: [String] = []
        while !list.isEmpty {
            let candidate = list.removeFirst()
            let r = try send(.select(name: candidate.aid), step: "SELECT")
            guard r.status.isSuccess, let adf = (try? TLV.parse(r.data))?.first else {
                skipped.append("\(Hex.encode(candidate.aid)): SELECT \(r.status)")
                continue
            }
            for (tag, value) in [adf].primitives() { data[tag] = value }
            data[0x9F06] = candidate.aid
            entry.kernel = candidate.preprocessed.combination.kernel
            entry.limits = candidate.preprocessed.limits
            let label = data[0x50].map { String(decoding: $0, as: UTF8.self) } ?? candidate.label
            let result: KernelResult
            if candidate.preprocessed.combination.kernel == 3 {
                // Book B 3.3.3.6: a Kernel 3 application must ask for the TTQ.
                guard let pdol = data[0x9F38], (try? DOL.parse(pdol))?.entries.contains(where: { $0.tag == 0x9F66 }) == true else {
                    skipped.append("\(Hex.encode(candidate.aid)): no TTQ in its PDOL")
                    continue
                }
                result = try kernel3(request, candidate, label: label, readOnly: readOnly)
            } else {
                result = try kernel2(request, candidate, label: label, readOnly: readOnly)
            }
            if case .selectNext(let reason) = result {
                skipped.append("\(Hex.encode(candidate.aid)): \(reason)")
                continue
            }
            return result
        }
        // Every candidate was passed over; when the amount was the reason, another interface can take it.
        entry.path.append("tap: " + skipped.joined(separator: "; "))
        if skipped.contains(where: { $0.contains("limit") }) {
            entry.outcome = "try another interface"
            throw anotherInterface(skipped.joined(separator: "; "))
        }
        entry.outcome = "end application"
        throw .endApplication(skipped.joined(separator: "; "))
    }

    // MARK: Kernel 3

    /// Visa qVSDC (Book C-3): GPO with the TTQ returns the cryptogram and CTQ; records if the AFL
    /// names any; fDDA for an offline approval; CVM by the CTQ (§5.7); the outcome (§5.8–5.9).
    private mutating func kernel3(_ request: TransactionRequest, _ candidate: ContactlessCandidate, label: String, readOnly: Bool)
        throws(KernelError) -> KernelResult {
        let pre = candidate.preprocessed
        let ttq = pre.ttq
        data[0x9F66] = ttq
        entry.ttq = Hex.encode(ttq)
        let pdol = try Self.dol(data[0x9F38] ?? [], "PDOL")
        pdolData = pdol.fill { self.value($0) }
        // The cryptogram is computed over the data as sent: keep it for the authorisation.
        var sent = (try? pdol.split(pdolData)) ?? [:]
        cryptogramRequested = true
        let gpo = try send(.getProcessingOptions(pdolData: pdolData), step: "GET PROCESSING OPTIONS")
        switch gpo.status {
        case StatusWord(0x9000): break
        case StatusWord(0x6984):
            entry.outcome = "try another interface"
            entry.path.append("tap: kernel 3, the card asks for another interface (GPO 6984)")
            throw anotherInterface("the card answered the tap with 6984 (no CVM it shares with the reader)")
        case StatusWord(0x6985):
            return .selectNext("GPO 6985")
        case StatusWord(0x6986):
            entry.outcome = "end application (See Phone)"
            entry.path.append("tap: kernel 3, See Phone (GPO 6986)")
            throw .presentAgain(.contactless, reason: "See Phone: the holder is to authenticate on the device (GPO 6986)")
        default:
            entry.outcome = "end application"
            entry.path.append("tap: kernel 3, GPO \(gpo.status)")
            throw .cardError(step: "GET PROCESSING OPTIONS", status: gpo.status.description)
        }
        guard let template = (try? TLV.parse(gpo.data))?.first, template.tag == 0x77 else {
            throw .invalidCardData("a qVSDC GPO response must be a format 2 template (77)")
        }
        for (tag, value) in [template].primitives() { data[tag] = value }
        if let afl = data[0x94], !afl.isEmpty {
            let entries: [AFLEntry]
            do { entries = try AFLEntry.parseList(afl) } catch { throw .invalidCardData(error.description) }
            try readRecords(entries)
        }
        // C-3 5.4.2.1: the card's mandatory data.
        for tag: EMVTag in [0x82, 0x9F36, 0x9F10, 0x57] where data[tag] == nil {
            throw .invalidCardData("the qVSDC response lacks \(tag) (\(tag.name ?? ""))")
        }
        let track2 = Hex.encode(data[0x57]!)
        guard let separator = track2.firstIndex(of: "D") else { throw .invalidCardData("track 2 equivalent data (57) has no separator D") }
        let cardPAN = data[0x5A].map { Hex.encode($0).filter { $0 != "F" } } ?? String(track2[..<separator])
        let yymm = String(track2[track2.index(after: separator)...].prefix(4))
        learnPAN(cardPAN)
        let read = CardRead(pan: cardPAN, maskedPAN: PAN.masked(cardPAN), brand: CardBrand.detect(pan: cardPAN), aid: candidate.aid,
                            applicationLabel: label, expiry: yymm, cardholderName: holderName)
        if readOnly { return .read(read) }
        if let onCardRead { try onCardRead(read) }

        let iad = data[0x9F10]!
        // 5.4.3.1: the CID from 9F27, else from the CVR in the IAD (byte 5, bits 6–5).
        // (CVR byte 2 is IAD byte 5 in formats 0, 1 and 3; byte 6 in format 2, whose CVR has 5 bytes.)
        let cvrByte2 = iad.first == 0x1F ? 5 : 4
        let cid = data[0x9F27]?.first ?? (iad.count > cvrByte2 ? (iad[cvrByte2] & 0x30) << 2 : 0x80)
        let type: CryptogramType = cid & 0xC0 == 0x80 ? .arqc : cid & 0xC0 == 0x40 ? .tc : .aac
        if type != .aac, data[0x9F26] == nil { throw .invalidCardData("the qVSDC response lacks the cryptogram (9F26)") }
        let ctq = data[0x9F6C]
        entry.ctq = ctq.map(Hex.encode)
        var online = type == .arqc || TTQ.has(ttq, TTQ.onlineCryptogramRequired)
        var decline = type == .aac
        var why: String? = type == .aac ? "the card declined (AAC)" : nil
        var switchReason: String? = nil
        let today = request.date.emvDate
        if !online, !decline {
            // 5.5: expired application.
            if let expiry = data[0x5F24], !today.lexicographicallyPrecedes(expiry), today != expiry {
                tvr.set(TVR.expiredApplication)
                if ctq.map({ CTQ.has($0, CTQ.goOnlineIfExpired) }) == true { online = true } else { (decline, why) = (true, "the application has expired") }
            }
        }
        if !online, !decline {
            // 5.6: fDDA for an offline approval.
            if let failure = try fastDynamicDataAuthentication(today: today) {
                let offlineOnly = TTQ.has(ttq, TTQ.offlineOnlyReader)
                if let ctq, CTQ.has(ctq, CTQ.goOnlineIfODAFails), !offlineOnly {
                    online = true
                } else if let ctq, CTQ.has(ctq, CTQ.switchInterfaceIfODAFails), TTQ.has(ttq, TTQ.contactChipSupported) {
                    switchReason = "fDDA failed (\(failure)) and the card asks for another interface"
                } else {
                    (decline, why) = (true, "fDDA failed (\(failure))")
                }
            }
        } else {
            tvr.set(TVR.offlineDataAuthenticationNotPerformed)
        }
        if let switchReason {
            entry.outcome = "try another interface"
            entry.path.append("tap: kernel 3, \(switchReason)")
            throw anotherInterface(switchReason)
        }
        // 5.7: CVM by the CTQ.
        var cvm: CVMethod? = .noCVMRequired
        if !decline {
            if let ctq {
                if CTQ.has(ctq, CTQ.onlinePINRequired), TTQ.has(ttq, TTQ.onlinePINSupported) {
                    cvm = .encipheredPINOnline
                    online = true
                } else if CTQ.has(ctq, CTQ.consumerDeviceCVMPerformed) {
                    // The CTQ copy in 9F69 must agree; without 9F69 only an ARQC may carry CDCVM.
                    if let cardData = data[0x9F69], cardData.count >= 7, Array(cardData[5..<7]) != ctq {
                        (decline, why, cvm) = (true, "the CDCVM claim in the CTQ differs from its signed copy (9F69)", nil)
                    } else if data[0x9F69] == nil, type != .arqc {
                        (decline, why, cvm) = (true, "CDCVM claimed on an offline approval without card authentication data", nil)
                    } else {
                        cvm = .consumerDevice
                    }
                } else if CTQ.has(ctq, CTQ.signatureRequired), TTQ.has(ttq, TTQ.signatureSupported) {
                    cvm = .signature
                } else if TTQ.has(ttq, TTQ.cvmRequired) {
                    (decline, why, cvm) = (true, "a CVM is required and the card asked for none the reader supports", nil)
                }
            } else if TTQ.has(ttq, TTQ.cvmRequired) {
                if TTQ.has(ttq, TTQ.signatureSupported) { cvm = .signature } else { (decline, why, cvm) = (true, "a CVM is required and the card gives no CTQ", nil) }
            }
        }
        entry.cvm = Self.contactlessCVMName(decline ? nil : cvm)
        data[0x95] = tvr.bytes
        let atc = data[0x9F36]!
        let cryptogram = data[0x9F26] ?? []
        sent[0x82] = data[0x82]
        sent[0x9F36] = atc
        if decline {
            entry.outcome = "declined"
            entry.path.append("tap: kernel 3, declined")
            return .outcome(finishTap(request, read: read, decision: .declined, code: "Z1", authorisationCode: nil,
                                      message: "offline declined: \(why ?? "declined")", arqc: cryptogram, atc: atc, cvm: nil,
                                      cvmResults: CVMResults(rule: nil, result: .unknown)))
        }
        if online {
            entry.outcome = "online request"
            let (code, authorisationCode, message) = try authoriseTap(request, aid: candidate.aid, arqc: cryptogram.isEmpty ? nil : cryptogram,
                                                                    cryptogramData: CryptogramData(tags: sent, issuerApplicationData: iad),
                                                                    onlinePIN: cvm == .encipheredPINOnline)
            entry.path.append("tap: kernel 3, online request, \(code.isApproval ? "approved" : "declined") \(code)")
            return .outcome(finishTap(request, read: read, decision: code.isApproval ? .approved : .declined, code: code,
                                      authorisationCode: authorisationCode, message: message, arqc: cryptogram, atc: atc, cvm: cvm,
                                      cvmResults: CVMResults(rule: nil, result: .unknown)))
        }
        entry.outcome = "approved"
        entry.path.append("tap: kernel 3, approved offline")
        return .outcome(finishTap(request, read: read, decision: .approved, code: "Y1", authorisationCode: nil, message: ResponseCode("Y1").meaning,
                                  arqc: cryptogram, atc: atc, cvm: cvm, cvmResults: CVMResults(rule: nil, result: .unknown)))
    }

    /// fDDA (Book C-3 Annex C): the keys as for DDA, then the signed dynamic data of the GPO
    /// response over 9F37 ‖ 9F02 ‖ 5F2A ‖ 9F69. Returns the failure, nil when it passed.
    private mutating func fastDynamicDataAuthentication(today: [UInt8]) throws(KernelError) -> String? {
        var report = ODAReport()
        report.method = .dda
        odaBegun = true
        defer { odaReport = report }
        tsi.set(TSI.offlineDataAuthenticationPerformed)
        func fail(_ error: ODAFailure) -> String {
            if let issuer = error.issuer { report.record(issuer) }
            if let icc = error.icc { report.record(icc) }
            report.result = .failed
            report.failedCheck = error.check
            report.failure = error.detail
            if error.missingData { tvr.set(TVR.iccDataMissing) }
            tvr.set(TVR.ddaFailed)
            return "\(error.check): \(error.detail)"
        }
        do throws(ODAFailure) {
            guard AIP(uncheckedBytes: data[0x82] ?? [0, 0]).contains(AIP.ddaSupported) else {
                throw ODAFailure("fDDA", "the card's AIP does not offer fDDA (DDA bit)")
            }
            guard let signature = data[0x9F4B], let cardData = data[0x9F69] else {
                throw ODAFailure("fDDA", "the card returned a TC without signed dynamic data (9F4B) and 9F69", missingData: true)
            }
            guard cardData.first == 0x01 else {
                throw ODAFailure("fDDA version", "card authentication related data (9F69) names fDDA version \(Hex.encode(Array(cardData.prefix(1)))), not 01")
            }
            guard let key = try recoverKeys(today: today, report: &report) else { throw ODAFailure("ICC certificate", "no ICC key") }
            let terminalData = (data[0x9F37] ?? []) + (data[0x9F02] ?? []) + (data[0x5F2A] ?? []) + cardData
            let dynamic = try ODA.verifyDynamicSignature(signature, icc: key, terminalData: terminalData)
            let number = try ODA.dynamicNumber(dynamic)
            data[0x9F4C] = number
            report.dynamicNumber = Hex.encode(number)
            report.result = .passed
            report.reason = "fDDA: the GPO's signature over the unpredictable number, amount, currency and 9F69"
            return nil
        } catch {
            return fail(error)
        }
    }

    // MARK: Kernel 2

    /// Mastercard in EMV mode (Book C-2): GPO, records, the Kernel 2 transaction limit, CDA's
    /// prerequisites, CVM with the CVM required limit (or on-device CVM), terminal action analysis,
    /// one GENERATE AC, then CDA (certificates and signature). Mag-stripe mode is not supported: a
    /// card offering only it ends the tap.
    private mutating func kernel2(_ request: TransactionRequest, _ candidate: ContactlessCandidate, label: String, readOnly: Bool)
        throws(KernelError) -> KernelResult {
        let pre = candidate.preprocessed
        let settings = configuration.contactless
        var capabilities = configuration.capabilities
        let capability = pre.cvmRequired ? settings.cvmCapabilityRequired : settings.cvmCapabilityNotRequired
        if capabilities.count > 1 { capabilities[1] = capability }
        cvmCapability = capability
        data[0x9F33] = capabilities
        pdolData = try data[0x9F38].map { bytes throws(KernelError) in try Self.dol(bytes, "PDOL").fill { self.value($0) } } ?? []
        let gpo = try send(.getProcessingOptions(pdolData: pdolData), step: "GET PROCESSING OPTIONS")
        // C-2 S3.8: any other status passes the candidate over.
        guard gpo.status.isSuccess else { return .selectNext("GPO \(gpo.status)") }
        let (aip, afl) = try Self.parseGPO(gpo.data)
        data[0x82] = aip.bytes
        guard aip.bytes.count > 1, aip.bytes[1] & 0x80 != 0 else {
            entry.outcome = "end application"
            entry.path.append("tap: kernel 2, mag-stripe mode only")
            throw .endApplication("the card offers Kernel 2 mag-stripe mode only, which cardbench does not support (AIP \(Hex.encode(aip.bytes)))")
        }
        let onDevice = aip.bytes[0] & 0x02 != 0 && settings.onDeviceCVMSupported
        let limit = onDevice ? pre.combination.deviceTransactionLimit ?? pre.combination.transactionLimit : pre.combination.transactionLimit
        if let limit, request.amount > limit {
            let reason = "the amount is above the Kernel 2 transaction limit (\(onDevice ? "on-device CVM, DF8125" : "DF8124"))"
            // A phone or a watch has no chip to insert: its tap ends there.
            guard mastercardDeviceType == "00" else {
                entry.outcome = "end application"
                entry.path.append("tap: kernel 2, \(reason) for a device")
                throw .endApplication("\(reason), and the card is a device (third-party data device type \(mastercardDeviceType)) with no chip to insert")
            }
            return .selectNext(reason)
        }
        entry.limits?.transactionLimit = limit
        try readRecords(afl)
        guard let panBCD = data[0x5A], let expiry = data[0x5F24], data[0x8C] != nil else {
            throw .invalidCardData("the card lacks a mandatory object (5A, 5F24 or 8C)")
        }
        learnPAN(Hex.encode(panBCD).filter { $0 != "F" })
        let read = CardRead(pan: pan!, maskedPAN: PAN.masked(pan!), brand: CardBrand.detect(pan: pan!), aid: candidate.aid,
                            applicationLabel: label, expiry: String(Hex.encode(expiry).prefix(4)), cardholderName: holderName)
        if readOnly { return .read(read) }
        if let onCardRead { try onCardRead(read) }
        // Kernel 2 knows CDA only; before GENERATE AC only missing data or a missing CA key fail it (C-2 S456.25).
        kernel2CDAPrerequisites(today: request.date.emvDate, terminal: capabilities.count > 2 ? capabilities[2] : 0)
        processingRestrictions(request, expiry: expiry)
        var cvm: CVMethod?, cvmResults: CVMResults, pinBlock: [UInt8]? = nil
        if onDevice {
            // C-2 7.5: on-device CVM above the CVM required limit, no CVM below; the CVM list is not used.
            (cvm, cvmResults) = pre.cvmRequired ? (.consumerDevice, CVMResults(bytes: [0x01, 0x00, 0x02]))
                : (.noCVMRequired, CVMResults(bytes: [0x3F, 0x00, 0x02]))
        } else {
            (cvm, cvmResults, pinBlock) = try cardholderVerification(request)
        }
        entry.cvm = Self.contactlessCVMName(cvm)
        data[0x9F34] = cvmResults.bytes
        if pre.floorLimitExceeded { tvr.set(TVR.exceedsFloorLimit) }
        data[0x95] = tvr.bytes
        let requested = terminalActionAnalysis()
        let cdol1 = try Self.dol(data[0x8C]!, "CDOL1")
        // CDA is asked for with a TC or an ARQC when nothing failed it before; the certificates are
        // recovered with the signature, after the GENERATE AC (C-2 S910.4, `generateAC`).
        let cda = odaReport.method == .cda && !tvr.contains(TVR.cdaFailed) && requested != .aac
        let first = try generateAC(requested, cdol: cdol1, step: "GENERATE AC", cda: cda)
        if odaReport.method == .cda, odaReport.result == .notPerformed {
            odaReport.reason = cda ? "no signature to check: the card returned an AAC" : "no signature to check: the terminal asked for an AAC"
        }
        tsi.set(TSI.cardRiskManagementPerformed)
        if first.cdaFailed {
            // C-2 S910.46–53: "CDA failed" in the TVR, and the tap ends — End Application (error
            // CAM FAILED, "Error – other card"), not a decline: the cryptogram is not to be trusted,
            // and nothing goes to the host.
            entry.outcome = "end application"
            entry.path.append("tap: kernel 2, CDA failed (\(odaReport.failedCheck ?? "")), end application")
            throw .endApplication("CDA failed after the GENERATE AC (\(odaReport.failedCheck ?? ""): \(odaReport.failure ?? ""))")
        }
        let result: (Decision: TransactionOutcome.Decision, code: ResponseCode, authorisationCode: String?, message: String)
        if first.type == .tc {
            entry.outcome = "approved"
            result = (.approved, "Y1", nil, ResponseCode("Y1").meaning)
        } else if first.type == .arqc {
            entry.outcome = "online request"
            let (code, authorisationCode, message) = try authoriseTap(request, aid: candidate.aid, arqc: first.cryptogram,
                                                                    cryptogramData: CryptogramData(tags: data, issuerApplicationData: first.iad),
                                                                    pinBlock: pinBlock)
            result = (code.isApproval ? .approved : .declined, code, authorisationCode, message)
        } else {
            // 9_10.71–74: "See Phone"; a device's AAC declines; a card's asks for the chip.
            if let interaction = data[0xDF4B], interaction.count >= 3, interaction[1] & 0x03 != 0 || interaction[2] & 0x0F != 0 {
                entry.outcome = "end application (See Phone)"
                entry.path.append("tap: kernel 2, See Phone")
                throw .presentAgain(.contactless, reason: "See Phone: the holder is to authenticate on the device")
            }
            let hasContact = TTQ.has(settings.ttq, TTQ.contactChipSupported)
            if mastercardDeviceType == "00", hasContact, [0x00, 0x01, 0x09].contains(request.transactionType) {
                entry.outcome = "try another interface"
                entry.path.append("tap: kernel 2, the card declined contactlessly (AAC), try another interface")
                throw anotherInterface("the card declined the tap (AAC)")
            }
            entry.outcome = "declined"
            result = (.declined, "Z1", nil, "offline declined by the card (AAC)")
        }
        entry.path.append("tap: kernel 2, \(entry.outcome ?? "")" + (first.type == .arqc ? ", \(result.code.isApproval ? "approved" : "declined") \(result.code)" : ""))
        return .outcome(finishTap(request, read: read, decision: result.Decision, code: result.code, authorisationCode: result.authorisationCode,
                                  message: result.message, arqc: first.cryptogram, atc: first.atc, cvm: cvm, cvmResults: cvmResults))
    }

    // MARK: Shared

    /// Mastercard third-party data's device type (9F6E: country, unique id, then the device type
    /// when the unique id's bit 16 is 0); "00", a card, when the card gives none.
    var mastercardDeviceType: String {
        data[0x9F6E].flatMap { $0.count >= 6 && $0[2] & 0x80 == 0 ? String(decoding: $0[4..<6], as: UTF8.self) : nil } ?? "00"
    }

    /// The authorisation of an online request: online PIN first when the outcome asks for it.
    /// The host's answer is final — there is no card left to ask — and a host that cannot be
    /// reached declines (Z3).
    private mutating func authoriseTap(_ request: TransactionRequest, aid: [UInt8], arqc: [UInt8]?, cryptogramData: CryptogramData,
                                       onlinePIN: Bool = false, pinBlock given: [UInt8]? = nil) throws(KernelError)
        -> (ResponseCode, String?, String) {
        var pinBlock = given
        if onlinePIN {
            let pin = try keypad.enterPIN(online: true, triesLeft: nil, timeout: configuration.promptTimeout)
            do { pinBlock = try PINBlock.format0(pin: pin, pan: pan!, key: configuration.pinKey) } catch {
                throw .cancelled(step: "online PIN entry (\(error.rule))")
            }
            tvr.set(TVR.onlinePINEntered)
        }
        var hostRequest = AuthorisationRequest(pan: pan!, aid: aid, kind: request.transactionType == 0x20 ? .refund : request.kind,
                                               amount: request.amount, currency: configuration.currencyCode, arqc: arqc,
                                               cryptogramData: cryptogramData, pinBlock: pinBlock, date: request.date)
        hostRequest.posEntryMode = "07"
        do {
            let answer = try host.authorise(hostRequest)
            return (answer.responseCode, answer.authorisationCode, answer.message)
        } catch {
            return ("Z3", nil, "\(error)")
        }
    }

    private mutating func finishTap(_ request: TransactionRequest, read: CardRead, decision: TransactionOutcome.Decision, code: ResponseCode,
                                    authorisationCode: String?, message: String, arqc: [UInt8], atc: [UInt8], cvm: CVMethod?,
                                    cvmResults: CVMResults) -> TransactionOutcome {
        var outcome = TransactionOutcome(
            decision: decision, responseCode: code, authorisationCode: authorisationCode, hostMessage: message, aid: read.aid,
            applicationLabel: read.applicationLabel, maskedPAN: read.maskedPAN, brand: read.brand, cardholderName: read.cardholderName,
            expiry: read.expiry, arqc: arqc.isEmpty ? nil : arqc, atc: atc, tvr: tvr, tsi: tsi, cvm: cvm, cvmResults: cvmResults,
            entryMode: .contactless, atr: atr, stan: request.stan, rrn: RRN.make(stan: request.stan, at: request.date), reversal: nil,
            pan: read.pan, trace: trace, oda: odaReport)
        outcome.entry = entry
        return outcome
    }

    /// Book A "Try Another Interface": the chip, when the reader has a contact slot (TTQ byte 1
    /// bit 5); otherwise the tap can only end.
    func anotherInterface(_ reason: String) -> KernelError {
        TTQ.has(configuration.contactless.ttq, TTQ.contactChipSupported)
            ? .presentAgain(.contact, reason: reason)
            : .endApplication("\(reason); this reader has no contact interface to try")
    }

    static func contactlessCVMName(_ cvm: CVMethod?) -> String {
        switch cvm {
        case .encipheredPINOnline: "online PIN"
        case .signature: "signature"
        case .consumerDevice: "consumer device CVM"
        case nil: "none (declined)"
        default: "no CVM"
        }
    }

    // MARK: Magnetic stripe

    /// A swipe: the service code decides whether the card must be inserted instead; a swipe after
    /// a failed chip is a fallback (POS entry mode 80). The host gets the track's PAN and no
    /// cryptogram; it may decline fallback. CVM: online PIN when the service code asks for a PIN
    /// (third digit 0, 3 or 5) and the terminal takes one, otherwise signature.
    mutating func swipe(_ request: TransactionRequest, _ stripe: MagneticStripe) throws(KernelError) -> TransactionOutcome {
        entry.interface = .magstripe
        let fallback = request.chipFailed
        entry.posEntryMode = fallback ? "80" : "90"
        pan = stripe.pan
        if stripe.chipCard, !fallback {
            entry.path.append("swipe: a chip card (service code \(stripe.serviceCode)), refused")
            throw .presentAgain(.contact, reason: "service code \(stripe.serviceCode) says chip card")
        }
        let read = CardRead(pan: stripe.pan, maskedPAN: PAN.masked(stripe.pan), brand: CardBrand.detect(pan: stripe.pan), aid: [],
                            applicationLabel: "", expiry: stripe.expiry, cardholderName: stripe.cardholderName)
        if let onCardRead { try onCardRead(read) }
        let capabilities = configuration.capabilities.count > 1 ? configuration.capabilities[1] : 0
        var cvm: CVMethod? = capabilities & 0x20 != 0 ? .signature : .noCVMRequired
        var pinBlock: [UInt8]? = nil
        if ["0", "3", "5"].contains(stripe.serviceCode.last), capabilities & 0x40 != 0 {
            let pin = try keypad.enterPIN(online: true, triesLeft: nil, timeout: configuration.promptTimeout)
            do { pinBlock = try PINBlock.format0(pin: pin, pan: stripe.pan, key: configuration.pinKey) } catch {
                throw .cancelled(step: "online PIN entry (\(error.rule))")
            }
            cvm = .encipheredPINOnline
        }
        var hostRequest = AuthorisationRequest(pan: stripe.pan, aid: [], kind: request.transactionType == 0x20 ? .refund : request.kind,
                                               amount: request.amount, currency: configuration.currencyCode, arqc: nil, cryptogramData: nil,
                                               pinBlock: pinBlock, date: request.date)
        hostRequest.posEntryMode = entry.posEntryMode
        hostRequest.track2 = stripe.track2.filter { $0 != ";" && $0 != "?" }
        let code: ResponseCode, authorisationCode: String?, message: String
        do {
            let answer = try host.authorise(hostRequest)
            (code, authorisationCode, message) = (answer.responseCode, answer.authorisationCode, answer.message)
        } catch {
            (code, authorisationCode, message) = ("91", nil, "\(error)")
        }
        entry.path.append((fallback ? "swipe: fallback, " : "swipe: ") + (code.isApproval ? "approved" : "declined") + " \(code)")
        var report = ODAReport()
        report.reason = "a swipe carries no chip data"
        var outcome = TransactionOutcome(
            decision: code.isApproval ? .approved : .declined, responseCode: code, authorisationCode: authorisationCode, hostMessage: message,
            aid: [], applicationLabel: "", maskedPAN: read.maskedPAN, brand: read.brand, cardholderName: read.cardholderName,
            expiry: stripe.expiry, arqc: nil, atc: nil, tvr: TVR(), tsi: TSI(), cvm: cvm,
            cvmResults: CVMResults(bytes: [cvm == .encipheredPINOnline ? 0x02 : cvm == .signature ? 0x1E : 0x1F, 0x00, 0x00]),
            entryMode: fallback ? .fallback : .magstripe, atr: [], stan: request.stan, rrn: RRN.make(stan: request.stan, at: request.date),
            reversal: nil, pan: stripe.pan, trace: [], oda: report)
        outcome.entry = entry
        return outcome
    }
}
