import Crypto
import Foundation
import HTTP
import Reporting
import Store

/// Sign-in by an authenticating proxy (`PAYRECON_CONSOLE_USER_HEADER`): oauth2-proxy or nginx's auth_request has
/// signed the person in and names them in a header. The header is believed only from a trusted proxy's address; from
/// anyone else it is ignored (a browser could send it). The person must be in the users file, which gives their role.
extension ConsoleServer {
    enum ProxiedSession {
        /// No header configured, or not from a trusted proxy, or it names the session's own person: as it is.
        case none
        /// A session opened (or replaced) for the person the proxy names, and its cookie.
        case signedIn(ConsoleSession, cookie: String)
        /// The proxy names someone the users file does not list (or a name that is none).
        case refused(HTTPResponse)
    }

    func proxiedSession(_ request: HTTPRequest, current: ConsoleSession?) async throws -> ProxiedSession {
        guard let header = configuration.userHeader, let peer = request.remoteAddress,
            configuration.trustedProxies.contains(where: { $0.contains(peer) }),
            let named = request.headers[header]?.trimmingCharacters(in: .whitespaces), !named.isEmpty
        else { return .none }
        if current?.userName == named { return .none }
        guard ConsoleUsers.isValidName(named), let user = user(named: named) else {
            logger.warning("console: the proxy names someone the users file does not list", ["user": String(named.prefix(64))])
            return .refused(
                Self.html(
                    403,
                    ConsolePages.page(
                        title: "Not a console user", session: nil,
                        body: "<p class=\"error\">You are signed in at the proxy as \(HTML.escape(String(named.prefix(64)))), whom the "
                            + "console's users file does not list: ask an administrator to add you (payrecon console add-user).</p>")))
        }
        // Another person's session in this browser (the proxy signed someone else in): it ends here.
        if current != nil, let token = FormBody.cookie(configuration.cookieName, in: request.headers["cookie"]) {
            try await pool.run { try ConsoleStore.endSession(tokenSHA256: SHA256.hash(Array(token.utf8)), on: $0) }
        }
        let (session, cookie) = try await openSession(for: user, address: clientAddress(request), how: "named by the proxy's \(header)")
        return .signedIn(session, cookie: cookie)
    }
}
