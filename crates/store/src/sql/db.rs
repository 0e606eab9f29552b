//! The query layer every store operation is written in, once, for both
//! databases.
//!
//! Statements use `$N` placeholders, which both drivers bind by number, and
//! the SQL both databases speak; what really differs is in
//! [`super::dialect`]. [`query`] and [`scalar`] mirror sqlx's functions of
//! the same names: arguments are collected as [`Arg`]s, and the statement is
//! handed to the driver of the [`Target`] it runs on (a pool or a
//! transaction of either database), so no code above names a driver type.
//! Rows come back as [`Row`], read by column name through
//! [`crate::rows::Columns`].

use super::dialect::Dialect;
use crate::rows::{Column, Columns};
use sqlx::postgres::{PgConnection, PgPool, PgRow, Postgres};
use sqlx::sqlite::{Sqlite, SqliteConnection, SqlitePool, SqliteRow};
use sqlx::Transaction;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

/// Where a statement runs: a pool (a connection taken for this statement
/// alone) or an open transaction's connection.
pub(crate) enum Target<'a> {
    SqlitePool(&'a SqlitePool),
    PgPool(&'a PgPool),
    Sqlite(&'a mut SqliteConnection),
    Pg(&'a mut PgConnection),
}

/// One bound value. Lists are PostgreSQL arrays, and JSON arrays on SQLite
/// (read there with `json_each`, see [`super::dialect::Dialect::any_of`]).
pub(crate) enum Arg<'q> {
    Int(Option<i64>),
    Bool(Option<bool>),
    Float(Option<f64>),
    Text(Option<Cow<'q, str>>),
    Bytes(Option<Cow<'q, [u8]>>),
    Texts(Cow<'q, [String]>),
    Ints(Cow<'q, [i64]>),
}

/// A value that can be bound to a statement.
pub(crate) trait IntoArg<'q> {
    fn into_arg(self) -> Arg<'q>;
}

macro_rules! int_args {
    ($($t:ty),*) => {$(
        impl<'q> IntoArg<'q> for $t {
            fn into_arg(self) -> Arg<'q> {
                Arg::Int(Some(i64::from(self)))
            }
        }
        impl<'q> IntoArg<'q> for Option<$t> {
            fn into_arg(self) -> Arg<'q> {
                Arg::Int(self.map(i64::from))
            }
        }
    )*};
}
int_args!(i64, i32, u32, u8, i16, u16);

/// `IntoArg` for each type, from the function that makes its `Arg`.
macro_rules! args {
    ($($t:ty => $make:expr;)*) => {$(
        impl<'q> IntoArg<'q> for $t {
            fn into_arg(self) -> Arg<'q> {
                let make: fn($t) -> Arg<'q> = $make;
                make(self)
            }
        }
    )*};
}
args! {
    bool => |v| Arg::Bool(Some(v));
    Option<bool> => Arg::Bool;
    f64 => |v| Arg::Float(Some(v));
    Option<f64> => Arg::Float;
    &'q str => |v| Arg::Text(Some(Cow::Borrowed(v)));
    Option<&'q str> => |v| Arg::Text(v.map(Cow::Borrowed));
    &'q String => |v| Arg::Text(Some(Cow::Borrowed(v.as_str())));
    String => |v| Arg::Text(Some(Cow::Owned(v)));
    Option<String> => |v| Arg::Text(v.map(Cow::Owned));
    &'q Option<String> => |v| Arg::Text(v.as_deref().map(Cow::Borrowed));
    Option<&'q String> => |v| Arg::Text(v.map(|s| Cow::Borrowed(s.as_str())));
    &'q [u8] => |v| Arg::Bytes(Some(Cow::Borrowed(v)));
    &'q Vec<u8> => |v| Arg::Bytes(Some(Cow::Borrowed(v.as_slice())));
    Vec<u8> => |v| Arg::Bytes(Some(Cow::Owned(v)));
    Option<Vec<u8>> => |v| Arg::Bytes(v.map(Cow::Owned));
    &'q [String] => |v| Arg::Texts(Cow::Borrowed(v));
    &'q Vec<String> => |v| Arg::Texts(Cow::Borrowed(v.as_slice()));
    Vec<String> => |v| Arg::Texts(Cow::Owned(v));
    &'q [i64] => |v| Arg::Ints(Cow::Borrowed(v));
    &'q Vec<i64> => |v| Arg::Ints(Cow::Borrowed(v.as_slice()));
}

/// A JSON array of the list, as SQLite's `json_each` reads it.
fn json_list<T: Clone + Into<serde_json::Value>>(list: &[T]) -> String {
    serde_json::Value::from(list.to_vec()).to_string()
}

/// A statement and its arguments (sqlx's `query`).
pub(crate) struct Query<'q> {
    sql: Cow<'q, str>,
    args: Vec<Arg<'q>>,
}

pub(crate) fn query<'q>(sql: impl Into<Cow<'q, str>>) -> Query<'q> {
    Query {
        sql: sql.into(),
        args: Vec::new(),
    }
}

/// A statement answering one value, its first column (sqlx's
/// `query_scalar`).
pub(crate) struct Scalar<'q, T> {
    query: Query<'q>,
    value: PhantomData<fn() -> T>,
}

pub(crate) fn scalar<'q, T>(sql: impl Into<Cow<'q, str>>) -> Scalar<'q, T> {
    Scalar {
        query: query(sql),
        value: PhantomData,
    }
}

/// What a statement changed.
pub(crate) struct Done {
    rows: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows
    }
}

/// A result row of either database.
pub(crate) enum Row {
    Sqlite(SqliteRow),
    Pg(PgRow),
}

impl Row {
    /// The column's value (the inherent twin of [`Columns::try_get`], so
    /// callers need no trait in scope).
    pub(crate) fn try_get<T: Column, I: AsRef<str>>(&self, column: I) -> Result<T, sqlx::Error> {
        match self {
            Row::Sqlite(row) => sqlx::Row::try_get(row, column.as_ref()),
            Row::Pg(row) => sqlx::Row::try_get(row, column.as_ref()),
        }
    }

    fn first<T: Column>(&self) -> Result<T, sqlx::Error> {
        match self {
            Row::Sqlite(row) => sqlx::Row::try_get(row, 0),
            Row::Pg(row) => sqlx::Row::try_get(row, 0),
        }
    }
}

impl Columns for Row {
    fn try_get<T: Column, I: AsRef<str>>(&self, column: I) -> Result<T, sqlx::Error> {
        Row::try_get(self, column)
    }
}

/// Binds every argument to one driver's statement.
macro_rules! bound {
    ($sql:expr, $args:expr, $db:ident) => {{
        let mut q = sqlx::query::<$db>($sql);
        for arg in $args {
            q = match arg {
                Arg::Int(v) => q.bind(*v),
                Arg::Bool(v) => q.bind(*v),
                Arg::Float(v) => q.bind(*v),
                Arg::Text(v) => q.bind(v.as_deref()),
                Arg::Bytes(v) => q.bind(v.as_deref()),
                Arg::Texts(list) => bound!(@list q, list, $db),
                Arg::Ints(list) => bound!(@list q, list, $db),
            };
        }
        q
    }};
    (@list $q:ident, $list:ident, Sqlite) => {
        $q.bind(json_list($list))
    };
    (@list $q:ident, $list:ident, Postgres) => {
        $q.bind(&**$list)
    };
}

/// Runs one statement on its target with the driver's method `$run`.
macro_rules! run {
    ($self:ident, $target:expr, $run:ident, $map:expr) => {{
        let sql: &str = &$self.sql;
        let args = &$self.args;
        let target: Target<'_> = $target.into();
        match target {
            Target::SqlitePool(p) => $map(bound!(sql, args, Sqlite).$run(p).await, Row::Sqlite),
            Target::Sqlite(c) => $map(bound!(sql, args, Sqlite).$run(c).await, Row::Sqlite),
            Target::PgPool(p) => $map(bound!(sql, args, Postgres).$run(p).await, Row::Pg),
            Target::Pg(c) => $map(bound!(sql, args, Postgres).$run(c).await, Row::Pg),
        }
    }};
}

fn one<R>(r: Result<R, sqlx::Error>, wrap: impl Fn(R) -> Row) -> Result<Row, sqlx::Error> {
    r.map(wrap)
}

fn maybe<R>(
    r: Result<Option<R>, sqlx::Error>,
    wrap: impl Fn(R) -> Row,
) -> Result<Option<Row>, sqlx::Error> {
    r.map(|row| row.map(wrap))
}

fn all<R>(
    r: Result<Vec<R>, sqlx::Error>,
    wrap: impl Fn(R) -> Row,
) -> Result<Vec<Row>, sqlx::Error> {
    r.map(|rows| rows.into_iter().map(wrap).collect())
}

fn done<Q: HasRows, W>(r: Result<Q, sqlx::Error>, _: W) -> Result<Done, sqlx::Error> {
    r.map(|q| Done { rows: q.rows() })
}

/// Both drivers' "what a statement changed".
trait HasRows {
    fn rows(&self) -> u64;
}

impl HasRows for sqlx::sqlite::SqliteQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

impl HasRows for sqlx::postgres::PgQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

impl<'q> Query<'q> {
    pub(crate) fn bind(mut self, value: impl IntoArg<'q>) -> Query<'q> {
        self.args.push(value.into_arg());
        self
    }

    pub(crate) async fn execute(self, target: impl Into<Target<'_>>) -> Result<Done, sqlx::Error> {
        run!(self, target, execute, done)
    }

    pub(crate) async fn fetch_one(self, target: impl Into<Target<'_>>) -> Result<Row, sqlx::Error> {
        run!(self, target, fetch_one, one)
    }

    pub(crate) async fn fetch_optional(
        self,
        target: impl Into<Target<'_>>,
    ) -> Result<Option<Row>, sqlx::Error> {
        run!(self, target, fetch_optional, maybe)
    }

    pub(crate) async fn fetch_all(
        self,
        target: impl Into<Target<'_>>,
    ) -> Result<Vec<Row>, sqlx::Error> {
        run!(self, target, fetch_all, all)
    }
}

impl<'q, T: Column> Scalar<'q, T> {
    pub(crate) fn bind(mut self, value: impl IntoArg<'q>) -> Scalar<'q, T> {
        self.query = self.query.bind(value);
        self
    }

    pub(crate) async fn fetch_one(self, target: impl Into<Target<'_>>) -> Result<T, sqlx::Error> {
        self.query.fetch_one(target).await?.first()
    }

    pub(crate) async fn fetch_optional(
        self,
        target: impl Into<Target<'_>>,
    ) -> Result<Option<T>, sqlx::Error> {
        match self.query.fetch_optional(target).await? {
            Some(row) => Ok(Some(row.first()?)),
            None => Ok(None),
        }
    }

    pub(crate) async fn fetch_all(
        self,
        target: impl Into<Target<'_>>,
    ) -> Result<Vec<T>, sqlx::Error> {
        self.query
            .fetch_all(target)
            .await?
            .iter()
            .map(Row::first)
            .collect()
    }
}

/// What a committed write may have changed, told to whoever keeps a copy
/// of it (the volume cache).
pub(crate) trait OnCommit: Send + Sync {
    fn committed(&self);
}

/// An open write transaction of either database: rolled back when dropped
/// uncommitted.
pub(crate) struct Tx {
    inner: TxInner,
    on_commit: Option<Arc<dyn OnCommit>>,
}

enum TxInner {
    Sqlite(Transaction<'static, Sqlite>),
    Pg(Transaction<'static, Postgres>),
}

impl Tx {
    pub(crate) fn sqlite(tx: Transaction<'static, Sqlite>, on: Option<Arc<dyn OnCommit>>) -> Tx {
        Tx {
            inner: TxInner::Sqlite(tx),
            on_commit: on,
        }
    }

    pub(crate) fn postgres(
        tx: Transaction<'static, Postgres>,
        on: Option<Arc<dyn OnCommit>>,
    ) -> Tx {
        Tx {
            inner: TxInner::Pg(tx),
            on_commit: on,
        }
    }

    /// Commits; whoever keeps a copy is told even when the commit failed (a
    /// commit may fail after it took effect).
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        let committed = match self.inner {
            TxInner::Sqlite(tx) => tx.commit().await,
            TxInner::Pg(tx) => tx.commit().await,
        };
        if let Some(on) = &self.on_commit {
            on.committed();
        }
        committed
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.inner {
            TxInner::Sqlite(_) => Dialect::Sqlite,
            TxInner::Pg(_) => Dialect::Postgres,
        }
    }

    /// The PostgreSQL transaction, for what only PostgreSQL does (the copy
    /// of a SQLite database into it).
    pub(crate) fn pg(&mut self) -> Option<&mut PgConnection> {
        match &mut self.inner {
            TxInner::Pg(tx) => Some(&mut **tx),
            TxInner::Sqlite(_) => None,
        }
    }
}

impl<'a> From<&'a mut Tx> for Target<'a> {
    fn from(tx: &'a mut Tx) -> Target<'a> {
        match &mut tx.inner {
            TxInner::Sqlite(tx) => Target::Sqlite(tx),
            TxInner::Pg(tx) => Target::Pg(tx),
        }
    }
}

impl<'a> From<&'a SqlitePool> for Target<'a> {
    fn from(pool: &'a SqlitePool) -> Target<'a> {
        Target::SqlitePool(pool)
    }
}

impl<'a> From<&'a PgPool> for Target<'a> {
    fn from(pool: &'a PgPool) -> Target<'a> {
        Target::PgPool(pool)
    }
}

impl<'a> From<&'a mut SqliteConnection> for Target<'a> {
    fn from(conn: &'a mut SqliteConnection) -> Target<'a> {
        Target::Sqlite(conn)
    }
}

impl<'a> From<&'a mut PgConnection> for Target<'a> {
    fn from(conn: &'a mut PgConnection) -> Target<'a> {
        Target::Pg(conn)
    }
}
