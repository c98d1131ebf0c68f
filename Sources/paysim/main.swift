// paysim: the PXP and PayPal sandbox simulator. All logic lives in PaysimCore (unit-tested); this is the CLI shell.
import Foundation
import PaysimCore

let options: PaysimOptions
do {
    options = try PaysimOptions.parse(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
} catch .help {
    print(PaysimOptions.help)
    exit(0)
} catch {
    FileHandle.standardError.write(Data("paysim: \(error)\nTry 'paysim --help'.\n".utf8))
    exit(2)
}
exit(await PaysimApp.run(options))
