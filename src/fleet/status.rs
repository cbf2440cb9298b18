//! What an operator looks at during an incident (`hookrelay fleet status`), read from the
//! store: who holds the fleet lease, the live instances and how far back each one's kept
//! messages reach ([`super::reach`]), and which instance delivers each hook.

use crate::base::ids::HookId;

use std::time::Duration;

use serde::Serialize;

use super::{LEASE_KEY, reach};
use crate::{
    base::redis_keys::{HOOKS_SET, lease_key},
    store_conn::StoreConn,
};

/// The fleet as the store shows it now.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The holder of the fleet lease (it queues every callback), and for how long more (ms)
    /// the lease lasts without a renewal. `None`: nobody holds it.
    lease: Option<Held>,
    /// The live instances' records, the holder's first, then by name.
    instances: Vec<Instance>,
    /// Each hook's deliverer (with delivery spread), by hook id.
    hooks: Vec<HookLease>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Held {
    instance: String,
    expires_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Instance {
    #[serde(flatten)]
    reach: reach::Reach,
    /// How long (ms) its record lasts unless it writes it again.
    expires_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HookLease {
    hook: HookId,
    /// `None`: nobody delivers it now (without delivery spread, the lease holder does).
    deliverer: Option<String>,
}

/// A key's value and time to live (ms); `None` when it does not exist.
async fn value_and_ttl(conn: &mut StoreConn, key: &str) -> redis::RedisResult<Option<Held>> {
    let (value, ttl): (Option<String>, i64) =
        redis::pipe().get(key).pttl(key).query_async(conn).await?;
    Ok(value.map(|instance| Held {
        instance,
        expires_ms: u64::try_from(ttl).unwrap_or(0),
    }))
}

/// Reads the fleet's state from the store.
///
/// # Errors
/// When Redis fails.
pub async fn read(conn: &mut StoreConn) -> redis::RedisResult<Status> {
    let lease = value_and_ttl(conn, LEASE_KEY).await?;
    let mut instances: Vec<Instance> = reach::read(conn)
        .await?
        .into_iter()
        .map(|(reach, left)| Instance {
            reach,
            expires_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
        })
        .collect();
    instances.sort_by(|a, b| {
        (!a.reach.holder, &a.reach.instance).cmp(&(!b.reach.holder, &b.reach.instance))
    });
    let mut ids: Vec<HookId> = redis::AsyncCommands::smembers::<_, Vec<String>>(conn, HOOKS_SET)
        .await?
        .iter()
        .filter_map(|id| id.parse().ok())
        .collect();
    ids.sort_unstable();
    let mut hooks = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.get(lease_key(*id));
        }
        let deliverers: Vec<Option<String>> = pipe.query_async(conn).await?;
        hooks.extend(
            chunk
                .iter()
                .zip(deliverers)
                .map(|(&hook, deliverer)| HookLease { hook, deliverer }),
        );
    }
    Ok(Status {
        lease,
        instances,
        hooks,
    })
}

impl Status {
    /// The status as lines for people.
    pub fn text(&self) -> String {
        let mut out = String::new();
        match &self.lease {
            Some(l) => out.push_str(&format!(
                "fleet lease: {} (queues every callback; runs out in {} unless renewed)\n",
                l.instance,
                seconds(l.expires_ms)
            )),
            None => out.push_str("fleet lease: free (nobody queues callbacks now)\n"),
        }
        out.push_str(&format!("instances: {}\n", self.instances.len()));
        for i in &self.instances {
            let r = &i.reach;
            if r.holder {
                out.push_str(&format!("  {}  holds the fleet lease\n", r.instance));
                continue;
            }
            let can = if r.able {
                "can resume where the holder stands"
            } else {
                "cannot resume where the holder stands"
            };
            out.push_str(&format!("  {}  follows; {can}\n", r.instance));
            for s in &r.sources {
                out.push_str(&format!(
                    "    source {}: {} messages kept, whole for {}, holder's place {}\n",
                    s.source,
                    s.kept,
                    seconds(s.whole_ms),
                    s.cursor
                ));
            }
        }
        let delivered = self.hooks.iter().filter(|h| h.deliverer.is_some()).count();
        out.push_str(&format!(
            "hooks: {} ({delivered} with a delivery lease)\n",
            self.hooks.len()
        ));
        for h in &self.hooks {
            match &h.deliverer {
                Some(d) => out.push_str(&format!("  hook {}  delivered by {d}\n", h.hook)),
                None => out.push_str(&format!(
                    "  hook {}  no delivery lease (the lease holder delivers it without spread)\n",
                    h.hook
                )),
            }
        }
        out
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", Duration::from_millis(ms).as_secs_f64())
}
