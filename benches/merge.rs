//! The CPU cost of one `/metrics/all` scrape without the network: parsing five exporters'
//! answers of realistic size and merging them with the relay's own series.

use criterion::{Criterion, criterion_group, criterion_main};
use hookrelay::{
    Metrics,
    merge::{merge, parse},
};

/// An exporter answer: `families` gauge families of `per_family` labelled samples each, plus
/// one histogram family, in the Prometheus text format.
fn exporter(prefix: &str, families: usize, per_family: usize) -> String {
    let mut out = String::new();
    for f in 0..families {
        out.push_str(&format!(
            "# HELP {prefix}_metric_{f} Some help text.\n# TYPE {prefix}_metric_{f} gauge\n"
        ));
        for s in 0..per_family {
            out.push_str(&format!(
                "{prefix}_metric_{f}{{device=\"dev{s}\",mode=\"m{}\"}} {}.5\n",
                s % 4,
                s * 7
            ));
        }
    }
    out.push_str(&format!("# TYPE {prefix}_latency_seconds histogram\n"));
    let mut cumulative = 0;
    for (i, le) in ["0.005", "0.01", "0.05", "0.1", "0.5", "1", "+Inf"]
        .iter()
        .enumerate()
    {
        cumulative += i * 3;
        out.push_str(&format!(
            "{prefix}_latency_seconds_bucket{{le=\"{le}\"}} {cumulative}\n"
        ));
    }
    out.push_str(&format!(
        "{prefix}_latency_seconds_sum 12.5\n{prefix}_latency_seconds_count {cumulative}\n"
    ));
    out
}

fn bench(c: &mut Criterion) {
    // Node exporter (~2,000 samples), service-manager exporter (~300), three WebRTC processes
    // (~200 each), sharing some family names.
    let sources = [
        ("node", exporter("node", 100, 20)),
        ("systemd", exporter("systemd", 30, 10)),
        ("sfu-main", exporter("sfu", 20, 10)),
        ("sfu-video", exporter("sfu", 20, 10)),
        ("sfu-audio", exporter("sfu", 20, 10)),
    ];
    let own = Metrics::new().render();
    let samples: usize = sources.iter().map(|(_, t)| t.lines().count()).sum();
    println!("five sources, {samples} lines in all");
    c.bench_function("merge: parse only", |b| {
        b.iter(|| {
            let mut n = parse(&own, true).expect("own").len();
            for (_, text) in &sources {
                n += parse(text, false).expect("valid").len();
            }
            n
        })
    });
    c.bench_function("merge: parse and merge 5 sources + own", |b| {
        b.iter(|| {
            let mut parts = vec![("hookrelay", parse(&own, true).expect("own"))];
            for (name, text) in &sources {
                parts.push((*name, parse(text, false).expect("valid")));
            }
            merge(parts).0.len()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
