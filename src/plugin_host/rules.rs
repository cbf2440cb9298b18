//! `count-rule-match`: per-rule counters of a plugin, `hookrelay_plugin_rule_matches{plugin,
//! rule}`, with a bound on the rule names one plugin may create series for.

use std::{collections::HashMap, sync::Mutex};

use prometheus_client::metrics::counter::Counter;

use crate::metrics::{Metrics, PluginRuleLabels};

/// Rule names one plugin may have series for; later names count as [`OTHER`].
pub(super) const MAX_RULES: usize = 256;
/// The rule name past [`MAX_RULES`].
pub(super) const OTHER: &str = "other";
/// Longest rule name kept; longer ones are cut.
const MAX_NAME: usize = 128;

/// One plugin's rule counters, shared by its instances.
pub(super) struct RuleCounts {
    plugin: String,
    metrics: std::sync::Arc<Metrics>,
    counters: Mutex<HashMap<String, Counter>>,
}

impl RuleCounts {
    pub(super) fn new(plugin: &str, metrics: std::sync::Arc<Metrics>) -> Self {
        Self {
            plugin: plugin.to_string(),
            metrics,
            counters: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one match of rule `name`.
    pub(super) fn count(&self, name: &str) {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = counters.get(name) {
            c.inc();
            return;
        }
        let name: String = if counters.len() >= MAX_RULES {
            OTHER.into()
        } else {
            name.chars()
                .take(MAX_NAME)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect()
        };
        let counter = self
            .metrics
            .plugin_rule_matches
            .get_or_create(&PluginRuleLabels {
                plugin: self.plugin.clone(),
                rule: name.clone(),
            })
            .clone();
        counter.inc();
        if counters.len() < MAX_RULES {
            counters.insert(name, counter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_rule_and_bounds_the_names() {
        let metrics = Metrics::new();
        let counts = RuleCounts::new("rules", metrics.clone());
        counts.count("a");
        counts.count("a");
        for i in 0..MAX_RULES + 5 {
            counts.count(&format!("r{i}"));
        }
        let get = |rule: &str| {
            metrics
                .plugin_rule_matches
                .get_or_create(&PluginRuleLabels {
                    plugin: "rules".into(),
                    rule: rule.into(),
                })
                .get()
        };
        assert_eq!(get("a"), 2);
        assert_eq!(get("r0"), 1);
        assert_eq!(get(OTHER), 6, "names past the bound");
    }
}
