//! The configuration's schema, loading and validation.

use super::*;

/// Configuration is plain data: it uses the leaf modules of `base` and nothing of the
/// stages, which all read it (no cycle).
#[test]
fn config_imports_only_the_leaf_modules() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
    let mut folders = vec![dir];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("src/config") {
            let path = entry.expect("entry").path();
            // A module's folder (`reference/`) holds its submodules: they are read too.
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            assert!(
                !code.replace("crate::base", "").contains("crate::"),
                "{} imports a stage",
                path.display()
            );
        }
    }
}

#[test]
fn missing_secret_names_the_key() {
    let err = Config::from_toml("").unwrap_err().to_string();
    assert!(err.contains("bbb.secret"), "{err}");
}

#[test]
fn unknown_key_is_named() {
    let err = Config::from_toml("[bbb]\nsecret='long-test-secret'\n[api]\nbnd='1.2.3.4:5'\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("bnd"), "{err}");
}

#[test]
fn bad_redis_url_is_named() {
    let err = Config::from_toml("[bbb]\nsecret='long-test-secret'\n[redis]\nurl='http://x'\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("configuration: redis.url"), "{err}");
}

#[test]
fn defaults_and_overrides() {
    let c = Config::from_toml(
        "[bbb]\nsecret='long-test-secret'\n[delivery]\ncompat='reference'\nretry_intervals_ms=[1,2]\n",
    )
    .unwrap();
    assert_eq!(c.delivery.compat, Some(Compat::Reference));
    assert_eq!(c.delivery.retry_intervals_ms, vec![1, 2]);
    assert_eq!(c.api.bind.port(), 3005);
    assert_eq!(c.redis.channels.len(), 7);
    assert_eq!(c.mapping.inactivity_timeout_s, 86_400);
}

proptest::proptest! {
    /// Any text as a configuration file: a config or one error line, never a panic.
    #[test]
    fn any_text_loads_or_fails_cleanly(text in "(\\[[a-z.]{0,12}\\]\n|[a-z_]{1,12} = (\"[ -~]{0,10}\"|[0-9]{1,6}|\\[[0-9, ]{0,12}\\]|true)\n|[ -~]{0,20}\n){0,8}") {
        match Config::from_toml(&text) {
            Ok(c) => proptest::prop_assert!(!c.bbb.secret.expose().is_empty()),
            Err(e) => proptest::prop_assert_eq!(e.to_string().lines().count(), 1),
        }
    }
}

#[test]
fn permanent_hooks_must_pass_the_ssrf_guard() {
    let text = "[bbb]\nsecret='long-test-secret'\n[delivery]\npermanent_hooks=[{url='http://127.0.0.1:9/x'}]\n";
    let err = Config::from_toml(text).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "configuration: delivery.permanent_hooks: http://127.0.0.1:9/x: not allowed"
        ),
        "{err}"
    );
    let allowed = format!("{text}[delivery.ssrf]\nallow_cidrs=['127.0.0.0/8']\n");
    assert!(Config::from_toml(&allowed).is_ok());
}

#[test]
fn secret_is_not_debug_printed() {
    let c = Config::from_toml("[bbb]\nsecret='hunter2-hunter2'\n").unwrap();
    assert!(!format!("{c:?}").contains("hunter2-hunter2"));
    assert_eq!(c.bbb.secret.expose(), "hunter2-hunter2");
}

#[test]
fn neither_debug_nor_serialized_output_shows_a_secret() {
    let c = Config::from_toml(
        "[bbb]\nsecret='hunter2-hunter2'\n[redis]\nurl='redis://:opensesame@127.0.0.1:6379/0'\n",
    )
    .unwrap();
    assert_eq!(c.redis.url.expose(), "redis://:opensesame@127.0.0.1:6379/0");
    let shown = [
        format!("{c:?}"),
        format!("{c:#?}"),
        serde_json::to_string(&c).unwrap(),
        toml::to_string(&c).unwrap(),
    ];
    for text in shown {
        assert!(!text.contains("hunter2-hunter2"), "{text}");
        assert!(!text.contains("opensesame"), "{text}");
        assert!(
            text.contains("127.0.0.1:6379"),
            "the rest of the URL is shown: {text}"
        );
    }
}

#[test]
fn bearer_mode_refuses_plain_http_permanent_hooks() {
    let text = "[bbb]\nsecret='long-test-secret'\n[delivery]\nauth='bearer'\npermanent_hooks=[{url='http://example.com/x'}]\n";
    let err = Config::from_toml(text).unwrap_err().to_string();
    assert!(err.contains("allow_insecure_bearer"), "{err}");
    let allowed = text.replace("auth='bearer'", "auth='bearer'\nallow_insecure_bearer=true");
    assert!(Config::from_toml(&allowed).is_ok());
    let https = text.replace("http://", "https://");
    assert!(Config::from_toml(&https).is_ok());
}

#[test]
fn standard_webhooks_secrets_must_be_keys() {
    let text = "[bbb]\nsecret='long-test-secret'\n[delivery.standard_webhooks]\nsecrets=['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_%%']\n";
    let err = Config::from_toml(text).unwrap_err().to_string();
    assert_eq!(
        err,
        "configuration: delivery.standard_webhooks.secrets: secret 2 is not base64 (whsec_ followed by the key in base64)"
    );
    let ok = Config::from_toml(&text.replace(", 'whsec_%%'", "")).unwrap();
    assert_eq!(ok.delivery.standard_webhooks.secrets.len(), 1);
    assert!(!format!("{ok:?}").contains("MfKQ9r8"), "never shown");
}

#[test]
fn without_sources_redis_and_bbb_are_the_default_source_and_the_store() {
    let c = Config::from_toml(
        "[bbb]\nsecret='long-test-secret'\nserver_domain='bbb.example'\napi_url='https://bbb.example/bigbluebutton/api'\n[redis]\nurl='redis://10.0.0.1:6379'\nchannels=['c1']\n",
    )
    .unwrap();
    let s = c.effective_sources();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].name, DEFAULT_SOURCE);
    assert_eq!(s[0].url.expose(), "redis://10.0.0.1:6379");
    assert_eq!(s[0].channels, ["c1"]);
    assert_eq!(s[0].secret.expose(), "long-test-secret");
    assert_eq!(s[0].server_domain, "bbb.example");
    assert_eq!(s[0].api_url, "https://bbb.example/bigbluebutton/api");
    assert_eq!(c.store_url().expose(), "redis://10.0.0.1:6379");
}

#[test]
fn sources_take_their_defaults_and_the_store_its_own_url() {
    let c = Config::from_toml(
        "[bbb]\nsecret='relay-secret-1'\n[store]\nurl='redis://store:6379'\n\
         [[sources]]\nname='bbb1'\nurl='redis://bbb1:6379'\nserver_domain='bbb1.example'\n\
         [[sources]]\nname='bbb2'\nurl='redis://:pw@bbb2:6379'\nchannels=['only']\nsecret='bbb2-secret-2'\n",
    )
    .unwrap();
    let s = c.effective_sources();
    assert_eq!(
        s.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["bbb1", "bbb2"]
    );
    assert_eq!(s[0].channels, RedisConfig::default().channels);
    assert_eq!(
        s[0].secret.expose(),
        "relay-secret-1",
        "the relay's secret by default"
    );
    assert_eq!(s[1].channels, ["only"]);
    assert_eq!(s[1].secret.expose(), "bbb2-secret-2");
    assert_eq!(s[1].server_domain, "localhost");
    assert_eq!(c.store_url().expose(), "redis://store:6379");
    let shown = format!("{c:?}{}", toml::to_string(&c).unwrap());
    assert!(
        !shown.contains(":pw@") && !shown.contains("s2\""),
        "{shown}"
    );
}

#[test]
fn bad_sources_are_named() {
    let base = "[bbb]\nsecret='long-test-secret'\n";
    for (sources, expected) in [
        (
            "[[sources]]\nname='a b'\nurl='redis://h'\n",
            "sources.name: \"a b\": 1 to 64 letters, digits, '-', '_' or '.'",
        ),
        (
            "[[sources]]\nname='a'\nurl='redis://h'\n[[sources]]\nname='a'\nurl='redis://i'\n",
            "sources.name: \"a\" is given twice",
        ),
        (
            "[[sources]]\nname='a'\nurl='http://h'\n",
            "sources.url: source \"a\": must be a redis:// URL",
        ),
        (
            "[[sources]]\nname='a'\nurl='redis://h'\napi_url='ftp://h'\n",
            "sources.api_url: source \"a\": must be an http(s) URL",
        ),
        (
            "[[sources]]\nname='a'\nurl='redis://h'\nserver_domain='a b'\n",
            "sources.server_domain: source \"a\": must be a host name",
        ),
        (
            "[store]\nurl='h:6379'\n",
            "store.url: must be a redis:// URL",
        ),
        (
            "[store]\nsentinels=['redis://s:26379']\n",
            "store.sentinel_master: sentinels and sentinel_master go together",
        ),
        (
            "[store]\nsentinels=['s:26379']\nsentinel_master='m'\n",
            "store.sentinels: each must be a redis:// URL",
        ),
        (
            "[store]\ncluster_nodes=['c:7000']\n",
            "store.cluster_nodes: each must be a redis:// URL",
        ),
        (
            "[store]\ncluster_nodes=['redis://c:7000']\nsentinels=['redis://s:26379']\nsentinel_master='m'\n",
            "store.cluster_nodes: a store is a cluster or a Sentinel-watched server, not both",
        ),
        (
            "[fleet]\nlease_ms = 100\n",
            "fleet.lease_ms: must be between 400 and 600000",
        ),
        (
            "[fleet]\nbuffer_s = 1\n",
            "fleet.buffer_s: must cover at least two leases (fleet.lease_ms)",
        ),
    ] {
        let err = Config::from_toml(&format!("{base}{sources}"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, format!("configuration: {expected}"), "{sources}");
    }
}

/// The example file documents the admin API and the delivery insight keys with their defaults.
#[test]
fn the_example_file_gives_the_admin_and_insight_defaults() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("hookrelay.example.toml"),
    )
    .expect("example file");
    let c = Config::from_toml(&text.replace("change-me", "long-test-secret")).expect("parses");
    let d = Config::default();
    assert_eq!(c.admin.enabled, d.admin.enabled);
    assert_eq!(c.admin.bind, d.admin.bind);
    assert!(c.admin.bearer_token.is_empty());
    assert_eq!(c.delivery.attempt_log, d.delivery.attempt_log);
    assert_eq!(c.delivery.retain, std::time::Duration::from_secs(3600));
    assert_eq!(c.delivery.retain, d.delivery.retain);
    assert_eq!(c.delivery.retain_max_mib, d.delivery.retain_max_mib);
}

#[test]
fn retain_takes_words_or_seconds_and_names_a_bad_one() {
    let with = |v: &str| {
        Config::from_toml(&format!(
            "[bbb]\nsecret='long-test-secret'\n[delivery]\nretain = {v}\n"
        ))
    };
    assert_eq!(with("\"30m\"").expect("ok").delivery.retain.as_secs(), 1800);
    assert_eq!(with("90").expect("ok").delivery.retain.as_secs(), 90);
    assert!(with("\"0s\"").expect("ok").delivery.retain.is_zero());
    let err = with("\"soon\"").expect_err("not a duration").to_string();
    assert!(
        err.contains("delivery.retain") && err.contains("soon"),
        "{err}"
    );
}

#[test]
fn an_admin_api_beyond_loopback_needs_a_token() {
    let open = "[bbb]\nsecret='long-test-secret'\n[admin]\nbind = '0.0.0.0:3006'\n";
    let err = Config::from_toml(open)
        .and_then(|c| c.validate().map(|()| c))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("admin.bearer_token"), "{err}");
    let closed = format!("{open}bearer_token = 't'\n");
    let c = Config::from_toml(&closed).expect("parses");
    assert!(c.validate().is_ok());
}

/// The reference's API is 3005 (hookrelay takes its place) and its metrics 3004; its test
/// suite's receivers listen on 3006-3013 and BBB's WebRTC units export on 3014-3026. By default
/// the relay listens on 3005 and 3004 only, on loopback, and its admin API on a Unix socket.
#[test]
fn the_default_listeners_collide_with_nothing_a_bbb_server_or_the_reference_runs() {
    let c = Config::default();
    assert_eq!(c.api.bind, "127.0.0.1:3005".parse().unwrap());
    assert_eq!(c.metrics.bind, "127.0.0.1:3004".parse().unwrap());
    assert_eq!(c.admin.bind, None);
    assert!(c.admin.enabled);
    assert!(c.admin.socket.as_os_str().is_empty());
    for addr in [c.api.bind, c.metrics.bind] {
        assert!(!(3006..=3026).contains(&addr.port()), "{addr}");
    }
}

#[test]
fn the_placeholder_and_short_secrets_are_refused_naming_the_key() {
    let refused = |toml: &str| Config::from_toml(toml).expect_err("refused").to_string();
    let err = refused("[bbb]\nsecret = 'change-me'\n");
    assert!(err.starts_with("configuration: bbb.secret: "), "{err}");
    assert!(
        err.contains("placeholder") && err.contains("bbb-conf --secret"),
        "{err}"
    );
    assert!(!err.contains("\n"));
    let err = refused("[bbb]\nsecret = 'elevenchars'\n");
    assert!(
        err.contains("bbb.secret: must be at least 12 characters"),
        "{err}"
    );
    assert!(!err.contains("elevenchars"), "{err}");
    let err = refused(
        "[bbb]\nsecret = 'a-long-relay-secret'\n[[sources]]\nname = 'a'\nurl = 'redis://h'\nsecret = 'short'\n",
    );
    assert!(err.contains("sources.secret: must be at least 12"), "{err}");
    assert!(Config::from_toml("[bbb]\nsecret = 'twelve-chars'\n").is_ok());
}

#[test]
fn tenants_come_from_scalelite_and_the_file() {
    let text = "[bbb]\nsecret='long-test-secret'\n[scalelite]\nredis_url='redis://:pw@sl:6379/2'\n\
        [[tenants]]\nname='acme'\nsecrets=['acme-secret-0123', 'acme-secret-4567']\n\
        [[tenants]]\nname='beta'\nid='b-1'\nsecrets=['beta-secret-0123']\n";
    let c = Config::from_toml(text).expect("parses");
    c.validate().expect("valid");
    let sl = c.scalelite.as_ref().expect("scalelite");
    assert_eq!(sl.namespace, "scalelite");
    assert_eq!(sl.refresh_ms, 2_000);
    assert_eq!(c.tenants[0].id(), "acme");
    assert_eq!(c.tenants[1].id(), "b-1");
    assert_eq!(c.tenants[0].secrets.len(), 2);
    let shown = format!("{c:?}");
    for secret in ["acme-secret-0123", "beta-secret-0123", ":pw@"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(Config::default().scalelite.is_none());
}

#[test]
fn an_unreadable_ca_file_is_named_by_its_key() {
    let err = Config::from_toml(
        "[bbb]\nsecret = \"0123456789abcdef0123\"\n[[sources]]\nname = \"bbb1\"\nurl = \"rediss://10.0.0.5:6380\"\nca_file = \"/nonexistent/ca.pem\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sources[0].ca_file: cannot read /nonexistent/ca.pem"),
        "{err}"
    );
}
