import Foundation
import Postgres

/// The database role `payrecon serve` runs as (PAYRECON_SERVE_ROLE), given only what the receiver does: store
/// deliveries (and count their redeliveries), guard transmission ids, count and sample rejections, keep PayPal's
/// certificates, and read which migrations are applied and how many deliveries wait. It cannot read a delivery's body or
/// headers once stored, nor any order, action, snapshot or finding, and cannot change a delivery's status: a stranger who
/// took over the one process they reach gets no money-moving table and no merchant data.
///
/// `payrecon migrate` applies this after the migrations, every run (a new table is granted nothing until it is named
/// here), in the schema the migrations went into.
public enum ServeRole {
    /// One grant: the privileges on a table, table-wide or on columns.
    public struct Grant: Sendable, Equatable {
        public var table: String
        public var privileges: String
        public init(_ table: String, _ privileges: String) { self.table = table; self.privileges = privileges }
    }

    /// Everything `PostgresReceiverStorage` needs, and nothing more (`ServeRoleTests` runs the receiver's storage as a
    /// role with only these, and checks what it must not do).
    public static let grants: [Grant] = [
        // DeliveryStore.commit: INSERT … ON CONFLICT (provider, dedupe_key) DO UPDATE SET redeliveries …, last_redelivered_at
        // … RETURNING id, redeliveries, provider, dedupe_key. pendingCount reads status.
        // The columns the commit names, no more: a row serve inserts is pending, unleased and due now (the defaults).
        Grant("deliveries", "INSERT (provider, dedupe_key, event_type, headers, body, redeliveries, last_redelivered_at, transmission_id)"),
        Grant("deliveries", "SELECT (id, provider, dedupe_key, status, redeliveries)"),
        Grant("deliveries", "UPDATE (redeliveries, last_redelivered_at)"),
        // The one-body-per-transmission guard.
        Grant("transmissions", "INSERT (provider, transmission_id, body_sha256)"),
        Grant("transmissions", "SELECT (provider, transmission_id, body_sha256)"),
        // DeliveryStore.recordRejections: counts (added to), and samples while the hour and the day have room.
        Grant("rejection_counts", "SELECT, INSERT"),
        Grant("rejection_counts", "UPDATE (count)"),
        Grant("rejected_deliveries", "INSERT (provider, reason, message, headers, body_prefix, body_bytes, remote_addr)"),
        Grant("rejected_deliveries", "SELECT (provider, reason, received_at)"),
        // WebhookMaterial: PayPal's certificates, read at start (and validated again), saved when one verifies.
        Grant("webhook_material", "SELECT (provider, key, value, keep_until, saved_at)"),
        Grant("webhook_material", "INSERT (provider, key, value, keep_until)"),
        // saved_at is the owner's trigger's (sql/0023): serve cannot date a row into the future to have it loaded first.
        Grant("webhook_material", "UPDATE (value, keep_until)"),
        // Migrator.status: serve refuses a database that lacks a migration.
        Grant("schema_migrations", "SELECT")
    ]

    /// The sequences behind the tables serve inserts into.
    static let sequences = ["deliveries_id_seq", "rejected_deliveries_id_seq"]

    /// Why a role cannot be serve's.
    public struct Refused: Error, CustomStringConvertible {
        public let description: String
    }

    /// Takes every privilege `role` holds in the current schema away, then grants `grants`, in one transaction (serve
    /// keeps running on what it had until the commit). The role must exist, must not be the role migrating (which owns
    /// the tables), must not be a superuser or able to bypass row security, and must belong to no other role (whose
    /// privileges it would have: pg_read_all_data, the owner).
    public static func apply(to role: String, on conn: PostgresConnection) throws {
        guard !role.isEmpty else {
            throw Refused(description: "PAYRECON_SERVE_ROLE is empty: name the role serve connects as, or unset it")
        }
        try refuseUnsafe(role, on: conn)
        let quoted = try quoteIdentifier(role)
        try conn.transaction { tx in
            let schema = try tx.query("SELECT current_schema() AS s").first.flatMap { try $0.optionalString("s") }
            guard let schema else { throw Refused(description: "the connection has no current schema (search_path): nothing to grant on") }
            let qschema = try quoteIdentifier(schema)
            // One grant at a time with the migrations (two concurrent migrates would update the same catalog rows).
            _ = try tx.query("SELECT pg_advisory_xact_lock(\(unescaped: Migrator.advisoryLock))")
            // A table-wide REVOKE takes the column grants on each of its columns with it (PostgreSQL's REVOKE).
            _ = try tx.execute("REVOKE ALL ON ALL TABLES IN SCHEMA \(unescaped: qschema) FROM \(unescaped: quoted)")
            _ = try tx.execute("REVOKE ALL ON ALL SEQUENCES IN SCHEMA \(unescaped: qschema) FROM \(unescaped: quoted)")
            _ = try tx.execute("GRANT USAGE ON SCHEMA \(unescaped: qschema) TO \(unescaped: quoted)")
            for grant in grants {
                _ = try tx.execute(
                    "GRANT \(unescaped: grant.privileges) ON \(unescaped: qschema).\(unescaped: try quoteIdentifier(grant.table)) TO \(unescaped: quoted)"
                )
            }
            for sequence in sequences {
                _ = try tx.execute(
                    "GRANT USAGE ON SEQUENCE \(unescaped: qschema).\(unescaped: try quoteIdentifier(sequence)) TO \(unescaped: quoted)")
            }
            // CREATE on the schema, granted to PUBLIC (PostgreSQL 14 and older, or kept by pg_upgrade), would let serve
            // create tables, or functions that shadow built-ins the worker then runs as the owner.
            if try tx.query("SELECT has_schema_privilege(\(.text(role)), \(.text(schema)), 'CREATE') AS c").first?.bool("c") == true {
                throw Refused(
                    description: "PAYRECON_SERVE_ROLE=\(role) may still create objects in schema \(schema) (granted to PUBLIC or "
                        + "a role it belongs to): REVOKE CREATE ON SCHEMA \(qschema) FROM PUBLIC, then run payrecon migrate again")
            }
        }
    }

    /// Refuses a role no grant can limit: missing, the owner, a superuser, a member of the owner or of any role, one that
    /// may create roles or databases, or one that owns the database, the schema or a table.
    static func refuseUnsafe(_ role: String, on conn: PostgresConnection) throws {
        guard
            let found = try conn.query(
                """
                SELECT r.rolsuper AS super, r.rolbypassrls AS bypass, r.rolname = current_user AS me,
                       r.rolcreaterole AS createrole, r.rolreplication AS replication, r.rolcreatedb AS createdb,
                       (SELECT d.datdba = r.oid FROM pg_database d WHERE d.datname = current_database()) AS owns_database,
                       (SELECT n.nspowner = r.oid FROM pg_namespace n WHERE n.nspname = current_schema()) AS owns_schema,
                       EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relowner = r.oid) AS owns_table,
                       pg_has_role(r.rolname, current_user, 'MEMBER') AS member_of_me,
                       (SELECT string_agg(g.rolname, ', ' ORDER BY g.rolname) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                        WHERE m.member = r.oid) AS groups
                FROM pg_roles r WHERE r.rolname = \(.text(role))
                """
            ).first
        else {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role): no such role in the database. Create it first (as a superuser: "
                    + "CREATE ROLE \(try quoteIdentifier(role)) LOGIN PASSWORD '…'), then run payrecon migrate again")
        }
        let owner = "serve needs a role of its own (CREATE ROLE payrecon_serve LOGIN PASSWORD '…'), and migrate runs as the owner"
        if try found.bool("me") {
            throw Refused(description: "PAYRECON_SERVE_ROLE=\(role) is the role payrecon migrate runs as, which owns the tables: \(owner)")
        }
        if try found.bool("super") || found.bool("bypass") {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role) is a superuser (or bypasses row security): no grant can limit it. "
                    + "Give serve an ordinary role (CREATE ROLE payrecon_serve LOGIN PASSWORD '…')")
        }
        if try found.bool("member_of_me") {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role) is a member of the role payrecon migrate runs as, so it has the "
                    + "owner's privileges: \(owner)")
        }
        if try found.bool("createrole") || found.bool("replication") || found.bool("createdb") {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role) may create roles or databases, or replicate the cluster: give serve "
                    + "an ordinary role (ALTER ROLE \(try quoteIdentifier(role)) NOCREATEROLE NOCREATEDB NOREPLICATION)")
        }
        if try found.optionalBool("owns_database") == true || found.optionalBool("owns_schema") == true || found.bool("owns_table") {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role) owns the database, the schema or one of its tables, and an owner "
                    + "may drop them whatever is granted: \(owner)")
        }
        if let groups = try found.optionalString("groups") {
            throw Refused(
                description: "PAYRECON_SERVE_ROLE=\(role) is a member of \(groups), whose privileges are serve's too: give serve a "
                    + "role that belongs to no other (REVOKE … FROM \(try quoteIdentifier(role)))")
        }
    }
}
