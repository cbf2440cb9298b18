//! The release binary's function order: `scripts/symbol_order.py` makes `link/hot-symbols.txt`
//! from callgrind profiles of the relay in parts (its start, its running, its stop), and puts
//! what a ready relay runs first.

use std::{path::Path, process::Command};

/// A callgrind file of process `pid`'s part `part`, dumped by `trigger`, in which each of
/// `functions` (name, own instructions) is a function of the relay's binary; a function of
/// libc is added to every part, to be left out.
fn profile(
    dir: &Path,
    file: &str,
    pid: u32,
    part: u32,
    trigger: &str,
    functions: &[(String, u64)],
) {
    let mut text = format!(
        "version: 1\ncreator: callgrind-3.19.0\npid: {pid}\ncmd: hookrelay serve\npart: {part}\n\n\
         desc: I1 cache:\ndesc: Trigger: {trigger}\n\npositions: line\nevents: Ir\n\n\
         ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6\nfl=(1) ???\nfn=(1) memcpy\n0 999999\n\n\
         ob=(2) /tmp/profiled/hookrelay\nfl=(2) ???\n"
    );
    for (i, (name, cost)) in functions.iter().enumerate() {
        let id = i + 2;
        text.push_str(&format!("fn=({id}) {name}\n0 {cost}\n"));
        if i == 0 && functions.len() > 1 {
            // A call's line: its cost is the callee's, not the caller's own.
            text.push_str(&format!(
                "cfn=({}) {}\ncalls=1 0\n0 {}\n",
                id + 1,
                functions[1].0,
                10_000_000
            ));
        }
    }
    text.push_str("totals: 1\n");
    std::fs::write(dir.join(file), text).unwrap();
}

fn named(prefix: &str, n: usize, top: u64) -> Vec<(String, u64)> {
    (0..n)
        .map(|i| (format!("{prefix}{i:04}"), top - i as u64))
        .collect()
}

#[test]
fn a_ready_relay_s_functions_come_first_and_the_start_s_after_them() {
    let dir = tempfile::tempdir().unwrap();
    // Relay 100: its start (up to the give-back at ready), its running, its stop.
    let mut start = named("_ZN5start", 600, 90_000);
    start.push(("_ZN6shared".to_string(), 1_000_000));
    profile(
        dir.path(),
        "profile.100.1",
        100,
        1,
        "--dump-after=*binary_pages*give_back*",
        &start,
    );
    let mut running = named("_ZN3run", 900, 50_000);
    running.push(("_ZN6shared".to_string(), 10));
    profile(dir.path(), "profile.100.2", 100, 2, "dump", &running);
    profile(
        dir.path(),
        "profile.100",
        100,
        3,
        "Program termination",
        &named("_ZN4stop", 3, 100),
    );
    // Relay 200 was never split (an older way of profiling): all of it counts as running.
    profile(
        dir.path(),
        "profile.200",
        200,
        1,
        "Program termination",
        &named("_ZN5whole", 200, 30_000),
    );
    let out = dir.path().join("hot-symbols.txt");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("profile.")
        })
        .collect();
    files.sort();
    let status = Command::new("python3")
        .arg(Path::new(root).join("scripts/symbol_order.py"))
        .arg(&out)
        .arg("/hookrelay")
        .args(&files)
        .status()
        .expect("python3");
    assert!(status.success());
    let list = std::fs::read_to_string(&out).unwrap();
    let names: Vec<&str> = list.lines().filter(|l| !l.starts_with('#')).collect();
    // The running functions of both relays, the most instructions first, each once; `shared`
    // ran in the start and in the running and counts with its running cost only (the last of
    // them), though its start made it the costliest of all.
    let mut want: Vec<(String, u64)> = running.clone();
    want.extend(named("_ZN5whole", 200, 30_000));
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut expected: Vec<String> = want.into_iter().map(|(n, _)| n).collect();
    // Then what only the start and the stop ran, the most instructions first.
    let mut rest: Vec<(String, u64)> = named("_ZN5start", 600, 90_000);
    rest.extend(named("_ZN4stop", 3, 100));
    rest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    expected.extend(rest.into_iter().map(|(n, _)| n));
    assert_eq!(names.len(), expected.len());
    assert_eq!(names, expected);
    assert!(!names.contains(&"memcpy"));
    assert!(list.starts_with("# The functions a running relay executes"));
}
