//! Bus input: any bytes as a sequence of bus messages through decode, map and the state changes.
#![no_main]

use std::sync::Arc;

use hookrelay::{EventFilter, Mappings, OUTPUT_IDS, Processor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = Processor::new(Mappings::new(86_400_000, false), EventFilter::default());
    // Several messages, so that state built by one feeds the next.
    for chunk in data.split(|b| *b == 0) {
        let Ok(text) = std::str::from_utf8(chunk) else {
            continue;
        };
        if let Ok(events) = p.process(&Arc::from(text), 1) {
            for e in events {
                assert!(OUTPUT_IDS.contains(&e.id.as_str()));
                let v: serde_json::Value = serde_json::from_str(e.processed.text()).unwrap();
                assert_eq!(v["data"]["type"], "event");
            }
        }
    }
});
