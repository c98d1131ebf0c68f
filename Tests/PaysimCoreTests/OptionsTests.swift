import Testing
@testable import PaysimCore

@Suite struct OptionsTests {
    @Test func flagsOverrideEnvironment() throws {
        let options = try PaysimOptions.parse(
            [
                "--listen", "0.0.0.0:0", "--seed-file", "seed.json", "--paypal-root-out=root.pem", "--port-file", "port",
                "--pxp-client-id", "cid", "--pxp-token-value", "tv", "--paypal-secret", "flag-secret",
                "--latency-ms", "10", "--error-rate", "0.1", "--rate-429", "0.2", "--drop-rate", "0.05", "--seed", "42",
                "--retry-after", "3", "--paypal-token-lifetime", "60", "--threads", "2"
            ],
            environment: [
                "PXP_TOKEN_ID": "env-token", "PAYPAL_CLIENT_SECRET": "env-secret", "PAYPAL_WEBHOOK_ID": "WH1",
                "PXP_WEBHOOK_KEY": "env-key"
            ])
        #expect(options.host == "0.0.0.0")
        #expect(options.port == 0)
        #expect(options.seedFile == "seed.json")
        #expect(options.paypalRootOut == "root.pem")
        #expect(options.portFile == "port")
        #expect(options.threads == 2)
        #expect(options.config.pxpClientID == "cid")
        #expect(options.config.pxpTokenID == "env-token")
        #expect(options.config.pxpTokenValue == "tv")
        #expect(options.config.paypalSecret == "flag-secret")
        #expect(options.config.paypalWebhookID == "WH1")
        #expect(options.config.pxpWebhookKey == "env-key")
        #expect(options.config.paypalTokenLifetime == 60)
        #expect(
            options.config.faults
                == FaultConfig(
                    latencyMs: 10, errorRate: 0.1, rate429: 0.2, retryAfter: 3,
                    dropRate: 0.05, seed: 42))
    }

    @Test func defaults() throws {
        let options = try PaysimOptions.parse([])
        #expect(options.host == "127.0.0.1" && options.port == 8089)
        #expect(options.config.faults == FaultConfig())
    }

    @Test(arguments: [["-h"], ["--help"], ["--listen", "127.0.0.1:0", "--help"]])
    func help(arguments: [String]) {
        #expect(throws: PaysimOptions.ParseError.help) { try PaysimOptions.parse(arguments) }
    }

    @Test(arguments: [
        ["--bogus"], ["--listen"], ["--listen", "nohost"], ["--listen", "h:99999"], ["--error-rate", "2"],
        ["--error-rate", "x"], ["--latency-ms", "-1"], ["--seed", "-3"], ["--port-file", ""],
        ["--error-rate", "0.6", "--rate-429", "0.6"], ["--threads", "0"], ["positional"]
    ])
    func usageErrors(arguments: [String]) {
        #expect { try PaysimOptions.parse(arguments) } throws: { error in
            guard case .usage = error as? PaysimOptions.ParseError else { return false }
            return true
        }
    }

    @Test func helpDocumentsEveryFlag() {
        for flag in [
            "--listen", "--seed-file", "--paypal-root-out", "--port-file", "--pxp-client-id", "--pxp-token-id",
            "--pxp-token-value", "--paypal-client-id", "--paypal-secret", "--pxp-webhook-key", "--paypal-webhook-id",
            "--latency-ms", "--error-rate", "--rate-429", "--seed", "--drop-rate", "--retry-after", "--public-url"
        ] {
            #expect(PaysimOptions.help.contains(flag), "\(flag)")
        }
    }
}
