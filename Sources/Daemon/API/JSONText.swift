import Fronts
extension OpenResult {
    /// The reply's JSON (see `JSONText`).
    var jsonBytes: [UInt8] {
        var out = JSONText()
        out.object { o in
            o.field("callback", callback)
            o.field("fields", array: fields) { f, field in
                f.field("name", field.name)
                f.field("value", field.value)
            }
            o.field("status", status)
            o.field("message", message)
            if let transaction { o.field("transaction") { transaction.write(to: &$0) } }
            o.field("replayed", replayed)
        }
        return out.bytes
    }
}

extension TransactionView {
    /// Writes the transaction's fields, in declaration order.
    func write(to o: inout JSONText) {
        o.field("id", id)
        o.field("transactionId", transactionId)
        o.field("terminal", terminal)
        o.field("tid", tid)
        o.field("provider", provider)
        o.field("action", action)
        o.field("status", status)
        o.field("amount", amount)
        o.field("tipAmount", tipAmount)
        o.field("currency", currency)
        o.field("clientReference", clientReference)
        o.field("stan", stan)
        o.field("rrn", rrn)
        o.field("authorisationCode", authorisationCode)
        o.field("responseCode", responseCode)
        o.field("message", message)
        o.field("maskedPAN", maskedPAN)
        o.field("brand", brand)
        o.field("aid", aid)
        o.field("applicationLabel", applicationLabel)
        o.field("cardholderName", cardholderName)
        o.field("arqc", arqc)
        o.field("atc", atc)
        o.field("tvr", tvr)
        o.field("cvm", cvm)
        o.field("entryMode", entryMode)
        o.field("installments", installments)
        o.field("originalId", originalId)
        o.field("createdAt", createdAt)
        o.field("completedAt", completedAt)
        if let oda {
            o.field("oda", object: { r in
                r.field("method", oda.method.rawValue)
                r.field("result", oda.result.rawValue)
                r.field("reason", oda.reason)
                r.field("rid", oda.rid)
                r.field("caIndex", oda.caIndex)
                r.field("caKey", oda.caKey)
                r.field("issuerIdentifier", oda.issuerIdentifier)
                r.field("issuerCertificateSerial", oda.issuerCertificateSerial)
                r.field("issuerCertificateExpiry", oda.issuerCertificateExpiry)
                r.field("issuerKeyBits", oda.issuerKeyBits)
                r.field("iccCertificateSerial", oda.iccCertificateSerial)
                r.field("iccCertificateExpiry", oda.iccCertificateExpiry)
                r.field("iccKeyBits", oda.iccKeyBits)
                r.field("dataAuthenticationCode", oda.dataAuthenticationCode)
                r.field("dynamicNumber", oda.dynamicNumber)
                r.field("failedCheck", oda.failedCheck)
                r.field("failure", oda.failure)
            })
        }
        if let entry {
            o.field("entry", object: { r in
                r.field("interface", entry.interface.rawValue)
                r.field("posEntryMode", entry.posEntryMode)
                r.field("kernel", entry.kernel)
                r.field("path", strings: entry.path)
                r.field("outcome", entry.outcome)
                r.field("ttq", entry.ttq)
                r.field("ctq", entry.ctq)
                r.field("cvm", entry.cvm)
                if let limits = entry.limits {
                    r.field("limits", object: { l in
                        l.field("aid", limits.aid)
                        l.field("transactionLimit", limits.transactionLimit)
                        l.field("floorLimit", limits.floorLimit)
                        l.field("cvmRequiredLimit", limits.cvmRequiredLimit)
                        l.field("floorLimitExceeded", limits.floorLimitExceeded)
                        l.field("cvmRequired", limits.cvmRequired)
                    })
                }
            })
        }
        o.field("trace", array: trace) { t, entry in
            t.field("command", entry.command)
            t.field("response", entry.response)
            t.field("name", entry.name)
        }
        o.field("callbacks", array: callbacks) { c, entry in
            c.field("id", entry.id)
            c.field("kind", entry.kind)
            c.field("target", entry.target)
            c.field("payload", entry.payload)
            c.field("status", entry.status)
            c.field("attempts", entry.attempts)
            c.field("lastError", entry.lastError)
        }
    }
}
