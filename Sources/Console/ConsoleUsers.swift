/// What a person signed in to the console may do: a viewer reads; an operator also acknowledges discrepancies and
/// retries actions and deliveries. Secrets and credentials are shown to no one.
public enum ConsoleRole: String, Sendable, CaseIterable {
    case viewer
    case `operator`

    public var mayWrite: Bool { self == .operator }
}

/// One person who may sign in: a name, a role and a scrypt hash of the password (`PasswordHash`), or no password for
/// one who signs in only through the authenticating proxy (`PAYRECON_CONSOLE_USER_HEADER`).
public struct ConsoleUser: Sendable, Equatable {
    public var name: String
    public var role: ConsoleRole
    /// nil: no password signs this person in; only the proxy's header does.
    public var passwordHash: String?

    public init(name: String, role: ConsoleRole, passwordHash: String?) {
        self.name = name; self.role = role; self.passwordHash = passwordHash
    }

    /// The users file's word for a person with no password, who signs in only through the proxy.
    public static let proxyOnly = "proxy"
}

/// The users file (`PAYRECON_CONSOLE_USERS_FILE`): one person a line, `name role hash` (or `name role proxy` for one
/// who signs in only through the authenticating proxy), separated by spaces; blank lines and lines starting with `#`
/// are skipped. `payrecon console add-user` writes it.
public struct ConsoleUsers: Sendable, Equatable {
    public private(set) var users: [ConsoleUser]

    public init(_ users: [ConsoleUser] = []) { self.users = users }

    /// A line the file cannot hold, with its number and what to do.
    public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    /// A name: 1 to 64 of a-z, 0-9, `.`, `_`, `@`, `-` (it shows in the audit trail and `explain`, and in a proxy's header).
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { b in
                (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2E || b == 0x5F || b == 0x40 || b == 0x2D
            }
    }

    /// Reads the file; every bad line is an error naming it (nothing is half read: a file with one bad line lets
    /// no one in, rather than some).
    public static func parse(_ text: String) throws(FileError) -> ConsoleUsers {
        var users: [ConsoleUser] = []
        var seen = Set<String>()
        // By lines, LF or CRLF (a CRLF is one Character in Swift: split on what is a newline, not on "\n").
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
            let number = index + 1
            guard fields.count == 3 else {
                throw FileError(
                    line: number, reason: "expected `name role hash`; write it with `payrecon console add-user NAME --role ROLE`")
            }
            let name = String(fields[0])
            guard isValidName(name) else {
                throw FileError(line: number, reason: "the name must be 1 to 64 of a-z, 0-9, '.', '_', '@', '-'")
            }
            guard let role = ConsoleRole(rawValue: String(fields[1])) else {
                throw FileError(line: number, reason: "the role must be viewer or operator")
            }
            let proxyOnly = fields[2] == ConsoleUser.proxyOnly
            guard proxyOnly || fields[2].hasPrefix("scrypt$") else {
                throw FileError(
                    line: number,
                    reason: "the password must be a scrypt hash made by `payrecon console add-user`, or `proxy` for no password")
            }
            guard seen.insert(name).inserted else { throw FileError(line: number, reason: "\(name) is named twice") }
            users.append(ConsoleUser(name: name, role: role, passwordHash: proxyOnly ? nil : String(fields[2])))
        }
        return ConsoleUsers(users)
    }

    public func user(named name: String) -> ConsoleUser? { users.first { $0.name == name } }

    /// Adds `user`, or replaces the one of that name where it stands (a new password or role).
    public mutating func put(_ user: ConsoleUser) {
        if let i = users.firstIndex(where: { $0.name == user.name }) { users[i] = user } else { users.append(user) }
    }

    /// The file's text, a header then one line a user.
    public var text: String {
        "# payrecon console users: name role scrypt-hash, or proxy (written by `payrecon console add-user`)\n"
            + users.map { "\($0.name) \($0.role.rawValue) \($0.passwordHash ?? ConsoleUser.proxyOnly)\n" }.joined()
    }
}
