import Foundation

/// A response the application gives back through an `HTTPResponder`.
///
/// `Content-Length` and `Date` are set by the server; a `Content-Length` or `Transfer-Encoding`
/// given here is ignored.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON body encoded from `value` (keys sorted). An encoding failure yields a 500 error body.
    public static func json(status: Int = 200, _ value: some Encodable, headers: [(String, String)] = []) -> HTTPResponse {
        guard let data = try? jsonEncoder().encode(value) else {
            return .error(status: 500, code: "internal_error", message: "response could not be encoded")
        }
        return .json(status: status, bytes: Array(data), headers: headers)
    }

    /// A JSON body given as already-encoded bytes.
    public static func json(status: Int = 200, bytes: [UInt8], headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: bytes)
    }

    /// A plain-text body (UTF-8).
    public static func text(status: Int = 200, _ text: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// The project's error body: `{"error":{"code":"...","message":"..."}}`.
    public static func error(status: Int, code: String, message: String, headers: [(String, String)] = []) -> HTTPResponse {
        let bytes =
            (try? jsonEncoder().encode(ErrorBody(error: .init(code: code, message: message)))).map(Array.init)
            ?? Array(#"{"error":{"code":"internal_error","message":""}}"#.utf8)
        return .json(status: status, bytes: bytes, headers: headers)
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let key = name.lowercased()
        return headers.first { $0.0.lowercased() == key }?.1
    }

    private static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    private struct ErrorBody: Encodable {
        struct Detail: Encodable { var code: String; var message: String }
        var error: Detail
    }
}
