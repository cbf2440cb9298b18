//! The sources' side of the wiring: each source's processing state read back from the store
//! (id mappings and conference state, under its own keys), and each source's subscriber and
//! `getMeetings` seeder started as tasks of their own, so that one server going down touches
//! nothing of the others.

use std::{collections::HashMap, sync::Arc, time::Duration};

use crate::store_conn::StoreConn;
use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    base::{redis_keys::SourceKeys, sources::SourceId, time::now_ms},
    bus::{BusMessage, Subscriber},
    conference::{self, SharedConference},
    config::{Config, SourceConfig},
    event::{EventFilter, Mappings, Processor, persist},
    metrics::Metrics,
    redis_conn::redis_client_verified,
    shutdown::retry_until_ok,
};

/// One source as the pipeline runs it.
pub(super) struct Source {
    id: SourceId,
    pub(super) config: SourceConfig,
    pub(super) keys: SourceKeys,
    pub(super) conference: SharedConference,
}

/// The configured sources, each with its keys and an empty conference state.
pub(super) fn configured(config: &Config) -> Vec<Source> {
    config
        .effective_sources()
        .into_iter()
        .enumerate()
        .map(|(i, config)| Source {
            id: SourceId::try_from(i).unwrap_or(SourceId::MAX),
            keys: SourceKeys::new(&config.name),
            config,
            conference: SharedConference::default(),
        })
        .collect()
}

/// Reads each source's id mappings and conference state back from the store and makes its
/// processor. `None` when the relay stopped first.
pub(super) async fn restore(
    sources: &[Source],
    conn: &StoreConn,
    config: &Config,
    token: &CancellationToken,
) -> Option<Vec<Processor>> {
    let mut processors = Vec::with_capacity(sources.len());
    for s in sources {
        let processor = restore_one(&s.config.name, &s.keys, &s.conference, conn, config, token)
            .await?
            .with_source(s.id);
        processors.push(processor);
    }
    Some(processors)
}

/// Reads one source's id mappings and conference state (into `conference`) back from the
/// store under `keys` and makes its processor (of source 0: the caller says which).
/// `None` when the relay stopped first.
pub(super) async fn restore_one(
    name: &str,
    keys: &SourceKeys,
    conference: &SharedConference,
    conn: &StoreConn,
    config: &Config,
    token: &CancellationToken,
) -> Option<Processor> {
    let stored = retry_until_ok(token, "restore id mappings", || {
        let mut c = conn.clone();
        async move {
            let meetings = persist::load_meetings(&mut c, keys).await?;
            let users = persist::load_users(&mut c, keys).await?;
            let rooms = conference::persist::load(&mut c, keys).await?;
            Ok::<_, redis::RedisError>((meetings, users, rooms))
        }
    })
    .await;
    let (meetings, users, (rooms, recordings)) = stored?;
    tracing::info!(
        source = %name,
        meetings = meetings.len(),
        users = users.len(),
        "id mappings restored"
    );
    // A meeting's clock goes on from its mapping's last activity (kept in Redis), so that
    // a restart does not keep a meeting that BBB crashed for one more inactivity window.
    let activity: HashMap<String, u64> = meetings
        .iter()
        .map(|m| (m.internal.clone(), m.last_activity_ms))
        .collect();
    conference
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .restore(rooms, recordings, &activity, now_ms());
    let mut mappings = Mappings::new(
        config.mapping.inactivity_timeout_s.saturating_mul(1000),
        true,
    );
    mappings.restore(meetings, users, now_ms());
    let processor =
        Processor::new(mappings, EventFilter::of(config)).with_observer(conference.clone());
    Some(if config.xapi.enabled {
        processor.keeping_filtered()
    } else {
        processor
    })
}

/// Each source's subscription counter, watched by readiness and by its seeder.
pub(super) struct Subscribed {
    pub(super) ready: Vec<watch::Receiver<u64>>,
    /// Made before the subscribers start, so that the seeders, started once the state is
    /// read back, still see the first subscription.
    pub(super) seeds: Vec<watch::Receiver<u64>>,
    /// The same, for an instance that follows the fleet lease's holder.
    pub(super) fleet: Vec<watch::Receiver<u64>>,
}

/// Starts every source's subscriber.
///
/// # Errors
/// When a source's Redis URL is unusable.
pub(super) fn subscribe_all(
    sources: &[Source],
    config: &Config,
    bus: &mpsc::Sender<BusMessage>,
    metrics: &Arc<Metrics>,
    tracker: &TaskTracker,
    token: &CancellationToken,
) -> anyhow::Result<Subscribed> {
    let mut out = Subscribed {
        ready: Vec::with_capacity(sources.len()),
        seeds: Vec::with_capacity(sources.len()),
        fleet: Vec::with_capacity(sources.len()),
    };
    for s in sources {
        let name: Arc<str> = s.config.name.as_str().into();
        let client = redis_client_verified(s.config.url.expose(), s.config.ca_file.as_deref())
            .map_err(|e| anyhow::anyhow!("source {name}: {e}"))?;
        let (subscribed, _) = watch::channel(0);
        out.ready.push(subscribed.subscribe());
        out.seeds.push(subscribed.subscribe());
        out.fleet.push(subscribed.subscribe());
        let subscriber = Subscriber {
            source: s.id,
            series: metrics.bus.source(&name),
            name,
            client,
            channels: s.config.channels.clone(),
            max_message_bytes: config.redis.max_message_bytes,
            metrics: metrics.clone(),
            subscribed,
        };
        tracker.spawn(subscriber.run(bus.clone(), token.clone()));
    }
    Ok(out)
}

/// Starts the `getMeetings` seeder of every source with an `api_url`, once their state has
/// been read back (a seed must not be overwritten by what was stored).
pub(super) fn seed_all(
    sources: &[Source],
    bbb: &crate::config::BbbConfig,
    seeds: Vec<watch::Receiver<u64>>,
    metrics: &Arc<Metrics>,
    tracker: &TaskTracker,
    token: &CancellationToken,
) {
    for (s, subscribed) in sources.iter().zip(seeds) {
        if s.config.api_url.is_empty() {
            continue;
        }
        let reconciler = conference::seed::Reconciler {
            source: s.config.name.as_str().into(),
            api_urls: bbb.api_candidates(&s.config.api_url),
            secret: s.config.secret.clone(),
            conference: s.conference.clone(),
            metrics: metrics.clone(),
            interval: Duration::from_secs(bbb.reconcile_interval_s),
            recordings: bbb.reconcile_recordings,
        };
        tracker.spawn(reconciler.run(subscribed, token.clone()));
    }
}
