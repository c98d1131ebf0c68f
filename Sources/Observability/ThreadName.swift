import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's name of the calling thread, as `top -H`, perf and `/proc/<pid>/task/*/comm` show it.
public enum ThreadName {
    /// Names the calling thread (at most 15 bytes are kept). Call it from the thread itself: Linux names only the
    /// running thread. Foundation's `Thread.name`, set the same way, was sometimes never applied under load (a test
    /// reading /proc/thread-self/comm saw the name of the thread that created it), so this writes the kernel's name
    /// directly (glibc's pthread_setname_np is not visible to Swift).
    public static func set(_ name: String) {
        #if os(Linux)
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        if fd >= 0 {
            let bytes = Array(name.utf8.prefix(15))
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        #endif
        Thread.current.name = name
    }
}
