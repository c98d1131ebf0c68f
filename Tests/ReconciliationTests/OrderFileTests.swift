import Testing
import Providers
@testable import Reconciliation

private let header = "provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount"

/// Parses and returns the errors (or records an issue if the file was accepted).
private func errors(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [OrderFileError] {
    do {
        let orders = try OrderFile.parse(text: text)
        Issue.record("accepted: \(orders)", sourceLocation: sourceLocation)
        return []
    } catch {
        return error.errors
    }
}

private func csv(_ rows: String...) -> String { ([header] + rows).joined(separator: "\n") + "\n" }

@Suite struct OrderFileCSVTests {
    @Test func goodCSV() throws {
        let text =
            "\u{FEFF}"
            + [
                "Provider , ORDER_ID,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount",
                "pxp,ORD-1,M1,S1,mtx-1,authorisation,25.00,USD,open,",
                "",
                "PayPal,\"ORD,2\",,,5O190127TN364715T,Purchase,1000,jpy,FULFILLED,250",
                "paypercut,\"ORD \"\"3\"\"\",acct_1,,pi_1,estimated_authorisation,1.250,BHD,cancelled,0.5",
                "pxp,\"multi",
                "line\",M1,S1,mtx-4,payout,0,EUR,fulfilled,0.00"
            ].joined(separator: "\r\n") + "\r\n"
        let orders = try OrderFile.parse(text: text)
        #expect(orders.count == 4)
        #expect(
            orders[0]
                == Order(
                    provider: .pxp, orderID: "ORD-1", merchant: "M1", site: "S1", transactionRef: "mtx-1",
                    intent: .authorisation, amount: Money(minorUnits: 2500, currency: .usd),
                    fulfilment: .open, refundAmount: 0))
        #expect(
            orders[1]
                == Order(
                    provider: .paypal, orderID: "ORD,2", merchant: nil, site: nil,
                    transactionRef: "5O190127TN364715T", intent: .purchase,
                    amount: Money(minorUnits: 1000, currency: .jpy), fulfilment: .fulfilled,
                    refundAmount: 250))
        #expect(orders[2].orderID == "ORD \"3\"")
        #expect(orders[2].amount == Money(minorUnits: 1250, currency: .bhd))
        #expect(orders[2].refundAmount == 500)
        #expect(orders[2].intent == .estimatedAuthorisation)
        #expect(orders[3].orderID == "multi\r\nline")
        #expect(orders[3].intent == .payout)
    }

    @Test func optionalColumnsMayBeAbsentAndOrderIsFree() throws {
        let text = "currency,amount,fulfilment,intent,transaction_ref,order_id,provider\nUSD,1.5,open,purchase,ref,o1,paypal\n"
        let orders = try OrderFile.parse(text: text)
        #expect(orders.map(\.amount.minorUnits) == [150])
        #expect(orders.first?.refundAmount == 0)
        #expect(orders.first?.merchant == nil)
    }

    @Test func lfLineEndingsAndNoFinalNewline() throws {
        let orders = try OrderFile.parse(text: header + "\npaypal,o1,,,r1,purchase,1,USD,open,\npaypal,o2,,,r2,purchase,2,USD,open,")
        #expect(orders.map(\.orderID) == ["o1", "o2"])
    }

    @Test func loneCRLineEndings() throws {
        let orders = try OrderFile.parse(text: header + "\rpaypal,o1,,,r1,purchase,1,USD,open,\r")
        #expect(orders.map(\.orderID) == ["o1"])
    }

    @Test func emptyFileAndHeaderOnly() throws {
        #expect(try OrderFile.parse(text: "").isEmpty)
        #expect(try OrderFile.parse(text: "\n\n").isEmpty)
        #expect(try OrderFile.parse(text: header + "\n").isEmpty)
    }

    struct BadRow: Sendable, CustomTestStringConvertible {
        var row: String
        var field: String
        var reason: String
        var testDescription: String { row }
    }

    @Test(arguments: [
        BadRow(
            row: "stripe,o1,,,r,purchase,1,USD,open,", field: "provider",
            reason: "unknown provider 'stripe' (expected one of: pxp, paypal, paypercut)"),
        BadRow(row: ",o1,,,r,purchase,1,USD,open,", field: "provider", reason: "missing"),
        BadRow(
            row: "paypal,o1,,,r,sale,1,USD,open,", field: "intent",
            reason: "unknown intent 'sale' (expected one of: authorisation, estimated_authorisation, purchase, payout)"),
        BadRow(
            row: "paypal,o1,,,r,purchase,1,USD,shipped,", field: "fulfilment",
            reason: "unknown fulfilment 'shipped' (expected one of: open, fulfilled, cancelled)"),
        BadRow(row: "paypal,o1,,,r,purchase,1,XYZ,open,", field: "currency", reason: "unknown currency 'XYZ'"),
        BadRow(row: "paypal,o1,,,r,purchase,1,,open,", field: "currency", reason: "missing"),
        BadRow(row: "paypal,o1,,,r,purchase,-1,USD,open,", field: "amount", reason: "negative amount"),
        BadRow(row: "paypal,o1,,,r,purchase,-0.01,USD,open,", field: "amount", reason: "negative amount"),
        BadRow(row: "paypal,o1,,,r,purchase,25.000,USD,open,", field: "amount", reason: "more decimals than USD allows (2)"),
        BadRow(row: "paypal,o1,,,r,purchase,1.5,JPY,open,", field: "amount", reason: "more decimals than JPY allows (0)"),
        BadRow(row: "paypal,o1,,,r,purchase,1.2345,KWD,open,", field: "amount", reason: "more decimals than KWD allows (3)"),
        BadRow(
            row: "paypal,o1,,,r,purchase,\"1,000.00\",USD,open,", field: "amount",
            reason: "invalid character ',' at position 2"),
        BadRow(row: "paypal,o1,,,r,purchase,1e3,USD,open,", field: "amount", reason: "exponent notation is not allowed"),
        BadRow(row: "paypal,o1,,,r,purchase, 1,USD,open,", field: "amount", reason: "invalid character ' ' at position 1"),
        BadRow(row: "paypal,o1,,,r,purchase,,USD,open,", field: "amount", reason: "missing"),
        BadRow(
            row: "paypal,o1,,,r,purchase,10.00,USD,open,10.01", field: "refund_amount",
            reason: "refund_amount above the amount (10.00)"),
        BadRow(row: "paypal,o1,,,r,purchase,10.00,USD,open,-1", field: "refund_amount", reason: "negative amount"),
        BadRow(
            row: "paypal,o1,,,r,purchase,10.00,USD,open,1.001", field: "refund_amount",
            reason: "more decimals than USD allows (2)"),
        BadRow(row: "paypal,,,,r,purchase,1,USD,open,", field: "order_id", reason: "missing"),
        BadRow(
            row: "paypal,o\u{0}1,,,r,purchase,1,USD,open,", field: "order_id",
            reason: "contains a NUL character, which PostgreSQL cannot store"),
        BadRow(
            row: "paypal,o1,,,r,purchase,1,US\u{0}D,open,", field: "currency",
            reason: "contains a NUL character, which PostgreSQL cannot store"),
        BadRow(row: "paypal,o1,,,,purchase,1,USD,open,", field: "transaction_ref", reason: "missing"),
        BadRow(row: "pxp,o1,,S1,r,purchase,1,USD,open,", field: "merchant", reason: "required for pxp (part of its API path)"),
        BadRow(row: "pxp,o1,M1,,r,purchase,1,USD,open,", field: "site", reason: "required for pxp (part of its API path)"),
        BadRow(row: "paypal,o1,,,r,purchase,1,USD,open", field: "", reason: "expected 10 fields, found 9"),
        BadRow(row: "paypal,o1,,,r,purchase,1,USD,open,,", field: "", reason: "expected 10 fields, found 11"),
        BadRow(
            row: "paypal,o\"1,,,r,purchase,1,USD,open,", field: "",
            reason: "quote inside an unquoted field (quote the whole field and write \"\")"),
        BadRow(
            row: "paypal,\"o1\"x,,,r,purchase,1,USD,open,", field: "",
            reason: "unexpected character after a closing quote (a quote inside a quoted field is written \"\")")
    ])
    func invalidRow(_ bad: BadRow) {
        let found = errors(csv("paypal,ok,,,r0,purchase,1,USD,open,", bad.row))
        #expect(found == [OrderFileError(line: 3, field: bad.field, reason: bad.reason)])
    }

    @Test func everyBadRowIsListedWithItsLine() {
        let found = errors(
            csv(
                "pxp,o1,,,r,purchase,1,USD,open,",  // line 2: merchant and site
                "paypal,o2,,,r,purchase,1.001,usd,open,",  // line 3: decimals (currency normalised)
                "paypal,o3,,,r,purchase,1,USD,open,",  // line 4: fine
                "bogus,,,,,nope,x,QQQ,later,y"  // line 5: everything
            ))
        #expect(
            found.map(\.description) == [
                "line 2, merchant: required for pxp (part of its API path)",
                "line 2, site: required for pxp (part of its API path)",
                "line 3, amount: more decimals than USD allows (2)",
                "line 5, provider: unknown provider 'bogus' (expected one of: pxp, paypal, paypercut)",
                "line 5, order_id: missing",
                "line 5, transaction_ref: missing",
                "line 5, intent: unknown intent 'nope' (expected one of: authorisation, estimated_authorisation, purchase, payout)",
                "line 5, fulfilment: unknown fulfilment 'later' (expected one of: open, fulfilled, cancelled)",
                "line 5, currency: unknown currency 'QQQ'",
                "line 5, amount: invalid character 'x' at position 1",
                "line 5, refund_amount: invalid character 'y' at position 1"
            ])
    }

    @Test func negativeAmountIsCaughtEvenWithAnUnknownCurrency() {
        #expect(
            errors(csv("paypal,o1,,,r,purchase,-5,XYZ,open,-0.001")) == [
                OrderFileError(line: 2, field: "currency", reason: "unknown currency 'XYZ'"),
                OrderFileError(line: 2, field: "amount", reason: "negative amount"),
                OrderFileError(line: 2, field: "refund_amount", reason: "negative amount")
            ])
        // "-0" is zero, not negative.
        #expect((try? OrderFile.parse(text: csv("paypal,o1,,,r,purchase,-0,USD,open,")))?.first?.amount.minorUnits == 0)
    }

    @Test func duplicateOrderIDForTheSameProvider() {
        let found = errors(
            csv(
                "paypal,o1,,,r1,purchase,1,USD,open,",
                "pxp,o1,M,S,r2,purchase,1,USD,open,",  // other provider: fine
                "paypal,o1,,,r3,purchase,2,USD,open,"
            ))
        #expect(found == [OrderFileError(line: 4, field: "order_id", reason: "duplicate order_id for paypal (first on line 2)")])
    }

    @Test func lineNumbersCountQuotedLineBreaksAndBlankLines() {
        let text = header + "\n\npaypal,\"a\nb\",,,r,purchase,1,USD,open,\n\npaypal,o2,,,r,purchase,1.999,USD,open,\n"
        #expect(errors(text) == [OrderFileError(line: 6, field: "amount", reason: "more decimals than USD allows (2)")])
    }

    @Test func unterminatedQuoteReportsWhereTheRecordStarted() {
        let text = csv("paypal,o1,,,r,purchase,1,USD,open,", "paypal,\"o2,,,r,purchase,1,USD,open,", "paypal,o3,,,r,purchase,1,USD,open,")
        #expect(errors(text) == [OrderFileError(line: 3, field: "", reason: "unterminated quoted field")])
    }

    @Test func invalidUTF8IsReported() {
        var bytes = Array((header + "\npaypal,o").utf8)
        bytes += [0xFF, 0xFE]
        bytes += Array(",,,r,purchase,1,USD,open,\n".utf8)
        #expect(throws: OrderFileRejection(errors: [OrderFileError(line: 2, field: "order_id", reason: "not valid UTF-8")])) {
            try OrderFile.parse(bytes)
        }
    }

    @Test func headerProblemsStopTheFile() {
        let found = errors("provider,order_id,order_id,transaction_ref,intent,amount,currency,refund_amout,\npaypal,o1\n")
        #expect(
            found == [
                OrderFileError(line: 1, field: "order_id", reason: "repeated column"),
                OrderFileError(
                    line: 1, field: "refund_amout",
                    reason: "unknown column; did you mean refund_amount? (known: provider, order_id, "
                        + "transaction_ref, intent, amount, currency, fulfilment, merchant, site, refund_amount, period_start, period_end)"),
                OrderFileError(line: 1, field: "", reason: "empty column name"),
                OrderFileError(line: 1, field: "fulfilment", reason: "missing column")
            ])
    }

    /// A shop's export has columns of its own: read past and named once; one a letter or two from a field payrecon
    /// reads is refused (its values would be dropped: `refund_amout`); `strict` refuses every one, as before.
    @Test func columnsOfTheShopsOwnAreReadPastAndNearMissesRefused() throws {
        let text =
            "provider,order_id,customer_email,transaction_ref,intent,amount,currency,fulfilment,Notes\n"
            + "paypal,o1,a@example.com,r1,purchase,1.00,USD,open,gift\npaypal,o2,b@example.com,r2,purchase,2.00,USD,open,\n"
        var reader = OrderFileReader(bytes: Array(text.utf8), traits: ProviderRegistry.traits)
        var orders: [Order] = []
        while let record = reader.next() {
            guard case let .order(o, _) = record else { Issue.record("\(record)"); continue }
            orders.append(o)
        }
        #expect(orders.map(\.orderID) == ["o1", "o2"])
        let amounts: [Int64] = orders.map(\.amount.minorUnits)
        #expect(amounts == [100, 200])
        #expect(reader.ignored == ["customer_email", "notes"])
        var strict = OrderFileReader(bytes: Array(text.utf8), traits: ProviderRegistry.traits)
        strict.strict = true
        guard case let .invalid(errors)? = strict.next() else { Issue.record("strict read a foreign column"); return }
        #expect(errors.map(\.field) == ["customer_email", "Notes"])
        // JSON Lines alike: a key of the shop's own is read past, a near miss refused.
        let line =
            #"{"provider":"paypal","order_id":"o3","transaction_ref":"r3","intent":"purchase","amount":"3","currency":"USD","fulfilment":"open","note":"x"}"#
        var json = OrderFileReader(bytes: Array(line.utf8), traits: ProviderRegistry.traits)
        guard case .order? = json.next() else { Issue.record("a key of the shop's own refused"); return }
        #expect(json.ignored == ["note"])
        #expect(
            OrderFileReader.nearMiss("refund_amout") == "refund_amount" && OrderFileReader.nearMiss("transacton_ref") == "transaction_ref")
        #expect(
            OrderFileReader.nearMiss("note") == nil && OrderFileReader.nearMiss("customer_email") == nil
                && OrderFileReader.nearMiss("sites") == "site")
        // A name holding a word of a field payrecon reads may be that field under another name: refused, whatever its case.
        for name in [
            "refund", "amount_refunded", "refund_total", "REFUND_AMOUNT_CENTS", "Total Amount", "billing_period", "merchant_account"
        ] {
            var r = OrderFileReader(
                bytes: Array(
                    (#"{"provider":"paypal","order_id":"o4","transaction_ref":"r4","intent":"purchase","amount":"3","currency":"USD","fulfilment":"open",""#
                        + name + #"":"1"}"#).utf8),
                traits: ProviderRegistry.traits)
            guard case let .invalid(errors)? = r.next() else { Issue.record("\(name) was read past"); continue }
            #expect(errors.map(\.field) == [name], "\(name)")
        }
    }

    @Test func headerAfterBlankLinesKeepsItsLineNumber() {
        let found = errors("\n\nprovider,order_id\n")
        #expect(found.map(\.line) == [3, 3, 3, 3, 3])
        #expect(found.map(\.field) == ["transaction_ref", "intent", "amount", "currency", "fulfilment"])
    }
}

@Suite struct OrderFileJSONLinesTests {
    @Test func goodJSONLines() throws {
        let text = """
            {"provider":"pxp","order_id":"ORD-1","merchant":"M1","site":"S1","transaction_ref":"mtx-1","intent":"authorisation","amount":50.05,"currency":"EUR","fulfilment":"open"}

              {"provider":"paypal","order_id":12345,"merchant":null,"transaction_ref":"5O19","intent":"purchase","amount":"20","currency":"gbp","fulfilment":"fulfilled","refund_amount":5}
            {"provider":"paypercut","order_id":"caf\\u00e9 \\"q\\" \\ud83d\\ude00","transaction_ref":"pi_1","intent":"PURCHASE","amount":1.0E2,"currency":"JPY","fulfilment":"cancelled","refund_amount":"0"}\r
            {"provider":"paypal","order_id":"o4","transaction_ref":"r","intent":"purchase","amount":0,"currency":"BHD","fulfilment":"open","refund_amount":null}
            """
        #expect(OrderFile.detectFormat(Array(text.utf8)) == .jsonLines)
        let orders = try OrderFile.parse(text: text)
        #expect(orders.count == 4)
        #expect(orders[0].amount == Money(minorUnits: 5005, currency: .eur))
        #expect(orders[0].site == "S1")
        #expect(orders[1].orderID == "12345")
        #expect(orders[1].merchant == nil)
        #expect(orders[1].amount == Money(minorUnits: 2000, currency: Currency(code: "GBP")!))
        #expect(orders[1].refundAmount == 500)
        #expect(orders[2].orderID == "café \"q\" 😀")
        #expect(orders[2].amount == Money(minorUnits: 100, currency: .jpy))
        #expect(orders[3].amount.minorUnits == 0)
        #expect(orders[3].refundAmount == 0)
    }

    struct BadLine: Sendable, CustomTestStringConvertible {
        var json: String
        var errors: [OrderFileError]
        var testDescription: String { json }
        init(_ json: String, _ field: String, _ reason: String) {
            self.json = json
            errors = [OrderFileError(line: 2, field: field, reason: reason)]
        }
    }

    private static let base =
        #""provider":"paypal","order_id":"o2","transaction_ref":"r","intent":"purchase","currency":"USD","fulfilment":"open""#

    @Test(arguments: [
        BadLine("{\(base),\"amount\":25.000}", "amount", "more decimals than USD allows (2)"),
        BadLine("{\(base),\"amount\":\"25.000\"}", "amount", "more decimals than USD allows (2)"),
        BadLine("{\(base),\"amount\":1e-3}", "amount", "more decimals than USD allows (2)"),
        BadLine("{\(base),\"amount\":-1}", "amount", "negative amount"),
        BadLine("{\(base),\"amount\":true}", "amount", "must be a decimal string or a number, not true"),
        BadLine("{\(base),\"amount\":{\"value\":\"1\"}}", "amount", "must be a decimal string or a number, not an object"),
        BadLine("{\(base),\"amount\":null}", "amount", "missing"),
        BadLine("{\(base)}", "amount", "missing"),
        BadLine("{\(base),\"amount\":\"1\",\"refund_amount\":1.01}", "refund_amount", "refund_amount above the amount (1.00)"),
        BadLine("{\(base),\"amount\":\"1\",\"refund_amout\":\"1\"}", "refund_amout", "unknown key; did you mean refund_amount?"),
        BadLine("{\(base),\"amount\":\"1\",\"amount\":\"2\"}", "amount", "repeated key"),
        BadLine("{\(base),\"amount\":\"1\",\"merchant\":[\"M\"]}", "merchant", "must be a string, not an array"),
        BadLine("{\(base),\"amount\":\"1\",\"merchant\":1.5}", "merchant", "must be a string or an integer"),
        BadLine(
            #"{"provider":"paypal","order_id":"o2","transaction_ref":"r","intent":2,"currency":"USD","fulfilment":"open","amount":"1"}"#,
            "intent", "must be a string"),
        BadLine("[1,2]", "", "invalid JSON at column 1: expected an object"),
        BadLine("{\(base),\"amount\":01}", "", "invalid JSON at column 126: invalid number (leading zero in a JSON number)"),
        BadLine("{\(base),\"amount\":\"1\"", "", "invalid JSON at column 129: unterminated object"),
        BadLine("{\(base),\"amount\":\"1\"} x", "", "invalid JSON at column 131: unexpected text after the object"),
        BadLine("{\(base),\"amount\":'1'}", "", "invalid JSON at column 126: unexpected character"),
        BadLine("{\(base),\"amount\":\"1\\x\"}", "", "invalid JSON at column 129: invalid escape"),
        BadLine("{\(base),\"amount\":\"1\",}", "", "invalid JSON at column 130: expected a key"),
        BadLine("{\(base),\"amount\":\"\\ud800\"}", "", "invalid JSON at column 133: lone surrogate"),
        BadLine("{\(base),\"amount\":\"1\t\"}", "", "invalid JSON at column 128: control character in a string"),
        // Escaped, a NUL is valid JSON; PostgreSQL's text holds none, so no field may carry one.
        BadLine(
            "{\(base),\"amount\":\"1\",\"merchant\":\"M\\u0000\"}", "merchant", "contains a NUL character, which PostgreSQL cannot store"),
        BadLine(
            #"{"provider":"paypal","order_id":"o\u00002","transaction_ref":"r","intent":"purchase","currency":"USD","fulfilment":"open","amount":"1"}"#,
            "order_id", "contains a NUL character, which PostgreSQL cannot store"),
        BadLine(
            #"{"provider":"paypal","order_id":"o2","transaction_ref":"r\u0000","intent":"purchase","currency":"USD","fulfilment":"open","amount":"1"}"#,
            "transaction_ref", "contains a NUL character, which PostgreSQL cannot store")
    ])
    func invalidLine(_ bad: BadLine) {
        let good =
            #"{"provider":"paypal","order_id":"o1","transaction_ref":"r","intent":"purchase","amount":1,"currency":"USD","fulfilment":"open"}"#
        #expect(errors(good + "\n" + bad.json + "\n") == bad.errors)
    }

    @Test func pxpRowNeedsMerchantAndSiteAndDuplicatesAreCaught() {
        let text = """
            {"provider":"pxp","order_id":"o1","merchant":"","transaction_ref":"r","intent":"purchase","amount":"1","currency":"USD","fulfilment":"open"}
            {"provider":"paypal","order_id":7,"transaction_ref":"r","intent":"purchase","amount":"1","currency":"USD","fulfilment":"open"}
            {"provider":"paypal","order_id":"7","transaction_ref":"r","intent":"purchase","amount":"1","currency":"USD","fulfilment":"open"}
            """
        #expect(
            errors(text) == [
                OrderFileError(line: 1, field: "merchant", reason: "required for pxp (part of its API path)"),
                OrderFileError(line: 1, field: "site", reason: "required for pxp (part of its API path)"),
                OrderFileError(line: 3, field: "order_id", reason: "duplicate order_id for paypal (first on line 2)")
            ])
    }

    @Test func invalidUTF8Line() {
        var bytes = Array(#"{"provider":"paypal","order_id":""#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#"","transaction_ref":"r","intent":"purchase","amount":"1","currency":"USD","fulfilment":"open"}"#.utf8)
        #expect(throws: OrderFileRejection(errors: [OrderFileError(line: 1, field: "", reason: "not valid UTF-8")])) {
            try OrderFile.parse(bytes)
        }
    }

    @Test func deepNestingIsRejectedNotCrashing() {
        let deep = String(repeating: "[", count: 10_000)
        let found = errors("{\"amount\":\(deep)}")
        #expect(found.first?.reason.contains("nested too deeply") == true)
    }
}

@Suite struct OrderFileStreamingTests {
    static let file = "\u{FEFF}" + header + "\r\npaypal,\"o\r\n1\",,,r,purchase,1.50,USD,open,\r\npxp,o2,M,S,r,payout,3,JPY,fulfilled,\r\n"

    @Test(arguments: [1, 2, 3, 7, 64])
    func chunkSizeDoesNotMatter(size: Int) {
        let bytes = Array(Self.file.utf8)
        var offset = 0
        let reader = OrderFileReader {
            guard offset < bytes.count else { return nil }
            defer { offset += size }
            return Array(bytes[offset..<min(offset + size, bytes.count)])
        }
        let records = Array(reader)
        let whole = Array(OrderFileReader(bytes: bytes))
        #expect(records == whole)
        #expect(records.count == 2)
        guard case let .order(first, line) = records.first else { Issue.record("not an order"); return }
        #expect(first.orderID == "o\r\n1")
        #expect(line == 2)
        guard case let .order(_, secondLine) = records.last else { Issue.record("not an order"); return }
        #expect(secondLine == 4)
    }

    @Test func emptyChunksAreSkipped() {
        var chunks: [[UInt8]] = [[], Array(Self.file.utf8), [], []]
        let reader = OrderFileReader { chunks.isEmpty ? nil : chunks.removeFirst() }
        #expect(Array(reader).count == 2)
    }

    @Test func readerYieldsInvalidRowsAndGoesOn() {
        let text = csv("paypal,o1,,,r,purchase,x,USD,open,", "paypal,o2,,,r,purchase,1,USD,open,")
        let records = Array(OrderFileReader(bytes: Array(text.utf8)))
        #expect(records.count == 2)
        #expect(records.first == .invalid([OrderFileError(line: 2, field: "amount", reason: "invalid character 'x' at position 1")]))
        if case .order(let order, _) = records.last { #expect(order.orderID == "o2") } else { Issue.record("no order") }
    }

    @Test(arguments: [
        ("", OrderFile.Format.csv), ("provider,x", .csv), ("  \n{\"a\":1}", .jsonLines),
        ("\u{FEFF}{}", .jsonLines), ("\u{FEFF}provider", .csv), ("\u{FEFF}", .csv)
    ])
    func detectFormat(text: String, format: OrderFile.Format) {
        #expect(OrderFile.detectFormat(Array(text.utf8)) == format)
    }

    @Test func rejectionDescriptionListsEveryError() {
        let rejection = OrderFileRejection(errors: [
            OrderFileError(line: 2, field: "amount", reason: "missing"),
            OrderFileError(line: 3, field: "", reason: "expected 10 fields, found 9")
        ])
        #expect(rejection.description == "line 2, amount: missing\nline 3: expected 10 fields, found 9")
    }
}

/// `transaction_ref` with several references: an order paid in several attempts or transactions.
@Suite struct OrderFileSeveralTransactionsTests {
    @Test func severalReferencesSeparatedBySpaces() throws {
        let orders = try OrderFile.parse(
            text: csv(
                "pxp,ORD-1,M1,S1,TX-1 TX-2  TX-3,purchase,10.00,GBP,fulfilled,0",
                "paypal,ORD-2,,,5O1,purchase,10.00,USD,fulfilled,0"))
        #expect(orders[0].transactionRefs == ["TX-1", "TX-2", "TX-3"])
        #expect(orders[0].transactionRef == "TX-1")
        #expect(orders[0].hasSeveralTransactions)
        #expect(orders[1].transactionRefs == ["5O1"] && !orders[1].hasSeveralTransactions)
        let jsonl = try OrderFile.parse(
            text:
                #"{"provider":"paypal","order_id":"O","transaction_ref":"A B","intent":"purchase","amount":"1.00","currency":"USD","fulfilment":"open"}"#
                + "\n")
        #expect(jsonl[0].transactionRefs == ["A", "B"])
    }

    @Test(arguments: [
        ("TX-1 TX-2 TX-1", "reference 3 of 3 ('TX-1') repeats reference 1"),
        ("TX-1 TX-\u{7}2", "reference 2 of 2 contains a control character"),
        ("TX-1 " + String(repeating: "x", count: 256), "reference 2 of 2 is longer than 255 bytes")
    ])
    func aBadReferenceIsReportedWithItsPosition(refs: String, reason: String) {
        let found = errors(csv("pxp,ORD-1,M1,S1,\"\(refs)\",purchase,10.00,GBP,fulfilled,0"))
        #expect(found.count == 1)
        #expect(found.first?.field == "transaction_ref")
        #expect(found.first?.reason == reason)
        #expect(found.first?.line == 2)
    }
}

/// Order files are bounded per row (issue "strangers, round three", item 5): a line or field past the bound is that
/// row's error, the reader goes on with the next row, and memory stays near the bound, not the file's size.
@Suite struct OrderFileBoundsTests {
    @Test func aJSONLineLongerThanTheBoundIsItsRowsError() {
        let long =
            #"{"provider":"paypal","order_id":"O-1","transaction_ref":""# + String(repeating: "x", count: OrderFile.maxLineBytes + 10)
            + #""}"#
        let good =
            #"{"provider":"paypal","order_id":"O-2","transaction_ref":"PP-2","intent":"purchase","amount":"1.00","currency":"USD","fulfilment":"open"}"#
        let found = errors(long + "\n" + good + "\n")
        #expect(found.map(\.line) == [1], "\(found.map(\.description))")
        #expect(found.first?.reason.contains("longer than \(OrderFile.maxLineBytes) bytes") == true)
    }

    @Test func aCSVFieldLongerThanTheBoundIsItsRowsError() {
        let long = "paypal,O-1,,," + String(repeating: "x", count: OrderFile.maxFieldBytes + 10) + ",purchase,1.00,USD,open,0"
        let found = errors(csv(long, "paypal,O-2,,,PP-2,purchase,1.00,USD,open,0"))
        #expect(found.map(\.line) == [2], "\(found.map(\.description))")
        #expect(found.first?.reason.contains("longer than \(OrderFile.maxFieldBytes) bytes") == true)
    }

    @Test func aRowOfTooManyFieldsIsItsRowsError() {
        let wide = "paypal,O-1,,,PP-1,purchase,1.00,USD,open,0" + String(repeating: ",", count: OrderFile.maxFields + 5)
        let found = errors(csv(wide))
        #expect(found.map(\.line) == [2])
        #expect(found.first?.reason.contains("more than \(OrderFile.maxFields) fields") == true)
    }
}

/// The one rule for text from outside on a terminal (`String.terminalSafe`): every control character visible as an
/// escape, nothing else changed.
@Suite struct TerminalSafeTests {
    @Test(arguments: [
        ("plain é 🐙", "plain é 🐙"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\u{1B}]0;title\u{07}", "\\u{1B}]0;title\\u{7}"),
        ("\u{7F}\u{85}\u{9B}", "\\u{7F}\\u{85}\\u{9B}"),
        ("left\u{202E}right\u{2066}", "left\\u{202E}right\\u{2066}"),
        ("line\u{2028}sep", "line\\u{2028}sep")
    ])
    func escapes(text: String, shown: String) {
        #expect(text.terminalSafe == shown)
        #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }

    @Test func linesBehindAGutter() {
        #expect("a\n\u{1B}b".terminalSafeLines() == "  | a\n  | \\u{1B}b")
    }
}

@Suite struct OrderFileQuotedBoundTests {
    /// A quoted field of doubled quotes is bounded too (each `""` adds a byte): the review's bypass.
    @Test func aFieldOfDoubledQuotesIsBounded() {
        let quotes = "\"" + String(repeating: "\"\"", count: OrderFile.maxFieldBytes + 10) + "\""
        let found = errors(csv("paypal,O-1,,," + quotes + ",purchase,1.00,USD,open,0"))
        #expect(found.first?.reason.contains("longer than \(OrderFile.maxFieldBytes) bytes") == true, "\(found.map(\.description))")
    }
}
