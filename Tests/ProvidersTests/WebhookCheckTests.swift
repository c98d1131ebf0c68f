import Crypto
import Foundation
import Testing
import Reconciliation
@testable import Providers

/// `payrecon verify` core, driven as the CLI drives it: file bytes in, a verdict out.
@Suite struct WebhookCheckTests {
    func paypalOptions(_ name: String, crlf: Bool = false, at: WebhookCheck.At = .transmission) throws -> WebhookCheck.Options {
        WebhookCheck.Options(
            provider: .paypal, body: try Fixture.bytes("paypal/\(name)/body.bin"),
            headersJSON: try Fixture.bytes("paypal/\(name)/headers.json"),
            webhookID: try Fixture.string("paypal/\(name)/webhook_id.txt"),
            certPEM: try Fixture.bytes("paypal/\(name)/\(crlf ? "cert.as_served_crlf.pem" : "cert.pem")"),
            rootsPEM: try Fixture.bytes("paypal/certs/DigiCertHighAssuranceEVRootCA.pem")
                + Fixture.bytes("paypal/certs/DigiCertSHA2ExtendedValidationServerCA.pem"),
            at: at)
    }

    @Test(arguments: PayPalWebhookVerifierTests.vectorsWithCertForms)
    func paypalVectorsAreValidAtTransmission(name: String, crlf: Bool) throws {
        let outcome = try WebhookCheck.run(try paypalOptions(name, crlf: crlf))
        #expect(outcome == .valid)
        #expect(outcome.line == "valid")
        #expect(outcome.exitCode == 0)
    }

    @Test func defaultRootsAreTheBundledOnes() throws {
        var options = try paypalOptions(Fixture.paypalVectors[1])
        options.rootsPEM = nil
        #expect(try WebhookCheck.run(options) == .valid)
    }

    @Test func paypalAtTheWallClockIsInvalid() throws {
        let outcome = try WebhookCheck.run(try paypalOptions(Fixture.paypalVectors[0], at: .now))
        guard case .invalid(let rejection) = outcome else { Issue.record("expected invalid"); return }
        #expect(rejection.code == .staleTimestamp)
        #expect(outcome.line.hasPrefix("invalid: stale_timestamp: "))
        #expect(outcome.exitCode == 1)
    }

    @Test func paypalAtAnExplicitTime() throws {
        let at = try #require(WebhookCheck.At(argument: "2015-05-12T18:15:00Z"))
        #expect(try WebhookCheck.run(try paypalOptions(Fixture.paypalVectors[0], at: at)) == .valid)
        let late = try #require(WebhookCheck.At(argument: "2015-05-13T18:15:00Z"))
        #expect(try WebhookCheck.run(try paypalOptions(Fixture.paypalVectors[0], at: late)) != .valid)
    }

    @Test func paypalWrongWebhookID() throws {
        var options = try paypalOptions(Fixture.paypalVectors[2])
        options.webhookID = "0FV983392A0531201"
        guard case .invalid(let rejection) = try WebhookCheck.run(options) else { Issue.record("expected invalid"); return }
        #expect(rejection.code == .invalidSignature)
    }

    @Test func certFileDoesNotLiftThePrefixCheck() throws {
        var options = try paypalOptions(Fixture.paypalVectors[0])
        options.certURLPrefixes = ["https://api.paypal.com/v1/notifications/certs/"]
        guard case .invalid(let rejection) = try WebhookCheck.run(options) else { Issue.record("expected invalid"); return }
        #expect(rejection.code == .untrustedCertificate)
    }

    @Test func paypalWithoutCertUsesTheGivenSourceOrIsAUsageError() throws {
        var options = try paypalOptions(Fixture.paypalVectors[0])
        let pem = try #require(options.certPEM)
        options.certPEM = nil
        #expect(throws: WebhookCheck.UsageError.self) { try WebhookCheck.run(options) }
        let source = CountingCertificateSource(pem: pem)
        #expect(try WebhookCheck.run(options, certificateSource: source) == .valid)
        #expect(source.calls.count == 1)
    }

    /// A certificate that could not be fetched says nothing of the delivery: `verify` says it cannot tell (exit 2,
    /// naming --cert), never "invalid" (which sent an operator looking for a forgery that was a network problem).
    @Test func aCertificateThatCannotBeFetchedIsNotInvalid() throws {
        var options = try paypalOptions(Fixture.paypalVectors[0])
        options.certPEM = nil
        let error = #expect(throws: WebhookCheck.UsageError.self) {
            try WebhookCheck.run(options, certificateSource: CountingCertificateSource(pem: nil))
        }
        #expect(
            error?.description.contains("cannot verify") == true && error?.description.contains("--cert FILE") == true,
            "\(String(describing: error))")
    }

    @Test func validlySignedButMalformedBodyIsInvalid() throws {
        let key = "k"
        let body = Array("[]".utf8)
        let headers =
            #"{"X-Request-Id":"r","X-Signature-Timestamp":"1700000000","X-Signature":"\#(PXPWebhookVerifier.signature(key: key, requestID: "r", timestamp: "1700000000", body: body))"}"#
        let options = WebhookCheck.Options(provider: .pxp, body: body, headersJSON: Array(headers.utf8), key: key, at: .transmission)
        let outcome = try WebhookCheck.run(options)
        #expect(outcome.line.hasPrefix("invalid: malformed_body: "))
    }

    @Test(arguments: HMACAlgorithm.allCases)
    func pxpValidAndWrongKey(algorithm: HMACAlgorithm) throws {
        let body = Array(#"{"eventCode":"transaction-captured"}"#.utf8)
        let now = Date(timeIntervalSince1970: 1_700_000_100)
        let sig = PXPWebhookVerifier.signature(key: "key", algorithm: algorithm, requestID: "r", timestamp: "1700000000", body: body)
        let headers = Array(#"{"x-request-id":"r","x-signature-timestamp":"1700000000","x-signature":"\#(sig)"}"#.utf8)
        var options = WebhookCheck.Options(
            provider: .pxp, body: body, headersJSON: headers, key: "key", at: .time(now),
            hmacAlgorithm: algorithm)
        #expect(try WebhookCheck.run(options) == .valid)
        #expect(try WebhookCheck.run(options, now: now) == .valid)
        options.key = "other"
        #expect(try WebhookCheck.run(options).line.hasPrefix("invalid: invalid_signature: "))
        options.key = "key"
        options.at = .now
        #expect(try WebhookCheck.run(options).line.hasPrefix("invalid: stale_timestamp: "))
        options.at = .transmission
        #expect(try WebhookCheck.run(options) == .valid)
    }

    @Test func paypercutValid() throws {
        let body = Array(#"{"id":"E1","type":"payment_intent.authorized","data":{"object":{"id":"PI1"}}}"#.utf8)
        let value = PaypercutWebhookVerifier.signatureHeaderValue(secret: "s", timestamp: 1_700_000_000, body: body)
        let options = WebhookCheck.Options(
            provider: .paypercut, body: body,
            headersJSON: Array(#"{"Paypercut-Signature":"\#(value)"}"#.utf8), key: "s",
            at: .time(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(try WebhookCheck.run(options) == .valid)
    }

    @Test func usageErrors() throws {
        let body = Array("{}".utf8)
        let headers = Array("{}".utf8)
        #expect(throws: WebhookCheck.UsageError.self) {
            try WebhookCheck.run(.init(provider: .pxp, body: body, headersJSON: headers))
        }
        #expect(throws: WebhookCheck.UsageError.self) {
            try WebhookCheck.run(.init(provider: .paypercut, body: body, headersJSON: headers, key: ""))
        }
        #expect(throws: WebhookCheck.UsageError.self) {
            try WebhookCheck.run(.init(provider: .paypal, body: body, headersJSON: headers, certPEM: [1]))
        }
        #expect(throws: WebhookCheck.UsageError.self) {
            try WebhookCheck.run(
                .init(
                    provider: .paypal, body: body, headersJSON: headers, webhookID: "W", certPEM: [1],
                    rootsPEM: Array("not pem".utf8)))
        }
        for bad in ["[]", "not json", #"{"a":1}"#, #"{"a":null}"#] {
            #expect(throws: WebhookCheck.UsageError.self) {
                try WebhookCheck.run(.init(provider: .pxp, body: body, headersJSON: Array(bad.utf8), key: "k"))
            }
        }
    }

    @Test func missingHeadersAreInvalidNotUsageErrors() throws {
        let outcome = try WebhookCheck.run(.init(provider: .pxp, body: Array("{}".utf8), headersJSON: Array("{}".utf8), key: "k"))
        #expect(outcome.line == "invalid: missing_signature: header X-Signature-Timestamp is missing or empty")
    }

    @Test(arguments: ["now", "transmission", "TRANSMISSION", "1700000000", "2024-10-27T08:51:04Z"])
    func atArguments(text: String) {
        #expect(WebhookCheck.At(argument: text) != nil)
    }

    @Test(arguments: ["", "later", "2024-10-27"])
    func badAtArguments(text: String) {
        #expect(WebhookCheck.At(argument: text) == nil)
    }
}
