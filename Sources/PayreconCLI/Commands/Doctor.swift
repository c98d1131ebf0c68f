import Observability
import Foundation
import Providers
import Reconciliation
import Wiring

struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        name: "doctor",
        summary: "Check this deployment against the database and the real providers, moving no money.",
        options: [Options.provider.help("Only this provider's checks (the database is always checked)."), Options.databaseURL],
        details: """
            Run it before the first real delivery, and after changing credentials. One line per check, 'ok' or what is
            wrong and what to do:
              database reachable, database migrated (every migration in sql/ applied: else run payrecon migrate);
              for each provider with API credentials (the reads below only; nothing is captured, voided or refunded):
              pxp credentials        a signed GET of a transaction that does not exist answers 404, not 401 or 403:
                                     this proves the PXP-UST1 signing (at the merchant and site of the latest PXP order);
              paypal credentials     an OAuth2 token is issued and a GET of an order that does not exist answers 404;
              paypal disputes permission
                                     GET /v1/customer/disputes answers, not 403 (scope
                                     https://uri.paypal.com/services/disputes/read-seller);
              paypal certificate of the last stored delivery
                                     its PAYPAL-CERT-URL is fetched and chained to PAYPAL_TRUST_ROOTS, as the receiver does
                                     (with none stored, the last delivery refused untrusted_certificate);
              paypercut credentials  a GET of a payment intent that does not exist answers 404, not 401 or 403.
            A provider without credentials is skipped (with --provider, that is a failure).
            Exit 0 when every check passed, 1 when one failed, 2 when the database is unreachable (or DATABASE_URL unset:
            the providers are still checked) or on a usage error.
            """
    )

    var provider: Provider?
    var databaseURL: String?

    init(parsing args: ParsedArguments) throws(UsageError) {
        provider = try args.value(Options.provider)
        databaseURL = try args.value(Options.databaseURL)
    }

    func run(logger: Logger) async throws -> Int32 {
        // An unreachable host must not hang the check: libpq waits 10 s for it unless PGCONNECT_TIMEOUT says otherwise.
        setenv("PGCONNECT_TIMEOUT", "10", 0)
        let doctor = Doctor(environment: Environment(), databaseURL: databaseURL, provider: provider)
        // Each line as its check completes (a slow provider shows which one it is), unbuffered.
        let report = try await doctor.run { check in FileHandle.standardOutput.write(Data((check.line + "\n").utf8)) }
        FileHandle.standardOutput.write(Data((report.summary + "\n").utf8))
        return report.exitCode
    }
}
