import Observability
import Postgres

/// The database pool as `/metrics` shows it, read at scrape time without a query: `payrecon_db_connections{state}`
/// (open, idle) and `payrecon_db_pool_size`, and `payrecon_db_jobs_waiting` (work waiting for a connection): a pool
/// exhausted by a slow database shows here before deliveries get 503.
public enum PoolMetrics {
    public static func register(_ pool: PostgresPool) {
        Metrics.shared.addTextCollector { [weak pool] in
            guard let pool else { return "" }
            let s = pool.statistics
            return """
                # HELP payrecon_db_connections Database connections of this process's pool, by state.
                # TYPE payrecon_db_connections gauge
                payrecon_db_connections{state="open"} \(s.open)
                payrecon_db_connections{state="idle"} \(s.idle)
                # HELP payrecon_db_pool_size Most connections this process's pool opens.
                # TYPE payrecon_db_pool_size gauge
                payrecon_db_pool_size \(pool.size)
                # HELP payrecon_db_jobs_waiting Work waiting for a database connection of this process's pool.
                # TYPE payrecon_db_jobs_waiting gauge
                payrecon_db_jobs_waiting \(s.waiting)

                """
        }
    }
}
