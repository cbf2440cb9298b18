//! Leaf modules that every layer may use and that use nothing else of the crate (a unit test
//! below checks it): the shared secret, digest algorithms, Standard Webhooks signatures, form
//! encoding, the callback URL policy, the Redis key names and the binary's own pages (given
//! back once the start is over). Configuration, stages and tools sit above them.

pub mod binary_pages;
pub mod ca;
pub mod callback_url;
pub mod digest;
pub mod form;
pub mod forwarded;
pub mod ids;
pub mod redis_keys;
pub mod secret;
pub mod sources;
pub mod standard_webhooks;
pub mod time;
pub mod unix;

/// An error and its sources in one line, `outer: inner: ...`. Callers strip what must not be
/// shown first (a URL with a checksum: `reqwest::Error::without_url`).
pub fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    /// A leaf imports nothing of the crate: that is what keeps the layers above free of cycles.
    #[test]
    fn leaves_import_nothing_of_the_crate() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/base");
        for entry in std::fs::read_dir(&dir).expect("src/base") {
            let path = entry.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("source");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code = code.replace("crate::base::", "");
            assert!(
                !code.contains("crate::") && !code.contains("super::"),
                "{} imports from the crate",
                path.display()
            );
        }
    }
}
