import Foundation
import PayreconCLI

// payrecon: the commands live in the PayreconCLI library (Sources/PayreconCLI), so tests reach them.
exit(await CLI.run(Array(CommandLine.arguments.dropFirst())))
