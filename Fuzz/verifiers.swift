// libFuzzer harness: the PXP, PayPal and Paypercut webhook verifiers on random headers and bodies.
// Input: byte 0 picks the verifier and the time mode; then "name: value" header lines up to an empty line; the rest is
// the body. The PayPal certificate source serves the body itself as the PEM, so certificate parsing is fuzzed too.
// Property: nothing crashes; a random input is (practically) never accepted.
import Foundation
import Providers

private let now = Date(timeIntervalSince1970: 1_764_000_000)
private let pxp = try! PXPWebhookVerifier(key: "fuzz-key", algorithm: .sha256)
private let pxp512 = try! PXPWebhookVerifier(key: "fuzz-key", algorithm: .sha512)
private let paypercut = try! PaypercutWebhookVerifier(secret: "whsec_fuzz")

private struct BodySource: CertificateSource {
    let pem: [UInt8]
    func pem(for url: String) throws -> [UInt8] { pem }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    var fields: [(String, String)] = []
    var i = 1
    while i < bytes.count {
        guard let end = bytes[i...].firstIndex(of: 0x0A) else { break }
        let line = bytes[i..<end]
        i = end + 1
        if line.isEmpty { break }
        let text = String(decoding: line, as: UTF8.self)
        if let colon = text.firstIndex(of: ":") {
            fields.append((String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        } else {
            fields.append((text, ""))
        }
    }
    let body = Array(bytes[min(i, bytes.count)...])
    let headers = Headers(fields)
    let time: VerificationTime = selector & 0x80 == 0 ? .at(now) : .signedTime
    switch selector % 4 {
    case 0: try? pxp.verify(headers: headers, body: body, time: time)
    case 1: try? pxp512.verify(headers: headers, body: body, time: time)
    case 2: try? paypercut.verify(headers: headers, body: body, time: time)
    default:
        let verifier = try! PayPalWebhookVerifier(webhookID: "WH-FUZZ", certificateSource: BodySource(pem: body),
                                                  certURLPrefixes: ["https://api.paypal.com/v1/notifications/certs/", "http://"])
        try? verifier.verify(headers: headers, body: body, time: time)
    }
    return 0
}
