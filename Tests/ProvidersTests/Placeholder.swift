import Testing

@Test func placeholder_ProvidersTests() { #expect(Bool(true)) }
