import Foundation
import Crypto
import HTTP
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

    /// A page refusing the proxy's word, saying why (`message` is text, escaped here).
    static func refused(_ status: Int, _ title: String, _ message: String) -> ProxiedSession {
        .refused(html(status, ConsolePages.page(title: title, session: nil, body: ConsoleHTML.alert(message))))
    }

    func proxiedSession(_ request: HTTPRequest, current: ConsoleSession?) async throws -> ProxiedSession {
        // The overview's refresh opens no session: an expired one stays expired (the page stops refreshing).
        guard let header = configuration.userHeader, fromProxy(request), request.path != "/live",
            request.headers["x-payrecon-refresh"] == nil
        else { return .none }
        let values = request.headers.values(for: header)
        guard !values.isEmpty else { return .none }
        // Names given twice (two headers, or one joined with a comma): the proxy set one and passed a browser's on; whichever
        // this read, it is not to be believed.
        guard values.count == 1, !values[0].contains(",") else {
            return Self.refused(
                400, "Refused", "The proxy sent \(header) twice: it must set it once, and never pass on a browser's own.")
        }
        // Names are kept in lower case (`add-user` takes no other); a proxy may send them as people typed them. ASCII
        // only, lower-cased as ASCII: Unicode's rules fold some other letters into ASCII ones (the Kelvin sign into
        // "k"), which would sign one person in as another.
        let sentName = values[0].trimmingCharacters(in: .whitespaces)
        guard sentName.utf8.allSatisfy({ $0 < 0x80 }) else {
            return Self.refused(403, "Not a console user", "The proxy names someone in characters a console name does not hold.")
        }
        let named = String(decoding: sentName.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
        guard !named.isEmpty else { return .none }
        if current?.userName == named { return .none }
        guard ConsoleUsers.isValidName(named), let user = user(named: named) else {
            logger.warning("console: the proxy names someone the users file does not list", ["user": String(named.prefix(64))])
            return Self.refused(
                403, "Not a console user",
                "You are signed in at the proxy as \(named.prefix(64)), whom the console's users file does not list: ask an "
                    + "administrator to add you (payrecon console add-user).")
        }
        // Another person's session in this browser (the proxy signed someone else in): it ends here.
        if current != nil, let token = FormBody.cookie(configuration.cookieName, in: request.headers["cookie"]) {
            try await pool.run { try ConsoleStore.endSession(tokenSHA256: SHA256.hash(Array(token.utf8)), on: $0) }
        }
        let (session, cookie) = try await openSession(for: user, address: clientAddress(request), how: "named by the proxy's \(header)")
        return .signedIn(session, cookie: cookie)
    }
}
