import CLibPQ
import Foundation

/// Finds the password in a connection string, so no message ever shows it, even when libpq echoes part of a
/// malformed string back.
enum ConnInfoSecrets {
    /// Every spelling of a password the string may carry: URI user info, `password=` in a URI query or in key=value
    /// form (quoted or not), raw and percent-decoded, plus what libpq itself parsed.
    static func candidates(in conninfo: String) -> [String] {
        var found: [String] = []
        func add(_ value: Substring) {
            guard !value.isEmpty else { return }
            found.append(String(value))
            if let decoded = value.removingPercentEncoding, decoded != value { found.append(decoded) }
        }
        // URI user info: postgresql://user:password@host
        for scheme in ["postgresql://", "postgres://"] where conninfo.hasPrefix(scheme) {
            let rest = conninfo.dropFirst(scheme.count)
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            if let at = authority.lastIndex(of: "@") {
                let userInfo = authority[..<at]
                if let colon = userInfo.firstIndex(of: ":") { add(userInfo[userInfo.index(after: colon)...]) }
            }
        }
        // password=... (key=value form, and URI query parameters).
        var search = conninfo.startIndex
        while let range = conninfo.range(of: "password", range: search..<conninfo.endIndex) {
            search = range.upperBound
            var index = range.upperBound
            while index < conninfo.endIndex, conninfo[index] == " " { index = conninfo.index(after: index) }
            guard index < conninfo.endIndex, conninfo[index] == "=" else { continue }
            index = conninfo.index(after: index)
            while index < conninfo.endIndex, conninfo[index] == " " { index = conninfo.index(after: index) }
            if index < conninfo.endIndex, conninfo[index] == "'" {
                var value = ""
                var cursor = conninfo.index(after: index)
                while cursor < conninfo.endIndex, conninfo[cursor] != "'" {
                    if conninfo[cursor] == "\\", conninfo.index(after: cursor) < conninfo.endIndex {
                        cursor = conninfo.index(after: cursor)
                    }
                    value.append(conninfo[cursor])
                    cursor = conninfo.index(after: cursor)
                }
                add(Substring(value))
                add(conninfo[conninfo.index(after: index)..<cursor])
            } else {
                let token = conninfo[index...].prefix { !$0.isWhitespace }
                add(token)
                add(token.prefix { $0 != "&" && $0 != "#" })
            }
        }
        // What libpq parses (exact, when the string is valid).
        if let options = PQconninfoParse(conninfo, nil) {
            defer { PQconninfoFree(options) }
            var option = options
            while let keyword = option.pointee.keyword {
                if String(cString: keyword) == "password", let value = option.pointee.val {
                    add(Substring(String(cString: value)))
                }
                option += 1
            }
        }
        return found
    }

    /// Replaces every candidate (longest first) with `********`.
    static func redact(_ message: String, secrets: [String]) -> String {
        var text = message
        for secret in Set(secrets).sorted(by: { $0.count > $1.count }) where !secret.isEmpty {
            text = text.replacingOccurrences(of: secret, with: "********")
        }
        return text
    }
}
