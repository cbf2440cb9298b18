//! API input: any query string, unsigned and correctly signed, through the checksum check and the
//! parameter rules of create and destroy.
#![no_main]

use hookrelay::{
    params::{authenticate, hook_id, new_hook},
    base::{callback_url::Guard, digest::Algorithm},
};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "fuzz-secret";

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let guard = Guard::new(true, vec![]);
    let sum = Algorithm::Sha256.hex_digest(&[b"hooks/create", query.as_bytes(), SECRET.as_bytes()]);
    let signed = format!("{query}&checksum={sum}");
    for q in [query, signed.as_str()] {
        if let Ok(p) = authenticate("hooks/create", q, SECRET, &Algorithm::ALL) {
            let _ = new_hook(&p, &guard);
            let _ = hook_id(&p);
        }
    }
});
