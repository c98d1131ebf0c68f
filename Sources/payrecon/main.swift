import Foundation

// payrecon: thin CLI over the rooms. Commands live in Commands/*.swift; the table below is the whole surface.
let commands: [Command] = [
    serveCommand, workCommand, reconcileCommand, reportCommand,
    ordersImportCommand, actionsListCommand, actionsExecuteCommand,
    eventsListCommand, eventsShowCommand, eventsRetryCommand,
    verifyCommand, migrateCommand,
]

let exitCode = await CLI.run(Array(CommandLine.arguments.dropFirst()), commands: commands)
exit(exitCode)
