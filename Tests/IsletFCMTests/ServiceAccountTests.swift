import Foundation
import Testing
import IsletCore
import IsletCrypto
import IsletFCM

/// Issue 46: a Google service account's key file, the assertion it signs for an FCM access token (checked by PyJWT, a
/// verifier that shares no code with Islet), and the token endpoint's answer.
@Suite("FCM service accounts and access tokens")
struct ServiceAccountTests {
    static let pem = RSASigningKey.generatePEM()

    static func keyFile(_ fields: [(String, JSONValue)]) -> [UInt8] {
        JSONValue.object(JSONObject(fields.map { (key: $0.0, value: $0.1) })).jsonBytes
    }

    static var fields: [(String, JSONValue)] {
        [("type", "service_account"), ("project_id", "islet-demo"), ("private_key_id", "0123abcd"), ("private_key", .string(pem)),
         ("client_email", "islet@islet-demo.iam.gserviceaccount.com"), ("client_id", "1234"),
         ("token_uri", "https://127.0.0.1:9443/token")]
    }

    @Test func aKeyFileIsReadAndItsTokenURIHonoured() throws {
        let account = try ServiceAccount(json: Self.keyFile(Self.fields))
        #expect(account.projectID == "islet-demo" && account.privateKeyID == "0123abcd")
        #expect(account.clientEmail == "islet@islet-demo.iam.gserviceaccount.com" && account.tokenURI == "https://127.0.0.1:9443/token")
        let google = try ServiceAccount(json: Self.keyFile(Self.fields.filter { $0.0 != "token_uri" }))
        #expect(google.tokenURI == "https://oauth2.googleapis.com/token", "Google's when the key names none")
    }

    @Test(arguments: [
        ("type", JSONValue.string("authorized_user"), "service account key: type must be \"service_account\", got \"authorized_user\""),
        ("project_id", JSONValue.null, "service account key: project_id is required and must be a non-empty string"),
        ("client_email", JSONValue.int(7), "service account key: client_email is required and must be a non-empty string"),
        ("private_key_id", JSONValue.string(""), "service account key: private_key_id is required and must be a non-empty string"),
        ("token_uri", JSONValue.string("http://127.0.0.1/token"), "service account key: token_uri must be an https URL, got \"http://127.0.0.1/token\""),
    ])
    func aWrongKeyFileNamesTheFieldAndTheRule(field: String, value: JSONValue, message: String) {
        let fields = Self.fields.map { $0.0 == field ? (field, value) : $0 }
        #expect(throws: ServiceAccountError(description: message)) { try ServiceAccount(json: Self.keyFile(fields)) }
    }

    @Test func aKeyThatIsNotRSAOrTooShortIsRefused() throws {
        #expect(throws: ServiceAccountError(description: "service account key: must be a JSON object (the key file from Firebase's console)")) {
            try ServiceAccount(json: Array("not json".utf8))
        }
        for pem in [Crypto.generateAPNsSigningKey(), RSASigningKey.generatePEM(bits: 1024), "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"] {
            let account = try ServiceAccount(json: Self.keyFile(Self.fields.map { $0.0 == "private_key" ? ("private_key", .string(pem)) : $0 }))
            #expect(throws: ServiceAccountError(description: "service account key: private_key must be an RSA private key (PEM) of 2048 bits or more")) {
                try ServiceAccountSigner(account)
            }
        }
    }

    /// The assertion as Google's token endpoint checks it, checked by PyJWT with the key's public half.
    @Test func theAssertionIsAnRS256JWTThatPyJWTAccepts() throws {
        let signer = try ServiceAccountSigner(ServiceAccount(json: Self.keyFile(Self.fields)))
        let issued = Date()
        let assertion = try #require(signer.assertion(issuedAt: issued))
        let parts = assertion.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let headerBytes = try #require(Base64URL.decode(parts[0]))
        #expect(try JSONParser.parse(headerBytes).objectValue == ["alg": "RS256", "typ": "JWT", "kid": "0123abcd"])
        let claimBytes = try #require(Base64URL.decode(parts[1]))
        let claims = try JSONParser.parse(claimBytes).objectValue
        let iat = Int64(issued.timeIntervalSince1970)
        #expect(claims == ["iss": "islet@islet-demo.iam.gserviceaccount.com", "scope": "https://www.googleapis.com/auth/firebase.messaging",
                           "aud": "https://127.0.0.1:9443/token", "iat": .int(iat), "exp": .int(iat + 3600)])
        #expect(Base64URL.decode(parts[2])?.count == 256, "a 2,048-bit key's signature")

        let verdict = try Self.pyjwt(assertion: assertion, pem: Self.pem, audience: "https://127.0.0.1:9443/token")
        #expect(verdict == "ok", "PyJWT: \(verdict)")
        var tampered = parts
        tampered[1] = Base64URL.encode(Array(#"{"iss":"someone-else"}"#.utf8))
        #expect(try Self.pyjwt(assertion: tampered.joined(separator: "."), pem: Self.pem, audience: "https://127.0.0.1:9443/token") != "ok",
                "a changed claim fails the signature")

        let body = String(decoding: try #require(signer.tokenRequest(issuedAt: issued)), as: UTF8.self)
        #expect(body == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion)
    }

    @Test func theTokenEndpointsAnswerIsReadAndTheTokenRenewedBeforeItExpires() throws {
        let received = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try AccessToken.of(body: Array(#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#.utf8), receivedAt: received)
        #expect(token == AccessToken(token: "ya29.abc", expiresAt: received.addingTimeInterval(3599)))
        #expect(token.isFresh(at: received.addingTimeInterval(3000)))
        #expect(!token.isFresh(at: received.addingTimeInterval(3300)), "renewed five minutes before it expires")
        #expect(throws: ServiceAccountError(description: "token endpoint: access_token is missing from the answer")) {
            try AccessToken.of(body: Array(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8), receivedAt: received)
        }
        #expect(throws: ServiceAccountError(description: "token endpoint: token_type must be Bearer, got \"MAC\"")) {
            try AccessToken.of(body: Array(#"{"access_token":"x","expires_in":10,"token_type":"MAC"}"#.utf8), receivedAt: received)
        }
        #expect(throws: ServiceAccountError(description: "token endpoint: expires_in must be a positive number of seconds")) {
            try AccessToken.of(body: Array(#"{"access_token":"x","expires_in":0,"token_type":"Bearer"}"#.utf8), receivedAt: received)
        }
    }

    /// Runs PyJWT (in the tests' .venv) on `assertion` with the public half of `pem`: "ok", or why it refused.
    static func pyjwt(assertion: String, pem: String, audience: String) throws -> String {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let python = repository.appendingPathComponent(".venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("no \(python): run scripts/install-deps --test (make test does) to install PyJWT")
            return "no python"
        }
        let script = """
            import json, sys, jwt
            from cryptography.hazmat.primitives import serialization
            given = json.load(sys.stdin)
            key = serialization.load_pem_private_key(given["pem"].encode(), None).public_key()
            try:
                jwt.decode(given["assertion"], key, algorithms=["RS256"], audience=given["audience"])
                print("ok")
            except Exception as error:
                print(type(error).__name__, error)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", script]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let request: JSONValue = ["pem": .string(pem), "assertion": .string(assertion), "audience": .string(audience)]
        input.fileHandleForWriting.write(Data(request.jsonBytes))
        try input.fileHandleForWriting.close()
        let answer = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
