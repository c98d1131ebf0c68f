import Console
import Crypto
import Testing

@Suite struct PasswordHashTests {
    /// RFC 7914 §12's vectors, through libcrypto.
    @Test func scryptMatchesRFC7914() {
        let empty = PasswordHash.derive([], salt: [], parameters: .init(ln: 4, r: 1, p: 1), length: 64)
        #expect(
            empty.map(Hex.encode)
                == "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"
        )
        let nacl = PasswordHash.derive(Array("password".utf8), salt: Array("NaCl".utf8), parameters: .init(ln: 10, r: 8, p: 16), length: 64)
        #expect(
            nacl.map(Hex.encode)
                == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        )
    }

    @Test func aHashVerifiesItsPasswordAndNoOther() throws {
        let cheap = PasswordHash.Parameters(ln: 10, r: 8, p: 1)
        let hash = try PasswordHash.make(Array("correct horse".utf8), parameters: cheap)
        #expect(hash.hasPrefix("scrypt$ln=10,r=8,p=1$"))
        #expect(PasswordHash.verify(Array("correct horse".utf8), against: hash))
        #expect(!PasswordHash.verify(Array("correct horsf".utf8), against: hash))
        #expect(!PasswordHash.verify([], against: hash))
        #expect(try PasswordHash.make(Array("correct horse".utf8), parameters: cheap) != hash, "a fresh salt each time")
    }

    /// A stored hash that cannot be read, or whose parameters would cost more than a sign-in may, verifies nothing.
    @Test(arguments: [
        "", "scrypt", "scrypt$ln=10,r=8,p=1$c2FsdHNhbHQ=", "bcrypt$ln=10,r=8,p=1$c2FsdHNhbHQ=$AAAAAAAAAAAAAAAAAAAAAA==",
        "scrypt$ln=30,r=8,p=1$c2FsdHNhbHQ=$AAAAAAAAAAAAAAAAAAAAAA==", "scrypt$ln=10,r=64,p=1$c2FsdHNhbHQ=$AAAAAAAAAAAAAAAAAAAAAA==",
        "scrypt$ln=10,r=8$c2FsdHNhbHQ=$AAAAAAAAAAAAAAAAAAAAAA==", "scrypt$ln=10,r=8,p=1,p=2$c2FsdHNhbHQ=$AAAAAAAAAAAAAAAAAAAAAA==",
        "scrypt$ln=10,r=8,p=1$!!!$AAAAAAAAAAAAAAAAAAAAAA==", "scrypt$ln=10,r=8,p=1$c2FsdHNhbHQ=$AAAA"
    ])
    func anUnreadableOrCostlyHashVerifiesNothing(_ stored: String) {
        #expect(!PasswordHash.verify(Array("x".utf8), against: stored))
    }
}

@Suite struct ConsoleUsersTests {
    static let hash = "scrypt$ln=10,r=8,p=1$c2FsdHNhbHRzYWx0$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

    @Test func readsNamesRolesAndHashesSkippingCommentsAndBlankLines() throws {
        let users = try ConsoleUsers.parse("# people\n\nana operator \(Self.hash)\r\n  bo.b@x viewer\t\(Self.hash)\n")
        #expect(users.users.map(\.name) == ["ana", "bo.b@x"])
        #expect(users.user(named: "ana")?.role == .operator && users.user(named: "bo.b@x")?.role == .viewer)
        #expect(users.user(named: "carl") == nil)
        #expect(try ConsoleUsers.parse(users.text) == users, "what it writes it reads back")
    }

    /// Each bad line is an error naming the line and what to do; nothing is half read.
    @Test(arguments: [
        ("ana operator", 1, "expected `name role hash`"),
        ("ok viewer \(hash)\nAna viewer \(hash)", 2, "the name must be"),
        ("ana admin \(hash)", 1, "the role must be viewer or operator"),
        ("ana viewer hunter2", 1, "scrypt hash"),
        ("ana viewer \(hash)\nana operator \(hash)", 2, "named twice"),
        ("a<script> viewer \(hash)", 1, "the name must be")
    ])
    func aBadLineIsNamed(_ text: String, _ line: Int, _ reason: String) {
        #expect {
            try ConsoleUsers.parse(text)
        } throws: { error in
            guard let e = error as? ConsoleUsers.FileError else { return false }
            return e.line == line && e.reason.contains(reason)
        }
    }

    @Test func putReplacesAUserWhereItStands() throws {
        var users = try ConsoleUsers.parse("ana operator \(Self.hash)\nbob viewer \(Self.hash)\n")
        users.put(ConsoleUser(name: "ana", role: .viewer, passwordHash: Self.hash))
        users.put(ConsoleUser(name: "cy", role: .operator, passwordHash: Self.hash))
        #expect(users.users.map { "\($0.name):\($0.role.rawValue)" } == ["ana:viewer", "bob:viewer", "cy:operator"])
    }
}

@Suite struct SignInLimiterTests {
    /// Five attempts of a name from an address: the sixth waits until the oldest leaves the window; the same name from
    /// elsewhere is not locked out by them.
    @Test func aNameWaitsAfterFiveAttemptsFromAnAddressUntilTheOldestLeavesTheWindow() {
        var limiter = SignInLimiter()
        for second in 0..<5 { #expect(limiter.attempt(name: "ana", address: "a1", now: .seconds(second)) == .allowed) }
        #expect(limiter.attempt(name: "ana", address: "a1", now: .seconds(10)) == .wait(.seconds(890)))
        #expect(limiter.attempt(name: "ana", address: "a2", now: .seconds(10)) == .allowed, "someone elsewhere cannot lock ana out")
        #expect(limiter.attempt(name: "ana", address: "a1", now: .seconds(900)) == .allowed, "the first attempt left the window")
    }

    @Test func anAddressWaitsAfterTwentyAttemptsAcrossNames() {
        var limiter = SignInLimiter()
        for i in 0..<20 { #expect(limiter.attempt(name: "user\(i)", address: "203.0.113.9", now: .seconds(i)) == .allowed) }
        #expect(limiter.attempt(name: "fresh", address: "203.0.113.9", now: .seconds(30)) == .wait(.seconds(870)))
        #expect(limiter.attempt(name: "fresh", address: "198.51.100.1", now: .seconds(30)) == .allowed)
    }

    /// Attempts sent at once all count before any is judged: the sixth of six concurrent ones is refused.
    @Test func concurrentAttemptsCountBeforeTheyAreJudged() {
        var limiter = SignInLimiter()
        let decisions = (0..<6).map { _ in limiter.attempt(name: "ana", address: "a1", now: .seconds(1)) }
        #expect(decisions.prefix(5).allSatisfy { $0 == .allowed } && decisions[5] == .wait(.seconds(900)))
    }

    /// A success takes its own attempt back and forgets the name's failures from that address, not the address's.
    @Test func aSuccessForgetsTheNameAndItsOwnAttemptOnly() {
        var limiter = SignInLimiter()
        limiter.perAddress = 6
        for second in 0..<4 { _ = limiter.attempt(name: "ana", address: "a1", now: .seconds(second)) }
        #expect(limiter.attempt(name: "ana", address: "a1", now: .seconds(5)) == .allowed)
        limiter.succeeded(name: "ana", address: "a1", at: .seconds(5))
        #expect(limiter.attempt(name: "ana", address: "a1", now: .seconds(6)) == .allowed, "ana's failures are forgotten")
        #expect(limiter.attempt(name: "bob", address: "a1", now: .seconds(7)) == .allowed, "the address's 6th attempt")
        #expect(limiter.attempt(name: "carl", address: "a1", now: .seconds(8)) == .wait(.seconds(892)), "the address kept its failures")
    }

    /// A flood of names from many addresses keeps at most `maxKeys` of them, the expired first.
    @Test func memoryIsBoundedByForgettingTheExpiredThenTheLeastRecent() {
        var limiter = SignInLimiter()
        limiter.maxKeys = 10
        limiter.perName = 1
        for i in 0..<5 { _ = limiter.attempt(name: "n\(i)", address: "a\(i)", now: .seconds(i)) }
        #expect(limiter.attempt(name: "n0", address: "a0", now: .seconds(10)) == .wait(.seconds(890)))
        for i in 5..<8 { _ = limiter.attempt(name: "n\(i)", address: "a\(i)", now: .seconds(i)) }
        #expect(limiter.attempt(name: "n0", address: "a0", now: .seconds(10)) == .allowed, "the oldest were forgotten")
        #expect(limiter.attempt(name: "n7", address: "a7", now: .seconds(10)) != .allowed)
        for i in 20..<25 { _ = limiter.attempt(name: "m\(i)", address: "b\(i)", now: .seconds(2000 + i)) }
        #expect(limiter.attempt(name: "n7", address: "a7", now: .seconds(2100)) == .allowed, "expired keys go first")
    }
}
