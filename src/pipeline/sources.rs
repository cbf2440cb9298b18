//! The sources' side of the wiring: each source's processing state read back from the store
//! (id mappings and conference state, under its own keys), and each source's subscriber and
//! `getMeetings` seeder started as tasks of their own, so that one server going down touches
//! nothing of the others.

use std::sync::Arc;

use redis::aio::ConnectionManager;
use tokio::sync::{mpsc, watch};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    base::{redis_keys::SourceKeys, sources::SourceId, time::now_ms},
    bus::{BusMessage, Subscriber},
    conference::{self, SharedConference},
    config::{Config, SourceConfig},
    event::{
        mapping::Mappings,
        persist,
        process::{EventFilter, Processor},
    },
    metrics::Metrics,
    redis_conn::redis_client,
    shutdown::retry_until_ok,
};

/// One source as the pipeline runs it.
pub struct Source {
    pub id: SourceId,
    pub config: SourceConfig,
    pub keys: SourceKeys,
    pub conference: SharedConference,
}

/// The configured sources, each with its keys and an empty conference state.
pub fn configured(config: &Config) -> Vec<Source> {
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
pub async fn restore(
    sources: &[Source],
    conn: &ConnectionManager,
    config: &Config,
    token: &CancellationToken,
) -> Option<Vec<Processor>> {
    let filter = EventFilter {
        include: config.delivery.include_events.clone(),
        exclude: config.delivery.exclude_events.clone(),
    };
    let mut processors = Vec::with_capacity(sources.len());
    for s in sources {
        let keys = &s.keys;
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
            source = %s.config.name,
            meetings = meetings.len(),
            users = users.len(),
            "id mappings restored"
        );
        s.conference
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .restore(rooms, recordings, now_ms());
        let mut mappings = Mappings::new(
            config.mapping.inactivity_timeout_s.saturating_mul(1000),
            true,
        );
        mappings.restore(meetings, users, now_ms());
        processors.push(
            Processor::new(mappings, filter.clone())
                .with_conference(s.conference.clone())
                .with_source(s.id),
        );
    }
    Some(processors)
}

/// Starts every source's subscriber (and seeder, where `api_url` is set). Returns each
/// source's subscription counter, for readiness.
///
/// # Errors
/// When a source's Redis URL is unusable.
pub fn subscribe_all(
    sources: &[Source],
    config: &Config,
    bus: &mpsc::Sender<BusMessage>,
    metrics: &Arc<Metrics>,
    tracker: &TaskTracker,
    token: &CancellationToken,
) -> anyhow::Result<Vec<watch::Receiver<u64>>> {
    let mut counters = Vec::with_capacity(sources.len());
    for s in sources {
        let name: Arc<str> = s.config.name.as_str().into();
        let client = redis_client(s.config.url.expose())
            .map_err(|e| anyhow::anyhow!("source {name}: {e}"))?;
        let (subscribed, _) = watch::channel(0);
        counters.push(subscribed.subscribe());
        if !s.config.api_url.is_empty() {
            tracker.spawn(conference::seed::run(
                name.clone(),
                s.config.api_url.clone(),
                s.config.secret.clone(),
                s.conference.clone(),
                subscribed.subscribe(),
                metrics.clone(),
                token.clone(),
            ));
        }
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
    Ok(counters)
}
