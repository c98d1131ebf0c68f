import Foundation
import PayreconCLI

#if canImport(Glibc)
import CMalloc

// glibc gives threads that allocate at once arenas of their own, up to eight per core, and memory freed in one is
// not reused by another: with the pool's, libmicrohttpd's and curl's threads, the sweep's peak RSS grew with the run
// (61 MiB at 100k orders, 68 at 300k, 75 at 1M). Two arenas: 60 MiB at 300k, the same rate and CPU per check
// (scripts/bench-reconcile). MALLOC_ARENA_MAX in the environment, when set, wins.
if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(M_ARENA_MAX, 2) }
#endif

// payrecon: the commands live in the PayreconCLI library (Sources/PayreconCLI), so tests reach them.
exit(await CLI.run(Array(CommandLine.arguments.dropFirst())))
