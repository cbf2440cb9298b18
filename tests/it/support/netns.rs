//! A network namespace joined to the host by a veth pair, for cutting one relay off the network
//! ([`NetCut::cut`]: the host's end goes down; nothing is reset, packets are just lost). Needs
//! root and `ip`; [`NetCut::create`] says `None` where namespaces cannot be made, where the
//! pair's addresses would not be routed through it (or when `HOOKRELAY_TEST_NO_NETNS` is set,
//! to try the tests' other way).
//!
//! Each test process takes its own /30 out of [`RANGE`], from its process id, so that two test
//! runs on one machine (a CI run beside a developer's) never route into each other's namespace.

use std::process::Command;

/// Where the pairs' addresses come from; test relays' SSRF guard lets callbacks through to it.
pub(crate) const RANGE: &str = "10.201.0.0/16";

pub(crate) struct NetCut {
    pub name: String,
    host_link: String,
    /// The host's end of the pair.
    pub host_ip: String,
    /// The namespace's end.
    pub ns_ip: String,
}

fn ip(args: &[&str]) -> bool {
    ip_output(args).is_some()
}

fn ip_output(args: &[&str]) -> Option<String> {
    let out = Command::new("ip").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes the pairs and namespaces of test processes that died before they cleaned up.
fn remove_leftovers() {
    let Some(links) = ip_output(&["-o", "link", "show"]) else {
        return;
    };
    for link in links.split('\n') {
        let Some(name) = link.split(": ").nth(1).and_then(|n| n.split('@').next()) else {
            continue;
        };
        let Some(pid) = name.strip_prefix("hrh").and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            ip(&["link", "del", name]);
            ip(&["netns", "del", &format!("hrns{pid}")]);
        }
    }
}

impl NetCut {
    pub(crate) fn create() -> Option<Self> {
        if std::env::var_os("HOOKRELAY_TEST_NO_NETNS").is_some() {
            return None;
        }
        remove_leftovers();
        let pid = std::process::id();
        // One of the 16384 /30s of RANGE.
        let n = pid % (1 << 14);
        let (c, d) = (n / 64, (n % 64) * 4);
        let cut = Self {
            name: format!("hrns{pid}"),
            host_link: format!("hrh{pid}"),
            host_ip: format!("10.201.{c}.{}", d + 1),
            ns_ip: format!("10.201.{c}.{}", d + 2),
        };
        let ns_link = format!("hrn{pid}");
        let ns_cidr = format!("{}/30", cut.ns_ip);
        let host_cidr = format!("{}/30", cut.host_ip);
        let (name, host_link) = (cut.name.as_str(), cut.host_link.as_str());
        let steps: [&[&str]; 8] = [
            &["netns", "add", name],
            &[
                "link", "add", host_link, "type", "veth", "peer", "name", &ns_link,
            ],
            &["link", "set", &ns_link, "netns", name],
            &["addr", "add", &host_cidr, "dev", host_link],
            &["link", "set", host_link, "up"],
            &[
                "netns", "exec", name, "ip", "addr", "add", &ns_cidr, "dev", &ns_link,
            ],
            &["netns", "exec", name, "ip", "link", "set", &ns_link, "up"],
            &["netns", "exec", name, "ip", "link", "set", "lo", "up"],
        ];
        if !steps.iter().all(|s| ip(s)) {
            return None;
        }
        // Another process's pair on the same addresses would take the packets.
        let route = ip_output(&["route", "get", &cut.ns_ip]).unwrap_or_default();
        let routed = route.split_whitespace().any(|w| w == cut.host_link);
        if !routed {
            eprintln!(
                "{} is not routed through {}: {route}",
                cut.ns_ip, cut.host_link
            );
        }
        routed.then_some(cut)
    }

    /// Cuts the namespace off (`true`) or joins it again (`false`).
    pub(crate) fn cut(&self, off: bool) {
        let state = if off { "down" } else { "up" };
        assert!(
            ip(&["link", "set", &self.host_link, state]),
            "ip link set {state}"
        );
    }
}

impl Drop for NetCut {
    fn drop(&mut self) {
        ip(&["link", "del", &self.host_link]);
        ip(&["netns", "del", &self.name]);
    }
}
