//! The last good view of Scalelite's tenants, kept in the relay's own store
//! ([`TENANTS_KEPT`]): a start while Scalelite's Redis cannot be read takes it, so that the
//! tenants' calls, meetings and hooks go on as before the restart. It holds their secrets, as
//! Scalelite's Redis does; it is read by the relay alone, never shown, logged or counted.

use serde::{Deserialize, Serialize};

use super::Tenant;
use crate::{
    base::{redis_keys::TENANTS_KEPT, secret::Secret, time::now_ms},
    store_conn::StoreConn,
};

/// What the store holds: one JSON document.
#[derive(Serialize, Deserialize)]
struct Stored {
    /// When it was written (ms since the epoch).
    saved_at: u64,
    tenants: Vec<StoredTenant>,
}

#[derive(Serialize, Deserialize)]
struct StoredTenant {
    id: String,
    name: String,
    secrets: Vec<String>,
}

/// A view read back from the store.
pub(crate) struct Kept {
    pub(super) saved_at: u64,
    pub(super) tenants: Vec<Tenant>,
}

/// Keeps `tenants` (Scalelite's, as last read) in the store.
///
/// # Errors
/// When the store cannot be written.
pub(crate) async fn save(
    conn: &mut StoreConn,
    tenants: &[std::sync::Arc<Tenant>],
) -> redis::RedisResult<()> {
    let stored = Stored {
        saved_at: now_ms(),
        tenants: tenants
            .iter()
            .map(|t| StoredTenant {
                id: t.id.clone(),
                name: t.name.clone(),
                secrets: t.secrets().iter().map(|s| s.expose().to_string()).collect(),
            })
            .collect(),
    };
    // Serializing plain strings cannot fail.
    let text = serde_json::to_string(&stored).unwrap_or_default();
    redis::cmd("SET")
        .arg(TENANTS_KEPT)
        .arg(text)
        .query_async(conn)
        .await
}

/// The view kept in the store, if any. A document that cannot be read is said in the log (not
/// its text) and taken as none.
///
/// # Errors
/// When the store cannot be read.
pub(crate) async fn load(conn: &mut StoreConn) -> redis::RedisResult<Option<Kept>> {
    let text: Option<String> = redis::cmd("GET")
        .arg(TENANTS_KEPT)
        .query_async(conn)
        .await?;
    let Some(text) = text else {
        return Ok(None);
    };
    let Ok(stored) = serde_json::from_str::<Stored>(&text) else {
        tracing::warn!(
            key = TENANTS_KEPT,
            "the tenants kept in the store cannot be read: not used"
        );
        return Ok(None);
    };
    Ok(Some(Kept {
        saved_at: stored.saved_at,
        tenants: stored
            .tenants
            .into_iter()
            .filter_map(|t| {
                Tenant::new(
                    t.id,
                    &t.name,
                    t.secrets.into_iter().map(Secret::new).collect(),
                )
            })
            .collect(),
    }))
}
