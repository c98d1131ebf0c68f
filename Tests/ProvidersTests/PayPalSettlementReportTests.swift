import Foundation
import Testing
@testable import Providers
import Reconciliation

/// PayPal's STL and TRR report files, read: rows by their type, columns by the CH row, amounts in hundredths whatever
/// the currency's exponent, direction from the CR/DR columns, UTF-8 with or without a BOM and UTF-16, footers checked.
@Suite struct PayPalSettlementReportTests {
    static let columns =
        #""CH","Transaction ID","Invoice ID","PayPal Reference ID","PayPal Reference ID Type","Transaction Event Code","Transaction Initiation Date","Transaction Completion Date","Transaction Debit or Credit","Gross Transaction Amount","Gross Transaction Currency","Fee Debit or Credit","Fee Amount","Fee Currency","Transactional Status","Custom Field""#
    /// A refund row in the shape of a real TRR row (a public parser's fixture): 150 JPY refunded, 43 JPY of fee given back.
    static let refund =
        #""SB","3HD08833MR473623T","46239229.0","1V551844CE5526421","TXN","T1107",2017/03/22 09:34:59 -0700,2017/03/22 09:34:59 -0700,"DR",15000,"JPY","CR",4300,"JPY","S","46239229""#
    static let payment =
        #""SB","1V551844CE5526421","46239229.0","","","T0006",2017/03/20 10:00:00 -0700,2017/03/20 10:00:00 -0700,"CR",1000,"USD","DR",64,"USD","S","46239229""#

    static func read(_ text: String) throws -> (SettlementReportSummary, [SettlementLine]) {
        try PayPalSettlementReport.read(name: "TRR-20170322.01.011.CSV", bytes: Array(text.utf8))
    }

    static func stl(_ body: [String], sc: Int? = nil, sf: String? = nil, footers: Bool = true) -> String {
        var lines =
            [
                #""RH",2017/03/23 02:00:00 -0700,"R","ACCT1",009,"#, #""FH",01"#,
                #""SH",2017/03/22 00:00:00 -0700,2017/03/22 23:59:59 -0700,"ACCT1","""#, columns
            ] + body
        if footers {
            lines += [
                sf ?? #""SF","JPY",0,15000,4300,0"#, #""SC",\#(sc ?? body.count)"#, #""RF",\#(body.count)"#, #""RC",\#(body.count)"#,
                #""FF",\#(body.count)"#
            ]
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    @Test func aJPYLineOf15000Is150JPYAndItsFeeGoesBackToTheMerchant() throws {
        let (summary, lines) = try Self.read(Self.stl([Self.refund]))
        #expect(summary.problems.isEmpty, "\(summary.problems)")
        #expect(summary.kind == "TRR" && summary.day == "2017-03-22" && summary.account == "ACCT1" && summary.bodyRows == 1)
        let line = try #require(lines.first)
        #expect(
            line.transactionID == "3HD08833MR473623T" && line.eventCode == "T1107" && line.direction == .debit && line.role == .moneyBack)
        #expect(line.currency.code == "JPY" && line.gross == 150)
        #expect(line.fee == 43 && line.feeDirection == .credit && line.feeTaken == -43)
        #expect(line.referenceID == "1V551844CE5526421" && line.referenceType == "TXN")
        #expect(line.initiatedAt == 1_490_200_499 && line.line == 5)
    }

    @Test func amountsAreHundredthsOfTheMajorUnitForEveryExponent() {
        #expect(PayPalSettlementReport.minorUnits(hundredths: 10000, Currency(code: "USD")!) == 10000)
        #expect(PayPalSettlementReport.minorUnits(hundredths: 10000, Currency(code: "JPY")!) == 100)
        #expect(PayPalSettlementReport.minorUnits(hundredths: 15050, Currency(code: "JPY")!) == nil)
        #expect(PayPalSettlementReport.minorUnits(hundredths: 1250, Currency(code: "BHD")!) == 12500)
        #expect(PayPalSettlementReport.minorUnits(hundredths: Int64.max, Currency(code: "BHD")!) == nil)
    }

    /// Header names vary between versions: a double space in "Transaction  Debit or Credit", or none at all.
    @Test func columnsAreFoundWhateverTheirSpacing() throws {
        for header in [
            Self.columns.replacingOccurrences(of: "Transaction Debit or Credit", with: "Transaction  Debit or Credit"),
            Self.columns.replacingOccurrences(of: " ", with: "")
        ] {
            let (_, lines) = try Self.read(Self.stl([Self.refund]).replacingOccurrences(of: Self.columns, with: header))
            #expect(lines.map { $0.gross } == [150])
        }
    }

    @Test func utf8WithABOMAndUTF16InEitherOrderReadAlike() throws {
        let text = Self.stl([Self.payment, Self.refund], sf: #""SF","JPY",0,15000,4300,0"#)
        var encodings: [[UInt8]] = [[0xEF, 0xBB, 0xBF] + Array(text.utf8)]
        var le: [UInt8] = [0xFF, 0xFE], beNoBOM: [UInt8] = []
        for unit in text.utf16 { le += [UInt8(unit & 0xFF), UInt8(unit >> 8)]; beNoBOM += [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
        encodings += [le, beNoBOM]
        let (_, expected) = try Self.read(text)
        for bytes in encodings {
            // Fed in chunks of 7 bytes: a character, a surrogate pair or the BOM may span two.
            var rest = bytes[...]
            var lines: [SettlementLine] = []
            _ = try PayPalSettlementReport.read(
                name: "x.csv",
                chunks: {
                    guard !rest.isEmpty else { return nil }
                    defer { rest = rest.dropFirst(7) }
                    return Array(rest.prefix(7))
                }
            ) { lines += $0 }
            #expect(lines == expected)
        }
        #expect(expected.count == 2)
    }

    @Test func footersThatDoNotAddUpAreProblemsAndTheLinesAreStillRead() throws {
        let good = try Self.read(Self.stl([Self.payment, Self.refund], sf: #""SF","JPY",0,15000,4300,0"#))
        #expect(good.0.problems.isEmpty, "\(good.0.problems)")
        let counted = try Self.read(Self.stl([Self.refund], sc: 2))
        #expect(counted.0.problems.contains { $0.contains("section count (SC) says 2 rows, the section has 1") }, "\(counted.0.problems)")
        #expect(counted.1.count == 1)
        let fee = try Self.read(Self.stl([Self.refund], sf: #""SF","JPY",0,15000,4301,0"#))
        #expect(fee.0.problems.contains { $0.contains("JPY fee credits of 4301 hundredths, its rows add up to 4300") }, "\(fee.0.problems)")
        // A file of CH and SB rows alone (an export) is not incomplete for that alone.
        let export = try Self.read([Self.columns, Self.refund].joined(separator: "\n"))
        #expect(export.0.problems.isEmpty && export.1.count == 1)
    }

    /// What the headers and footers give is stored with the file (its account, its problems): a NUL or an overlong
    /// account rejects the file naming the line, where it failed the whole import at the database naming none; a
    /// footer's currency quoted in a problem holds U+FFFD for a NUL (outside review).
    @Test func headersAndFootersCarryNoNULToTheDatabase() throws {
        for (bad, reason) in [
            ("ACCT\u{0}1", "the account of its header (RH) holds a NUL byte"),
            (String(repeating: "A", count: 256), "the account of its header (RH) is longer than 255 bytes")
        ] {
            let text = Self.stl([Self.refund]).replacingOccurrences(of: #""R","ACCT1""#, with: "\"R\",\"\(bad)\"")
            let error = #expect(throws: SettlementReportError.self) { try Self.read(text) }
            #expect(error?.description.contains(reason) == true && error?.line == 1, "\(String(describing: error))")
        }
        let section = Self.stl([Self.refund]).replacingOccurrences(of: #""ACCT1","""#, with: "\"AC\u{0}CT1\",\"\"")
        let error = #expect(throws: SettlementReportError.self) { try Self.read(section) }
        #expect(error?.description.contains("the account of its header (SH) holds a NUL byte") == true, "\(String(describing: error))")
        let (summary, _) = try Self.read(Self.stl([Self.refund], sf: "\"SF\",\"JP\u{0}Y\",0,15000,4300,0"))
        #expect(!summary.problems.isEmpty && summary.problems.allSatisfy { !$0.utf8.contains(0) }, "\(summary.problems)")
        #expect(summary.problems.contains { $0.contains("JP\u{FFFD}Y") })
    }

    /// A file of a million footers that disagree keeps 50 problems in words and counts the rest.
    @Test func problemsAreBounded() throws {
        let (summary, _) = try Self.read(Self.stl([Self.refund]) + String(repeating: "\"SC\",7\r\n", count: 200))
        #expect(summary.problems.count == 51 && summary.problems.last == "… and 150 more problems", "\(summary.problems.suffix(2))")
    }

    /// A file is all or nothing: one cut short (inside its last row, or a header without its footer) is refused whole,
    /// naming where it stops; before, its whole rows were kept and it was only `settlement_incomplete`.
    @Test func aFileCutShortIsRefusedWholeNamingWhereItStops() throws {
        let whole = Self.stl([Self.payment, Self.refund], footers: false)
        // Cut inside the last row: it has fewer fields than its columns.
        let cut = String(whole.dropLast(16))  // `,"S","46239229"` and the line end (one Character): 14 of 16 fields
        let inRow = #expect(throws: SettlementReportError.self) { try Self.read(cut) }
        #expect(
            inRow?.line == 6 && inRow?.description.contains("the file ends inside this row (14 of 16 fields): it was cut short") == true,
            "\(String(describing: inRow))")
        // Cut inside a quoted field.
        let quoted = #expect(throws: SettlementReportError.self) { try Self.read(String(whole.dropLast(4))) }
        #expect(quoted?.line == 6 && quoted?.description.contains("a quoted field never closes") == true, "\(String(describing: quoted))")
        // Whole rows but no footers after a file header.
        let footless = #expect(throws: SettlementReportError.self) { try Self.read(whole) }
        #expect(
            footless?.description.contains("the file header (FH, line 2) has no file footer (FF): it stops after line 6, cut short")
                == true,
            "\(String(describing: footless))")
        // A report header without its report footer, where there is no file header.
        let noFH = whole.replacingOccurrences(of: "\"FH\",01\r\n", with: "")
        let report = #expect(throws: SettlementReportError.self) { try Self.read(noFH) }
        #expect(
            report?.description.contains("the report header (RH, line 1) has no report footer (RF)") == true,
            "\(String(describing: report))")
        // The whole file reads.
        #expect(try Self.read(Self.stl([Self.payment, Self.refund])).1.count == 2)
    }

    /// A TRR row's Transactional Status as PayPal defines it: S and V moved money (V: fully refunded since, its
    /// refund a row of its own), P waits for a later file, D moved none; anything else is no status PayPal defines.
    @Test(arguments: [
        ("S", SettlementLine.Status.completed, true), ("V", .reversed, true), ("v", .reversed, true),
        ("P", .pending, false), ("D", .denied, false)
    ])
    func eachTransactionalStatusIsReadAsPayPalDefinesIt(_ written: String, _ status: SettlementLine.Status, _ moved: Bool) throws {
        let row = Self.payment.replacingOccurrences(of: "\"USD\",\"S\",", with: "\"USD\",\"\(written)\",")
        let (_, lines) = try Self.read(Self.stl([row], sf: #""SF","USD",1000,0,0,64"#))
        #expect(lines.count == 1 && lines[0].status == status && lines[0].status.moved == moved && lines[0].role == .payment)
    }

    @Test func aStatusPayPalDoesNotDefineRefusesTheFile() {
        let row = Self.payment.replacingOccurrences(of: "\"USD\",\"S\",", with: "\"USD\",\"X\",")
        let error = #expect(throws: SettlementReportError.self) { try Self.read(Self.stl([row], sf: #""SF","USD",1000,0,0,64"#)) }
        #expect(
            error?.line == 5 && error?.description.contains("Transactional Status \"X\" is not one PayPal defines") == true,
            "\(String(describing: error))")
    }

    /// A body row with no Transaction ID (a withdrawal, a transfer) is the account's own: read, counted in the footers,
    /// never a reason to refuse the file (before: "Transaction ID is empty", the whole file refused).
    @Test func aRowWithNoTransactionIDIsAnAccountRow() throws {
        let withdrawal = #""SB","","","","","T0400",2017/03/22 12:00:00 -0700,2017/03/22 12:00:00 -0700,"DR",5000,"USD","","","","S","""#
        let (summary, lines) = try Self.read(Self.stl([Self.payment, withdrawal], sf: #""SF","USD",1000,5000,0,64"#))
        #expect(summary.problems.isEmpty, "\(summary.problems)")
        #expect(lines.count == 2 && lines[1].isAccountRow && lines[1].role == .other && lines[1].gross == 5000 && lines[1].line == 6)
        #expect(!lines[0].isAccountRow)
    }

    @Test(arguments: [
        (#""SB","X""#, "a body row (SB) before the column names (CH)"),
        ("\(columns)\n\"ZZ\",1", "\"ZZ\" is not a row type"),
        (
            "\(columns)\n" + payment.replacingOccurrences(of: ",1000,", with: ",10.00,"),
            "Gross Transaction Amount \"10.00\" is not an unsigned whole number"
        ),
        ("\(columns)\n" + refund.replacingOccurrences(of: ",15000,", with: ",15050,"), "15050 hundredths is not a whole amount of JPY"),
        ("\(columns)\n" + refund.replacingOccurrences(of: "\"DR\",15000", with: "\"XX\",15000"), "not CR or DR"),
        ("\(columns)\n" + refund.replacingOccurrences(of: "\"JPY\",\"CR\"", with: "\"YEN\",\"CR\""), "\"YEN\" is not an ISO 4217 currency"),
        (
            columns.replacingOccurrences(of: ",\"Gross Transaction Amount\"", with: "") + "\n" + payment,
            "the column names (CH) have no \"Gross Transaction Amount\""
        ),
        ("\(columns)\n\(payment)\n\"SB\",\"short\"\n\(refund)", "2 fields where the column names (CH) give 16"),
        ("\(columns)\n\"SB\",\"a\"b\"\n\(refund)", "unexpected character after a closing quote"),
        ("\(columns)\n" + payment.replacingOccurrences(of: ",1000,", with: ",99999999999999999,"), "larger than any settlement amount"),
        (
            "\(columns)\n" + payment.replacingOccurrences(of: "1V551844CE5526421", with: String(repeating: "X", count: 300)),
            "Transaction ID is longer than 255 bytes"
        ),
        (
            "\(columns)\n" + payment.replacingOccurrences(of: "\"46239229\"", with: "\"" + String(repeating: "x", count: 70_000) + "\""),
            "a field longer than 65536 bytes"
        ),
        ("\(columns)\n\"SB\"" + String(repeating: ",1", count: 600), "more than 512 fields")
    ])
    func aRowThatCannotBeReadRejectsTheFileNamingItsLine(_ text: String, _ reason: String) {
        let error = #expect(throws: SettlementReportError.self) { try Self.read(text) }
        #expect(error?.description.contains(reason) == true, "\(String(describing: error))")
        #expect(error.map { $0.line > 0 } == true)
    }

    /// An identifier is held to 255 bytes as stored: a byte that is not UTF-8 is kept as U+FFFD, three bytes.
    @Test func anIdentifierIsMeasuredAsStored() throws {
        func file(_ id: [UInt8]) -> [UInt8] {
            let (head, tail) = (
                Self.payment.components(separatedBy: "1V551844CE5526421")[0], Self.payment.components(separatedBy: "1V551844CE5526421")[1]
            )
            return Array("\(Self.columns)\n\(head)".utf8) + id + Array(tail.utf8)
        }
        let error = #expect(throws: SettlementReportError.self) {
            try PayPalSettlementReport.read(name: "TRR-20170322.01.011.CSV", bytes: file(Array(repeating: 0xFF, count: 100)))
        }
        #expect(error?.description.contains("Transaction ID is longer than 255 bytes") == true, "\(String(describing: error))")
        let (_, lines) = try PayPalSettlementReport.read(name: "TRR-20170322.01.011.CSV", bytes: file(Array(repeating: 0xFF, count: 85)))
        #expect(lines.first?.transactionID.utf8.count == 255)
    }

    @Test func roles() {
        #expect(PayPalSettlementReport.role(eventCode: "T0006") == .payment)
        #expect(PayPalSettlementReport.role(eventCode: "T0002") == .payment)
        #expect(PayPalSettlementReport.role(eventCode: "T1107") == .moneyBack)
        #expect(PayPalSettlementReport.role(eventCode: "T1201") == .moneyBack)
        #expect(PayPalSettlementReport.role(eventCode: "T0400") == .other)
        #expect(PayPalSettlementReport.role(eventCode: "T0300") == .other)  // funding the account from a bank
        #expect(PayPalSettlementReport.role(eventCode: "T1110") == .other)  // a hold and its release
        #expect(PayPalSettlementReport.role(eventCode: "T1114") == .other)  // a mass payment's reversal
        #expect(PayPalSettlementReport.nameParts("/in/STL-20261130.01.009.CSV") == ("STL", "2026-11-30"))
        #expect(PayPalSettlementReport.nameParts("report.csv") == (nil, nil))
        #expect(PayPalSettlementReport.timestamp("2017/03/22 09:34:59 -0700") == 1_490_200_499)
        #expect(PayPalSettlementReport.timestamp("2017-03-22 16:34:59") == 1_490_200_499)
        #expect(PayPalSettlementReport.timestamp("22/03/2017") == nil)
    }

    /// Report times, each read the same from a string and from the middle of a row's bytes (as the reader reads them).
    @Test(
        arguments: [
            ("2017/03/22 09:34:59 -0700", 1_490_200_499), ("2017/03/22 09:34:59 -07:00", 1_490_200_499),
            ("2017-03-22T16:34:59Z", 1_490_200_499), ("2017/03/22 16:34:59", 1_490_200_499), ("2017/03/22 16:34:59   +0000", 1_490_200_499),
            ("2017/03/23 01:34:59 +0900", 1_490_200_499), ("2017/03/22 09:34:59 -07000", nil), ("2017/03/22 09:34:59 -07", nil),
            ("2017/03/22 09:34:59 0700", nil), ("2017/03/22 09:34:59 -07a0", nil), ("2017/03-22 09:34:59", nil),
            ("2017/02/30 09:34:59", nil),
            ("2017/03/22 09:34", nil), ("", nil)
        ] as [(String, Int64?)])
    func reportTimes(text: String, seconds: Int64?) {
        #expect(PayPalSettlementReport.timestamp(text) == seconds)
        let row = Array("\"SB\",".utf8) + Array(text.utf8) + Array(",x".utf8)
        #expect(PayPalSettlementReport.timestamp(bytes: row[5..<(5 + text.utf8.count)]) == seconds)
    }
}
