//! Series computed when scraped rather than kept up to date: the seconds since the last bus
//! message (a gauge that grows while the bus is quiet, which a stored value cannot do).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Instant,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
};

/// When the last bus message arrived, as milliseconds since the relay started.
#[derive(Debug)]
pub struct BusClock {
    started: Instant,
    /// `u64::MAX`: none yet.
    last_ms: AtomicU64,
}

impl Default for BusClock {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            last_ms: AtomicU64::new(u64::MAX),
        }
    }
}

impl BusClock {
    /// A bus message arrived now.
    pub fn tick(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Seconds since the last bus message (since start when none came yet).
    pub fn seconds_since_last(&self) -> f64 {
        let now = self.started.elapsed().as_millis() as u64;
        let last = match self.last_ms.load(Ordering::Relaxed) {
            u64::MAX => 0,
            ms => ms,
        };
        now.saturating_sub(last) as f64 / 1000.0
    }
}

impl Collector for BusClock {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = ConstGauge::new(self.seconds_since_last());
        let metric = encoder.encode_descriptor(
            "hookrelay_bus_seconds_since_last_message",
            "Seconds since the last message arrived from the bus (since start if none did)",
            None,
            MetricType::Gauge,
        )?;
        gauge.encode(metric)
    }
}
