import Console
import Crypto
import Foundation
import PayreconTesting
import Testing

/// `payrecon console add-user`: the password from standard input (never an argument), kept as a scrypt hash in a
/// file only its owner reads; a bad file, name, role or password is refused with what to do, and nothing written.
@Suite struct ConsoleUsersCommandTests {
    static func addUser(_ file: String, _ name: String, role: String?, password: String?) async throws -> PayreconProcess.Result {
        try await PayreconProcess.run(
            ["console", "add-user", name] + (role.map { ["--role", $0] } ?? []),
            environment: ["PAYRECON_CONSOLE_USERS_FILE": file], stdin: password.map { Array(($0 + "\n").utf8) })
    }

    static func temporaryFile() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("console-users-" + UUID().uuidString).path
    }

    @Test func addsAUserThenChangesItInPlace() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        let added = try await Self.addUser(file, "ana", role: "operator", password: "correct horse battery")
        #expect(added.status == 0 && added.stdout.contains("added ana (operator)"), "\(added.stderr)")
        let bob = try await Self.addUser(file, "bob", role: "viewer", password: "staple staple staple")
        #expect(bob.status == 0, "\(bob.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "only its owner reads it")
        var users = try ConsoleUsers.parse(String(contentsOfFile: file, encoding: .utf8))
        #expect(users.users.map(\.name) == ["ana", "bob"])
        #expect(PasswordHash.verify(Array("correct horse battery".utf8), against: try #require(users.user(named: "ana")?.passwordHash)))
        #expect(!(try String(contentsOfFile: file, encoding: .utf8)).contains("correct horse"), "no password in the file")

        let changed = try await Self.addUser(file, "ana", role: "viewer", password: "another long password")
        #expect(changed.status == 0 && changed.stdout.contains("changed ana (viewer)"), "\(changed.stderr)")
        users = try ConsoleUsers.parse(String(contentsOfFile: file, encoding: .utf8))
        #expect(users.users.map { "\($0.name):\($0.role.rawValue)" } == ["ana:viewer", "bob:viewer"])
        #expect(PasswordHash.verify(Array("another long password".utf8), against: try #require(users.user(named: "ana")?.passwordHash)))
    }

    /// `--proxy-only` reads no password and keeps none: the line says `proxy`, and a password the person had is gone.
    @Test func aProxyOnlyUserHasNoPassword() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        #expect(try await Self.addUser(file, "ana", role: "operator", password: "correct horse battery").status == 0)
        let proxied = try await PayreconProcess.run(
            ["console", "add-user", "ana", "--role", "viewer", "--proxy-only"], environment: ["PAYRECON_CONSOLE_USERS_FILE": file],
            stdin: nil)
        #expect(proxied.status == 0 && proxied.stdout.contains("changed ana (viewer, through the proxy only)"), "\(proxied.stderr)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.contains("\nana viewer proxy\n") && !text.contains("scrypt$"), "\(text)")
        let users = try ConsoleUsers.parse(text)
        #expect(users.user(named: "ana") == ConsoleUser(name: "ana", role: .viewer, passwordHash: nil))
        #expect(throws: ConsoleUsers.FileError.self) { try ConsoleUsers.parse("bob viewer proxied\n") }
        // Without the proxy's user header no one in this file could sign in: the console does not start.
        let refused = try await PayreconProcess.run(
            ["console", "--listen", "127.0.0.1:0"],
            environment: ["PAYRECON_CONSOLE_USERS_FILE": file, "DATABASE_URL": TestDatabase.baseURL])
        #expect(refused.status == 2 && refused.stderr.contains("everyone in it signs in only through the proxy"), "\(refused.stderr)")
    }

    /// Each bad input: exit 2, a message saying what to do, and the file as it was.
    @Test(
        arguments: [
            (["Ana"], "operator", "correct horse battery", "NAME must be"),
            (["ana"], nil, "correct horse battery", "--role is required"),
            (["ana"], "admin", "correct horse battery", "--role must be one of"),
            (["ana"], "viewer", "short", "at least 12 characters"),
            (["ana"], "viewer", nil, "no password on standard input")
        ] as [([String], String?, String?, String)])
    func aBadInputIsRefusedAndNothingWritten(_ name: [String], _ role: String?, _ password: String?, _ message: String) async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        let result = try await Self.addUser(file, name[0], role: role, password: password)
        #expect(result.status == 2 && result.stderr.contains(message), "\(result.status) \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// A user header believed from anywhere would let any browser name itself: refused unless the proxies are named,
    /// and a header name that is none is refused too (exit 2, before anything listens).
    @Test(
        arguments: [
            ("X-Forwarded-User", nil, "believed only from the proxies of PAYRECON_TRUSTED_PROXIES"),
            ("X Forwarded: User", nil, "must be a header name"),
            ("X-Forwarded-User", "127.0.0.1/32", "needs PAYRECON_CONSOLE_PROXY_SECRET"),
            ("", "127.0.0.1/32", "needs PAYRECON_CONSOLE_PROXY_SECRET")
        ] as [(String, String?, String)])
    func aUserHeaderWithoutTrustedProxiesIsRefused(_ header: String, _ proxies: String?, _ message: String) async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        #expect(try await Self.addUser(file, "ana", role: "operator", password: "correct horse battery").status == 0)
        var environment = [
            "PAYRECON_CONSOLE_USERS_FILE": file, "PAYRECON_CONSOLE_USER_HEADER": header, "DATABASE_URL": TestDatabase.baseURL
        ]
        if let proxies { environment["PAYRECON_TRUSTED_PROXIES"] = proxies }
        let result = try await PayreconProcess.run(["console", "--listen", "127.0.0.1:0"], environment: environment)
        #expect(result.status == 2 && result.stderr.contains(message), "\(result.status) \(result.stderr)")
    }

    /// A users file others may write lets them make themselves operators: the console refuses it (exit 2, before
    /// anything listens), saying how to fix it.
    @Test func aUsersFileOthersMayWriteIsRefused() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        #expect(try await Self.addUser(file, "ana", role: "operator", password: "correct horse battery").status == 0)
        #expect(chmod(file, 0o664) == 0)
        let result = try await PayreconProcess.run(
            ["console", "--listen", "127.0.0.1:0"], environment: ["PAYRECON_CONSOLE_USERS_FILE": file, "DATABASE_URL": TestDatabase.baseURL]
        )
        #expect(result.status == 2 && result.stderr.contains("can be written by others (mode 664)") && result.stderr.contains("chmod 600"))
    }

    /// Interrupted while it reads a password at a terminal (echo off), `add-user` puts echo back before it exits: the
    /// person's next keystrokes are not typed blind. (Standard input is a pseudo-terminal; the interrupt is a SIGINT.)
    @Test func anInterruptedPasswordPromptPutsEchoBack() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        var master: Int32 = -1, slave: Int32 = -1
        #expect(openpty(&master, &slave, nil, nil, nil) == 0)
        defer { close(master); close(slave) }
        let process = Process()
        process.executableURL = PayreconProcess.binary
        process.arguments = ["console", "add-user", "zed", "--role", "viewer"]
        process.environment = ["PAYRECON_CONSOLE_USERS_FILE": file, "PATH": "/usr/bin:/bin"]
        let terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        (process.standardInput, process.standardOutput, process.standardError) = (terminal, terminal, terminal)
        try process.run()
        // Until the prompt has turned echo off.
        var settings = termios()
        for _ in 0..<200 {
            tcgetattr(slave, &settings)
            if settings.c_lflag & tcflag_t(ECHO) == 0 { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(settings.c_lflag & tcflag_t(ECHO) == 0, "the prompt reads without echo")
        kill(process.processIdentifier, SIGINT)
        await offload { process.waitUntilExit() }
        tcgetattr(slave, &settings)
        #expect(settings.c_lflag & tcflag_t(ECHO) != 0, "echo is back")
        // It dies of the signal, as unhandled, so a calling shell stops too.
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGINT)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    /// Rewriting the file keeps its owner: `sudo payrecon console add-user` must not leave a file the console's own
    /// user cannot read. (Needs root to give the file another owner first.)
    @Test(.enabled(if: getuid() == 0, "only root can give the file another owner")) func aRewriteKeepsTheFilesOwner() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        #expect(try await Self.addUser(file, "ana", role: "operator", password: "correct horse battery").status == 0)
        #expect(chown(file, 1, 1) == 0)
        let again = try await Self.addUser(file, "bob", role: "viewer", password: "staple staple staple")
        #expect(again.status == 0, "\(again.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect(
            (attributes[.ownerAccountID] as? NSNumber)?.intValue == 1 && (attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try ConsoleUsers.parse(String(contentsOfFile: file, encoding: .utf8)).users.map(\.name) == ["ana", "bob"])
    }

    @Test func aBrokenUsersFileIsNamedAndLeftAlone() async throws {
        let file = Self.temporaryFile()
        defer { try? FileManager.default.removeItem(atPath: file); try? FileManager.default.removeItem(atPath: file + ".lock") }
        try "ana admin scrypt$x\n".write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await Self.addUser(file, "bob", role: "viewer", password: "correct horse battery")
        #expect(result.status == 2 && result.stderr.contains("line 1: the role must be viewer or operator"), "\(result.stderr)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "ana admin scrypt$x\n")
        let unset = try await PayreconProcess.run(["console", "add-user", "bob", "--role", "viewer"], environment: [:], stdin: [])
        #expect(unset.status == 2 && unset.stderr.contains("set PAYRECON_CONSOLE_USERS_FILE"), "\(unset.stderr)")
    }
}
