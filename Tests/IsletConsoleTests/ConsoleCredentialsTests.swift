import Foundation
import Testing
import IsletConsole

/// The console's sign-in rules as pure functions (issue 17): the cookie, the CSRF check, the password's stored form.
@Suite("Console credentials")
struct ConsoleCredentialsTests {
    @Test func theSessionCookieIsHttpOnlySameSiteStrictAndScopedToTheConsole() {
        let cookie = ConsoleCredentials.sessionCookie("abc", secure: false)
        #expect(cookie == "islet_console=abc; Path=/console; Max-Age=43200; HttpOnly; SameSite=Strict")
        #expect(ConsoleCredentials.sessionCookie("abc", secure: true).hasSuffix("; Secure"))
        #expect(ConsoleCredentials.clearedCookie(secure: false).contains("Max-Age=0"))
    }

    @Test func theSessionIDIsReadFromAmongOtherCookies() {
        #expect(ConsoleCredentials.sessionID(cookieHeader: "a=1; islet_console=xyz; b=2") == "xyz")
        #expect(ConsoleCredentials.sessionID(cookieHeader: "islet_console_other=1") == nil)
        #expect(ConsoleCredentials.sessionID(cookieHeader: "islet_console=") == nil)
        #expect(ConsoleCredentials.sessionID(cookieHeader: nil) == nil)
    }

    @Test func onlyHTTPSForwardedByTheProxyMakesTheCookieSecure() {
        #expect(ConsoleCredentials.isHTTPS(forwardedProto: "https"))
        #expect(ConsoleCredentials.isHTTPS(forwardedProto: "HTTPS, http"))
        #expect(!ConsoleCredentials.isHTTPS(forwardedProto: "http"))
        #expect(!ConsoleCredentials.isHTTPS(forwardedProto: nil))
    }

    @Test func theCSRFTokenMustBePresentedExactly() {
        #expect(ConsoleCredentials.csrfAccepted(expected: "token", presented: "token"))
        #expect(!ConsoleCredentials.csrfAccepted(expected: "token", presented: "tokeN"))
        #expect(!ConsoleCredentials.csrfAccepted(expected: "token", presented: nil))
        #expect(!ConsoleCredentials.csrfAccepted(expected: "", presented: ""), "an empty expected token accepts nothing")
    }

    @Test func secretsAreLongURLSafeAndFresh() {
        let one = ConsoleCredentials.newSecret(), two = ConsoleCredentials.newSecret()
        #expect(one.count == 43 && one != two)
        #expect(one.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(ConsoleCredentials.idHash(one).count == 32)
    }

    @Test func aPasswordRecordMatchesItsPasswordOnly() {
        let record = ConsoleCredentials.passwordRecord("correct horse battery", iterations: 1000)
        #expect(record.hasPrefix("pbkdf2-sha256$1000$"))
        #expect(ConsoleCredentials.passwordMatches("correct horse battery", record: record))
        #expect(!ConsoleCredentials.passwordMatches("correct horse batterY", record: record))
        #expect(!ConsoleCredentials.passwordMatches("correct horse battery", record: "md5$1$00$11"))
        #expect(!ConsoleCredentials.passwordMatches("x", record: "pbkdf2-sha256$0$00$11"), "a record with zero rounds is refused")
        #expect(ConsoleCredentials.passwordRecord("same", iterations: 1000) != ConsoleCredentials.passwordRecord("same", iterations: 1000), "salted")
    }

    @Test func aKnownPBKDF2VectorMatches() {
        // RFC 7914 §11's PBKDF2-HMAC-SHA256 vector: P="passwd", S="salt", c=1, first 32 bytes.
        let record = "pbkdf2-sha256$1$73616c74$55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        #expect(ConsoleCredentials.passwordMatches("passwd", record: record))
    }

    @Test func shortPasswordsAreRefused() {
        #expect(ConsoleCredentials.passwordProblem("short") == "must be at least 12 characters")
        #expect(ConsoleCredentials.passwordProblem("twelve chars") == nil)
    }

    /// Issue 44: a password sign-in over the checks run at once is told what is busy and when to retry.
    @Test func aBusyPasswordCheckSaysWhatIsBusyAndWhenToRetry() {
        #expect(ConsoleCredentials.passwordChecksBusy(limit: 1)
                == "console password sign-ins: 1 is being checked, the most this server checks at once (each costs a fifth of a second of a core); retry after 1 s")
        #expect(ConsoleCredentials.passwordChecksAtOnce >= 1)
    }
}
