import Foundation
import Reconciliation
import TextFormats

// `payrecon doctor` for PXP: one signed GET of a transaction that does not exist. PXP publishes the shape of the
// PXP-UST1 header but not the string to sign (docs/PROVIDER-FACTS.md PXP-11), so this 404 — not 401 — is what proves
// payrecon's signing against the real PXP before the first delivery depends on it.
extension PXPProvider.API {
    static let doctorCredentials = "pxp credentials"
    /// A merchantTransactionId no merchant uses.
    static let doctorTransactionID = "payrecon-doctor-no-such-transaction"
    /// Merchant and site for the probe when no PXP order is stored yet (they are part of PXP's API path).
    static let doctorPlaceholder = "payrecon-doctor"

    public func doctor(_ context: DoctorContext) async -> [DoctorCheck] {
        guard let client else { return [] }
        var merchant = Self.doctorPlaceholder, site = Self.doctorPlaceholder
        var madeUp = true
        if case .found(let m) = context.latestMerchant, let s = m.site, !m.merchant.isEmpty, !s.isEmpty {
            merchant = m.merchant; site = s; madeUp = false
        }
        let request = client.transactionRequest(merchant: merchant, site: site, query: ("merchantTransactionId", Self.doctorTransactionID))
        let asked = DoctorProbe.target(request)
        let base = client.configuration.baseURL
        let whose =
            madeUp
            ? "a made-up merchant and site (no PXP order is stored yet)" : "merchant \(merchant), site \(site) (the latest PXP order's)"
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return [
                .failed(
                    Self.doctorCredentials,
                    "\(asked) got no answer (\(reason)): check PXP_API_BASE_URL (\(base)) and that this host can reach it")
            ]
        case .answered(let response):
            return Self.doctorChecks(
                answered: response, asked: asked, whose: whose, base: base, merchant: merchant, site: site, madeUp: madeUp)
        }
    }

    /// The check PXP's answer to the probe comes to: 404 (or a 2xx) proves the credentials and the signing; any other
    /// status says what to look at.
    static func doctorChecks(
        answered response: ProviderResponse, asked: String, whose: String, base: String, merchant: String, site: String,
        madeUp: Bool
    ) -> [DoctorCheck] {
        let said = Self.doctorSummary(response)
        switch response.status {
        case 404:
            return [
                .ok(
                    Self.doctorCredentials,
                    "\(asked) answered 404 for a transaction that does not exist, at \(whose): "
                        + "PXP accepted PXP_CLIENT_ID, PXP_TOKEN_ID and the PXP-UST1 signature")
            ]
        case 200..<300:
            return [
                .ok(
                    Self.doctorCredentials,
                    "\(asked) answered \(response.status) at \(whose): PXP accepted the credentials and the PXP-UST1 signature")
            ]
        case 401:
            return [
                .failed(
                    Self.doctorCredentials,
                    "\(asked) answered 401\(said): PXP did not accept the request's authentication. "
                        + "Check PXP_CLIENT_ID, PXP_TOKEN_ID and PXP_TOKEN_VALUE against the Unity Portal, for PXP_API_BASE_URL's "
                        + "environment (\(base)); if they are right, PXP signs requests otherwise than payrecon assumes "
                        + "(PXP-UST1, docs/PROVIDER-FACTS.md PXP-11) and no PXP call will work until "
                        + "Sources/Providers/PXP/PXPClient+Auth.swift matches it")
            ]
        case 403:
            let hint =
                madeUp
                ? "; the merchant and site were made up, so import a PXP order and run doctor again to check with real ones"
                : "; check that these credentials belong to the merchant group holding merchant \(merchant) and site \(site)"
            return [
                .failed(
                    Self.doctorCredentials,
                    "\(asked) answered 403\(said) at \(whose): the authentication was accepted but "
                        + "these credentials may not read it\(hint)")
            ]
        case 408, 429, 500..<600:
            return [
                .failed(
                    Self.doctorCredentials,
                    "\(asked) answered \(response.status)\(said): PXP could not answer now; run doctor again later")
            ]
        default:
            return [
                .failed(
                    Self.doctorCredentials,
                    "\(asked) answered \(response.status)\(said), not 404: PXP should answer 404 for a "
                        + "transaction it does not know (docs/PROVIDER-FACTS.md PXP-13), and every PXP order check would fail with "
                        + "this status; check PXP_API_BASE_URL (\(base))")
            ]
        }
    }

    /// ` (errorCode: errorReason)` of a PXP error body, else a short excerpt; empty when there is nothing to show.
    static func doctorSummary(_ response: ProviderResponse) -> String {
        if let json = try? JSONValue.parse(response.body), let code = json["errorCode"]?.stringValue {
            return " (" + code + (json["errorReason"]?.stringValue.map { ": " + $0 } ?? "") + ")"
        }
        let text = DoctorProbe.excerpt(response.body)
        return text.isEmpty ? "" : " (\(text))"
    }
}
