import Foundation
import Testing
@testable import Providers

/// Smaller items of the receiver's security review: credentials never go to a provider in clear, and what is under
/// an allowed certificate prefix is decided on bytes.
@Suite struct ConfigurationSafetyTests {
    @Test(arguments: ["PXP_API_BASE_URL", "PAYPAL_API_BASE_URL", "PAYPERCUT_API_BASE_URL"])
    func plainHTTPBaseURLsAreRefusedExceptOnLoopback(_ name: String) throws {
        #expect(throws: ConfigurationError.self) {
            try Environment([name: "http://api.example.com/v1"]).baseURL(name, default: "https://x")
        }
        #expect(throws: ConfigurationError.self) { try Environment([name: "api.example.com"]).baseURL(name, default: "https://x") }
        #expect(throws: ConfigurationError.self) {
            try Environment([name: "http://127.evil.example/v1"]).baseURL(name, default: "https://x")
        }
        #expect(try Environment([name: "https://api.example.com/v1"]).baseURL(name, default: "https://x") == "https://api.example.com/v1")
        #expect(try Environment([name: "http://127.0.0.1:8089"]).baseURL(name, default: "https://x") == "http://127.0.0.1:8089")
        #expect(try Environment([:]).baseURL(name, default: "https://api.default") == "https://api.default")
    }

    @Test func aProviderConfiguredWithPlainHTTPDoesNotStart() {
        let env = Environment([
            "PXP_API_BASE_URL": "http://api-services.pxp.io/api/v1", "PXP_CLIENT_ID": "c", "PXP_TOKEN_ID": "t",
            "PXP_TOKEN_VALUE": "v"
        ])
        #expect(throws: ConfigurationError.self) { _ = try PXPProvider.API(environment: env, transport: NoTransport()) }
    }

    @Test func theCertificatePrefixIsComparedAsBytes() {
        // Canonically equivalent (é precomposed in the prefix, e + combining acute in the URL), not the same bytes.
        let prefixes = ["https://certs.example/caf\u{E9}/"]
        #expect(!PayPalWebhookVerifier.isAllowed(certURL: "https://certs.example/cafe\u{301}/CERT-1", prefixes: prefixes))
        #expect(
            PayPalWebhookVerifier.isAllowed(
                certURL: "https://api.paypal.com/v1/notifications/certs/CERT-1",
                prefixes: ["https://api.paypal.com/v1/notifications/certs/"]))
    }
}

struct NoTransport: ProviderTransport {
    func send(_ request: ProviderRequest) async throws -> ProviderResponse {
        throw ProviderTransportError.rejected("no network in this test")
    }
}
