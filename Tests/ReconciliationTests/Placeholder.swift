import Testing

@Test func placeholder_ReconciliationTests() { #expect(Bool(true)) }
