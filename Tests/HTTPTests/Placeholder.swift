import Testing

@Test func placeholder_HTTPTests() { #expect(Bool(true)) }
