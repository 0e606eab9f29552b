//! What the two databases spell differently, and nothing else: every
//! statement that needs one of these builds it from the dialect of the store
//! it runs on. (How a write transaction begins, and what only one of them
//! does, lives in `mod.rs`, `sqlite.rs` and `postgres/`.)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `column` is one of the list bound as `$n` (a JSON array on SQLite,
    /// an array on PostgreSQL; see `db::Arg`).
    pub(crate) fn in_list(self, column: &str, n: u8) -> String {
        match self {
            Dialect::Sqlite => format!("{column} IN (SELECT value FROM json_each(${n}))"),
            Dialect::Postgres => format!("{column} = ANY(${n})"),
        }
    }

    /// The statement appending the text `$1` to job `$2`'s JSON array of
    /// details.
    pub(crate) fn append_job_detail(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "UPDATE jobs SET details = json_insert(details, '$[#]', $1) WHERE id = $2"
            }
            Dialect::Postgres => {
                "UPDATE jobs SET details = (details::jsonb || jsonb_build_array($1::text))::text \
                 WHERE id = $2"
            }
        }
    }

    /// Whether job `j`'s JSON arguments ask for volume `v`'s size.
    pub(crate) fn job_asks_volume_size(self) -> &'static str {
        match self {
            Dialect::Sqlite => "json_extract(j.args, '$.size') = v.size_gib",
            Dialect::Postgres => "(j.args::jsonb -> 'size') = to_jsonb(v.size_gib)",
        }
    }

    /// Locks the rows a `SELECT` reads until the transaction ends. SQLite's
    /// write transaction holds the whole database already.
    pub(crate) fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }

    /// As [`Dialect::for_update`], passing over rows another transaction
    /// holds.
    pub(crate) fn for_update_skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}
