import Observability
import Foundation
import Wiring
import Providers
import Receiver
import Reconciliation

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "verify",
        summary: "Check one delivery's signature offline: why was this webhook rejected?",
        arguments: [.init(name: "PROVIDER", help: "pxp, paypal or paypercut.")],
        options: [
            Options.body, Options.headers, Options.webhookID, Options.cert, Options.roots, Options.key, Options.at
        ],
        details: "Prints 'valid' or 'invalid: <reason>'. Exit 0 valid, 1 invalid, 2 usage error."
    )

    var provider: Provider
    var bodyPath: String
    var headersPath: String
    var webhookID: String?
    var certPath: String?
    var rootsPath: String?
    var key: String?
    var at = WebhookCheck.At.now

    init(parsing args: ParsedArguments) throws(UsageError) {
        guard let provider = Provider(rawValue: args.positionals[0]) else {
            throw UsageError("PROVIDER must be pxp, paypal or paypercut, not '\(args.positionals[0].terminalSafe)'")
        }
        self.provider = provider
        guard let bodyPath = try args.value(Options.body) else { throw UsageError("--body FILE is required") }
        guard let headersPath = try args.value(Options.headers) else { throw UsageError("--headers FILE is required") }
        self.bodyPath = bodyPath
        self.headersPath = headersPath
        if let text = try args.value(Options.at) {
            guard let parsed = WebhookCheck.At(argument: text) else {
                throw UsageError("--at must be 'transmission', 'now', unix seconds or an ISO 8601 time, not '\(text.terminalSafe)'")
            }
            at = parsed
        }
        webhookID = try args.value(Options.webhookID)
        certPath = try args.value(Options.cert)
        rootsPath = try args.value(Options.roots)
        key = try args.value(Options.key)
    }

    func run(logger: Logger) async throws -> Int32 {
        func read(_ path: String, _ flag: String) throws -> [UInt8] {
            guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("\(flag) \(path): cannot read the file") }
            return Array(data)
        }
        // The flags stand in for the environment: --key and --webhook-id for the provider's webhook secret.
        let secretVariable = ProviderRegistry.definition(provider).webhookSecretVariable
        let options = try WebhookCheck.Options(
            provider: provider, body: try read(bodyPath, "--body"), headersJSON: try read(headersPath, "--headers"),
            certPEM: try certPath.map { try read($0, "--cert") }, rootsPEM: try rootsPath.map { try read($0, "--roots") }, at: at,
            environment: Environment().overriding([secretVariable: key ?? webhookID]))
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
}
