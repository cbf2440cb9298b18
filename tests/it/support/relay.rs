//! `TestRelay`: the relay running in-process through `hookrelay::run`, on port 0, with a short
//! retry schedule; and a signed API client.

use std::net::SocketAddr;

use hookrelay::{Config, Listeners, Shutdown, base::digest::Algorithm};
use tokio::net::TcpListener;

use super::{SECRET, TestRedis};

pub(crate) struct TestRelay {
    pub api: SocketAddr,
    pub metrics: SocketAddr,
    /// The admin API (its token: the one derived from the secret, or the configured one).
    pub admin: SocketAddr,
    admin_token: String,
    shutdown: Shutdown,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    http: reqwest::Client,
}

impl TestRelay {
    /// A configuration for `redis` with fast retries (50, 100, 150 ms) and a 1 s timeout.
    pub(crate) fn config(redis: &TestRedis) -> Config {
        let text = format!(
            r#"
            [bbb]
            secret = "{SECRET}"
            [redis]
            url = "{}"
            [delivery]
            retry_intervals_ms = [50, 100, 150]
            request_timeout_ms = 1000
            [delivery.ssrf]
            allow_cidrs = ["127.0.0.1/32"]
            "#,
            redis.url()
        );
        Config::from_toml(&text).expect("test config")
    }

    pub(crate) async fn start(redis: &TestRedis) -> Self {
        Self::start_with(redis, Self::config(redis)).await
    }

    /// Starts the relay and waits until it is subscribed to the bus.
    pub(crate) async fn start_with(redis: &TestRedis, config: Config) -> Self {
        let api = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
        let metrics = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind metrics");
        let admin = TcpListener::bind("127.0.0.1:0").await.expect("bind admin");
        let (api_addr, metrics_addr) = (api.local_addr().unwrap(), metrics.local_addr().unwrap());
        let admin_addr = admin.local_addr().unwrap();
        let admin_token = config.admin.token(&config.bbb.secret).expose().to_string();
        let shutdown = Shutdown::new();
        let listeners = Listeners {
            api,
            metrics: Some(metrics),
            admin: Some(admin),
            admin_socket: None,
        };
        let handle = tokio::spawn(hookrelay::run(config, listeners, shutdown.clone()));
        let relay = Self {
            api: api_addr,
            metrics: metrics_addr,
            admin: admin_addr,
            admin_token,
            shutdown,
            handle,
            http: http_client(),
        };
        redis.wait_for_subscriber().await;
        relay
    }

    /// Stops the relay gracefully and waits for it.
    pub(crate) async fn stop(self) {
        self.shutdown.trigger();
        self.handle
            .await
            .expect("relay task")
            .expect("relay result");
    }

    /// Calls `hooks/<call>` with `query`, signed with sha1; returns the XML body.
    pub(crate) async fn call(&self, call: &str, query: &str) -> String {
        self.call_with(call, query, Algorithm::Sha1, SECRET).await
    }

    pub(crate) async fn call_with(
        &self,
        call: &str,
        query: &str,
        alg: Algorithm,
        secret: &str,
    ) -> String {
        signed_call(&self.http, self.api, call, query, alg, secret).await
    }

    /// A GET of `path_and_query`: (status, content type, body).
    pub(crate) async fn get(&self, path_and_query: &str) -> (u16, String, String) {
        let r = self
            .http
            .get(format!("http://{}{path_and_query}", self.api))
            .send()
            .await
            .expect("api answers");
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or("").to_string())
            .unwrap_or_default();
        (status, ct, r.text().await.expect("body"))
    }

    /// Registers a hook; returns its id.
    pub(crate) async fn create_hook(&self, callback_url: &str, extra: &str) -> u64 {
        create_hook(&self.http, self.api, callback_url, extra).await
    }

    /// `GET {path}` of the admin API, as JSON.
    #[allow(dead_code)]
    pub(crate) async fn admin_get(&self, path: &str) -> serde_json::Value {
        self.admin_json(reqwest::Method::GET, path).await
    }

    /// `POST {path}` of the admin API (no form), as JSON.
    #[allow(dead_code)]
    pub(crate) async fn admin_post(&self, path: &str) -> serde_json::Value {
        self.admin_json(reqwest::Method::POST, path).await
    }

    /// `{method} {path}` of the admin API with the token, as JSON.
    async fn admin_json(&self, method: reqwest::Method, path: &str) -> serde_json::Value {
        let text = self
            .http
            .request(method, format!("http://{}{path}", self.admin))
            .bearer_auth(&self.admin_token)
            .send()
            .await
            .expect("admin API answers")
            .text()
            .await
            .expect("body");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
    }

    /// The metrics as a Prometheus server scrapes them: OpenMetrics (the text format, which
    /// other scrapers get, is tried in `exposition.rs`).
    pub(crate) async fn metrics(&self) -> String {
        self.http
            .get(format!("http://{}/metrics", self.metrics))
            .header("Accept", PROMETHEUS_ACCEPT)
            .send()
            .await
            .expect("metrics answer")
            .text()
            .await
            .expect("metrics body")
    }
}

/// A plain HTTP client for the tests (reqwest is built without a default crypto provider).
pub(crate) fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Calls `hooks/<call>` of the API at `api`, signed with `alg` and `secret`; returns the body.
pub(crate) async fn signed_call(
    http: &reqwest::Client,
    api: SocketAddr,
    call: &str,
    query: &str,
    alg: Algorithm,
    secret: &str,
) -> String {
    signed_call_at(http, api, None, call, query, (alg, secret)).await
}

/// As [`signed_call`], made to host name `host` (a tenant's, say) when given.
pub(crate) async fn signed_call_at(
    http: &reqwest::Client,
    api: SocketAddr,
    host: Option<&str>,
    call: &str,
    query: &str,
    (alg, secret): (Algorithm, &str),
) -> String {
    let checksum = alg.hex_digest(&[
        format!("hooks/{call}").as_bytes(),
        query.as_bytes(),
        secret.as_bytes(),
    ]);
    let sep = if query.is_empty() { "" } else { "&" };
    let mut request = http.get(format!(
        "http://{api}/bigbluebutton/api/hooks/{call}?{query}{sep}checksum={checksum}"
    ));
    if let Some(host) = host {
        request = request.header("host", host);
    }
    request
        .send()
        .await
        .expect("api answers")
        .text()
        .await
        .expect("body")
}

/// Registers a hook through the API at `api`; returns its id.
pub(crate) async fn create_hook(
    http: &reqwest::Client,
    api: SocketAddr,
    callback_url: &str,
    extra: &str,
) -> u64 {
    let mut q = format!(
        "callbackURL={}",
        hookrelay::base::form::form_encode(callback_url)
    );
    if !extra.is_empty() {
        q.push('&');
        q.push_str(extra);
    }
    let xml = signed_call(http, api, "create", &q, Algorithm::Sha1, SECRET).await;
    hook_id_of(&xml).unwrap_or_else(|| panic!("create failed: {xml}"))
}

/// The `hookID` of a `hooks/create` answer.
pub(crate) fn hook_id_of(xml: &str) -> Option<u64> {
    xml.split("<hookID>")
        .nth(1)
        .and_then(|s| s.split("</hookID>").next())
        .and_then(|s| s.parse().ok())
}

/// The `Accept` header of Prometheus 2.x's scrapes: OpenMetrics first.
pub(crate) const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
