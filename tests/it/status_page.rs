//! The admin API's status page in a real headless Chromium (Debian's package, driven through
//! chromedriver): what a person sees of a failing hook (marked failing, with its last error
//! and its attempts), and a redelivery asked for with the page's form arriving at the
//! receiver. The page wants the admin token (a browser gives it as a password).

use crate::support::{
    RelayProcess, Reply, TestReceiver, TestRedis,
    browser::Browser,
    relay::{create_hook, http_client},
    user_joined, user_name,
    wait::until,
};

const TOKEN: &str = "page-token-1";

#[tokio::test]
async fn a_person_sees_a_failing_hook_and_sends_callbacks_again_from_the_page() {
    let Some(browser) = Browser::start().await else {
        eprintln!("chromium is not installed: the status page is not tried in a browser");
        return;
    };
    let redis = TestRedis::start().await;
    let (ok, failing) = (TestReceiver::start().await, TestReceiver::start().await);
    failing.set_default(Reply::Status(500));
    // A permanent hook is never removed: it stays failing while its receiver answers 500.
    let extra = format!(
        "permanent_hooks = [{{ url = \"{}\" }}]\n",
        failing.url("/perm")
    );
    let env = [("HOOKRELAY_ADMIN__BEARER_TOKEN", TOKEN)];
    let relay = RelayProcess::start_env(&redis, &extra, "info", &env).await;
    let a = create_hook(&http_client(), relay.api, &ok.url("/a"), "").await;
    let listed: serde_json::Value = serde_json::from_str(
        &http_client()
            .get(format!("http://{}/v1/hooks", relay.admin))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("list")
            .text()
            .await
            .expect("body"),
    )
    .expect("JSON");
    let perm = listed["hooks"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["permanent"] == true))
        .and_then(|h| h["id"].as_u64())
        .expect("the permanent hook");
    let names = ["Ann", "Bob", "Cy"];
    let joins: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| user_joined("m", &format!("u{i}"), n))
        .collect();
    redis.publish_all(&joins).await;
    let first = ok.wait_delivered(3).await;
    // Its three attempts written (the callbacks they sent are kept before them).
    until("three attempts written", async || {
        let shown = http_client()
            .get(format!("http://{}/v1/hooks/{a}/deliveries", relay.admin))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("deliveries")
            .text()
            .await
            .expect("body");
        match shown.matches("\"ok\":true").count() == 3 {
            true => Ok(()),
            false => Err(shown),
        }
    })
    .await;

    // Without the token: refused, with a challenge a browser answers with a password prompt.
    let plain = http_client()
        .get(format!("http://{}/", relay.admin))
        .send()
        .await
        .expect("answer");
    assert_eq!(plain.status(), 401);
    assert!(
        plain.headers()["www-authenticate"]
            .to_str()
            .is_ok_and(|c| c.contains("Basic"))
    );

    // The password prompt answered with user admin and the token.
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("admin:{TOKEN}"),
    );
    browser.authorize(&format!("Basic {basic}")).await;
    let site = format!("http://{}", relay.admin);
    let row = until(
        "the page shows one hook failing, the other ok",
        async || {
            browser.open(&format!("{site}/")).await;
            let row = browser.text_of(&format!("#hook-{perm}")).await;
            let other = browser.text_of(&format!("#hook-{a}")).await;
            match row.contains("failing") && other.contains("ok") {
                true => Ok(row),
                false => Err(browser.text().await),
            }
        },
    )
    .await;
    assert!(row.contains("receiver answered HTTP 500"), "{row}");
    assert!(row.contains(&failing.url("/perm")), "{row}");
    assert!(
        browser.text().await.starts_with("Hooks"),
        "the page's heading"
    );

    // Its own page: the last error and the attempts that failed.
    browser.click(&format!("#hook-{perm} a")).await;
    assert!(browser.url().await.ends_with(&format!("/hooks/{perm}")));
    let last = browser.text_of("#last-failure").await;
    assert!(last.ends_with("receiver answered HTTP 500"), "{last}");
    let attempts = browser.text_of("#attempts").await;
    assert!(
        attempts
            .lines()
            .filter(|l| l.contains("receiver answered HTTP 500"))
            .count()
            >= 2,
        "{attempts}"
    );

    // The first hook's callbacks again, asked for with the form.
    browser.open(&format!("{site}/hooks/{a}")).await;
    browser.fill("input[name=since]", "10m").await;
    browser.click("button[type=submit]").await;
    let said = browser.wait_for("#message").await;
    assert_eq!(
        said,
        "Queued 3 callbacks again; they are sent after what was queued."
    );
    let all = ok.wait_delivered(6).await;
    let again: Vec<String> = all[3..].iter().map(|r| user_name(&r.event())).collect();
    assert_eq!(again, names);
    for (orig, re) in first.iter().zip(&all[3..]) {
        assert_eq!(orig.body, re.body);
        assert_eq!(re.headers["x-hookrelay-redelivery"], "true");
    }

    // A form on another site cannot make the browser queue redeliveries.
    let forged = http_client()
        .post(format!("http://{}/hooks/{a}/redeliver", relay.admin))
        .header("authorization", format!("Basic {basic}"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("since=10m")
        .send()
        .await
        .expect("answer");
    assert_eq!(forged.status(), 403);

    // A window before what is kept: the page says how far back it reaches.
    browser.fill("input[name=since]", "3h").await;
    browser.click("button[type=submit]").await;
    let problem = browser.wait_for("#problem").await;
    assert!(
        problem.contains("callbacks are kept for 1h (delivery.retain)"),
        "{problem}"
    );
    browser.quit().await;
}
