import Foundation
import Observability
import Testing

/// A log line quotes a stranger's bytes (an unauthenticated transmission id): DEL, C1 controls, the line separators
/// and bidi overrides are escaped as well as what JSON requires, so whoever tails the log in a terminal is not driven.
@Suite struct LogEscapingTests {
    @Test func terminalControlsAreEscapedInLogStrings() {
        let text = "a\u{7F}b\u{9B}2Jc\u{9D}0;x\u{07}d\u{2028}e\u{202E}f"
        let json = Log.jsonString(text)
        #expect(
            !json.unicodeScalars.contains {
                $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x202E
            })
        #expect(json == #""a\u007fb\u009b2Jc\u009d0;x\u0007d\u2028e\u202ef""#)
        // It is still the same string to a JSON reader.
        let back = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed) as? String
        #expect(back == text)
    }
}
