//! The hooks API: every answer byte for byte, checksums, parameter checks.

use hookrelay::base::digest::Algorithm;

use crate::support::{SECRET, TestRedis, TestRelay};

const CHECKSUM_ERROR: &str = "<response><returncode>FAILED</returncode><messageKey>checksumError</messageKey><message>You did not pass the checksum security check.</message></response>";

#[tokio::test]
async fn create_duplicate_list_destroy_answers_are_exact() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;

    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fcb")
        .await;
    assert_eq!(
        xml,
        "<response><returncode>SUCCESS</returncode><hookID>1</hookID><permanentHook>false</permanentHook><rawData>false</rawData></response>"
    );
    let xml = relay
        .call(
            "create",
            "callbackURL=http%3A%2F%2Fh.example%2Fcb&meetingID=other&getRaw=true",
        )
        .await;
    assert_eq!(
        xml,
        "<response><returncode>SUCCESS</returncode><hookID>1</hookID><messageKey>duplicateWarning</messageKey><message>There is already a hook for this callback URL.</message></response>"
    );
    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fm%3Fa%3D1&meetingID=m1&eventID=User-Joined,%20meeting-ended&getRaw=TRUE")
        .await;
    assert_eq!(
        xml,
        "<response><returncode>SUCCESS</returncode><hookID>2</hookID><permanentHook>false</permanentHook><rawData>true</rawData></response>"
    );

    let xml = relay.call("list", "").await;
    assert_eq!(
        xml,
        "<response><returncode>SUCCESS</returncode><hooks><hook><hookID>1</hookID><callbackURL><![CDATA[http://h.example/cb]]></callbackURL><permanentHook>false</permanentHook><rawData>false</rawData></hook><hook><hookID>2</hookID><callbackURL><![CDATA[http://h.example/m?a=1]]></callbackURL><meetingID><![CDATA[m1]]></meetingID><eventID>user-joined,meeting-ended</eventID><permanentHook>false</permanentHook><rawData>true</rawData></hook></hooks></response>"
    );

    let xml = relay.call("destroy", "hookID=1").await;
    assert_eq!(
        xml,
        "<response><returncode>SUCCESS</returncode><removed>true</removed></response>"
    );
    let xml = relay.call("destroy", "hookID=1").await;
    assert_eq!(
        xml,
        "<response><returncode>FAILED</returncode><messageKey>destroyMissingHook</messageKey><message>The hook informed was not found.</message></response>"
    );
    let xml = relay.call("destroy", "").await;
    assert_eq!(
        xml,
        "<response><returncode>FAILED</returncode><messageKey>missingParamHookID</messageKey><message>You must specify a hookID in the parameters.</message></response>"
    );
    let xml = relay.call("create", "meetingID=x").await;
    assert_eq!(
        xml,
        "<response><returncode>FAILED</returncode><messageKey>missingParamCallbackURL</messageKey><message>You must specify a callbackURL in the parameters.</message></response>"
    );

    // Ids are never reused.
    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fcb")
        .await;
    assert!(xml.contains("<hookID>3</hookID>"), "{xml}");
    // Redis holds what the API says.
    assert_eq!(
        redis
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        2
    );
    let stored = redis.hgetall("bigbluebutton:webhooks:out:hook:2").await;
    assert_eq!(stored["externalMeetingID"], "m1");
    assert_eq!(stored["eventID"], "user-joined,meeting-ended");
    assert_eq!(stored["id"], "2");
    assert_eq!(stored["getRaw"], "true");
    assert_eq!(stored["permanent"], "false");

    // A Redis that lost its id counter (restarted without persistence) never makes the relay
    // give out the id of a live hook again.
    let _: () = redis::AsyncCommands::del(
        &mut redis.conn().await.expect("redis"),
        "bigbluebutton:webhooks:out:hookId",
    )
    .await
    .expect("del");
    let xml = relay
        .call("create", "callbackURL=http%3A%2F%2Fh.example%2Fafter-loss")
        .await;
    assert!(xml.contains("<hookID>4</hookID>"), "{xml}");
    assert_eq!(
        redis.hgetall("bigbluebutton:webhooks:out:hook:4").await["callbackURL"],
        "http://h.example/after-loss"
    );
    relay.stop().await;
}

#[tokio::test]
async fn concurrent_creates_give_one_hook_per_url_and_distinct_ids() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let same = (0..16).map(|_| relay.call("create", "callbackURL=http%3A%2F%2Fh.example%2Fsame"));
    let distinct: Vec<String> = (0..16)
        .map(|i| format!("callbackURL=http%3A%2F%2Fh.example%2Fd{i}"))
        .collect();
    let (same, distinct) = tokio::join!(
        futures_util::future::join_all(same),
        futures_util::future::join_all(distinct.iter().map(|q| relay.call("create", q)))
    );
    let id = |xml: &str| -> u64 {
        let start = xml.find("<hookID>").expect("hookID") + "<hookID>".len();
        let end = xml[start..].find('<').expect("end") + start;
        xml[start..end].parse().expect("number")
    };
    let created: Vec<&String> = same
        .iter()
        .filter(|x| x.contains("<permanentHook>"))
        .collect();
    assert_eq!(created.len(), 1, "{same:?}");
    let winner = id(created[0]);
    for xml in same.iter().filter(|x| !x.contains("<permanentHook>")) {
        assert_eq!(
            *xml,
            format!(
                "<response><returncode>SUCCESS</returncode><hookID>{winner}</hookID><messageKey>duplicateWarning</messageKey><message>There is already a hook for this callback URL.</message></response>"
            )
        );
    }
    let mut ids: Vec<u64> = distinct.iter().map(|x| id(x)).collect();
    ids.push(winner);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 17, "every new URL got an id of its own");
    assert_eq!(
        redis
            .smembers("bigbluebutton:webhooks:out:hooks")
            .await
            .len(),
        17
    );
    assert_eq!(relay.call("list", "").await.matches("<hook>").count(), 17);
    relay.stop().await;
}

#[tokio::test]
async fn list_by_meeting_gives_bound_and_global_hooks() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let g = relay.create_hook("http://h.example/global", "").await;
    let a = relay
        .create_hook("http://h.example/a", "meetingID=m1")
        .await;
    let b = relay
        .create_hook("http://h.example/b", "meetingID=m1")
        .await;
    let _c = relay
        .create_hook("http://h.example/c", "meetingID=m2")
        .await;
    let ids = |xml: &str| -> Vec<u64> {
        xml.split("<hookID>")
            .skip(1)
            .map(|s| s.split('<').next().unwrap().parse().unwrap())
            .collect()
    };
    assert_eq!(
        ids(&relay.call("list", "meetingID=m1").await),
        vec![g, a, b]
    );
    // No hook bound to m3: just the global ones (the reference answers an error here).
    assert_eq!(ids(&relay.call("list", "meetingID=m3").await), vec![g]);
    assert_eq!(ids(&relay.call("list", "").await).len(), 4);
    // The unfiltered answer is kept per hook snapshot: a change shows at once.
    let again = relay.call("list", "").await;
    assert_eq!(ids(&again).len(), 4);
    let d = relay.create_hook("http://h.example/d", "").await;
    assert_eq!(ids(&relay.call("list", "").await).len(), 5);
    relay.call("destroy", &format!("hookID={d}")).await;
    assert_eq!(relay.call("list", "").await, again);
    relay.stop().await;
}

#[tokio::test]
async fn checksums_by_algorithm_and_every_bad_form() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    for (i, alg) in Algorithm::ALL.into_iter().enumerate() {
        let q = format!("callbackURL=http%3A%2F%2Fh.example%2F{i}");
        let xml = relay.call_with("create", &q, alg, SECRET).await;
        assert!(
            xml.contains("<returncode>SUCCESS</returncode>"),
            "{alg:?}: {xml}"
        );
    }
    assert_eq!(
        relay
            .call_with("list", "", Algorithm::Sha256, "wrong")
            .await,
        CHECKSUM_ERROR
    );
    // Checksum computed for another call.
    let q = "hookID=1";
    let sum = Algorithm::Sha1.hex_digest(&[b"hooks/create", q.as_bytes(), SECRET.as_bytes()]);
    let (status, ct, body) = relay
        .get(&format!(
            "/bigbluebutton/api/hooks/destroy?{q}&checksum={sum}"
        ))
        .await;
    assert_eq!(
        (status, ct.as_str(), body.as_str()),
        (200, "text/xml; charset=utf-8", CHECKSUM_ERROR)
    );
    let good = Algorithm::Sha1.hex_digest(&[b"hooks/list", b"", SECRET.as_bytes()]);
    for bad in [
        "".to_string(),
        "?checksum=".to_string(),
        "?checksum=abc".to_string(),
        format!("?checksum={}", &good[..39]),
        format!("?checksum={}", good.to_uppercase()),
        format!("?checksum={good}&checksum={good}"),
        format!("?checksum={}", "z".repeat(40)),
    ] {
        let (status, _, body) = relay
            .get(&format!("/bigbluebutton/api/hooks/list{bad}"))
            .await;
        assert_eq!((status, body.as_str()), (200, CHECKSUM_ERROR), "{bad}");
    }
    // sha512 is refused when the configuration leaves it out.
    relay.stop().await;
    let mut config = TestRelay::config(&redis);
    config.api.checksum_algorithms = vec![Algorithm::Sha1];
    let relay = TestRelay::start_with(&redis, config).await;
    assert_eq!(
        relay.call_with("list", "", Algorithm::Sha512, SECRET).await,
        CHECKSUM_ERROR
    );
    assert!(
        relay
            .call_with("list", "", Algorithm::Sha1, SECRET)
            .await
            .contains("SUCCESS")
    );
    relay.stop().await;
}

#[tokio::test]
async fn bad_parameters_get_clear_failures() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let cases = [
        ("create", "callbackURL=", "invalidCallbackURL"),
        ("create", "callbackURL=not-a-url", "invalidCallbackURL"),
        (
            "create",
            "callbackURL=ftp%3A%2F%2Fh%2Fx",
            "invalidCallbackURL",
        ),
        (
            "create",
            "callbackURL=http%3A%2F%2Fh%2F&getRaw=yes",
            "invalidGetRaw",
        ),
        (
            "create",
            "callbackURL=http%3A%2F%2Fh%2F&meetingID=",
            "invalidMeetingID",
        ),
        (
            "create",
            "callbackURL=http%3A%2F%2Fh%2F&eventID=%2C",
            "invalidEventID",
        ),
        (
            "create",
            "callbackURL=http%3A%2F%2Fh%2F&callbackURL=http%3A%2F%2Fi%2F",
            "repeatedParam",
        ),
        ("destroy", "hookID=abc", "invalidHookID"),
        ("destroy", "hookID=-1", "invalidHookID"),
    ];
    for (call, q, key) in cases {
        let xml = relay.call(call, q).await;
        assert!(
            xml.starts_with(&format!(
                "<response><returncode>FAILED</returncode><messageKey>{key}</messageKey><message>"
            )),
            "{call}?{q}: {xml}"
        );
    }
    // Nothing was created by any of them.
    assert_eq!(
        relay.call("list", "").await,
        "<response><returncode>SUCCESS</returncode><hooks></hooks></response>"
    );
    // A query over 8 KiB is refused.
    let long = format!("callbackURL=http%3A%2F%2Fh%2F{}", "a".repeat(9000));
    assert!(
        relay
            .call("create", &long)
            .await
            .contains("<messageKey>queryTooLong</messageKey>")
    );
    relay.stop().await;
}

#[tokio::test]
async fn routes_ping_post_and_unknown_paths() {
    let redis = TestRedis::start().await;
    let relay = TestRelay::start(&redis).await;
    let (status, _, body) = relay.get("/bigbluebutton/api/hooks/ping").await;
    assert_eq!((status, body.as_str()), (200, "bbb-webhooks API up!"));
    // Case-insensitive path and trailing slash, checksum over the call name as sent.
    let sum = Algorithm::Sha1.hex_digest(&[b"hooks/list/", b"", SECRET.as_bytes()]);
    let (status, _, body) = relay
        .get(&format!("/BigBlueButton/api/hooks/list/?checksum={sum}"))
        .await;
    assert_eq!(
        (status, body.as_str()),
        (
            200,
            "<response><returncode>SUCCESS</returncode><hooks></hooks></response>"
        )
    );
    // POST with the parameters in the query string.
    let sum = Algorithm::Sha1.hex_digest(&[b"hooks/list", b"", SECRET.as_bytes()]);
    let r = crate::support::relay::http_client()
        .post(format!(
            "http://{}/bigbluebutton/api/hooks/list?checksum={sum}",
            relay.api
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("SUCCESS"));
    let (status, _, _) = relay.get("/bigbluebutton/api/hooks/other").await;
    assert_eq!(status, 404);
    let (status, _, _) = relay.get("/elsewhere").await;
    assert_eq!(status, 404);
    // Metrics count the calls.
    let m = relay.metrics().await;
    assert!(
        m.contains(
            r#"hookrelay_api_requests_total{call="list",returncode="SUCCESS",message_key="",tenant=""} 2"#
        ),
        "{m}"
    );
    relay.stop().await;
}

#[tokio::test]
async fn bearer_mode_refuses_plain_http_callbacks_unless_allowed() {
    async fn create(relay: &TestRelay, url: &str) -> String {
        let q = format!("callbackURL={}", hookrelay::base::form::form_encode(url));
        relay.call("create", &q).await
    }
    let redis = TestRedis::start().await;
    let mut config = TestRelay::config(&redis);
    config.delivery.auth = hookrelay::config::CallbackAuth::Bearer;
    let relay = TestRelay::start_with(&redis, config.clone()).await;
    let xml = create(&relay, "http://127.0.0.1:9/plain").await;
    assert!(
        xml.contains("<messageKey>invalidCallbackURL</messageKey><message>callbackURL is not allowed: callbacks carry the shared secret as a bearer token, so they need https"),
        "{xml}"
    );
    let xml = create(&relay, "https://127.0.0.1:9/tls").await;
    assert!(xml.contains("<returncode>SUCCESS</returncode>"), "{xml}");
    relay.stop().await;

    config.delivery.allow_insecure_bearer = true;
    let relay = TestRelay::start_with(&redis, config).await;
    let xml = create(&relay, "http://127.0.0.1:9/plain").await;
    assert!(xml.contains("<returncode>SUCCESS</returncode>"), "{xml}");
    relay.stop().await;
}
