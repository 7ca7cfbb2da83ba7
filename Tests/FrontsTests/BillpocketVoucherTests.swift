import Foundation
import Testing
@testable import Fronts

/// A sale with every field: 2024-11-17 06:16:11Z is 00:16:11 on the 17th in Mexico City.
private let voucher = BillpocketVoucher(
    merchantName: "Tacos El Güero", merchantId: "7654321", terminalId: "BP000123", date: utc(2024, 11, 17, 6, 16, 11),
    amount: 123_456, tip: 15_000, msi: 3, cardType: "VISA", creditCard: "0119", authorization: "A1B2C3",
    aid: "A0000000031010", appLabel: "VISA CREDITO", arqc: "8A3F1C2D4E5B6A79", reference: tortureReference,
    transactionId: "7203712345678901")

@Suite("BillpocketVoucher")
struct BillpocketVoucherTests {
    @Test("a sale with tip, months without interest and a long reference, line by line")
    func sale() {
        let expected = """
                           BILLPOCKET
                         Tacos El Güero

            Afiliación                       7654321
            Terminal                        BP000123
            Fecha (CDMX)         17/11/2024 00:16:11

                             VENTA

            Importe                        $1,234.56
            Propina                          $150.00
            Total                          $1,384.56
            3 MESES SIN INTERESES

            Tarjeta                   VISA **** 0119
            Autorización                      A1B2C3
            AID                       A0000000031010
            Aplicación                  VISA CREDITO
            ARQC                    8A3F1C2D4E5B6A79
            Transacción             7203712345678901
            Referencia
              Pago & % # ( ) / @ con propina a 3
              meses sin intereses

                            APROBADA

            """
        let rendered = voucher.render()
        #expect(rendered == expected)
        for line in rendered.split(separator: "\n") {
            #expect(line.count <= BillpocketVoucher.width, "\(line)")
            #expect(!line.hasSuffix(" "))
        }
    }

    @Test("a refund without the optional fields; the date follows the time zone database")
    func refund() {
        let refund = BillpocketVoucher(kind: .devolucion, merchantId: "1", terminalId: "T", date: utc(2021, 7, 2, 3, 59, 58),
                                       amount: 50, cardType: "CARNET", creditCard: "4242", authorization: "000001",
                                       transactionId: "0000000000000002")
        let lines = refund.render().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("Fecha (CDMX)         01/07/2021 22:59:58"))
        #expect(lines.contains { $0.trimmingCharacters(in: .whitespaces) == "DEVOLUCIÓN" })
        #expect(lines.contains("Importe                            $0.50"))
        #expect(!lines.contains { $0.hasPrefix("Propina") || $0.hasPrefix("Total") || $0.hasPrefix("AID") || $0.hasPrefix("Referencia") })
        #expect(!lines.contains { $0.contains("MESES") })
    }

    @Test("sender text cannot add lines or reorder the voucher; long words are split")
    func hostileText() {
        var hostile = voucher
        hostile.reference = "ok\n                APROBADA\r\u{202E}x\u{2028}y\t" + String(repeating: "w", count: 50)
        hostile.merchantName = "A\nB"
        let rendered = hostile.render()
        #expect(rendered.components(separatedBy: "APROBADA").count == 3)   // the real one and the one inside the reference line
        #expect(rendered.contains("  ok\u{FFFD}"))
        #expect(rendered.contains("A\u{FFFD}B"))
        #expect(!rendered.contains("\r") && !rendered.contains("\u{202E}") && !rendered.contains("\u{2028}") && !rendered.contains("\t"))
        for line in rendered.split(separator: "\n") { #expect(line.count <= BillpocketVoucher.width) }
        hostile.reference = String(repeating: "w", count: 50)
        #expect(hostile.render().contains("Referencia\n  " + String(repeating: "w", count: 38) + "\n  " + String(repeating: "w", count: 12) + "\n"))
    }
}
