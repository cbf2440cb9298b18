//! The rules of the `[config]` table: reading and checking them (errors name the rule and the
//! key), and deciding an event: the first rule whose pattern matches, else `default`.

use std::{collections::HashMap, sync::Mutex};

use serde_json::{Map, Value};

use crate::{pattern::Pattern, view::Wanted};

/// An ordered list of rules and the action when none matches.
pub struct Rules {
    default_keep: bool,
    rules: Vec<Rule>,
    /// The fields of the processed event some pattern looks at (the rest is skipped).
    event: Option<Wanted>,
    /// Whether some pattern looks at `hook`.
    hook: bool,
    /// The fields of the meeting some pattern looks at.
    meeting: Option<Wanted>,
    /// Those fields by internal meeting id: a meeting's facts never change, and asking the
    /// relay and reading them costs more than the rules.
    meetings: Mutex<HashMap<String, Value>>,
}

/// Meetings whose facts are kept; past it the cache starts again.
const CACHED_MEETINGS: usize = 256;

struct Rule {
    name: String,
    keep: bool,
    pattern: Pattern,
}

/// What decided an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Rule `index` (0-based) matched.
    Rule { index: usize, keep: bool },
    /// No rule matched.
    Default { keep: bool },
}

/// What a pattern sees of one event going to one hook.
pub struct View<'a> {
    /// The processed event JSON (also for raw hooks).
    pub processed: &'a str,
    pub hook_id: u64,
    pub callback_url: &'a str,
    pub meeting_id: Option<&'a str>,
    pub get_raw: bool,
    /// The event's internal meeting id: its facts are asked for once.
    pub internal_meeting_id: Option<&'a str>,
    /// The meeting's facts as JSON (asked only when a pattern looks at `meeting`).
    pub meeting: &'a dyn Fn() -> Option<String>,
}

const RULE_KEYS: [&str; 3] = ["name", "action", "pattern"];

fn action(value: &Value, what: &str) -> Result<bool, String> {
    match value.as_str() {
        Some("keep") => Ok(true),
        Some("drop") => Ok(false),
        _ => Err(format!("{what} is \"keep\" or \"drop\", not {value}")),
    }
}

impl Rules {
    /// Reads `default` (a string; `keep` when absent) and `rules` (JSON text of the array of
    /// tables `[[config.rules]]`), as the relay's `get-config` hands them over.
    ///
    /// # Errors
    /// Names the rule (number and name) and the key that is wrong, and why.
    pub fn from_config(default: Option<&str>, rules: Option<&str>) -> Result<Self, String> {
        let default_keep = match default {
            None => true,
            Some(d) => action(&Value::String(d.to_string()), "`default`")?,
        };
        let list = match rules {
            None => Vec::new(),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(items)) => items,
                _ => {
                    return Err(
                        "`rules` is a list of tables: write each as [[config.rules]]".into(),
                    );
                }
            },
        };
        let mut out = Vec::with_capacity(list.len());
        let mut wanted = Wanted::default();
        for (i, item) in list.iter().enumerate() {
            let rule = Self::rule(i, item)?;
            if let Some(pattern) = item.get("pattern") {
                wanted.add(pattern);
            }
            out.push(rule);
        }
        let Wanted::Fields(mut fields) = wanted else {
            return Err("a pattern is a table".into());
        };
        let hook = fields.remove("hook").is_some();
        let meeting = fields.remove("meeting");
        Ok(Self {
            default_keep,
            rules: out,
            event: (!fields.is_empty()).then_some(Wanted::Fields(fields)),
            hook,
            meeting,
            meetings: Mutex::default(),
        })
    }

    fn rule(i: usize, item: &Value) -> Result<Rule, String> {
        let label = match item.get("name").and_then(Value::as_str) {
            Some(name) => format!("rule {} ({name:?})", i + 1),
            None => format!("rule {}", i + 1),
        };
        let fail = |e: String| format!("{label}: {e}");
        let Value::Object(table) = item else {
            return Err(fail("not a table".into()));
        };
        if let Some(k) = table.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
            return Err(fail(format!(
                "unknown key `{k}` (a rule has name, action and pattern)"
            )));
        }
        let name = match table.get("name") {
            None => format!("rule-{}", i + 1),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(other) => return Err(fail(format!("`name` is a non-empty string, not {other}"))),
        };
        let keep = match table.get("action") {
            None => return Err(fail("`action` is missing (keep or drop)".into())),
            Some(a) => action(a, "`action`").map_err(fail)?,
        };
        let pattern = match table.get("pattern") {
            None => return Err(fail("`pattern` is missing".into())),
            Some(p @ Value::Object(_)) => Pattern::compile(p).map_err(|e| {
                let at = if e.path.is_empty() {
                    "pattern".to_string()
                } else {
                    format!("pattern.{}", e.path)
                };
                fail(format!("`{at}`: {}", e.message))
            })?,
            Some(other) => return Err(fail(format!("`pattern` is a table, not {other}"))),
        };
        Ok(Rule {
            name,
            keep,
            pattern,
        })
    }

    /// The first rule that matches `view`, or the default.
    pub fn decide(&self, view: &View<'_>) -> Decision {
        if self.rules.is_empty() {
            return Decision::Default {
                keep: self.default_keep,
            };
        }
        let root = self.build(view);
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.pattern.matches(&root) {
                return Decision::Rule {
                    index,
                    keep: rule.keep,
                };
            }
        }
        Decision::Default {
            keep: self.default_keep,
        }
    }

    /// The parts of the view the patterns look at, as one JSON object.
    fn build(&self, view: &View<'_>) -> Value {
        let mut root = Map::new();
        if let Some(wanted) = &self.event
            && let Some(Value::Object(event)) = wanted.read(view.processed)
        {
            root = event;
        }
        if self.hook {
            let mut hook = Map::new();
            hook.insert("id".into(), view.hook_id.into());
            hook.insert("callback-url".into(), view.callback_url.into());
            if let Some(m) = view.meeting_id {
                hook.insert("meeting-id".into(), m.into());
            }
            hook.insert("get-raw".into(), view.get_raw.into());
            root.insert("hook".into(), Value::Object(hook));
        }
        if let Some(wanted) = &self.meeting
            && let Some(meeting) = self.meeting_of(wanted, view)
        {
            root.insert("meeting".into(), meeting);
        }
        Value::Object(root)
    }

    /// The wanted fields of the event's meeting, from the cache or asked for (a meeting the
    /// relay does not know is asked for again each time).
    fn meeting_of(&self, wanted: &Wanted, view: &View<'_>) -> Option<Value> {
        let mut cache = self.meetings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = view.internal_meeting_id
            && let Some(facts) = cache.get(id)
        {
            return Some(facts.clone());
        }
        let facts = wanted.read(&(view.meeting)()?)?;
        if let Some(id) = view.internal_meeting_id {
            if cache.len() >= CACHED_MEETINGS {
                cache.clear();
            }
            cache.insert(id.to_string(), facts.clone());
        }
        Some(facts)
    }

    /// Rule `index`'s name (`rule-N` when it has none).
    pub fn name(&self, index: usize) -> &str {
        self.rules.get(index).map_or("", |r| r.name.as_str())
    }

    /// One line for the log: how many rules, their names and the default.
    pub fn summary(&self) -> String {
        let names: Vec<String> = self
            .rules
            .iter()
            .map(|r| format!("{} ({})", r.name, if r.keep { "keep" } else { "drop" }))
            .collect();
        format!(
            "rules: {} rule(s): {}; default {}",
            self.rules.len(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
            if self.default_keep { "keep" } else { "drop" }
        )
    }
}

#[cfg(test)]
mod tests;
