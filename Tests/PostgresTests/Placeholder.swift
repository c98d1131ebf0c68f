import Testing

@Test func placeholder_PostgresTests() { #expect(Bool(true)) }
