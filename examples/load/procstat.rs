//! The relay process's own figures, read from `/proc`: peak resident memory and CPU time.

/// Peak resident set size (`VmHWM`) of process `pid`, in KiB.
pub(crate) fn peak_rss_kib(pid: u32) -> Option<u64> {
    kib(&status(pid)?, "VmHWM:")
}

/// `/proc/<pid>/status`.
fn status(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

/// The KiB of line `name` (e.g. `VmRSS:`) of a status file.
fn kib(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User plus system CPU seconds used so far by process `pid` (all its threads).
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Resident set size now (`VmRSS`) of process `pid`, in KiB.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    kib(&status(pid)?, "VmRSS:")
}

/// The peaks of a process's anonymous and file-backed resident memory (`RssAnon`,
/// `RssFile`), sampled every 10 ms by a thread until [`RssPeaks::stop`]: the kernel keeps
/// only their sum's peak (`VmHWM`), and the two parts answer different questions (the heap
/// against the binary's pages).
pub(crate) struct RssPeaks {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(u64, u64)>,
}

impl RssPeaks {
    pub(crate) fn start(pid: u32) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peaks = (0, 0);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some((anon, file)) = rss_parts_kib(pid) {
                    peaks = (peaks.0.max(anon), peaks.1.max(file));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            peaks
        });
        Self { stop, thread }
    }

    /// The peaks seen, anonymous and file-backed, in MiB.
    pub(crate) fn stop(self) -> (f64, f64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (anon, file) = self.thread.join().unwrap_or((0, 0));
        (anon as f64 / 1024.0, file as f64 / 1024.0)
    }
}

/// `RssAnon` and `RssFile` of process `pid` now, in KiB.
fn rss_parts_kib(pid: u32) -> Option<(u64, u64)> {
    let status = status(pid)?;
    Some((kib(&status, "RssAnon:")?, kib(&status, "RssFile:")?))
}
