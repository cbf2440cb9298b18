//! Real brokers for the destination tests: a `nats-server` with JetStream and a `mosquitto`
//! started per test on a free port (so a test may stop and start them), and the machine's
//! RabbitMQ (127.0.0.1:5672, guest/guest) with an exchange and a queue of the test's own.
//! `scripts/ensure-brokers.sh` installs them.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::{free_port, wait};

/// How a broker is started: its command's arguments and environment.
#[derive(Default)]
pub(crate) struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl From<Vec<String>> for Launch {
    fn from(args: Vec<String>) -> Self {
        Self {
            args,
            env: Vec::new(),
        }
    }
}

/// The launch of a broker, from its port and data folder.
type Args = Box<dyn Fn(u16, &std::path::Path) -> Launch + Send + Sync>;

/// A broker process of a test's own: its command, port and data folder.
pub(crate) struct OwnBroker {
    pub(crate) port: u16,
    dir: tempfile::TempDir,
    program: &'static str,
    args: Args,
    child: Option<Child>,
}

impl OwnBroker {
    /// NATS with JetStream, its store in the broker's folder (kept across its restarts).
    pub(crate) async fn nats() -> Self {
        Self::nats_with_max_payload(1024 * 1024).await
    }

    /// [`Self::nats`] taking messages of at most `max_payload` bytes.
    pub(crate) async fn nats_with_max_payload(max_payload: usize) -> Self {
        Self::nats_with(format!("max_payload: {max_payload}\n")).await
    }

    /// [`Self::nats`] speaking TLS only, with `ca`'s server certificate.
    pub(crate) async fn nats_tls(ca: &super::tls::TestCa) -> Self {
        Self::nats_with(format!(
            "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
            ca.server_cert(),
            ca.server_key()
        ))
        .await
    }

    /// [`Self::nats`] with `extra` in its configuration file.
    async fn nats_with(extra: String) -> Self {
        Self::start("nats-server", move |port, dir| {
            let conf = dir.join("nats.conf");
            let text = format!(
                "host: 127.0.0.1\nport: {port}\n{extra}jetstream {{\n  store_dir: \"{}\"\n}}\n",
                dir.display()
            );
            std::fs::write(&conf, text).expect("nats.conf");
            vec!["-c".into(), conf.display().to_string()].into()
        })
        .await
    }

    /// Mosquitto, keeping its sessions and queued messages on disk across its restarts.
    pub(crate) async fn mosquitto() -> Self {
        Self::mosquitto_with(String::new()).await
    }

    /// [`Self::mosquitto`] taking packets of at most `max` bytes (said in its CONNACK).
    pub(crate) async fn mosquitto_with_max_packet(max: usize) -> Self {
        Self::mosquitto_with(format!("max_packet_size {max}\n")).await
    }

    /// [`Self::mosquitto`] speaking TLS only, with `ca`'s server certificate (made readable
    /// to the user mosquitto runs as).
    pub(crate) async fn mosquitto_tls(ca: &super::tls::TestCa) -> Self {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(ca.dir(), std::fs::Permissions::from_mode(0o755));
        for f in [ca.server_cert(), ca.server_key(), ca.ca_file()] {
            let _ = std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644));
        }
        Self::mosquitto_with(format!(
            "cafile {}\ncertfile {}\nkeyfile {}\n",
            ca.ca_file(),
            ca.server_cert(),
            ca.server_key()
        ))
        .await
    }

    /// [`Self::mosquitto`] with `extra` after its listener line.
    async fn mosquitto_with(extra: String) -> Self {
        Self::start("mosquitto", move |port, dir| {
            // Started as root, it writes as the user mosquitto.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777));
            let conf = dir.join("mosquitto.conf");
            let text = format!(
                "listener {port} 127.0.0.1\n{extra}allow_anonymous true\npersistence true\npersistence_location {}/\nautosave_interval 1\nmax_queued_messages 100000\n",
                dir.display()
            );
            std::fs::write(&conf, text).expect("mosquitto.conf");
            vec!["-c".into(), conf.display().to_string()].into()
        })
        .await
    }

    /// RabbitMQ of the test's own (a node of its own name, its data in the broker's folder),
    /// speaking TLS only with `ca`'s server certificate when `ca` is given. It takes a few
    /// seconds to start.
    pub(crate) async fn rabbitmq(ca: Option<&super::tls::TestCa>) -> Self {
        Self::rabbitmq_with(ca, String::new()).await
    }

    /// [`Self::rabbitmq`] with `extra` in its `rabbitmq.conf`.
    pub(crate) async fn rabbitmq_with(ca: Option<&super::tls::TestCa>, extra: String) -> Self {
        let tls = ca.map(|ca| (ca.ca_file(), ca.server_cert(), ca.server_key()));
        let dist = free_port();
        Self::start(RABBITMQ_SERVER, move |port, dir| {
            let listener = match &tls {
                None => format!("listeners.tcp.default = {port}\n"),
                Some((ca, cert, key)) => format!(
                    "listeners.tcp = none\nlisteners.ssl.default = {port}\nssl_options.cacertfile = {ca}\nssl_options.certfile = {cert}\nssl_options.keyfile = {key}\nssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n"
                ),
            };
            std::fs::write(dir.join("rabbitmq.conf"), format!("{listener}{extra}"))
                .expect("rabbitmq.conf");
            std::fs::write(dir.join("enabled_plugins"), "[].\n").expect("enabled_plugins");
            let at = |f: &str| dir.join(f).display().to_string();
            let env = [
                ("HOME", at("")),
                ("RABBITMQ_NODENAME", format!("hookrelay-test-{port}@localhost")),
                ("RABBITMQ_NODE_PORT", port.to_string()),
                ("RABBITMQ_DIST_PORT", dist.to_string()),
                ("RABBITMQ_MNESIA_BASE", at("mnesia")),
                ("RABBITMQ_LOG_BASE", at("log")),
                ("RABBITMQ_CONFIG_FILE", at("rabbitmq")),
                ("RABBITMQ_ENABLED_PLUGINS_FILE", at("enabled_plugins")),
                ("RABBITMQ_PID_FILE", at("pid")),
            ];
            Launch {
                args: Vec::new(),
                env: env.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            }
        })
        .await
    }

    /// The broker's own process, when its command starts it as a child (RabbitMQ's script).
    fn inner_pid(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.path().join("pid"))
            .ok()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
    }

    async fn start(
        program: &'static str,
        args: impl Fn(u16, &std::path::Path) -> Launch + Send + Sync + 'static,
    ) -> Self {
        let mut broker = Self {
            port: 0,
            dir: tempfile::tempdir().expect("temp dir"),
            program,
            args: Box::new(args),
            child: None,
        };
        for _ in 0..10 {
            broker.port = free_port();
            if broker.try_spawn().await {
                return broker;
            }
        }
        panic!("{program} could not start on a free port (scripts/ensure-brokers.sh installs it)");
    }

    async fn try_spawn(&mut self) -> bool {
        let path = [PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")]
            .iter()
            .map(|d| d.join(self.program))
            .find(|p| p.is_file())
            .or_else(|| super::on_path(self.program))
            .unwrap_or_else(|| {
                panic!("{} is missing: run scripts/ensure-brokers.sh", self.program)
            });
        let launch = (self.args)(self.port, self.dir.path());
        let mut child = Command::new(path)
            .args(launch.args)
            .envs(launch.env)
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the broker");
        // RabbitMQ takes seconds; the others a few milliseconds.
        for _ in 0..1200 {
            if let Ok(Some(_)) = child.try_wait() {
                return false;
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                self.child = Some(child);
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let _ = child.kill();
        false
    }

    /// Stops the broker (SIGTERM, as a service manager does) and waits for its end.
    pub(crate) async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            if let Some(inner) = self.inner_pid() {
                let _ = Command::new("kill").args(["-TERM", &inner]).status();
            }
            for _ in 0..1200 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on its port, with its data.
    pub(crate) async fn start_again(&mut self) {
        for _ in 0..40 {
            if self.try_spawn().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!(
            "{} could not start again on port {}",
            self.program, self.port
        );
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        if let Some(inner) = self.inner_pid() {
            let _ = Command::new("kill").args(["-KILL", &inner]).status();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// RabbitMQ's own start script (the one in /usr/sbin switches to the user rabbitmq).
const RABBITMQ_SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

/// The machine's RabbitMQ.
pub(crate) const RABBITMQ: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A connection to the machine's RabbitMQ, waiting for it to answer.
pub(crate) async fn rabbitmq() -> lapin::Connection {
    wait::until(
        "RabbitMQ answers on 127.0.0.1:5672 (scripts/ensure-brokers.sh)",
        async || {
            lapin::Connection::connect(RABBITMQ, lapin::ConnectionProperties::default())
                .await
                .map_err(|e| e.to_string())
        },
    )
    .await
}

/// A durable, auto-deleted topic exchange of the caller's own on the machine's RabbitMQ, with a queue bound to
/// all of it; the queue's consumer.
pub(crate) async fn amqp_queue(exchange: &str) -> (lapin::Channel, lapin::Consumer) {
    use lapin::{options::*, types::FieldTable};
    let connection = rabbitmq().await;
    let channel = connection.create_channel().await.expect("channel");
    channel
        .exchange_declare(
            exchange.into(),
            lapin::ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                auto_delete: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("exchange");
    let queue = channel
        .queue_declare(
            "".into(),
            QueueDeclareOptions {
                exclusive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("queue");
    channel
        .queue_bind(
            queue.name().clone(),
            exchange.into(),
            "#".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("bind");
    let consumer = channel
        .basic_consume(
            queue.name().clone(),
            "test".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("consume");
    std::mem::forget(connection);
    (channel, consumer)
}
