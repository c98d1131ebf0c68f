import Foundation
import PayreconTesting
import Testing

/// Configuration `payrecon serve` refuses at start (exit 2, a message naming the variable), before any delivery.
@Suite struct ServeConfigurationTests {
    /// PayPal's public webhook simulator signs with `WEBHOOK_ID` and posts to any listener: a receiver that trusts
    /// PayPal's own certificate URLs must not take it as its webhook id.
    @Test func theSimulatorsWebhookIDWithPayPalsPrefixesStopsServe() async throws {
        let result = try await PayreconProcess.launch(
            ["serve", "--listen", "127.0.0.1:0"], databaseURL: "postgresql://127.0.0.1:1/none",
            environment: ["PAYPAL_WEBHOOK_ID": "WEBHOOK_ID", "PAYPAL_CERT_URL_PREFIXES": ""])
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(result.stderr.contains("PAYPAL_WEBHOOK_ID=WEBHOOK_ID"), "\(result.stderr)")
        #expect(result.stderr.contains("webhook simulator"), "\(result.stderr)")
    }
}
