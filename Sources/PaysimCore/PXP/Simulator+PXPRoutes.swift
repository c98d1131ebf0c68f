import Foundation
import Reconciliation

// PXP as paysim serves it: the Transactions API (read, modify) behind PXP-UST1, and its admin routes. The book is
// PXPBook.swift, what PXP leaves undocumented PXPBehaviour.swift, the request check Simulator+PXPAuth.swift.
extension Simulator {
    /// PXP's routes; nil for a route that is not PXP's.
    func dispatchPXP(_ route: Route, _ r: SimRequest) throws(SimError) -> SimResponse? {
        func expect(_ method: String) throws(SimError) {
            guard r.method == method else { throw Self.wrongMethod(method) }
        }
        switch route {
        case .pxpTransaction(let merchant, let site):
            try expect("GET"); try checkPXPAuth(r)
            return try pxpGet(merchant: merchant, site: site, query: r.query)
        case .pxpModifications(let id):
            try expect("POST"); try checkPXPAuth(r)
            return try pxpModify(parentID: id, r)
        case .adminPXPTransactions:
            if r.method == "GET" {
                // Every PXP transaction, modifications included, as PXP's GET shows each, with its parent: how the
                // chaos runs count what was applied.
                let all = state.withLock { Array($0.pxp.transactions.values) }.sorted { $0.systemTransactionID < $1.systemTransactionID }
                return .json(
                    200,
                    .object([
                        "transactions": .array(
                            all.map { t in
                                .object([
                                    ("transaction", t.json), ("parent", t.parentID.map { .string($0) } ?? .null),
                                    ("operation", t.operation.map { .string($0) } ?? .null)
                                ])
                            })
                    ]))
            }
            try expect("POST"); return try adminPutPXP(r.body)
        case .adminPXPBehaviour:
            if r.method == "GET" { return .json(200, state.withLock { $0.config.pxpBehaviour.json }) }
            try expect("POST")
            let json = try Self.parseAdminBody(r.body)
            let behaviour = try state.withLock { s throws(SimError) -> PXPBehaviour in
                s.config.pxpBehaviour = try PXPBehaviour.parse(json, base: s.config.pxpBehaviour)
                return s.config.pxpBehaviour
            }
            return .json(200, behaviour.json)
        default:
            return nil
        }
    }
}

extension Simulator {

    /// Checks `Authorization: PXP-UST1 {tokenId}:{timestamp}:{hmac}`, `X-Request-Id` and `X-Client-Id`.
    func checkPXPAuth(_ r: SimRequest) throws(SimError) {
        let config = state.withLock { $0.config }
        func reject(_ reason: String) -> SimError { SimError.pxp(401, "Unauthorized", reason) }
        guard let header = r.header("authorization") else { throw reject("missing Authorization header") }
        let prefix = "PXP-UST1 "
        guard header.hasPrefix(prefix) else { throw reject("Authorization scheme must be PXP-UST1") }
        // tokenId up to the first ':', hmac after the last (an ISO 8601 timestamp has colons of its own).
        let credential = header.dropFirst(prefix.count)
        guard let first = credential.firstIndex(of: ":"), let last = credential.lastIndex(of: ":"), first < last else {
            throw reject("Authorization must be PXP-UST1 {tokenId}:{timestamp}:{hmac}")
        }
        let parts = [
            String(credential[..<first]), String(credential[credential.index(after: first)..<last]),
            String(credential[credential.index(after: last)...])
        ]
        guard !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw reject("Authorization must be PXP-UST1 {tokenId}:{timestamp}:{hmac}")
        }
        guard simConstantTimeEquals(Array(parts[0].utf8), Array(config.pxpTokenID.utf8)) else {
            throw reject("unknown token id")
        }
        guard Self.isPXPTimestamp(parts[1]) else { throw reject("timestamp must be unix seconds, unix milliseconds or ISO 8601") }
        guard let requestID = r.header("x-request-id"), !requestID.isEmpty else { throw reject("missing X-Request-Id") }
        guard let clientID = r.header("x-client-id"),
            simConstantTimeEquals(Array(clientID.utf8), Array(config.pxpClientID.utf8))
        else { throw reject("missing or unknown X-Client-Id") }
        guard
            verifyPXPSignature(
                request: r, tokenValue: config.pxpTokenValue, timestamp: parts[1],
                requestID: requestID, signature: parts[2])
        else { throw reject("signature does not match") }
    }

    func pxpGet(merchant: String, site: String, query: [String: String]) throws(SimError) -> SimResponse {
        let found: PXPTransaction? = state.withLock { s in
            if let mtid = query["merchantTransactionId"], !mtid.isEmpty {
                let t = s.pxp.find(merchant: merchant, site: site, merchantTransactionID: mtid)
                // A PXP whose lookup by merchantTransactionId finds only the merchant's own transactions (undocumented).
                if t?.parentID != nil, !s.config.pxpBehaviour.findsModifications { return nil }
                return t.flatMap { s.pxp.lookedUp($0.systemTransactionID) }
            }
            if let sid = query["systemTransactionId"], !sid.isEmpty,
                let t = s.pxp.find(systemTransactionID: sid), t.merchant == merchant, t.site == site
            {
                return t
            }
            return nil
        }
        guard query["merchantTransactionId"] != nil || query["systemTransactionId"] != nil else {
            throw SimError.pxp(400, "InvalidRequest", "merchantTransactionId or systemTransactionId is required")
        }
        guard let found else { throw SimError.pxp(404, "TransactionNotFound", "transaction not found") }
        return .json(200, found.json)
    }

    func pxpModify(parentID: String, _ r: SimRequest) throws(SimError) -> SimResponse {
        let route = Route.pxpModifications(parentID)
        let modification: PXPModificationRequest
        do {
            modification = try PXPModificationRequest.parse(r.body)
        } catch {
            logAction(route, r, key: nil, status: error.status, result: error.code, resourceID: nil)
            throw error
        }
        let now = nowString
        let outcome: Result<PXPBook.Outcome, SimError> = state.withLock { s in
            let id = s.ids.uuid()
            do throws(SimError) {
                return .success(
                    try s.pxp.modify(
                        parentID: parentID, modification, newSystemTransactionID: id, now: now,
                        behaviour: s.config.pxpBehaviour))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(.applied(let t)):
            logAction(
                route, r, key: modification.merchantTransactionID, status: 200, result: "applied",
                resourceID: t.systemTransactionID)
            return .json(200, t.json)
        case .success(.replayed(let t)):
            logAction(
                route, r, key: modification.merchantTransactionID, status: 200, result: "replayed",
                resourceID: t.systemTransactionID)
            return .json(200, t.json)
        case .failure(let error):
            logAction(
                route, r, key: modification.merchantTransactionID, status: error.status, result: error.code,
                resourceID: nil)
            throw error
        }
    }
}
