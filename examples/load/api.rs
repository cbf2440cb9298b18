//! The API scenario: `hooks/list` with many hooks and `hooks/create` of new hooks, driven by
//! `wrk` (Debian's package) on loopback. With tenants, the hooks are spread over them, the
//! new hooks are tenant t0's, and a tenant's `hooks/list` is measured beside the operator's.

use std::{io::Write, time::Duration};

use hookrelay::base::{digest::Algorithm, form::form_encode};

use crate::{
    launch::{Relay, Setup, tenant, tenant_secret},
    procstat,
    scenario::Figures,
    support::{SECRET, TestRedis},
};

/// `/bigbluebutton/api/hooks/<call>?<query>&checksum=...` signed with `secret`.
fn signed_path(call: &str, query: &str, secret: &str) -> String {
    let checksum = Algorithm::Sha1.hex_digest(&[
        format!("hooks/{call}").as_bytes(),
        query.as_bytes(),
        secret.as_bytes(),
    ]);
    format!("/bigbluebutton/api/hooks/{call}?{query}&checksum={checksum}")
}

/// Runs wrk for `seconds` against `base` (to host `host` when given), with a Lua `script` when
/// given; requests per second.
fn wrk(
    base: &str,
    path: &str,
    seconds: u64,
    script: Option<&std::path::Path>,
    host: Option<&str>,
) -> f64 {
    let mut cmd = std::process::Command::new("wrk");
    cmd.args(["-t2", "-c32", &format!("-d{seconds}s")]);
    if let Some(h) = host {
        cmd.arg("-H").arg(format!("Host: {h}"));
    }
    if let Some(s) = script {
        cmd.arg("-s").arg(s);
    }
    let out = cmd
        .arg(format!("{base}{path}"))
        .output()
        .expect("wrk (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("Non-2xx") {
        eprintln!("{text}");
    }
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

pub(crate) async fn run(setup: &Setup, hooks: usize, seconds: u64) -> Figures {
    let redis = TestRedis::start().await;
    let (relay, _) = Relay::start(setup, &redis, "").await;
    for i in 0..hooks {
        let url = format!("http://127.0.0.1:9/existing/{i}");
        match setup.tenants {
            0 => relay.create_hook(&url).await,
            n => relay.create_tenant_hook(i % n, &url).await,
        };
    }
    let base = format!("http://{}", relay.api);
    let list = tokio::task::spawn_blocking({
        let base = base.clone();
        move || wrk(&base, &signed_path("list", "", SECRET), seconds, None, None)
    });
    let list_rps = list.await.unwrap_or(0.0);
    // The caller of the creates (and of the tenant's list): tenant t0, or the operator.
    let (host, secret) = match setup.tenants {
        0 => (None, SECRET.to_string()),
        _ => (Some(tenant(0).1), tenant_secret(0)),
    };
    let tenant_list_rps = match &host {
        None => None,
        Some(h) => {
            let (base, h, path) = (base.clone(), h.clone(), signed_path("list", "", &secret));
            let rps =
                tokio::task::spawn_blocking(move || wrk(&base, &path, seconds, None, Some(&h)));
            Some(rps.await.unwrap_or(0.0))
        }
    };

    // Enough distinct new callback URLs for the run; each wrk thread takes every other one.
    let dir = tempfile::tempdir().expect("temp dir");
    let paths = dir.path().join("paths.txt");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&paths).expect("paths"));
    for i in 0..(40_000 * seconds as usize) {
        let url = format!("http://127.0.0.1:9/new/{i}");
        let q = format!("callbackURL={}", form_encode(&url));
        writeln!(file, "{}", signed_path("create", &q, &secret)).expect("write");
    }
    drop(file);
    let script = dir.path().join("create.lua");
    std::fs::write(
        &script,
        format!(
            "local n = 0\nfunction setup(thread) thread:set('tid', n); n = n + 1 end\n\
             function init(args)\n  paths = {{}}\n  for l in io.lines('{}') do paths[#paths + 1] = l end\n  i = tid\nend\n\
             function request()\n  local p = paths[(i % #paths) + 1]\n  i = i + 2\n  return wrk.format('GET', p)\nend\n",
            paths.display()
        ),
    )
    .expect("script");
    let create = tokio::task::spawn_blocking({
        let base = base.clone();
        move || wrk(&base, "/", seconds, Some(&script), host.as_deref())
    });
    let create_rps = create.await.unwrap_or(0.0);
    let created = hookrelay_hooks(&redis).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut f = Figures {
        ok: list_rps > 0.0 && create_rps > 0.0 && created > hooks,
        ..Figures::default()
    };
    f.push("list_rps", list_rps);
    if let Some(rps) = tenant_list_rps {
        f.push("tenant_list_rps", rps);
    }
    f.push("create_rps", create_rps);
    f.push("hooks_at_end", created as f64);
    f.push(
        "relay_peak_rss_mib",
        procstat::peak_rss_kib(relay.pid()).unwrap_or(0) as f64 / 1024.0,
    );
    relay.kill9().await;
    f
}

/// Hooks registered in Redis.
async fn hookrelay_hooks(redis: &TestRedis) -> usize {
    let Some(mut c) = redis.conn().await else {
        return 0;
    };
    redis::cmd("SCARD")
        .arg(hookrelay::base::redis_keys::HOOKS_SET)
        .query_async(&mut c)
        .await
        .unwrap_or(0)
}
