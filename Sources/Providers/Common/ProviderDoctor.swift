import Foundation

// `payrecon doctor` behind the provider seam: each provider's folder says how to prove, without moving
// money, that its credentials work and that it has the permissions payrecon needs. The wiring runs the database
// checks, hands each configured provider what payrecon's own records know (`DoctorContext`), and prints the lines.

/// One line of `payrecon doctor`: a check, whether it passed, and what it proved or what is wrong and what to do.
public struct DoctorCheck: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok
        case failed
        /// Not run, and not a failure: nothing to check yet (no delivery stored), or it depends on a check that failed.
        case skipped
    }

    /// `pxp credentials`, `paypal disputes permission`… (docs/PROVIDER-FACTS.md names the checks by these).
    public var name: String
    public var status: Status
    /// For `ok`, what was proved; otherwise what is wrong and what to do. Never a secret.
    public var detail: String

    public init(name: String, status: Status, detail: String) { self.name = name; self.status = status; self.detail = detail }

    public static func ok(_ name: String, _ detail: String) -> DoctorCheck { DoctorCheck(name: name, status: .ok, detail: detail) }
    public static func failed(_ name: String, _ detail: String) -> DoctorCheck { DoctorCheck(name: name, status: .failed, detail: detail) }
    public static func skipped(_ name: String, _ detail: String) -> DoctorCheck {
        DoctorCheck(name: name, status: .skipped, detail: detail)
    }

    /// `ok   pxp credentials: …`, `FAIL paypal disputes permission: …`, `skip …`: the status first, so a run reads down
    /// one column.
    /// One line whatever the detail quotes (a sender's certificate URL, a provider's answer): `terminalSafe`.
    public var line: String {
        let tag =
            switch status {
            case .ok: "ok  ";
            case .failed: "FAIL";
            case .skipped: "skip"
            }
        return detail.isEmpty ? "\(tag) \(name.terminalSafe)" : "\(tag) \(name.terminalSafe): \(detail.terminalSafe)"
    }
}

/// What payrecon's database holds, or why it could not be read (unreachable, not migrated).
public enum DoctorRecord<T: Sendable>: Sendable {
    case found(T)
    case none
    case unavailable(String)
}

/// A merchant (PXP merchant, PayPal payee, Paypercut account) and PXP site of a stored order.
public struct DoctorMerchant: Sendable, Equatable {
    public var merchant: String
    public var site: String?
    public init(merchant: String, site: String?) { self.merchant = merchant; self.site = site }
}

/// A kept sample of a refused delivery: unauthenticated (anyone may have sent it), but the only trace of a provider
/// whose every delivery is refused.
public struct DoctorRejection: Sendable {
    public var id: Int64
    public var message: String
    public var headers: Headers
    public var receivedAt: Date
    public init(id: Int64, message: String, headers: Headers, receivedAt: Date) {
        self.id = id; self.message = message; self.headers = headers; self.receivedAt = receivedAt
    }
}

/// What a provider's checks may use besides its API: the environment (its webhook settings), its last stored
/// delivery, its last delivery refused `untrusted_certificate`, and the merchant of its most recently updated order.
public struct DoctorContext: Sendable {
    public var environment: Environment
    public var lastDelivery: DoctorRecord<StoredEvent>
    /// The latest kept sample refused `401 untrusted_certificate` (a trust-root problem refuses every delivery, so none
    /// is stored: this is where its certificate URL is found).
    public var lastUntrustedCertificate: DoctorRecord<DoctorRejection>
    public var latestMerchant: DoctorRecord<DoctorMerchant>

    public init(
        environment: Environment, lastDelivery: DoctorRecord<StoredEvent> = .none,
        lastUntrustedCertificate: DoctorRecord<DoctorRejection> = .none, latestMerchant: DoctorRecord<DoctorMerchant> = .none
    ) {
        self.environment = environment; self.lastDelivery = lastDelivery; self.lastUntrustedCertificate = lastUntrustedCertificate
        self.latestMerchant = latestMerchant
    }
}

/// A probe's request sent once, as it is (no retry: doctor reports what one call saw, and the operator runs it again),
/// and what came back.
enum DoctorProbe {
    enum Answer {
        case answered(ProviderResponse)
        /// No HTTP answer: the transport's words.
        case unreachable(String)
    }

    static func send(_ request: ProviderRequest, over transport: any ProviderTransport) async -> Answer {
        do { return .answered(try await transport.send(request)) } catch {
            switch error {
            case ProviderTransportError.timeout: return .unreachable("no answer within \(request.timeout.components.seconds) s")
            case ProviderTransportError.connection(let message): return .unreachable(message)
            case ProviderTransportError.rejected(let message), ProviderTransportError.unreadable(let message): return .unreachable(message)
            default: return .unreachable(String(describing: error))
            }
        }
    }

    /// The request as a line shows it: method and path with query, no host (the base URL is named where it matters).
    static func target(_ request: ProviderRequest) -> String { "\(request.method) \(request.pathAndQuery)" }

    /// At most `limit` characters of a body, on one line, for a message when no provider field could be read.
    static func excerpt(_ body: [UInt8], limit: Int = 160) -> String {
        let text = String(decoding: body.prefix(limit * 4), as: UTF8.self)
            .map { $0.isNewline || $0 == "\t" ? " " : $0 }
        let flat = String(text).trimmingCharacters(in: .whitespaces)
        return flat.count > limit ? String(flat.prefix(limit)) + "…" : flat
    }
}
