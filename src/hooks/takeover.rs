//! What the relay records in the store when it takes over from bbb-webhooks: the callback
//! form, the `domain` and bbb-webhooks' permanent hooks ([`read`], [`write`]), so that they are
//! decided once and survive a purge of bbb-webhooks.

use redis::AsyncCommands;

use crate::{
    base::redis_keys::TAKEOVER,
    config::{Compat, compat::Recorded},
    store_conn::StoreConn,
};

/// The recorded takeover, if any.
///
/// # Errors
/// When Redis fails.
pub async fn read(conn: &mut StoreConn) -> Result<Option<Recorded>, redis::RedisError> {
    let fields: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(TAKEOVER)
        .arg("compat")
        .arg("domain")
        .arg("permanent_hooks")
        .query_async(conn)
        .await?;
    let (Some(Some(compat)), Some(Some(domain))) = (fields.first(), fields.get(1)) else {
        return Ok(None);
    };
    // A list that does not parse is an empty one: the configuration can name them again.
    let permanent = fields
        .get(2)
        .and_then(|p| p.as_deref())
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    let compat = match compat.as_str() {
        "spec" => Compat::Spec,
        _ => Compat::Reference,
    };
    Ok(Some(Recorded {
        compat,
        domain: domain.clone(),
        permanent,
    }))
}

/// Records `takeover`.
///
/// # Errors
/// When Redis fails.
pub async fn write(conn: &mut StoreConn, takeover: &Recorded) -> Result<(), redis::RedisError> {
    let compat = match takeover.compat {
        Compat::Spec => "spec",
        Compat::Reference => "reference",
    };
    conn.hset_multiple(
        TAKEOVER,
        &[
            ("compat", compat.to_string()),
            ("domain", takeover.domain.clone()),
            (
                "permanent_hooks",
                serde_json::to_string(&takeover.permanent).unwrap_or_else(|_| "[]".into()),
            ),
            ("at_ms", crate::base::time::now_ms().to_string()),
        ],
    )
    .await
}
