//! Series computed when scraped rather than kept up to date: the seconds since each source's
//! last bus message (a gauge that grows while the bus is quiet, which a stored value cannot do).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
};

use super::SourceLabel;

/// When each source's last bus message arrived, as milliseconds since the relay started.
#[derive(Debug)]
pub(super) struct BusClock {
    started: Instant,
    sources: Mutex<Vec<(String, Arc<AtomicU64>)>>,
}

impl Default for BusClock {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            sources: Mutex::default(),
        }
    }
}

/// One source's clock: ticked by its subscriber.
#[derive(Debug, Clone)]
pub(crate) struct SourceClock {
    started: Instant,
    /// `u64::MAX`: none yet.
    last_ms: Arc<AtomicU64>,
}

impl SourceClock {
    /// A bus message arrived now.
    pub(crate) fn tick(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }
}

impl BusClock {
    /// The clock of source `name`, shown from now on (the same one when asked again).
    pub(super) fn source(&self, name: &str) -> SourceClock {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let last_ms = match sources.iter().find(|(n, _)| n == name) {
            Some((_, last)) => last.clone(),
            None => {
                let last = Arc::new(AtomicU64::new(u64::MAX));
                sources.push((name.to_string(), last.clone()));
                last
            }
        };
        SourceClock {
            started: self.started,
            last_ms,
        }
    }

    fn since(&self, last: &AtomicU64) -> f64 {
        let now = self.started.elapsed().as_millis() as u64;
        let last = match last.load(Ordering::Relaxed) {
            u64::MAX => 0,
            ms => ms,
        };
        now.saturating_sub(last) as f64 / 1000.0
    }
}

impl Collector for BusClock {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        let mut family = encoder.encode_descriptor(
            "hookrelay_bus_seconds_since_last_message",
            "Seconds since the last message arrived from the source's bus (since start if none did)",
            None,
            MetricType::Gauge,
        )?;
        for (name, last) in sources.iter() {
            let label = SourceLabel {
                source: name.clone(),
            };
            let metric = family.encode_family(&label)?;
            ConstGauge::new(self.since(last)).encode(metric)?;
        }
        Ok(())
    }
}
