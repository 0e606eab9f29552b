//! Announcements between instances: `NOTIFY` on a topic after a change
//! committed, heard by every instance `LISTEN`ing on it. A wake-up hint
//! only: PostgreSQL delivers notifications at commit and never replays
//! them, so a listener that lost its connection is told (`Heard::Missed`)
//! and its waiters read the store again; polling stays the fallback.

use super::PgStore;
use crate::{AnnouncementStream, Heard, StoreResult};
use async_trait::async_trait;
use sqlx::postgres::PgListener;

/// What one instance hears of the others' announcements.
pub struct PgAnnouncements {
    listener: PgListener,
}

impl PgStore {
    pub(super) async fn notify_topic(&self, topic: &str) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(topic)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn listen_topics(&self, topics: &[&str]) -> StoreResult<PgAnnouncements> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen_all(topics.iter().copied()).await?;
        Ok(PgAnnouncements { listener })
    }
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
