//! A default install on a BBB server: with `bbb.api_url` left empty, the relay finds BBB's API
//! in bbb-web's properties (its `bigbluebutton.web.serverURL`), tries bbb-web on the host first,
//! and calls `getMeetings` and `getRecordings` as bbb-exporter does, `state=processed`
//! included; `check-config` says which API it uses and why.

use std::path::Path;

use crate::support::{
    RelayProcess, TestRedis, bbb_api::FakeBbbApi, free_port, metric_value, process::binary,
    wait::until,
};

const EMPTY: &str = "<response><returncode>SUCCESS</returncode><meetings/></response>";

/// A bbb-web.properties naming `server_url`.
fn properties(dir: &Path, server_url: &str) -> std::path::PathBuf {
    let file = dir.join("bbb-web.properties");
    std::fs::write(
        &file,
        format!("securitySalt=not-read-here\nbigbluebutton.web.serverURL={server_url}\n"),
    )
    .expect("properties");
    file
}

/// Waits until the API got every call of one reconciliation, and the relay says it is up.
async fn reconciled(relay: &RelayProcess, api: &FakeBbbApi) {
    until("a getMeetings and every getRecordings", async || {
        let calls = api.calls();
        let want = [
            "getMeetings?",
            "getRecordings?state=processing",
            "getRecordings?state=processed",
            "getRecordings?state=published",
            "getRecordings?state=unpublished",
            "getRecordings?state=deleted",
        ];
        match want.iter().all(|w| calls.iter().any(|c| c == w)) {
            true => Ok(()),
            false => Err(calls),
        }
    })
    .await;
    until("bbb_api_up 1", async || {
        let text = relay.metrics().await;
        match metric_value(&text, "bbb_api_up") == 1.0
            && text.contains(
                "bbb_api_latency_count{endpoint=\"getRecordings\",parameters=\"state=processed\"}",
            ) {
            true => Ok(()),
            false => Err(text),
        }
    })
    .await;
}

#[tokio::test]
async fn without_api_url_the_serverurl_of_bbb_web_gives_the_api_after_bbb_web_on_the_host() {
    let redis = TestRedis::start().await;
    let api = FakeBbbApi::start(EMPTY.into()).await;
    let dir = tempfile::tempdir().expect("dir");
    let server_url = api.url.trim_end_matches("/bigbluebutton/api").to_string();
    let props = properties(dir.path(), &server_url);
    // Nothing listens where bbb-web would be on this host: the serverURL's API is used.
    let local = format!("http://127.0.0.1:{}/bigbluebutton/api", free_port());
    let list = format!("[\"{}\"]", props.display());
    let env = [
        ("HOOKRELAY_BBB__WEB_PROPERTIES", list.as_str()),
        ("HOOKRELAY_BBB__LOCAL_API_URL", local.as_str()),
        ("HOOKRELAY_BBB__RECONCILE_INTERVAL_S", "1"),
    ];
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    reconciled(&relay, &api).await;

    let out = std::process::Command::new(binary())
        .args(["check-config", "-c"])
        .arg(&relay.config)
        .envs(env)
        .output()
        .expect("check-config");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "BBB API: {local} (bbb-web on this host), which does not answer now, else {} (bigbluebutton.web.serverURL of {})",
            api.url,
            props.display()
        )),
        "{said}"
    );
    drop(relay);

    // bbb-web answers on the host: it is called there, whatever the serverURL says.
    let redis = TestRedis::start().await;
    let local_api = FakeBbbApi::start(EMPTY.into()).await;
    let unreachable = format!("http://127.0.0.1:{}", free_port());
    let props = properties(dir.path(), &unreachable);
    let list = format!("[\"{}\"]", props.display());
    let env = [
        ("HOOKRELAY_BBB__WEB_PROPERTIES", list.as_str()),
        ("HOOKRELAY_BBB__LOCAL_API_URL", local_api.url.as_str()),
        ("HOOKRELAY_BBB__RECONCILE_INTERVAL_S", "1"),
    ];
    let relay = RelayProcess::start_env(&redis, "", "info", &env).await;
    reconciled(&relay, &local_api).await;
}
