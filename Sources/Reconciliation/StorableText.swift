extension String {
    /// This text with each NUL as U+FFFD: PostgreSQL's text and jsonb hold no NUL, so what quotes a provider or a
    /// sender (an outcome, an error, a header) is stored this way rather than failing the statement that stores it.
    public var withoutNUL: String {
        guard utf8.contains(0) else { return self }
        var out = String.UnicodeScalarView()
        for scalar in unicodeScalars { out.append(scalar.value == 0 ? "\u{FFFD}" : scalar) }
        return String(out)
    }
}
