//! Operators' pauses of routes: stored, so that every process obeys them, each with its audit
//! record. Same text in both dialects.

use sqlx::FromRow;

use serde_json::json;

use super::rows::insert_event;
use super::seam::{Arg, Conn, Dialect, SqlStore, args};
use super::{EventType, OutboxEvent, StoreError, StoreResult, Timestamp};
use crate::domain::RoutePause;

use async_trait::async_trait;

/// Operators' pauses of routes, shared by every process.
#[async_trait]
pub trait RoutePauses: Send + Sync {
    /// Pauses `pause.route` for every process, with its audit record: the pause that stands
    /// (an earlier one, where it was paused already).
    async fn pause_route(&self, pause: &RoutePause) -> StoreResult<RoutePause>;

    /// Lifts the route's pause, audited as `by` says (who, why, when): the pause lifted, `None`
    /// where it was not paused.
    async fn resume_route(&self, by: &RoutePause) -> StoreResult<Option<RoutePause>>;

    /// Every standing pause, by route.
    async fn route_pauses(&self) -> StoreResult<Vec<RoutePause>>;
}

/// A pause stands until it is lifted: pausing a paused route changes nothing.
const PAUSE: &str = "INSERT INTO route_pauses (route, principal, note, paused_at, to_fallback)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (route) DO NOTHING";

const LIFT: &str = "DELETE FROM route_pauses WHERE route = $1
     RETURNING route, principal, note, paused_at, to_fallback";

const LOG: &str = "INSERT INTO route_pause_log (route, action, principal, note, at, to_fallback)
     VALUES ($1, $2, $3, $4, $5, $6)";

const PAUSES: &str =
    "SELECT route, principal, note, paused_at, to_fallback FROM route_pauses ORDER BY route";

const STANDING: &str =
    "SELECT route, principal, note, paused_at, to_fallback FROM route_pauses WHERE route = $1";

#[derive(FromRow)]
struct PauseRow {
    route: String,
    principal: String,
    note: String,
    paused_at: Timestamp,
    to_fallback: bool,
}

impl From<PauseRow> for RoutePause {
    fn from(row: PauseRow) -> Self {
        RoutePause {
            route: row.route,
            principal: row.principal,
            note: row.note,
            at: row.paused_at.into_inner(),
            to_fallback: row.to_fallback,
        }
    }
}

#[async_trait]
impl<D: Dialect> RoutePauses for SqlStore<D> {
    async fn pause_route(&self, pause: &RoutePause) -> StoreResult<RoutePause> {
        let mut tx = self.begin().await?;
        let paused = tx
            .execute(
                PAUSE,
                args![
                    &pause.route,
                    &pause.principal,
                    &pause.note,
                    pause.at,
                    Some(pause.to_fallback)
                ],
            )
            .await?
            == 1;
        if paused {
            insert_event(
                &mut tx,
                &OutboxEvent::for_route(
                    &pause.route,
                    EventType::RoutePaused,
                    json!({"principal": pause.principal, "note": pause.note,
                           "to_fallback": pause.to_fallback}),
                    pause.at,
                ),
            )
            .await?;
            tx.execute(
                LOG,
                args![
                    &pause.route,
                    "paused",
                    &pause.principal,
                    &pause.note,
                    pause.at,
                    Some(pause.to_fallback)
                ],
            )
            .await?;
        }
        let standing: Option<PauseRow> = tx.fetch_optional(STANDING, args![&pause.route]).await?;
        tx.commit().await?;
        standing.map(RoutePause::from).ok_or_else(|| {
            StoreError::Conflict(
                "the route was resumed while this pause was given; send it again".to_owned(),
            )
        })
    }

    async fn resume_route(&self, by: &RoutePause) -> StoreResult<Option<RoutePause>> {
        let mut tx = self.begin().await?;
        let lifted: Option<PauseRow> = tx.fetch_optional(LIFT, args![&by.route]).await?;
        if lifted.is_some() {
            insert_event(
                &mut tx,
                &OutboxEvent::for_route(
                    &by.route,
                    EventType::RouteResumed,
                    json!({"principal": by.principal, "note": by.note}),
                    by.at,
                ),
            )
            .await?;
            tx.execute(
                LOG,
                args![
                    &by.route,
                    "resumed",
                    &by.principal,
                    &by.note,
                    by.at,
                    Some(false)
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(lifted.map(RoutePause::from))
    }

    async fn route_pauses(&self) -> StoreResult<Vec<RoutePause>> {
        let rows: Vec<PauseRow> = self.0.read().await?.fetch_all(PAUSES, args![]).await?;
        Ok(rows.into_iter().map(RoutePause::from).collect())
    }
}
