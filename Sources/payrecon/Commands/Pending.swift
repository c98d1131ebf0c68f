// Commands still being built; each answers with a clear message until then.
let workCommand = Command(name: "work", summary: "Process stored deliveries: re-fetch, reconcile, emit actions.") { _ in throw FatalError("not built yet") }
let reconcileCommand = Command(name: "reconcile", summary: "The nightly sweep over recent orders.") { _ in throw FatalError("not built yet") }
let ordersImportCommand = Command(name: "orders import", summary: "Import orders from CSV or JSON Lines (all or nothing).", arguments: [.init(name: "FILE", help: "CSV with a header row, or JSON Lines.")]) { _ in throw FatalError("not built yet") }
let actionsExecuteCommand = Command(name: "actions execute", summary: "Execute pending actions at the provider.") { _ in throw FatalError("not built yet") }
let eventsListCommand = Command(name: "events list", summary: "List stored deliveries.") { _ in throw FatalError("not built yet") }
let eventsShowCommand = Command(name: "events show", summary: "Show one stored delivery.", arguments: [.init(name: "ID", help: "The delivery id.")]) { _ in throw FatalError("not built yet") }
let eventsRetryCommand = Command(name: "events retry", summary: "Make a dead delivery due again.") { _ in throw FatalError("not built yet") }
