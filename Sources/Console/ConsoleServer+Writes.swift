import Foundation
import HTTP
import Reconciliation
import Store

/// The console's writes. Each comes with the session's CSRF token (checked before these run), needs an operator, and
/// is recorded in `console_audit` with who, when, from where and what came of it.
extension ConsoleServer {
    func write(_ request: HTTPRequest, session: ConsoleSession) async -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if parts == ["logout"] { return await signOut(request, session: session) }
        guard parts.count == 3, let id = Int64(parts[1]), id > 0,
            ["discrepancies/ack", "actions/retry", "deliveries/retry"].contains(parts[0] + "/" + parts[2])
        else { return notFound(session) }
        guard session.role == ConsoleRole.operator.rawValue else {
            return Self.html(
                403,
                ConsolePages.page(title: "Refused", session: session, body: "<p class=\"error\">A viewer reads; only an operator acts.</p>")
            )
        }
        let form = FormBody.parse(request.body), address = clientAddress(request)
        do {
            let answer: HTTPResponse
            switch parts[0] {
            case "discrepancies": answer = try await acknowledge(id, form: form, address: address, session: session)
            case "actions": answer = try await retryAction(id, form: form, address: address, session: session)
            default: answer = try await retryDelivery(id, address: address, session: session)
            }
            // This console's overview reads its figures again, and every console's refreshes (their watchers LISTEN
            // on this channel).
            if answer.status == 303 {
                live.forgetFigures()
                try? await pool.run { try $0.notify(channel: ConsoleWatcher.channel) }
            }
            return answer
        } catch {
            logger.warning("console: a write failed", ["path": request.path, "error": String(describing: error)])
            return Self.html(
                503, ConsolePages.page(title: "Unavailable", session: session, body: "<p>The database is out of reach; try again.</p>"))
        }
    }

    func acknowledge(_ id: Int64, form: [String: String], address: String, session: ConsoleSession) async throws -> HTTPResponse {
        let note = form["note"].map { String($0.prefix(500)) }.flatMap { $0.isEmpty ? nil : $0 }
        if let note, note.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return Self.html(
                400,
                ConsolePages.page(
                    title: "Refused", session: session,
                    body: "<p class=\"error\">The note holds a control character; write it as plain text on one line.</p>"))
        }
        let result = try await pool.run {
            try ConsoleStore.acknowledge(id: id, note: note, user: session.userName, address: address, on: $0)
        }
        guard result.acknowledged else {
            guard let status = result.status else { return notFound(session) }
            return try await discrepancyPage(
                id, session: session, error: "It is \(status), not open: only an open discrepancy can be acknowledged.", status: 409)
        }
        logger.info("console: discrepancy acknowledged", ["user": session.userName, "discrepancy_id": id])
        return Self.redirect("/discrepancies/\(id)")
    }

    /// Re-plans a failed action from a fresh fetch, as `payrecon actions retry ID` does (the same executor code): the
    /// console never decides an amount. A call whose outcome is unknown is retried only when the operator says they
    /// checked at the provider that it was not applied.
    func retryAction(_ id: Int64, form: [String: String], address: String, session: ConsoleSession) async throws -> HTTPResponse {
        guard let action = try await pool.run({ try ActionStore.find(id: id, on: $0) }) else { return notFound(session) }
        guard let retry = configuration.retryAction else {
            return try await actionPage(
                id, session: session,
                error: "This console has no provider API credentials, so it cannot fetch the transaction again: give it the "
                    + "provider variables the worker has, or run `payrecon actions retry \(id)` where the worker runs.",
                status: 503)
        }
        guard let looked = form["attempts"].flatMap(Int.init), looked == action.attempts else {
            return try await actionPage(
                id, session: session,
                error: "It was tried again since you opened it (attempt \(action.attempts) now): look at it again before retrying.",
                status: 409)
        }
        if action.inDoubt && form["checked"] != "yes" {
            return try await actionPage(
                id, session: session,
                error: "Its last call's outcome is unknown: check at \(action.provider.rawValue) that it was not applied, tick the box, "
                    + "and retry.", status: 409)
        }
        // Recorded before the executor runs (whatever then fails, the request is on record), and completed after.
        let checked = action.inDoubt ? "checked at the provider that attempt \(looked) was not applied; " : ""
        let asked = checked + "asked"
        let record = try await pool.run {
            try ConsoleStore.audit(user: session.userName, address: address, action: "retry", target: "action \(id)", detail: asked, on: $0)
        }
        let result = await retry(id, looked)
        let said: String, problem: (status: Int, text: String)?
        switch result {
        case .pending(let amount):
            // In the currency the plan gave (re-read, as `payrecon actions retry` prints it).
            let now = try? await pool.run { try ActionStore.find(id: id, on: $0) }
            let currency = now?.amount.currency ?? action.amount.currency
            said = "pending again: " + Money.format(minorUnits: amount, exponent: currency.exponent) + " " + currency.code
            problem = nil
        case .retired(let why): (said, problem) = ("superseded: " + why, nil)
        case .notNow(let why): (said, problem) = (Self.notRetried + why, (503, "Not retried: \(why). Try again later."))
        case .notFailed(let why): (said, problem) = (Self.notRetried + why, (409, why))
        case .noSuchAction(let why): (said, problem) = (Self.notRetried + why, (404, why))
        }
        let detail = checked + said
        var recorded = true
        do { try await pool.run { try ConsoleStore.completeAudit(record, detail: detail, on: $0) } } catch {
            recorded = false
            logger.error(
                "console: a retry's outcome was not recorded", ["action_id": id, "result": said, "error": String(describing: error)])
        }
        logger.info("console: action retried", ["user": session.userName, "action_id": id, "result": said])
        guard let problem else { return Self.redirect("/actions/\(id)") }
        // Redirected after the post, so a reload never asks again: the page says what came of it, from its record in
        // the trail (`unfinishedRetry`). Without that record (not completed, or the action gone) it is said here.
        guard recorded, problem.status != 404 else {
            return try await actionPage(id, session: session, error: problem.text, status: problem.status)
        }
        return Self.redirect("/actions/\(id)?retry=\(record)")
    }

    /// How a retry's record in the trail says it was not completed (`unfinishedRetry` reads it back).
    static let notRetried = "not retried: "

    func retryDelivery(_ id: Int64, address: String, session: ConsoleSession) async throws -> HTTPResponse {
        let retried = try await pool.run { try ConsoleStore.retryDeadDelivery(id: id, user: session.userName, address: address, on: $0) }
        guard retried else {
            return try await deliveryPage(id, session: session, error: "It is not dead: only a dead delivery is retried here.", status: 409)
        }
        logger.info("console: delivery retried", ["user": session.userName, "delivery_id": id])
        return Self.redirect("/deliveries/\(id)")
    }
}
