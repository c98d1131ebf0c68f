import Testing
@testable import Reconciliation

/// PAYRECON_PENDING_MAX: a default, then provider and payment-method entries; a method wins over a provider.
@Suite struct PendingWindowsTests {
    @Test func methodWinsOverProviderWhichWinsOverTheDefault() throws {
        let w = try PendingWindows.parse("24h, paypercut=2h, blik=15m,AEROPAY=5d")
        #expect(w.seconds(provider: .paypercut, method: "blik") == 900)
        #expect(w.seconds(provider: .paypercut, method: "card") == 7_200)
        #expect(w.seconds(provider: .paypercut, method: nil) == 7_200)
        #expect(w.seconds(provider: .pxp, method: "aeropay") == 432_000)
        #expect(w.seconds(provider: .paypal, method: nil) == 86_400)
    }

    @Test func aLoneDurationIsTheDefault() throws {
        #expect(try PendingWindows.parse("36h") == PendingWindows(defaultSeconds: 129_600))
        #expect(try PendingWindows.parse("blik=15m").defaultSeconds == 86_400, "no default given: 24h")
    }

    @Test(arguments: ["", "24h,", "24h,blik=", "24h,=15m", "24h,blik=15", "24h,12h", "24h,blik=15m,blik=20m", "soon"])
    func badValuesAreErrorsNamingTheEntry(text: String) {
        #expect(throws: PendingWindows.ParseError.self) { try PendingWindows.parse(text) }
    }
}
