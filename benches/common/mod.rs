//! What the plugin benchmarks share: the hook the events go to, and starting a plugin.

use hookrelay::{Defaults, Hook, Host, Metrics, Plugin, Settings, wasm_digest};

/// A hook for every meeting and event, getting processed events.
pub(crate) fn hook() -> Hook {
    Hook {
        id: hookrelay::base::ids::HookId(1),
        callback_url: "https://lms.example/bbb/callback".into(),
        meeting_id: None,
        event_ids: None,
        get_raw: false,
        permanent: false,
        tenant: None,
        disabled: None,
        signing: None,
    }
}

/// Compiles `bytes` (or reads them from `host`'s cache) and starts the plugin with the
/// settings `toml` (defaults when `None`); whether the code came from the cache.
pub(crate) fn start(host: &Host, name: &str, bytes: &[u8], toml: Option<&str>) -> (Plugin, bool) {
    let digest = wasm_digest(bytes);
    let (component, cached) = host.compile(bytes, &digest).expect("compiles");
    let settings = Settings::parse(toml, &Defaults::default()).expect("settings");
    let plugin = Plugin::load(
        host,
        name,
        &component,
        settings,
        [0; 32],
        digest,
        Metrics::new(),
    )
    .expect("loads");
    (plugin, cached)
}
