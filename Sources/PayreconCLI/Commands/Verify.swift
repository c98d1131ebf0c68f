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
        Options.body, Options.headers, Options.webhookID, Options.cert, Options.roots, Options.key, Options.at
    ],
    details: "Prints 'valid' or 'invalid: <reason>'. Exit 0 valid, 1 invalid, 2 usage error."
) { args in
    let env = Environment()
    guard let provider = Provider(rawValue: args.positionals[0]) else {
        throw UsageError("PROVIDER must be pxp, paypal or paypercut, not '\(args.positionals[0])'")
    }
    guard let bodyPath = try args.value(Options.body) else { throw UsageError("--body FILE is required") }
    guard let headersPath = try args.value(Options.headers) else { throw UsageError("--headers FILE is required") }
    func read(_ path: String, _ flag: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("\(flag) \(path): cannot read the file") }
        return Array(data)
    }
    var at = WebhookCheck.At.now
    if let text = try args.value(Options.at) {
        guard let parsed = WebhookCheck.At(argument: text) else {
            throw UsageError("--at must be 'transmission', 'now', unix seconds or an ISO 8601 time, not '\(text)'")
        }
        at = parsed
    }
    // The flags stand in for the environment: --key and --webhook-id for the provider's webhook secret.
    let secretVariable = ProviderRegistry.definition(provider).webhookSecretVariable
    let rootsPEM = try args.value(Options.roots).map { try read($0, "--roots") }
    let options = try WebhookCheck.Options(
        provider: provider, body: try read(bodyPath, "--body"), headersJSON: try read(headersPath, "--headers"),
        certPEM: try args.value(Options.cert).map { try read($0, "--cert") }, rootsPEM: rootsPEM, at: at,
        environment: env.overriding([secretVariable: try args.value(Options.key) ?? args.value(Options.webhookID)]))
    // A PayPal check may fetch the certificate, which blocks its caller until the answer: on a thread of its own, never
    // Swift's cooperative pool (one thread on a one-core host, and the fetch's own completion needs one).
    let checked: Result<WebhookCheck.Outcome, any Error> = await withCheckedContinuation { done in
        Thread { done.resume(returning: Result { try WebhookCheck.run(options, certificateSource: HTTPCertificateSource()) }) }.start()
    }
    let outcome: WebhookCheck.Outcome
    do { outcome = try checked.get() } catch { throw UsageError(String(describing: error)) }
    print(outcome.line)
    return outcome.exitCode
}
