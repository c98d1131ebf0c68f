extension Duration {
    /// Seconds with their fraction, for the SQL, the C calls and the log fields that take a number.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
