import Providers

extension Simulator {
    /// The one place that checks the PXP-UST1 HMAC: recomputed with the client's own `PXPAuth.signature` (PXP has
    /// not published its string-to-sign; Providers/PXP holds the assumed construction, so both sides agree by
    /// construction) over the request target re-encoded from the decoded path and query, compared in constant time.
    func verifyPXPSignature(request: SimRequest, tokenValue: String, timestamp: String, requestID: String,
                            signature: String) -> Bool {
        let target = PXPAuth.requestTarget(decodedPath: request.path, query: request.query)
        let expected = PXPAuth.signature(tokenValue: tokenValue, timestamp: timestamp, requestID: requestID,
                                         method: request.method, pathAndQuery: target, body: request.body)
        return constantTimeEquals(Array(expected.utf8), Array(signature.utf8))
    }
}
