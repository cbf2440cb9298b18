//! `Browser`: a real headless Chromium (Debian's `chromium`), driven through its WebDriver
//! (`chromedriver`, Debian's `chromium-driver`) started on a free port: open a page, read what
//! it shows, fill a form field, click, as a person would. The window is a phone's.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{free_port, on_path, relay::http_client};

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub(crate) struct Browser {
    /// The session's URL at the driver.
    base: String,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session; `None` when they are not
    /// installed (a failure under `TEST_REQUIRE_CHROMIUM`).
    pub(crate) async fn start() -> Option<Self> {
        let (Some(driver), Some(chromium)) = (on_path("chromedriver"), on_path("chromium")) else {
            assert!(
                std::env::var_os("TEST_REQUIRE_CHROMIUM").is_none(),
                "Debian's chromium and chromium-driver are needed here (scripts/test.sh installs them)"
            );
            return None;
        };
        let port = free_port();
        let child = tokio::process::Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = http_client();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !http
            .get(format!("{base}/status"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "chromedriver never answered");
            // The loop's pace: it polls until chromedriver answers.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=412,915".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let answer = post(&format!("{base}/session"), &caps).await;
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        Some(Self {
            base: format!("{base}/session/{session}"),
            _driver: child,
            _profile: profile,
        })
    }

    /// Sends `Authorization: <value>` with every request from now on, as a browser does once
    /// its user answered the password prompt (headless Chromium has no prompt; this goes
    /// through its DevTools protocol).
    pub(crate) async fn authorize(&self, value: &str) {
        let cdp = |cmd: &str, params: Value| {
            let url = format!("{}/goog/cdp/execute", self.base);
            let body = json!({ "cmd": cmd, "params": params });
            async move { post(&url, &body).await }
        };
        cdp("Network.enable", json!({})).await;
        cdp(
            "Network.setExtraHTTPHeaders",
            json!({ "headers": { "Authorization": value } }),
        )
        .await;
    }

    /// Opens `url` and waits until it is loaded.
    pub(crate) async fn open(&self, url: &str) {
        post(&format!("{}/url", self.base), &json!({ "url": url })).await;
    }

    /// Runs `script` in the page and returns its value.
    pub(crate) async fn run(&self, script: &str) -> Value {
        let answer = post(
            &format!("{}/execute/sync", self.base),
            &json!({ "script": script, "args": [] }),
        )
        .await;
        answer["value"].clone()
    }

    /// The text a person sees on the page.
    pub(crate) async fn text(&self) -> String {
        self.run("return document.body.innerText")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The text of the element `css` selects (empty when there is none).
    pub(crate) async fn text_of(&self, css: &str) -> String {
        let script = format!(
            "const e = document.querySelector({}); return e ? e.innerText : ''",
            Value::from(css)
        );
        self.run(&script)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits until the page shows the element `css` selects (a form's answer may still be on
    /// its way when the click returns), and returns its text.
    pub(crate) async fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let script = format!(
                "const e = document.querySelector({}); return e ? e.innerText : null",
                Value::from(css)
            );
            if let Some(text) = self.run(&script).await.as_str() {
                return text.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "{css} never showed on {}: {}",
                self.url().await,
                self.text().await
            );
            // The loop's pace: it polls the page until the element shows.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn element(&self, css: &str) -> String {
        let answer = post(
            &format!("{}/element", self.base),
            &json!({ "using": "css selector", "value": css }),
        )
        .await;
        answer["value"][ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {answer}"))
            .to_string()
    }

    /// Types `text` into the field `css` selects, after clearing it.
    pub(crate) async fn fill(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        post(&format!("{}/element/{id}/clear", self.base), &json!({})).await;
        post(
            &format!("{}/element/{id}/value", self.base),
            &json!({ "text": text }),
        )
        .await;
    }

    /// Clicks the element `css` selects (a link or a button: the page that follows is loaded
    /// when this returns).
    pub(crate) async fn click(&self, css: &str) {
        let id = self.element(css).await;
        post(&format!("{}/element/{id}/click", self.base), &json!({})).await;
    }

    /// The page's address now.
    pub(crate) async fn url(&self) -> String {
        let answer: Value = http_client()
            .get(format!("{}/url", self.base))
            .send()
            .await
            .expect("url")
            .text()
            .await
            .map(|t| serde_json::from_str(&t).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        answer["value"].as_str().unwrap_or_default().to_string()
    }
}

impl Browser {
    /// Ends the session, which closes Chromium (the driver goes when this is dropped).
    pub(crate) async fn quit(self) {
        let _ = http_client().delete(&self.base).send().await;
    }
}

async fn post(url: &str, body: &Value) -> Value {
    let text = http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .text()
        .await
        .expect("answer");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{url}: {text}"));
    assert!(
        v["value"]["error"].is_null(),
        "{url} {body}: {}",
        v["value"]
    );
    v
}
