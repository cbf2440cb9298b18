//! The relay's listeners, as a second relay, an upgrading administrator and a local user meet
//! them: defaults that collide with nothing, a bind failure that names its key and address, and
//! an admin API that gives nothing to whom could not call `hooks/list`.

use std::{net::SocketAddr, os::unix::fs::PermissionsExt, path::Path, process::Stdio};

use tokio::process::{Child, Command};

use crate::support::{
    RelayProcess, SECRET, TestReceiver, TestRedis, free_port,
    process::binary,
    relay::{create_hook, http_client},
    wait::until,
};

/// Starts the binary with `config` (and `env`), and waits until its API answers.
async fn serve(config: &Path, api: SocketAddr, env: &[(&str, &Path)]) -> Child {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("hookrelay");
    let http = http_client();
    until("the relay answers hooks/ping", async || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the relay exited at start: {status}");
        }
        http.get(format!("http://{api}/bigbluebutton/api/hooks/ping"))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    child
}

/// The binary's exit status and standard error for `args`.
async fn run(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut command = Command::new(binary());
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().await.expect("hookrelay");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn two_relays_with_only_their_api_and_metrics_ports_set_both_run() {
    // Nothing of [admin]: its default. (The test's own Redis, and callbacks to loopback.)
    let runtime = tempfile::tempdir().expect("runtime dir");
    let env = [("RUNTIME_DIRECTORY", runtime.path())];
    let (mut relays, mut configs) = (Vec::new(), Vec::new());
    let mut redises = Vec::new();
    for n in 0..2 {
        let redis = TestRedis::start().await;
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = runtime.path().join(format!("relay{n}.toml"));
        std::fs::write(
            &config,
            format!(
                "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{api}\"\n[metrics]\nbind = \"127.0.0.1:{}\"\n[redis]\nurl = \"{}\"\n[delivery.ssrf]\nallow_cidrs = [\"127.0.0.1/32\"]\n",
                free_port(),
                redis.url()
            ),
        )
        .expect("config");
        relays.push((serve(&config, api, &env).await, api));
        configs.push(config);
        redises.push(redis);
    }
    // Each has its admin API on a socket of its own, which the commands find from the same
    // configuration: each lists its own hook.
    let rx = TestReceiver::start().await;
    for (n, (_, api)) in relays.iter().enumerate() {
        create_hook(&http_client(), *api, &rx.url(&format!("/relay{n}")), "").await;
        let socket = runtime.path().join(format!("admin-{}.sock", api.port()));
        let mode = std::fs::metadata(&socket)
            .expect("its socket")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o660, "{}", socket.display());
    }
    for (n, config) in configs.iter().enumerate() {
        let config = config.to_str().unwrap();
        let (code, out, err) = run(&["hooks", "list", "-c", config], &env).await;
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(&format!("/relay{n}")), "{out}");
        assert!(!out.contains(&format!("/relay{}", 1 - n)), "{out}");
        // The states come from its admin API, reached through its socket.
        assert!(!err.contains("no hook states"), "{err}");
    }
    for (mut child, _) in relays {
        child.kill().await.expect("kill");
    }
}

#[tokio::test]
async fn a_taken_port_gives_one_line_naming_its_key_and_address() {
    let redis = TestRedis::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr");
    let free = || format!("127.0.0.1:{}", free_port());
    for key in ["api.bind", "metrics.bind", "admin.bind"] {
        let addr = |k: &str| if k == key { busy.to_string() } else { free() };
        let config = dir.path().join("c.toml");
        std::fs::write(
            &config,
            format!(
                "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{}\"\n[metrics]\nbind = \"{}\"\n[admin]\nbind = \"{}\"\nsocket = \"{}\"\n[redis]\nurl = \"{}\"\n",
                addr("api.bind"),
                addr("metrics.bind"),
                addr("admin.bind"),
                dir.path().join("admin.sock").display(),
                redis.url()
            ),
        )
        .expect("config");
        let (code, out, err) = run(&["serve", "-c", config.to_str().unwrap()], &[]).await;
        assert_eq!(code, 1, "{key}: {out}{err}");
        assert_eq!(
            err,
            format!(
                "hookrelay: cannot listen on {busy} ({key}): {}\n",
                std::io::Error::from_raw_os_error(libc::EADDRINUSE)
            ),
            "{key}"
        );
    }
    // A socket another relay answers on is not taken over.
    let sock = dir.path().join("live.sock");
    let _live = std::os::unix::net::UnixListener::bind(&sock).expect("socket");
    let config = dir.path().join("s.toml");
    std::fs::write(
        &config,
        format!(
            "[bbb]\nsecret = \"{SECRET}\"\n[api]\nbind = \"{}\"\n[metrics]\nenabled = false\n[admin]\nsocket = \"{}\"\n[redis]\nurl = \"{}\"\n",
            free(),
            sock.display(),
            redis.url()
        ),
    )
    .expect("config");
    let (code, _, err) = run(&["serve", "-c", config.to_str().unwrap()], &[]).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        format!(
            "hookrelay: cannot listen on {} (admin.socket): another relay listens on this socket\n",
            sock.display()
        )
    );
}

#[tokio::test]
async fn an_unauthenticated_local_caller_gets_no_hook_url_and_cannot_redeliver() {
    let redis = TestRedis::start().await;
    let relay = RelayProcess::start(&redis, "").await;
    let rx = TestReceiver::start().await;
    let url = rx.url("/cb?token=integrator-credential-77");
    let id = create_hook(&http_client(), relay.api, &url, "").await;
    let http = http_client();
    let admin = format!("http://{}", relay.admin);
    // Over TCP, with no token configured: nothing without the token derived from the secret.
    for (method, path) in [
        ("GET", "/v1/hooks".to_string()),
        ("GET", format!("/v1/hooks/{id}")),
        ("GET", "/".to_string()),
        ("POST", format!("/v1/hooks/{id}/redeliver")),
        ("POST", format!("/hooks/{id}/redeliver")),
    ] {
        let request = match method {
            "GET" => http.get(format!("{admin}{path}")),
            _ => http
                .post(format!("{admin}{path}"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body("since=10m"),
        };
        let answer = request.send().await.expect("answer");
        assert_eq!(answer.status(), 401, "{method} {path}");
        let body = answer.text().await.expect("body");
        assert!(
            !body.contains("integrator-credential"),
            "{method} {path}: {body}"
        );
    }
    // The token `hookrelay admin-token` prints from the same configuration opens it.
    let config = relay.config.to_str().unwrap();
    let (code, token, err) = run(&["admin-token", "-c", config], &[]).await;
    assert_eq!(code, 0, "{err}");
    let token = token.trim();
    assert_eq!(token.len(), 64);
    assert!(!token.contains(SECRET));
    let listed = http
        .get(format!("{admin}/v1/hooks"))
        .bearer_auth(token)
        .send()
        .await
        .expect("answer");
    assert_eq!(listed.status(), 200);
    assert!(
        listed
            .text()
            .await
            .unwrap()
            .contains("integrator-credential")
    );

    // The socket: a user who is neither the relay's user nor in its group cannot open it, and
    // the command says why. (Only where the test can become another user.)
    let nobody = crate::support::on_path("runuser").is_some() && unsafe { libc::getuid() } == 0;
    if !nobody {
        eprintln!(
            "not root, or no runuser: the socket's permissions are not tried as another user"
        );
        return;
    }
    let dir = relay.config.parent().expect("dir").to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&relay.config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // The binary as another user can run it: the build's folder may be private to its owner
    // (a target folder under root's home, as CI's cache is).
    let copy = dir.join("hookrelay");
    std::fs::copy(binary(), &copy).expect("copy the binary");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&copy)
        .args(["hooks", "show", &id.to_string(), "-c", config])
        .output()
        .await
        .expect("runuser");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert!(err.contains("member of group"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("integrator-credential"));
    // Root (the relay's own user here) reads it through the socket, without a token.
    let (code, out, err) = run(&["hooks", "show", &id.to_string(), "-c", config], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("integrator-credential"), "{out}");
}
