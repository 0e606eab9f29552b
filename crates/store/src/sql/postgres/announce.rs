//! Announcements between instances: `NOTIFY` on a topic after a change
//! committed, heard by every instance `LISTEN`ing on it. A wake-up hint
//! only: PostgreSQL delivers notifications at commit and never replays
//! them, so a listener that lost its connection is told (`Heard::Missed`)
//! and its waiters read the store again; polling stays the fallback.

use crate::{AnnouncementStream, Heard, StoreResult};
use async_trait::async_trait;
use sqlx::postgres::{PgListener, PgPool};

/// What one instance hears of the others' announcements.
pub struct PgAnnouncements {
    listener: PgListener,
}

pub(in crate::sql) async fn notify_topic(pool: &PgPool, topic: &str) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, '')")
        .bind(topic)
        .execute(pool)
        .await?;
    Ok(())
}

pub(in crate::sql) async fn listen_topics(
    pool: &PgPool,
    topics: &[&str],
) -> StoreResult<PgAnnouncements> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen_all(topics.iter().copied()).await?;
    Ok(PgAnnouncements { listener })
}

#[async_trait]
impl AnnouncementStream for PgAnnouncements {
    /// `Heard::Missed` when the connection was lost (it reconnects at the
    /// next call: announcements made meanwhile are gone).
    async fn next(&mut self) -> StoreResult<Heard> {
        Ok(match self.listener.try_recv().await? {
            Some(notification) => Heard::Topic(notification.channel().to_string()),
            None => Heard::Missed,
        })
    }
}
