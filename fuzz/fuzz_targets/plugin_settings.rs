//! A plugin's NAME.toml: any text gives settings within their limits, or one line of error.
#![no_main]

use hookrelay::{Defaults, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Settings::parse(Some(text), &Defaults::default()) {
        Ok(s) => assert!(s.limits.validate().is_ok()),
        Err(e) => assert_eq!(e.to_string().lines().count(), 1, "{e}"),
    }
});
