import Reconciliation

/// A snapshot as the `snapshots` table stores it (jsonb): the document `JSONEncoder` makes of it (the shape
/// `Snapshot`'s `Decodable` reads: nil optionals left out, enum cases with associated values as `{"case":{"label":…}}`
/// and `_0` for an unlabelled one), written directly.
///
/// Every check encodes one, and a profile of the sweep found `JSONEncoder` at about 90 µs of a check's 500 µs of
/// CPU (it boxes each value, then sorts each object's keys); this takes a few. Keys are written in sorted order, as
/// `.sortedKeys` wrote them; jsonb keeps its own order anyway, so only the document matters, not its bytes: `/` is
/// not escaped (`JSONEncoder` writes `\/`, the same string). (A provider's `\u0000` is U+FFFD from the parser on:
/// jsonb holds no NUL.) `SnapshotJSONTests` holds every field to the encoder's document, so a field added to
/// `Snapshot` and not here fails there.
enum SnapshotJSON {
    static func encode(_ s: Snapshot) -> String {
        var w = JSONDocumentWriter()
        w.out.reserveCapacity(768)
        w.open()
        w.key("aliases"); w.strings(s.aliases)
        w.key("authorised"); w.int(s.authorised)
        w.key("capabilities"); w.capabilities(s.capabilities)
        w.key("captured"); w.int(s.captured)
        if let v = s.createdAt { w.key("createdAt"); w.int(v) }
        w.key("currency"); w.currency(s.currency)
        w.key("disputed"); w.int(s.disputed)
        w.key("intent"); w.string(s.intent.rawValue)
        if let v = s.merchant { w.key("merchant"); w.string(v) }
        if let v = s.method { w.key("method"); w.string(v) }
        w.key("movements"); w.openArray()
        for m in s.movements { w.element(); w.movement(m) }
        w.closeArray()
        w.key("notes"); w.strings(s.notes)
        w.key("orderReferences"); w.strings(s.orderReferences)
        w.key("pendingCaptured"); w.int(s.pendingCaptured)
        w.key("provider"); w.string(s.provider.rawValue)
        w.key("rawState"); w.string(s.rawState)
        w.key("refunded"); w.int(s.refunded)
        w.key("reportsMerchant"); w.bool(s.reportsMerchant)
        w.key("reportsSite"); w.bool(s.reportsSite)
        w.key("reversed"); w.int(s.reversed)
        if let v = s.site { w.key("site"); w.string(v) }
        w.key("state"); w.string(s.state.rawValue)
        w.key("transactionRef"); w.string(s.transactionRef)
        w.key("value"); w.int(s.value)
        w.close()
        return String(decoding: w.out, as: UTF8.self)
    }
}

/// What a snapshot holds beyond plain values, as `JSONEncoder` wrote it.
extension JSONDocumentWriter {
    mutating func capabilities(_ c: Capabilities) {
        open()
        key("amountUnit"); int(c.amountUnit)
        if let note = c.amountUnitNote { key("amountUnitNote"); string(note) }
        key("capture"); capability(c.capture)
        key("captureSources"); sources(c.captureSources)
        key("increment"); capability(c.increment)
        key("refund"); refund(c.refund)
        key("void"); capability(c.void)
        close()
    }

    /// An enum case with associated values: `{"case":{…}}`.
    private mutating func variant(_ name: StaticString, target: String?) {
        open(); key(name); open()
        if let target { key("target"); string(target) }
        close(); close()
    }

    private mutating func variant(_ name: StaticString, reason: String) {
        open(); key(name); open(); key("_0"); string(reason); close(); close()
    }

    mutating func capability(_ c: Capability) {
        switch c {
        case .allowed(let target): variant("allowed", target: target)
        case .denied(let reason): variant("denied", reason: reason)
        case .unsupported(let reason): variant("unsupported", reason: reason)
        }
    }

    mutating func refund(_ r: RefundCapability) {
        switch r {
        case .against(let target): variant("against", target: target)
        case .denied(let reason): variant("denied", reason: reason)
        case .spread(let list, let names):
            open(); key("spread"); open()
            key("_0"); sources(list)
            key("sources"); string(names)
            close(); close()
        }
    }

    mutating func sources(_ list: [RefundSource]) {
        openArray()
        for s in list {
            element()
            open(); key("amount"); int(s.amount); key("id"); string(s.id); key("refunded"); int(s.refunded); close()
        }
        closeArray()
    }

    mutating func movement(_ m: Movement) {
        open()
        if let v = m.at { key("at"); int(v) }
        key("currency"); currency(m.currency)
        if let v = m.fee { key("fee"); int(v) }
        key("gross"); int(m.gross)
        key("id"); string(m.id)
        key("kind"); string(m.kind.rawValue)
        if let v = m.net { key("net"); int(v) }
        if let v = m.received { key("received"); int(v) }
        if let v = m.receivedCurrency { key("receivedCurrency"); currency(v) }
        close()
    }
}
