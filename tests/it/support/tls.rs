//! `TestCa`: a certificate authority made for one test with Debian's `openssl`, and a server
//! certificate it signed for 127.0.0.1 and localhost, in a temporary folder.

use std::path::{Path, PathBuf};

pub(crate) struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// A new CA named `name`, and its server certificate.
    pub(crate) fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |f: &str| dir.path().join(f);
        let openssl = |args: &[&str]| {
            let out = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl must be installed (scripts/ensure-redis.sh installs it)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let subject = format!("/CN={name}");
        openssl(&[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", &subject,
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(at("ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").expect("ext");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext",
        ]);
        Self { dir }
    }

    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }

    /// The CA's certificate (PEM): what a `ca_file` key names.
    pub(crate) fn ca_file(&self) -> String {
        self.path("ca.crt").display().to_string()
    }

    pub(crate) fn server_cert(&self) -> String {
        self.path("server.crt").display().to_string()
    }

    pub(crate) fn server_key(&self) -> String {
        self.path("server.key").display().to_string()
    }

    #[allow(dead_code)]
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}
