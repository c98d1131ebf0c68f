import Foundation
import Reconciliation
import TextFormats

// `payrecon doctor` for Paypercut: a GET of a payment intent that does not exist must answer 404 with Paypercut's
// error object (`resource_missing` in its reading, docs/PROVIDER-FACTS.md PAYPERCUT-5), not 401 (the key) or 403
// `account_invalid`. Which account an order acts for is each order's merchant, so the probe names none and checks
// the key itself.
extension PaypercutProvider.API {
    static let doctorCredentials = "paypercut credentials"
    static let doctorIntentID = "pi_payrecon_doctor_no_such_intent"

    static let doctorLists = "paypercut payment and refund lists"

    public func doctor(_ context: DoctorContext) async -> [DoctorCheck] {
        guard let client else { return [] }
        var checks = [await Self.doctorKey(client)]
        // Only when the nightly run backfills from Paypercut: it reads the payment and refund lists.
        if (try? context.environment.backfill())?.contains(where: { $0.provider == .paypercut }) == true {
            checks.append(await Self.doctorListRead(client))
        }
        return checks
    }

    /// `GET /v2/payments?limit=1` and `GET /v1/refunds?limit=1` as the key's own account: what `payrecon backfill
    /// --provider paypercut` reads. Reads only.
    static func doctorListRead(_ client: PaypercutClient) async -> DoctorCheck {
        for segments in [["v2", "payments"], ["v1", "refunds"]] {
            let request = client.request("GET", segments, query: [("limit", "1")], body: nil, key: nil, account: nil)
            let asked = DoctorProbe.target(request)
            switch await DoctorProbe.send(request, over: client.transport) {
            case .unreachable(let reason):
                return .failed(doctorLists, "\(asked) got no answer (\(reason)): run doctor again later")
            case .answered(let r) where (200..<300).contains(r.status):
                guard let json = try? JSONValue.parse(r.body), json["items"]?.arrayValue != nil else {
                    return .failed(
                        doctorLists,
                        "\(asked) answered \(r.status) without an items list\(doctorExcerpt(r.body)): payrecon backfill could not read it")
                }
            case .answered(let r) where r.status == 403 && doctorError(r.body)?.code == "account_required":
                return .ok(
                    doctorLists,
                    "\(asked) answered 403 account_required: a platform key holds nothing as itself; payrecon backfill "
                        + "--provider paypercut lists each connected account payrecon's orders name as their merchant")
            case .answered(let r):
                let said = doctorError(r.body).map { " (\($0.summary))" } ?? doctorExcerpt(r.body)
                let hint =
                    r.status == 401 || r.status == 403
                    ? ": PAYPERCUT_SECRET_KEY may not list them; until it may, payrecon backfill --provider paypercut exits 2 and the nightly run skips it"
                    : ": payrecon backfill --provider paypercut would leave its windows for a later run"
                return .failed(doctorLists, "\(asked) answered \(r.status)\(said)\(hint)")
            }
        }
        return .ok(doctorLists, "GET /v2/payments and GET /v1/refunds answered: payrecon backfill --provider paypercut can read them")
    }

    static func doctorKey(_ client: PaypercutClient) async -> DoctorCheck {
        let request = client.request("GET", ["v1", "payment_intents", Self.doctorIntentID], body: nil, key: nil, account: nil)
        let asked = DoctorProbe.target(request)
        let base = client.configuration.baseURL
        let name = Self.doctorCredentials
        switch await DoctorProbe.send(request, over: client.transport) {
        case .unreachable(let reason):
            return .failed(
                name, "\(asked) got no answer (\(reason)): check PAYPERCUT_API_BASE_URL (\(base)) and that this host can reach it")
        case .answered(let r):
            let error = Self.doctorError(r.body)
            let said = error.map { " (\($0.summary))" } ?? Self.doctorExcerpt(r.body)
            switch (r.status, error?.code) {
            case (404, "resource_missing"):
                return .ok(
                    name,
                    "\(asked) answered 404 resource_missing for a payment intent that does not exist: Paypercut accepted PAYPERCUT_SECRET_KEY"
                )
            case (404, .some(let code)):
                return .ok(
                    name, "\(asked) answered 404 \(code) for a payment intent that does not exist: Paypercut accepted PAYPERCUT_SECRET_KEY")
            case (404, nil):
                return .failed(
                    name,
                    "\(asked) answered 404\(said) without Paypercut's error object: the route itself may not exist at "
                        + "PAYPERCUT_API_BASE_URL (\(base)), and every Paypercut order would read missing_at_provider; check the base URL")
            case (200..<300, _):
                return .ok(name, "\(asked) answered \(r.status): Paypercut accepted PAYPERCUT_SECRET_KEY")
            case (401, _):
                return .failed(
                    name,
                    "\(asked) answered 401\(said): Paypercut refused PAYPERCUT_SECRET_KEY. Set it to the secret key from "
                        + "the Paypercut dashboard for PAYPERCUT_API_BASE_URL (\(base)): a test key for the test mode, a live one for live")
            case (403, "account_required"):
                return .ok(
                    name,
                    "\(asked) answered 403 account_required: Paypercut accepted PAYPERCUT_SECRET_KEY, a platform key that must "
                        + "act for an account, so every Paypercut order must name its account in merchant")
            case (403, _):
                return .failed(
                    name,
                    "\(asked) answered 403\(said) with no account named: PAYPERCUT_SECRET_KEY was authenticated but may "
                        + "not read payment intents; check the key's permissions in the Paypercut dashboard")
            case (408, _), (429, _), (500..<600, _):
                return .failed(name, "\(asked) answered \(r.status)\(said): Paypercut could not answer now; run doctor again later")
            default:
                return .failed(
                    name,
                    "\(asked) answered \(r.status)\(said), not 404: every Paypercut order check would fail this way; "
                        + "check PAYPERCUT_API_BASE_URL (\(base))")
            }
        }
    }

    /// Paypercut's error object, top level or under `error` (as `PaypercutErrorObject` reads it).
    static func doctorError(_ body: [UInt8]) -> (code: String, summary: String)? {
        guard let json = try? JSONValue.parse(body), json.objectMembers != nil else { return nil }
        let object = json["error"].flatMap { $0.objectMembers != nil ? $0 : nil } ?? json
        guard let code = object["code"]?.stringValue else { return nil }
        let trace = object["trace_id"]?.stringValue.map { ", trace_id \($0)" } ?? ""
        return (code, code + trace)
    }

    static func doctorExcerpt(_ body: [UInt8]) -> String {
        let text = DoctorProbe.excerpt(body)
        return text.isEmpty ? "" : " (\(text))"
    }
}
