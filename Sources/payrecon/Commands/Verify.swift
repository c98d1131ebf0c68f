import Foundation
import Wiring
import Providers
import Receiver
import Reconciliation

let verifyCommand = Command(
    name: "verify",
    summary: "Check one delivery's signature offline: why was this webhook rejected?",
    arguments: [.init(name: "PROVIDER", help: "pxp, paypal or paypercut.")],
    options: [
        .init(name: "--body", value: "FILE", help: "The raw body bytes, exactly as delivered."),
        .init(name: "--headers", value: "FILE", help: "A JSON object of header names to values."),
        .init(name: "--webhook-id", value: "ID", help: "PayPal: the listener's webhook id (default PAYPAL_WEBHOOK_ID)."),
        .init(name: "--cert", value: "FILE", help: "PayPal: the signing certificate PEM (else PAYPAL-CERT-URL is fetched, if allowed)."),
        .init(name: "--roots", value: "FILE", help: "PayPal: trust roots PEM (default PAYPAL_TRUST_ROOTS, else the shipped DigiCert roots)."),
        .init(name: "--key", value: "K", help: "PXP: the webhook key (default PXP_WEBHOOK_KEY); Paypercut: the secret (default PAYPERCUT_WEBHOOK_SECRET)."),
        .init(name: "--at", value: "TIME|transmission", help: "Evaluate time checks at TIME (ISO 8601 or unix seconds) or at the delivery's own timestamp (default: now)."),
    ],
    details: "Prints 'valid' or 'invalid: <reason>'. Exit 0 valid, 1 invalid, 2 usage error."
) { args in
    let env = Environment()
    guard let provider = Provider(rawValue: args.positionals[0]) else {
        throw UsageError("PROVIDER must be pxp, paypal or paypercut, not '\(args.positionals[0])'")
    }
    guard let bodyPath = args.value("--body") else { throw UsageError("--body FILE is required") }
    guard let headersPath = args.value("--headers") else { throw UsageError("--headers FILE is required") }
    func read(_ path: String, _ flag: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("\(flag) \(path): cannot read the file") }
        return Array(data)
    }
    var at = WebhookCheck.At.now
    if let text = args.value("--at") {
        guard let parsed = WebhookCheck.At(argument: text) else {
            throw UsageError("--at must be 'transmission', 'now', unix seconds or an ISO 8601 time, not '\(text)'")
        }
        at = parsed
    }
    // The flags stand in for the environment: --key and --webhook-id for the provider's webhook secret.
    let secretVariable = ProviderRegistry.definition(provider).webhookSecretVariable
    let rootsPEM = try args.value("--roots").map { try read($0, "--roots") }
    let options = try WebhookCheck.Options(
        provider: provider, body: try read(bodyPath, "--body"), headersJSON: try read(headersPath, "--headers"),
        certPEM: try args.value("--cert").map { try read($0, "--cert") }, rootsPEM: rootsPEM, at: at,
        environment: env.overriding([secretVariable: args.value("--key") ?? args.value("--webhook-id")]))
    let outcome: WebhookCheck.Outcome
    do { outcome = try WebhookCheck.run(options, certificateSource: HTTPCertificateSource()) }
    catch { throw UsageError(String(describing: error)) }
    print(outcome.line)
    return outcome.exitCode
}
