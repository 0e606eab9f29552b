//! `svs store migrate`: a stopped service's whole SQLite database copied
//! into an empty PostgreSQL one, row for row, ids kept.

use crate::sql::SqlStore;
use crate::{StoreError, StoreResult};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, ValueRef};

/// Every table, parents before the tables that refer to them.
const TABLES: [&str; 15] = [
    "tenants",
    "users",
    "refresh_tokens",
    "media",
    "policies",
    "volumes",
    "slices",
    "jobs",
    "reservations",
    "resize_steps",
    "nodes",
    "snapshots",
    "attachments",
    "node_agents",
    "signing_keys",
];

/// The tables whose ids PostgreSQL numbers (identity columns), with that
/// column: their sequences go past the highest id copied.
const IDENTITIES: [(&str, &str); 9] = [
    ("tenants", "id"),
    ("users", "id"),
    ("refresh_tokens", "id"),
    ("policies", "id"),
    ("slices", "id"),
    ("jobs", "id"),
    ("reservations", "id"),
    ("resize_steps", "id"),
    ("snapshots", "seq"),
];

/// How many rows of one table were copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedTable {
    pub table: &'static str,
    pub rows: u64,
}

impl SqlStore {
    /// Copies every row of `from` (a database no process writes to: the
    /// caller holds its data directory's lock) into this store, which must
    /// hold no data yet, in one transaction: all of it or nothing. The
    /// SQLite database is brought to the latest schema first (as `svs
    /// serve` would), so both have the same tables and columns. Each
    /// table's rows are counted on both sides after the copy.
    pub async fn copy_from_sqlite(&self, from: &SqlStore) -> StoreResult<Vec<CopiedTable>> {
        let reader = from.sqlite_reader().ok_or_else(|| {
            StoreError::Conflict("svs store migrate copies from a SQLite database".into())
        })?;
        let mut tx = self.begin_write().await?;
        let Some(pg) = tx.pg() else {
            return Err(StoreError::Conflict(
                "svs store migrate copies into a PostgreSQL database".into(),
            ));
        };
        for table in TABLES {
            let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut *pg)
                .await?;
            if rows > 0 {
                return Err(StoreError::Conflict(format!(
                    "the PostgreSQL database already holds data ({rows} rows in {table}): \
                     svs store migrate copies into an empty database only"
                )));
            }
        }
        let mut copied = Vec::new();
        for table in TABLES {
            let columns = pg_columns(&mut *pg, table).await?;
            let names: Vec<&str> = columns.iter().map(|(name, _)| name.as_str()).collect();
            let select = format!("SELECT {} FROM {table}", names.join(", "));
            let rows: Vec<SqliteRow> = sqlx::query(&select).fetch_all(reader).await?;
            let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
            let insert = format!(
                "INSERT INTO {table} ({}) VALUES ({})",
                names.join(", "),
                placeholders.join(", ")
            );
            for row in &rows {
                let mut query = sqlx::query(&insert);
                for (i, (name, kind)) in columns.iter().enumerate() {
                    let null = row.try_get_raw(i)?.is_null();
                    query =
                        match kind {
                            ColumnKind::Integer => query.bind(if null {
                                None
                            } else {
                                Some(row.try_get::<i64, _>(i)?)
                            }),
                            ColumnKind::Text => query.bind(if null {
                                None
                            } else {
                                Some(row.try_get::<String, _>(i).map_err(|e| {
                                    StoreError::Corrupt(format!("{table}.{name}: {e}"))
                                })?)
                            }),
                            ColumnKind::Bytes => query.bind(if null {
                                None
                            } else {
                                Some(row.try_get::<Vec<u8>, _>(i).map_err(|e| {
                                    StoreError::Corrupt(format!("{table}.{name}: {e}"))
                                })?)
                            }),
                        };
                }
                query.execute(&mut *pg).await?;
            }
            let written: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&mut *pg)
                .await?;
            if written != rows.len() as i64 {
                return Err(StoreError::Corrupt(format!(
                    "{table}: {} rows read, {written} written",
                    rows.len()
                )));
            }
            copied.push(CopiedTable {
                table,
                rows: rows.len() as u64,
            });
        }
        for (table, column) in IDENTITIES {
            sqlx::query(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), \
                 COALESCE(MAX({column}), 1), MAX({column}) IS NOT NULL) FROM {table}"
            ))
            .execute(&mut *pg)
            .await?;
        }
        // The stopped service's job claims died with it: its jobs are
        // claimable at once by the first instance on PostgreSQL.
        sqlx::query("UPDATE jobs SET lease_owner = NULL, lease_expires_ms = NULL")
            .execute(&mut *pg)
            .await?;
        tx.commit().await?;
        Ok(copied)
    }
}

enum ColumnKind {
    Integer,
    Text,
    Bytes,
}

/// The columns of `table` in PostgreSQL, in order, with their kind (the
/// schema has only BIGINT and TEXT columns, and the signing keys' BYTEA
/// seeds).
async fn pg_columns(
    conn: &mut sqlx::PgConnection,
    table: &str,
) -> StoreResult<Vec<(String, ColumnKind)>> {
    let rows: Vec<PgRow> = sqlx::query(
        "SELECT column_name, data_type FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let name: String = row.try_get("column_name")?;
            let kind = match row.try_get::<String, _>("data_type")?.as_str() {
                "bigint" => ColumnKind::Integer,
                "text" => ColumnKind::Text,
                "bytea" => ColumnKind::Bytes,
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "{table}.{name}: unexpected column type {other}"
                    )))
                }
            };
            Ok((name, kind))
        })
        .collect()
}
