import COpenSSL

/// `count` bytes from libcrypto's CSPRNG (salts, session and CSRF tokens). Stops the process if libcrypto cannot
/// give them: nothing that needs a secret may go on without one.
public func randomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    guard count == 0 || RAND_bytes(&bytes, Int32(count)) == 1 else { preconditionFailure("libcrypto's RAND_bytes failed") }
    return bytes
}
