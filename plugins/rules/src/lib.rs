//! Keeps or drops each event by an ordered list of rules in the `[config]` of the plugin's
//! NAME.toml: the first rule whose pattern matches decides, `default` when none does. A
//! pattern is an AWS EventBridge event pattern ([`pattern`]), written as TOML, over a view of
//! the event: the processed event's keys (`data`), the `hook` it goes to, and its `meeting`
//! (from its `meeting-created`, as the relay keeps it). The relay reloads the plugin when the
//! file changes; a file with an error keeps the previous rules running.

pub mod pattern;
pub mod rules;
pub mod view;

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

    use std::sync::OnceLock;

    use bbb::relay::host::{count_rule_match, get_config, log, meeting};
    use bbb::relay::types::*;

    use crate::rules::{Decision, Rules, View};

    /// The rules, read once per instance by `init`.
    static RULES: OnceLock<Rules> = OnceLock::new();

    struct RulesPlugin;

    impl Guest for RulesPlugin {
        fn init() -> Result<Vec<String>, String> {
            let rules = Rules::from_config(
                get_config("default").as_deref(),
                get_config("rules").as_deref(),
            )?;
            log(Level::Info, &rules.summary());
            let _ = RULES.set(rules);
            Ok(Vec::new())
        }

        fn on_event(event: Event, hook: Hook) -> Action {
            let Some(rules) = RULES.get() else {
                return Action::Keep;
            };
            let view = View {
                processed: &event.processed,
                hook_id: hook.id,
                callback_url: &hook.callback_url,
                meeting_id: hook.meeting_id.as_deref(),
                get_raw: hook.get_raw,
                internal_meeting_id: event.internal_meeting_id.as_deref(),
                meeting: &|| meeting(),
            };
            match rules.decide(&view) {
                Decision::Rule { index, keep } => {
                    count_rule_match(rules.name(index));
                    if keep { Action::Keep } else { Action::Drop }
                }
                Decision::Default { keep } => {
                    if keep {
                        Action::Keep
                    } else {
                        Action::Drop
                    }
                }
            }
        }
    }

    export!(RulesPlugin);
}
