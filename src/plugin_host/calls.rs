//! The plugin calls made for one callback, noted while its trace records them: the worker
//! runs the chain inside [`noting`] on a plugin thread, [`note`] adds each call made there,
//! and the calls become `plugin <name>` spans under the callback's trace. Outside
//! [`noting`] (traces off, an untraced callback, `hookrelay replay`) nothing is noted.

use std::{cell::RefCell, sync::Arc, time::SystemTime};

use crate::traces::PluginCall;

thread_local! {
    static NOTED: RefCell<Option<Vec<PluginCall>>> = const { RefCell::new(None) };
}

/// Runs `f`, noting the plugin calls it makes on this thread.
pub(crate) fn noting<R>(f: impl FnOnce() -> R) -> (R, Vec<PluginCall>) {
    NOTED.with(|n| *n.borrow_mut() = Some(Vec::new()));
    // Taken back even when `f` panics (the caller catches it).
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            NOTED.with(|n| n.borrow_mut().take());
        }
    }
    let reset = Reset;
    let out = f();
    let calls = NOTED.with(|n| n.borrow_mut().take()).unwrap_or_default();
    drop(reset);
    (out, calls)
}

/// When calls are noted on this thread, the wall-clock time a call starts at.
pub(super) fn started() -> Option<SystemTime> {
    NOTED.with(|n| n.borrow().is_some().then(SystemTime::now))
}

/// Notes a call of `plugin` that began at `started` and came to `result`.
pub(super) fn note(plugin: &Arc<str>, result: &'static str, started: SystemTime) {
    let ended = SystemTime::now();
    NOTED.with(|n| {
        if let Some(calls) = n.borrow_mut().as_mut() {
            calls.push(PluginCall {
                plugin: plugin.clone(),
                result,
                started,
                ended,
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_made_inside_noting_are_noted() {
        let name: Arc<str> = "filter".into();
        assert!(started().is_none());
        note(&name, "keep", SystemTime::now());
        let ((), calls) = noting(|| {
            let at = started().expect("noting");
            note(&name, "drop", at);
        });
        assert_eq!(calls.len(), 1);
        assert_eq!((&*calls[0].plugin, calls[0].result), ("filter", "drop"));
        assert!(started().is_none(), "noting ends with its closure");
    }
}
