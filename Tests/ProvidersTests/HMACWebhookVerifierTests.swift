import Crypto
import Foundation
import Testing
@testable import Providers

@Suite struct PXPWebhookVerifierTests {
    static let key = "pxp-hash-key-ÄÖ"
    static let now = Date(timeIntervalSince1970: 1_732_870_000)
    static let body = Array(#"{"eventCategory":"Transaction","eventData":{"merchantTransactionId":"ORD-1"}}"#.utf8)

    enum TimestampFormat: String, CaseIterable, Sendable {
        case unixSeconds, unixMilliseconds, isoZulu, isoFraction, isoSevenDigits, isoOffset, isoCompactOffset

        func render(_ date: Date) -> String {
            let s = Int64(date.timeIntervalSince1970)
            switch self {
            case .unixSeconds: return String(s)
            case .unixMilliseconds: return String(s * 1000 + 250)
            case .isoZulu: return ISO8601.format(date)
            case .isoFraction: return ISO8601.format(date).replacingOccurrences(of: "Z", with: ".826Z")
            case .isoSevenDigits: return ISO8601.format(date).replacingOccurrences(of: "Z", with: ".8264455Z")
            case .isoOffset: return ISO8601.format(date.addingTimeInterval(7200)).replacingOccurrences(of: "Z", with: "+02:00")
            case .isoCompactOffset: return ISO8601.format(date.addingTimeInterval(-5 * 3600)).replacingOccurrences(of: "Z", with: "-0500")
            }
        }
    }

    static func headers(
        key: String = key, algorithm: HMACAlgorithm = .sha256, requestID: String = "req-1",
        timestamp: String, body: [UInt8] = body
    ) -> Headers {
        [
            "X-Request-Id": requestID, "X-Signature-Timestamp": timestamp,
            "X-Signature": PXPWebhookVerifier.signature(
                key: key, algorithm: algorithm, requestID: requestID, timestamp: timestamp, body: body)
        ]
    }

    static let algorithmsAndFormats = HMACAlgorithm.allCases.flatMap { a in TimestampFormat.allCases.map { (a, $0) } }

    @Test(arguments: algorithmsAndFormats)
    func validDelivery(algorithm: HMACAlgorithm, format: TimestampFormat) throws {
        let v = try PXPWebhookVerifier(key: Self.key, algorithm: algorithm)
        let timestamp = format.render(Self.now.addingTimeInterval(-42))
        try v.verify(headers: Self.headers(algorithm: algorithm, timestamp: timestamp), body: Self.body, time: .at(Self.now))
    }

    @Test func signatureIsBase64OfTheHMACOfTheConcatenation() {
        let signature = PXPWebhookVerifier.signature(key: "k", requestID: "r", timestamp: "1", body: Array("b".utf8))
        #expect(Base64.decode(signature) == Crypto.HMAC.authenticate(.sha256, key: "k", message: "r1b"))
    }

    @Test func headerNamesAreCaseInsensitive() throws {
        let h = Self.headers(timestamp: "1732870000")
        let lower = Headers(h.pairs.map { ($0.name.lowercased(), $0.value) })
        try PXPWebhookVerifier(key: Self.key).verify(headers: lower, body: Self.body, time: .at(Self.now))
    }

    func rejection(
        _ headers: Headers, body: [UInt8] = body, algorithm: HMACAlgorithm = .sha256,
        time: VerificationTime = .at(now)
    ) throws -> WebhookRejection? {
        let v = try PXPWebhookVerifier(key: Self.key, algorithm: algorithm)
        return #expect(throws: WebhookRejection.self) { try v.verify(headers: headers, body: body, time: time) }
    }

    @Test func wrongKey() throws {
        let error = try rejection(Self.headers(key: "another key", timestamp: "1732870000"))
        #expect(error?.code == .invalidSignature)
        #expect(error?.message.contains("PXP_WEBHOOK_KEY") == true)
        #expect(error?.message.contains(Self.key) == false)
    }

    @Test func alteredBody() throws {
        var body = Self.body
        body[body.count - 3] = UInt8(ascii: "2")
        #expect(try rejection(Self.headers(timestamp: "1732870000"), body: body)?.code == .invalidSignature)
    }

    @Test func alteredRequestIDOrTimestamp() throws {
        var h = Self.headers(timestamp: "1732870000")
        h.set("X-Request-Id", "req-2")
        #expect(try rejection(h)?.code == .invalidSignature)
        h = Self.headers(timestamp: "1732870000")
        h.set("X-Signature-Timestamp", "1732870001")
        #expect(try rejection(h)?.code == .invalidSignature)
    }

    @Test func otherAlgorithmThanConfigured() throws {
        let error = try rejection(Self.headers(algorithm: .sha512, timestamp: "1732870000"), algorithm: .sha256)
        #expect(error?.code == .invalidSignature)
        #expect(error?.message.contains("PXP_WEBHOOK_HMAC") == true)
    }

    @Test(arguments: [-601.0, 601.0, -86_400.0, 10 * 86_400.0])
    func staleOrFutureTimestamp(offset: TimeInterval) throws {
        for format in TimestampFormat.allCases {
            let error = try rejection(Self.headers(timestamp: format.render(Self.now.addingTimeInterval(offset))))
            #expect(error?.code == .staleTimestamp, "\(format)")
            #expect(error?.message.contains(offset < 0 ? "old" : "in the future") == true)
        }
    }

    @Test func withinToleranceBothWays() throws {
        let v = try PXPWebhookVerifier(key: Self.key, tolerance: 60)
        for offset in [-60.0, 60.0, 0] {
            let ts = String(Int64(Self.now.addingTimeInterval(offset).timeIntervalSince1970))
            try v.verify(headers: Self.headers(timestamp: ts), body: Self.body, time: .at(Self.now))
        }
    }

    @Test func signedTimeSkipsFreshness() throws {
        try PXPWebhookVerifier(key: Self.key).verify(headers: Self.headers(timestamp: "1000000000"), body: Self.body, time: .signedTime)
    }

    @Test(arguments: ["yesterday", "173287000000", "17328700000000", "2024-10-27", "2024-10-27T08:51:04", "-1732870000", "1732870000.5"])
    func unreadableTimestampOfAGenuineDeliveryIsStale(timestamp: String) throws {
        let error = try rejection(Self.headers(timestamp: timestamp))
        #expect(error?.code == .staleTimestamp)
        #expect(error?.message.contains("is not canonical unix seconds") == true)
        // Even when replaying at the signed time: there is no signed time to use.
        #expect(try rejection(Self.headers(timestamp: timestamp), time: .signedTime)?.code == .staleTimestamp)
    }

    @Test func unreadableTimestampOfAForgedDeliveryIsInvalid() throws {
        var h = Self.headers(timestamp: "yesterday")
        h.set("X-Signature", Base64.encode([UInt8](repeating: 1, count: 32)))
        #expect(try rejection(h)?.code == .invalidSignature)
    }

    @Test func requestIdIsOptionalAndSignedAsEmpty() throws {
        var h = Self.headers(timestamp: "1732870000")
        h.set("X-Request-Id", nil)
        // Signed with the request id: no longer matches once it is gone.
        #expect(try rejection(h)?.code == .invalidSignature)
        // Signed without one ("" + timestamp + body): authentic.
        var unsigned = Self.headers(requestID: "", timestamp: "1732870000")
        unsigned.set("X-Request-Id", nil)
        try PXPWebhookVerifier(key: Self.key).verify(headers: unsigned, body: Self.body, time: .at(Self.now))
    }

    @Test(arguments: ["X-Signature-Timestamp", "X-Signature"])
    func missingHeader(name: String) throws {
        var h = Self.headers(timestamp: "1732870000")
        h.set(name, nil)
        let error = try rejection(h)
        #expect(error?.code == .missingSignature)
        #expect(error?.message.contains(name) == true)
        h.set(name, "")
        #expect(try rejection(h)?.code == .missingSignature)
    }

    @Test(arguments: ["not base64!", "AAAA AAAA", "QUJD="])
    func signatureNotBase64(value: String) throws {
        var h = Self.headers(timestamp: "1732870000")
        h.set("X-Signature", value)
        let error = try rejection(h)
        #expect(error?.code == .invalidSignature)
    }

    @Test func missingKeyIsAConfigurationError() {
        #expect(throws: WebhookConfigurationError(provider: .pxp, variable: "PXP_WEBHOOK_KEY")) { try PXPWebhookVerifier(key: "") }
        #expect(
            WebhookConfigurationError(provider: .pxp, variable: "PXP_WEBHOOK_KEY").description
                == "pxp webhooks cannot be verified: PXP_WEBHOOK_KEY is not set")
    }
}

@Suite struct PaypercutWebhookVerifierTests {
    static let secret = "whsec_test_secret"
    static let now = Date(timeIntervalSince1970: 1_768_991_448)
    static let t: Int64 = 1_768_991_448
    static let body = Array(
        #"{"id":"01KA9T0VGBB5YAB0X9TN7VHWW8","type":"payment_intent.captured","data":{"object":{"id":"PI1","object":"payment_intent"}}}"#
            .utf8)

    static func headers(_ value: String) -> Headers { ["Paypercut-Signature": value] }
    static func signed(secret: String = secret, t: Int64 = t, body: [UInt8] = body) -> String {
        PaypercutWebhookVerifier.signatureHeaderValue(secret: secret, timestamp: t, body: body)
    }

    func rejection(_ headers: Headers, body: [UInt8] = body, time: VerificationTime = .at(now)) throws -> WebhookRejection? {
        let v = try PaypercutWebhookVerifier(secret: Self.secret)
        return #expect(throws: WebhookRejection.self) { try v.verify(headers: headers, body: body, time: time) }
    }

    @Test func valid() throws {
        let v = try PaypercutWebhookVerifier(secret: Self.secret)
        try v.verify(headers: Self.headers(Self.signed()), body: Self.body, time: .at(Self.now))
        try v.verify(headers: ["paypercut-signature": Self.signed()], body: Self.body, time: .at(Self.now.addingTimeInterval(600)))
    }

    @Test func headerIsHexOfHMACSHA256OverTDotBody() {
        let value = PaypercutWebhookVerifier.signatureHeaderValue(secret: "s", timestamp: 5, body: Array("b".utf8))
        #expect(value == "t=5,v1=" + Hex.encode(Crypto.HMAC.authenticate(.sha256, key: "s", message: "5.b")))
    }

    @Test func anyOfSeveralV1EntriesMayMatch() throws {
        let good = Self.signed().split(separator: ",")[1]
        let bad = "v1=" + String(repeating: "ab", count: 32)
        let v = try PaypercutWebhookVerifier(secret: Self.secret)
        for value in ["t=\(Self.t),\(bad),\(good)", "t=\(Self.t), \(good), \(bad)", "\(good),t=\(Self.t)", "t=\(Self.t),v0=xyz,\(good)"] {
            try v.verify(headers: Self.headers(value), body: Self.body, time: .at(Self.now))
        }
    }

    @Test func wrongSecret() throws {
        let error = try rejection(Self.headers(Self.signed(secret: "other")))
        #expect(error?.code == .invalidSignature)
        #expect(error?.message.contains("PAYPERCUT_WEBHOOK_SECRET") == true)
    }

    @Test func alteredBody() throws {
        #expect(try rejection(Self.headers(Self.signed()), body: Self.body + [0x20])?.code == .invalidSignature)
    }

    @Test func alteredTimestamp() throws {
        let v1 = Self.signed().split(separator: ",")[1]
        #expect(try rejection(Self.headers("t=\(Self.t + 1),\(v1)"))?.code == .invalidSignature)
    }

    @Test(arguments: [-301.0 - 300, 601.0, 86_400.0])
    func staleOrFuture(offset: TimeInterval) throws {
        let error = try rejection(Self.headers(Self.signed(t: Self.t + Int64(offset))))
        #expect(error?.code == .staleTimestamp)
    }

    @Test func signedTimeSkipsFreshness() throws {
        try PaypercutWebhookVerifier(secret: Self.secret)
            .verify(headers: Self.headers(Self.signed(t: 1_000)), body: Self.body, time: .signedTime)
    }

    @Test func missingHeader() throws {
        #expect(try rejection([:])?.code == .missingSignature)
        #expect(try rejection(Self.headers(""))?.code == .missingSignature)
        #expect(try rejection(["Stripe-Signature": Self.signed()])?.code == .missingSignature)
    }

    @Test(arguments: ["v1=abcd", "t=1768991448", "t=,v1=ab", "garbage", "t=1768991448,v1=zz", "t=1,t=2,v1=ab"])
    func malformedHeaderIsInvalid(value: String) throws {
        #expect(try rejection(Self.headers(value))?.code == .invalidSignature)
    }

    @Test func nonNumericButSignedTimestampIsStale() throws {
        let v1 = Hex.encode(Crypto.HMAC.authenticate(.sha256, key: Array(Self.secret.utf8), message: Array("soon.".utf8) + Self.body))
        let error = try rejection(Self.headers("t=soon,v1=\(v1)"))
        #expect(error?.code == .staleTimestamp)
    }

    @Test func missingSecretIsAConfigurationError() {
        #expect(throws: WebhookConfigurationError(provider: .paypercut, variable: "PAYPERCUT_WEBHOOK_SECRET")) {
            try PaypercutWebhookVerifier(secret: "")
        }
    }
}

@Suite struct SignedTimestampTests {
    @Test(arguments: [
        ("1732870000", 1_732_870_000.0),
        ("0", 0),
        ("1732870000123", 1_732_870_000.123),
        ("2024-10-27T08:51:04Z", 1_730_019_064),
        ("2024-10-27T08:51:04.8264455Z", 1_730_019_064.8264455),
        ("2024-10-27t08:51:04.5z", 1_730_019_064.5),
        ("2024-10-27 08:51:04Z", 1_730_019_064),
        ("2024-10-27T10:51:04+02:00", 1_730_019_064),
        ("2024-10-27T03:51:04-0500", 1_730_019_064),
        ("2018-08-15T12:13:29-07:00", 1_534_360_409),
        ("2000-02-29T00:00:00Z", 951_782_400),
        ("1969-12-31T23:59:59Z", -1)
    ])
    func parses(text: String, seconds: Double) throws {
        let date = try #require(SignedTimestamp.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_01)
    }

    @Test(arguments: [
        "", "abc", "123456789012", "12345678901234", "2024-10-27", "2024-10-27T08:51:04", "2024-10-27T08:51Z",
        "2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-13-01T00:00:00Z", "2024-10-27T24:00:00Z",
        "2024-10-27T08:60:00Z", "2024-10-27T08:51:60Z", "2024-10-27T08:51:04.Z", "2024-10-27T08:51:04+2",
        "2024-10-27T08:51:04Z trailing", "2024-10-27T08:51:04+25:00", "2024-10-27T08:51:04.5PST", "+1732870000"
    ])
    func rejects(text: String) {
        #expect(SignedTimestamp.parse(text) == nil)
    }

    @Test func formatRoundTrips() {
        for seconds in [0, 951_782_400, 1_431_454_454, 4_102_444_800, -86_401] {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(ISO8601.parse(ISO8601.format(date)) == date)
        }
        #expect(ISO8601.format(Date(timeIntervalSince1970: 1_431_454_454)) == "2015-05-12T18:14:14Z")
    }
}

/// PXP signs `X-Request-Id` + timestamp + body with no delimiter: a timestamp with a leading zero would let one
/// genuine delivery be re-cut into another request id (a new dedupe key) under the same signature.
@Suite struct PXPCanonicalTimestampTests {
    @Test func aReCutRequestIdAndTimestampIsRefused() throws {
        let v = try PXPWebhookVerifier(key: PXPWebhookVerifierTests.key)
        let genuine = PXPWebhookVerifierTests.headers(requestID: "req-10", timestamp: "1732870000")
        try v.verify(headers: genuine, body: PXPWebhookVerifierTests.body, time: .at(PXPWebhookVerifierTests.now))
        // "req-1" + "01732870000" is the same signed string as "req-10" + "1732870000".
        let recut = Headers(["X-Request-Id": "req-1", "X-Signature-Timestamp": "01732870000", "X-Signature": genuine["X-Signature"]!])
        let error = #expect(throws: WebhookRejection.self) {
            try v.verify(headers: recut, body: PXPWebhookVerifierTests.body, time: .at(PXPWebhookVerifierTests.now))
        }
        #expect(error?.code == .staleTimestamp)
        #expect(error?.message.contains("no leading zero") == true)
    }

    @Test(arguments: ["01732870000", "00", "+1732870000", "-1732870000", "01732870000000"])
    func nonCanonicalDigitsAreNotTimestamps(text: String) {
        #expect(SignedTimestamp.parse(text) == nil)
    }

    @Test func paypercutUnixSecondsAreCanonicalToo() {
        #expect(SignedTimestamp.parseUnixSeconds("01732870000") == nil)
        #expect(SignedTimestamp.parseUnixSeconds("1732870000") != nil)
    }
}
