import Foundation
import Reconciliation
import TextFormats

// PayPal as paysim serves it: Orders v2, Payments v2, v1 sales, disputes, the signing certificate, and its admin
// routes. Every answer conforms to PayPal's OpenAPI documents (scripts/lib/validate-paysim-paypal.py).
extension Simulator {
    /// PayPal's routes; nil for a route that is not PayPal's.
    func dispatchPayPal(_ route: Route, _ r: SimRequest) throws(SimError) -> SimResponse? {
        func expect(_ method: String) throws(SimError) {
            guard r.method == method else { throw Self.wrongMethod(method) }
        }
        switch route {
        case .paypalToken:
            try expect("POST")
            return try paypalToken(r)
        case .paypalOrder(let id):
            try expect("GET"); try checkBearer(r)
            let now = clock()
            return try state.withLock { s throws(SimError) in
                guard let order = s.paypal.orders[id], !order.hasExpired(now: now) else {
                    throw SimError.paypalNotFound()
                }
                return .json(200, s.paypal.orderJSON(order, base: s.config.publicBaseURL))
            }
        case .paypalAuthorization(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let a = s.paypal.authorizations[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.authorizationJSON(a, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalCapture(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let c = s.paypal.captures[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.captureJSON(c, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalRefund(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let x = s.paypal.refunds[id] else { throw SimError.paypalNotFound() }
                return .json(200, s.paypal.refundJSON(x, base: s.config.publicBaseURL, standalone: true))
            }
        case .paypalAuthorizationCapture(let id):
            try expect("POST"); try checkBearer(r)
            guard state.withLock({ $0.config.paypalCapturePermission }) else {
                throw SimError.paypal(
                    403, name: "NOT_AUTHORIZED", message: "Authorization failed due to insufficient permissions.",
                    issue: "PERMISSION_DENIED", description: SimError.paypalDescriptions["PERMISSION_DENIED"]!)
            }
            return paypalAction(route, r) { s, body throws(SimError) in
                let (amount, currency) = try Self.paypalAmount(body)
                var final = false
                if let f = body?["final_capture"], !f.isNull {
                    guard let b = f.boolValue else {
                        throw SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX", field: "/final_capture")
                    }
                    final = b
                }
                let capture = try s.paypal.capture(
                    authorizationID: id, amountText: amount, currency: currency,
                    finalCapture: final, newID: s.paypalID(), now: self.nowSeconds)
                return (.json(201, s.paypal.captureJSON(capture, base: s.config.publicBaseURL, standalone: true)), capture.id)
            }
        case .paypalAuthorizationVoid(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, _ throws(SimError) in
                let auth = try s.paypal.void(authorizationID: id, now: self.nowSeconds)
                return (.json(200, s.paypal.authorizationJSON(auth, base: s.config.publicBaseURL, standalone: true)), auth.id)
            }
        case .paypalCaptureRefund(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, body throws(SimError) in
                let (amount, currency) = try Self.paypalAmount(body)
                // refund_request.custom_id: 1 to 127 characters, kept on the refund and shown with it.
                let customID = body?["custom_id"]?.stringValue
                if let customID, customID.isEmpty || customID.count > 127 {
                    throw SimError.paypalInvalid("INVALID_STRING_LENGTH", field: "/custom_id")
                }
                let refund = try s.paypal.refund(
                    captureID: id, amountText: amount, currency: currency,
                    newID: s.paypalID(), now: self.nowSeconds, customID: customID)
                return (.json(201, s.paypal.refundJSON(refund, base: s.config.publicBaseURL, standalone: true)), refund.id)
            }
        case .paypalSale(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let sale = s.paypal.sales[id] else { throw SimError.paypalNotFound("The requested resource ID was not found.") }
                return .json(200, s.paypal.saleJSON(sale, base: s.config.publicBaseURL))
            }
        case .paypalV1Refund(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                guard let refund = s.paypal.saleRefunds[id] else {
                    throw SimError.paypalNotFound("The requested resource ID was not found.")
                }
                return .json(200, s.paypal.saleRefundJSON(refund, base: s.config.publicBaseURL))
            }
        case .paypalSaleRefund(let id):
            try expect("POST"); try checkBearer(r)
            return paypalAction(route, r) { s, body throws(SimError) in
                let amount = body?["amount"]
                let refund = try s.paypal.refundSale(
                    id: id, total: amount?["total"]?.scalarText, currency: amount?["currency"]?.stringValue,
                    newID: s.paypalID(), now: self.nowSeconds)
                return (.json(201, s.paypal.saleRefundJSON(refund, base: s.config.publicBaseURL)), refund.id)
            }
        case .paypalDispute(let id):
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                // Reading a dispute needs the app's disputes scope (customer_disputes_v1.json security); without it
                // PayPal refuses (PAYPAL-DISPUTES-PERMISSION).
                guard s.config.paypalDisputesPermission else { throw Self.disputesNotAuthorized }
                guard let d = s.paypal.disputes[id] else { throw SimError.paypalNotFound("The requested resource ID was not found.") }
                return .json(200, s.paypal.disputeJSON(d, base: s.config.publicBaseURL))
            }
        case .paypalDisputes:
            try expect("GET"); try checkBearer(r)
            return try state.withLock { s throws(SimError) in
                // Listing needs the same scope as reading one (customer_disputes_v1.json `disputes.list` security).
                guard s.config.paypalDisputesPermission else { throw Self.disputesNotAuthorized }
                return .json(200, try s.paypal.disputeListJSON(query: r.query, base: s.config.publicBaseURL))
            }
        case .adminPayPalSales:
            try expect("POST"); return try adminPutPayPalSales(r.body)
        case .adminPayPalSubscriptions:
            try expect("POST"); return try adminPayPalSubscription(r.body)
        case .adminPayPalDisputes:
            try expect("POST"); return try adminPayPalDispute(r.body)
        case .adminPayPalReversals:
            try expect("POST"); return try adminPayPalReversal(r.body)
        case .adminPayPalRefunds:
            try expect("POST"); return try adminPayPalRefund(r.body)
        case .paypalCert(let name):
            try expect("GET")
            guard name == Self.certName, let ca else {
                return SimResponse(status: 404, headers: [("Content-Type", "text/plain")], body: Array("not found\n".utf8))
            }
            return SimResponse(
                status: 200,
                headers: [
                    ("Content-Type", "application/x-pem-file"),
                    ("Cache-Control", "public,max-age=86400")
                ],
                body: Array(ca.leafPEMWithCRLF.utf8))
        case .adminPayPalPermissions:
            if r.method == "POST" {
                let json = try Self.parseAdminBody(r.body)
                let disputes = json["disputes"], search = json["transaction_search"], maxItems = json["search_max_items"]
                let captures = json["captures"]
                guard disputes != nil || search != nil || maxItems != nil || captures != nil else {
                    throw SimError.admin(
                        400, "invalid_field",
                        "give disputes, transaction_search or captures (booleans: whether the app may use them) or search_max_items")
                }
                if let captures {
                    guard let b = captures.boolValue else {
                        throw SimError.admin(400, "invalid_field", "captures must be a boolean (whether the app may capture)")
                    }
                    state.withLock { $0.config.paypalCapturePermission = b }
                }
                if let disputes {
                    guard let b = disputes.boolValue else {
                        throw SimError.admin(400, "invalid_field", "disputes must be a boolean (whether the app may read disputes)")
                    }
                    state.withLock { $0.config.paypalDisputesPermission = b }
                }
                if let search {
                    guard let b = search.boolValue else {
                        throw SimError.admin(400, "invalid_field", "transaction_search must be a boolean")
                    }
                    state.withLock { $0.config.paypalTransactionSearchPermission = b }
                }
                if let maxItems {
                    guard let n = maxItems.integerValue, n > 0 else {
                        throw SimError.admin(400, "invalid_field", "search_max_items must be a positive integer")
                    }
                    state.withLock { $0.config.paypalSearchMaxItems = Int(n) }
                }
            } else {
                try expect("GET")
            }
            return .json(
                200,
                state.withLock { s in
                    .object([
                        "disputes": .bool(s.config.paypalDisputesPermission),
                        "transaction_search": .bool(s.config.paypalTransactionSearchPermission),
                        "captures": .bool(s.config.paypalCapturePermission),
                        "search_max_items": .integer(Int64(s.config.paypalSearchMaxItems))
                    ])
                })
        case .paypalWebhookEvents:
            try expect("GET"); try checkBearer(r)
            return try paypalWebhookEvents(r)
        case .paypalTransactionSearch:
            try expect("GET"); try checkBearer(r)
            return try paypalTransactionSearch(r)
        case .adminPayPalOrders:
            try expect("POST"); return try adminPutPayPal(r.body)
        case .adminPayPalReport(let name):
            try expect("GET")
            return try paypalReport(name: name, faults: r.query["faults"] ?? "", account: r.query["account"], zone: r.query["tz"])
        case .adminRootPEM:
            try expect("GET")
            guard let ca else { throw SimError.admin(404, "no_ca", "paysim runs without a PayPal test CA") }
            return SimResponse(
                status: 200, headers: [("Content-Type", "application/x-pem-file")],
                body: Array(ca.trustBundlePEM.utf8))
        default:
            return nil
        }
    }
}

extension Simulator {

    func paypalToken(_ r: SimRequest) throws(SimError) -> SimResponse {
        let config = state.withLock { $0.config }
        func reject() -> SimError {
            SimError(
                status: 401, body: .object(["error": "invalid_client", "error_description": "Client Authentication failed"]),
                code: "invalid_client")
        }
        guard let header = r.header("authorization"), header.hasPrefix("Basic "),
            let data = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces))
        else { throw reject() }
        let decoded = [UInt8](data)
        let expected = Array("\(config.paypalClientID):\(config.paypalSecret)".utf8)
        guard simConstantTimeEquals(decoded, expected) else { throw reject() }
        let form = SimRequest.parseQuery(String(decoding: r.body, as: UTF8.self))
        guard form["grant_type"] == "client_credentials" else {
            throw SimError(
                status: 400,
                body: .object([
                    "error": "unsupported_grant_type",
                    "error_description": "Grant Type is NULL or not client_credentials"
                ]),
                code: "unsupported_grant_type")
        }
        let now = Int64(clock().timeIntervalSince1970)
        let token: String = state.withLock { s in
            if s.tokens.count > 10_000 { s.tokens = s.tokens.filter { $0.value > now } }
            let token = "A21AA" + s.ids.string(60, alphabet: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))
            s.tokens[token] = now + config.paypalTokenLifetime
            return token
        }
        return .json(
            200,
            .object([
                "scope": "https://uri.paypal.com/services/payments/payment https://uri.paypal.com/services/payments/refund",
                "access_token": .string(token), "token_type": "Bearer", "app_id": "APP-PAYSIM",
                "expires_in": .integer(config.paypalTokenLifetime), "nonce": .string(SimTime.rfc3339(clock()) + "paysim")
            ]))
    }

    func checkBearer(_ r: SimRequest) throws(SimError) {
        let now = Int64(clock().timeIntervalSince1970)
        let valid: Bool = state.withLock { s in
            guard let header = r.header("authorization"), header.hasPrefix("Bearer ") else { return false }
            let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            guard let expiry = s.tokens[token] else { return false }
            return expiry > now
        }
        guard valid else {
            // The message every document's `error_401` allows, and the debug_id the v1 `error` requires.
            throw SimError(
                status: 401,
                body: .object([
                    "name": "AUTHENTICATION_FAILURE",
                    "message": "Authentication failed due to missing authorization header, or invalid authentication credentials.",
                    "debug_id": "paysim",
                    "links": .array([PayPalBook.link("https://developer.paypal.com/docs/api/overview/#error", "information_link", "GET")])
                ]), code: "AUTHENTICATION_FAILURE")
        }
    }

    /// `amount {currency_code, value}` of a capture or refund body, both nil when absent.
    static func paypalAmount(_ body: JSONValue?) throws(SimError) -> (String?, String?) {
        guard let amount = body?["amount"], !amount.isNull else { return (nil, nil) }
        guard amount.objectMembers != nil, let value = amount["value"]?.scalarText else {
            throw SimError.paypalInvalid("MISSING_REQUIRED_PARAMETER", field: "/amount/value")
        }
        return (value, amount["currency_code"]?.stringValue)
    }

    /// Runs a PayPal action once per PayPal-Request-Id: a repeated id gets the stored answer and changes nothing.
    func paypalAction(
        _ route: Route, _ r: SimRequest,
        _ apply: (inout SimState, JSONValue?) throws(SimError) -> (SimResponse, String)
    ) -> SimResponse {
        let requestID = r.header("paypal-request-id").flatMap { $0.isEmpty ? nil : $0 }
        var body: JSONValue?
        var parseError: SimError?
        // PayPal-Request-Id is at most 108 characters (checkout_orders_v2.json), 78 on the v1 sale refund
        // (payments_payment_v1.json `paypal_request_id`); a longer one is refused.
        let limit: Int
        if case .paypalSaleRefund = route { limit = 78 } else { limit = 108 }
        if let requestID, requestID.count > limit {
            parseError = SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX", field: "PayPal-Request-Id")
        }
        // A body that is not a JSON object is INVALID_PARAMETER_SYNTAX: the 400s the capture and refund documents
        // list have no MALFORMED_REQUEST_JSON.
        if parseError == nil, !r.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let parsed = try? JSONValue.parse(r.body)
            if parsed?.objectMembers == nil { parseError = SimError.paypalInvalid("INVALID_PARAMETER_SYNTAX") }
            body = parsed
        }
        let now = nowString
        return state.withLock { s in
            if let requestID, let cached = s.paypalIdempotency[requestID] {
                s.record(
                    SimLogEntry(
                        time: now, provider: "paypal", method: r.method, path: r.path, idempotencyKey: requestID,
                        requestID: requestID, status: cached.status, result: "replayed", resourceID: nil))
                return cached
            }
            let response: SimResponse
            let result: String
            var resourceID: String?
            if let parseError {
                response = parseError.response; result = parseError.code
            } else {
                do throws(SimError) {
                    let (answer, id) = try apply(&s, body)
                    response = answer; result = "applied"; resourceID = id
                } catch {
                    response = error.response; result = error.code
                }
            }
            if let requestID, requestID.count <= limit { s.paypalIdempotency[requestID] = response }
            s.record(
                SimLogEntry(
                    time: now, provider: "paypal", method: r.method, path: r.path, idempotencyKey: requestID,
                    requestID: requestID, status: response.status, result: result, resourceID: resourceID))
            return response
        }
    }
}

extension Simulator {
    /// A report file by PayPal's name for it: `STL-20261130.01.009.CSV` or `TRR-20261130.01.011.CSV`.
    /// `zone`: the account's time zone as PayPal writes it (`-0700`; default `+0000`).
    func paypalReport(name: String, faults list: String, account: String?, zone: String?) throws(SimError) -> SimResponse {
        let upper = name.uppercased()
        guard let kind = ["STL", "TRR"].first(where: { upper.hasPrefix($0 + "-") }), upper.count >= 12,
            case let digits = Array(upper.dropFirst(4).prefix(8)), digits.allSatisfy({ $0.isASCII && $0.isNumber })
        else {
            throw SimError.admin(400, "invalid_field", "a report is named STL-yyyymmdd.01.009.CSV or TRR-yyyymmdd.01.011.CSV")
        }
        let day = String(digits[0..<4]) + "-" + String(digits[4..<6]) + "-" + String(digits[6..<8])
        let faults = Set(list.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        if let unknown = faults.first(where: { !PayPalBook.reportFaults.contains($0) }) {
            throw SimError.admin(
                400, "invalid_field", "unknown report fault \(unknown) (known: \(PayPalBook.reportFaults.sorted().joined(separator: ", ")))"
            )
        }
        var offset: Int64 = 0
        if let zone {
            let z = Array(zone.utf8)
            guard z.count == 5, z[0] == 0x2B || z[0] == 0x2D, z.dropFirst().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let hours = Int64(String(zone.dropFirst().prefix(2))), let minutes = Int64(String(zone.suffix(2))), hours <= 14,
                minutes < 60
            else {
                throw SimError.admin(400, "invalid_field", "tz is an offset as PayPal writes it: -0700, +0530")
            }
            offset = (z[0] == 0x2D ? -1 : 1) * (hours * 3_600 + minutes * 60)
        }
        let generated = nowSeconds
        let bytes = state.withLock { s in
            s.paypal.report(
                kind: kind, day: day, account: account ?? PayPalOrder.defaultMerchantID, generated: generated, faults: faults,
                offset: offset)
        }
        return SimResponse(
            status: 200, headers: [("Content-Type", "text/csv"), ("Content-Disposition", "attachment; filename=\"\(name)\"")],
            body: bytes)
    }
}

extension Simulator {
    /// GET /v1/reporting/transactions (reporting_transactions_v1.json): the book's money movements made in
    /// [start_date, end_date], as `transaction_details[].transaction_info`. As PayPal documents it: both dates required,
    /// at most 31 days apart; transactions listed 3 hours after they happen (`last_refreshed_datetime` is now − 3 h,
    /// and a start after it is "Data for the given start date is not available"); pages of `page_size` (≤ 500,
    /// default 100) from `page` 1; a window holding more than 10,000 items is RESULTSET_TOO_LARGE; 403 without the
    /// Transaction Search permission. With `balance_affecting_records_only=N` a capture is listed twice under its id,
    /// its authorization-like non-balance row too ("not unique in the reporting system").
    func paypalTransactionSearch(_ r: SimRequest) throws(SimError) -> SimResponse {
        let (allowed, maxItems) = state.withLock { ($0.config.paypalTransactionSearchPermission, $0.config.paypalSearchMaxItems) }
        guard allowed else {
            throw SimError.paypal(
                403, name: "NOT_AUTHORIZED", message: "Authorization failed due to insufficient permissions.",
                issue: "PERMISSION_DENIED", description: SimError.paypalDescriptions["PERMISSION_DENIED"]!)
        }
        // A parameter PayPal refuses: its documents' 400 (error_400: the fixed message, what is wrong in `details`).
        func invalid(_ message: String, field: String) -> SimError {
            SimError.paypal(
                400, name: "INVALID_REQUEST", message: "Request is not well-formed, syntactically incorrect, or violates schema.",
                issue: "INVALID_PARAMETER_VALUE", description: message, field: field)
        }
        guard let startText = r.query["start_date"], let start = SimTime.parse(startText) else {
            throw invalid("start_date is required (RFC 3339 with seconds)", field: "start_date")
        }
        guard let endText = r.query["end_date"], let end = SimTime.parse(endText) else {
            throw invalid("end_date is required (RFC 3339 with seconds)", field: "end_date")
        }
        guard end >= start else { throw invalid("end_date is before start_date", field: "end_date") }
        guard end - start <= 31 * 86_400 else { throw invalid("Date range is greater than 31 days", field: "end_date") }
        let pageSize = Int(r.query["page_size"] ?? "100") ?? 0, page = Int(r.query["page"] ?? "1") ?? 0
        guard (1...500).contains(pageSize) else { throw invalid("page_size must be 1 to 500", field: "page_size") }
        guard page >= 1 else { throw invalid("page must be 1 or more", field: "page") }
        let now = Int64(clock().timeIntervalSince1970)
        let reach = now - 3 * 3_600
        guard start <= reach else {
            // As production answered it (PayPal-node-SDK#452), not as the documents' error_400 has it.
            return .json(
                400,
                .object([
                    "debug_id": "paysim", "name": "INVALID_REQUEST", "details": .array([]), "links": .array([]),
                    "message": "Data for the given start date is not available."
                ]))
        }
        let until = min(end, reach)
        let nonBalance = r.query["balance_affecting_records_only"]?.uppercased() == "N"
        // The window's rows (under the book's lock), then only the asked page's as JSON.
        let (rows, book): ([PayPalBook.ReportRow], PayPalBook) = state.withLock { s in
            let index = s.paypal.transactionSearchIndex()
            // A row PayPal lists late (an eCheck that cleared later, one held for review) is not there until it is.
            var rows = index[PayPalBook.firstIndex(in: index, atOrAfter: start)..<PayPalBook.firstIndex(in: index, atOrAfter: until + 1)]
                .map(\.row).filter { $0.listed <= now }
            if nonBalance {
                // The same id as a non-balance-affecting row (PayPal: ids are "not unique in the reporting system").
                rows += rows.filter { $0.code == "T0006" }.map {
                    var h = $0; h.code = "T1105"; h.fee = nil; return h
                }
            }
            return (rows, s.paypal)
        }
        guard rows.count <= maxItems else {
            // As production answered it (airbytehq/airbyte#4404), not in the documents.
            return .json(
                400,
                .object([
                    "name": "RESULTSET_TOO_LARGE",
                    "message": "Result set size is greater than the maximum limit. Change the filter criteria and try again.",
                    "debug_id": "paysim", "total_items": .integer(Int64(rows.count)), "maximum_items": .integer(Int64(maxItems))
                ]))
        }
        let items: [JSONValue] = rows.dropFirst((page - 1) * pageSize).prefix(pageSize).map { row in
            var info: [(String, JSONValue)] = [
                ("transaction_id", .string(row.id)),
                ("transaction_event_code", .string(row.code)),
                ("transaction_initiation_date", .string(SimTime.rfc3339(Date(timeIntervalSince1970: Double(row.initiated))))),
                ("transaction_updated_date", .string(SimTime.rfc3339(Date(timeIntervalSince1970: Double(row.completed))))),
                ("transaction_amount", book.searchMoney(row.direction == "DR" ? -row.gross : row.gross, row.currency)),
                ("transaction_status", .string(row.status))
            ]
            if let fee = row.fee { info.append(("fee_amount", book.searchMoney(row.feeDirection == "DR" ? -fee : fee, row.currency))) }
            if let reference = row.reference {
                // A refund names its capture (TXN), a capture its order (ODR), a subscription payment its
                // billing agreement (PAP).
                let type = row.code.hasPrefix("T11") ? "TXN" : row.code == "T0002" ? "PAP" : "ODR"
                info += [("paypal_reference_id", .string(reference)), ("paypal_reference_id_type", .string(type))]
            }
            if !row.invoice.isEmpty { info.append(("invoice_id", .string(row.invoice))) }
            return .object(["transaction_info": .object(info)])
        }
        let totalPages = max(1, (rows.count + pageSize - 1) / pageSize)
        let slice = items
        return .json(
            200,
            .object([
                "transaction_details": slice.isEmpty ? nil : .array(Array(slice)),
                "account_number": .string(PayPalOrder.defaultMerchantID),
                "start_date": .string(SimTime.rfc3339(Date(timeIntervalSince1970: Double(start)))),
                "end_date": .string(SimTime.rfc3339(Date(timeIntervalSince1970: Double(until)))),
                "last_refreshed_datetime": .string(SimTime.rfc3339(Date(timeIntervalSince1970: Double(reach)))),
                "page": .integer(Int64(page)), "total_items": .integer(Int64(rows.count)), "total_pages": .integer(Int64(totalPages))
            ]))
    }
}
