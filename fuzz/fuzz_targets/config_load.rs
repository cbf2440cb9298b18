//! Configuration input: any text as a configuration file loads or fails with one line.
#![no_main]

use hookrelay::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = Config::from_toml(text) {
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
    }
});
