//! Commands for integrators debugging their receivers: `sign` and `verify` of a callback (the
//! BBB checksum, and the Standard Webhooks signature when asked).

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, ValueEnum};
use hookrelay::{
    base::{digest::Algorithm, standard_webhooks},
    callback_checksum, signed_url, unsign_url,
};

use super::{REFUSED, fail, load};

/// The digests a callback can be signed with.
#[derive(Clone, Copy, ValueEnum)]
pub enum Digest {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

impl From<Digest> for Algorithm {
    fn from(d: Digest) -> Self {
        match d {
            Digest::Sha1 => Self::Sha1,
            Digest::Sha256 => Self::Sha256,
            Digest::Sha384 => Self::Sha384,
            Digest::Sha512 => Self::Sha512,
        }
    }
}

/// Where a callback's secret comes from: `HOOKRELAY_SIGN_SECRET`, a file or standard input,
/// else the configuration. On the command line it is visible to every user of the machine
/// (`ps`, `/proc/*/cmdline`): taken, with a warning.
#[derive(Args)]
pub(super) struct SecretArgs {
    /// The shared secret, visible to other users there: prefer HOOKRELAY_SIGN_SECRET or
    /// --secret-file (default: bbb.secret of the configuration).
    #[arg(long)]
    secret: Option<String>,
    /// A file holding the shared secret (`-`: standard input), its first line.
    #[arg(long, conflicts_with = "secret")]
    secret_file: Option<PathBuf>,
    /// The relay's configuration, for its secret.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct SignArgs {
    /// The callback URL as registered.
    #[arg(long)]
    url: String,
    /// The body exactly as sent (`-` reads it from stdin).
    #[arg(long)]
    body: String,
    #[arg(long, value_enum, default_value_t = Digest::Sha1)]
    algorithm: Digest,
    #[command(flatten)]
    secret: SecretArgs,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The URL the request came to, with its checksum parameter.
    #[arg(long)]
    url: String,
    /// The body exactly as received (`-` reads it from stdin).
    #[arg(long)]
    body: String,
    #[command(flatten)]
    secret: SecretArgs,
    /// Also check this `webhook-signature` header (Standard Webhooks).
    #[arg(long, requires_all = ["webhook_id", "webhook_timestamp"])]
    webhook_signature: Option<String>,
    /// The `webhook-id` header.
    #[arg(long)]
    webhook_id: Option<String>,
    /// The `webhook-timestamp` header.
    #[arg(long)]
    webhook_timestamp: Option<u64>,
    /// A `whsec_` secret to check the signature with (repeatable), visible to other users
    /// there: prefer HOOKRELAY_STANDARD_SECRETS (space-separated) or --standard-secret-file
    /// (default: the configuration's delivery.standard_webhooks.secrets).
    #[arg(long)]
    standard_secret: Vec<String>,
    /// A file of `whsec_` secrets, one a line (`-`: standard input).
    #[arg(long, conflicts_with = "standard_secret")]
    standard_secret_file: Option<PathBuf>,
}

/// The variable that holds the shared secret for `sign` and `verify`.
const SIGN_SECRET: &str = "HOOKRELAY_SIGN_SECRET";
/// The variable that holds Standard Webhooks secrets for `verify`, space-separated.
const STANDARD_SECRETS: &str = "HOOKRELAY_STANDARD_SECRETS";

/// Says once that a secret was given where other users see it.
fn warn_visible(flag: &str, instead: &str) {
    eprintln!(
        "hookrelay: warning: {flag} on the command line is visible to every user of this machine (ps, /proc); use {instead}"
    );
}

/// The lines of `path` (`-`: standard input), blank ones left out.
fn secret_lines(path: &std::path::Path) -> Result<Vec<String>, ExitCode> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| fail(2, &format!("{}: {e}", path.display())))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

fn secret(args: &SecretArgs) -> Result<String, ExitCode> {
    if let Some(s) = &args.secret {
        warn_visible("--secret", &format!("{SIGN_SECRET} or --secret-file"));
        return Ok(s.clone());
    }
    if let Some(path) = &args.secret_file {
        return secret_lines(path)?
            .into_iter()
            .next()
            .ok_or_else(|| fail(2, &format!("{}: no secret in it", path.display())));
    }
    if let Some(s) = std::env::var(SIGN_SECRET).ok().filter(|s| !s.is_empty()) {
        return Ok(s);
    }
    Ok(load(args.config.as_deref())?
        .bbb
        .secret
        .expose()
        .to_string())
}

/// Refuses to read the body and a secret both from standard input.
fn one_stdin(body: &str, secrets: &[Option<&PathBuf>]) -> Result<(), ExitCode> {
    let stdin = |p: &Option<&PathBuf>| p.is_some_and(|p| p.as_os_str() == "-");
    match body == "-" && secrets.iter().any(stdin) {
        true => Err(fail(
            2,
            "the body and a secret cannot both come from standard input",
        )),
        false => Ok(()),
    }
}

fn body(arg: &str) -> Result<String, ExitCode> {
    if arg != "-" {
        return Ok(arg.to_string());
    }
    std::io::read_to_string(std::io::stdin()).map_err(|e| fail(2, &format!("stdin: {e}")))
}

/// `hookrelay sign`: the checksum of a callback and the URL it is posted to.
pub(crate) fn sign(args: &SignArgs) -> ExitCode {
    if let Err(code) = one_stdin(&args.body, &[args.secret.secret_file.as_ref()]) {
        return code;
    }
    let (secret, body) = match (secret(&args.secret), body(&args.body)) {
        (Ok(s), Ok(b)) => (s, b),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let checksum = callback_checksum(args.algorithm.into(), &args.url, &body, &secret);
    println!("checksum: {checksum}");
    println!("POST {}", signed_url(&args.url, &checksum));
    ExitCode::SUCCESS
}

/// `hookrelay verify`: whether a received callback carries the right checksum (when its URL
/// has one) and, with `--webhook-signature`, the right Standard Webhooks signature.
pub(crate) fn verify(args: &VerifyArgs) -> ExitCode {
    let files = [
        args.secret.secret_file.as_ref(),
        args.standard_secret_file.as_ref(),
    ];
    if let Err(code) = one_stdin(&args.body, &files) {
        return code;
    }
    let body = match body(&args.body) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let signed = unsign_url(&args.url);
    if signed.is_none() && args.webhook_signature.is_none() {
        return fail(
            2,
            "the URL has no checksum parameter at its end (and no --webhook-signature was given)",
        );
    }
    if let Some((registered, checksum)) = signed {
        let secret = match secret(&args.secret) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let Some(alg) = Algorithm::from_hex_len(checksum.len()) else {
            return fail(
                REFUSED,
                &format!(
                    "a checksum of {} characters is no known digest",
                    checksum.len()
                ),
            );
        };
        let expected = callback_checksum(alg, &registered, &body, &secret);
        let given = checksum.to_ascii_lowercase();
        // Nothing of the expected digest is shown or told by the time taken: a receiver that
        // passes this command's output on would otherwise sign forged bodies for anyone.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            expected.as_bytes(),
            given.as_bytes(),
        )) {
            return fail(
                REFUSED,
                "checksum mismatch (is the body exactly as received, the URL as registered, and the secret the server's?)",
            );
        }
        println!("ok: {alg:?} checksum of {registered} and the body");
    }
    if let (Some(header), Some(id), Some(ts)) = (
        &args.webhook_signature,
        &args.webhook_id,
        args.webhook_timestamp,
    ) {
        return verify_standard(args, header, id, ts, &body);
    }
    ExitCode::SUCCESS
}

fn verify_standard(args: &VerifyArgs, header: &str, id: &str, ts: u64, body: &str) -> ExitCode {
    let from_env: Vec<String> = std::env::var(STANDARD_SECRETS)
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    let secrets = if !args.standard_secret.is_empty() {
        warn_visible(
            "--standard-secret",
            &format!("{STANDARD_SECRETS} or --standard-secret-file"),
        );
        args.standard_secret.clone()
    } else if let Some(path) = &args.standard_secret_file {
        match secret_lines(path) {
            Ok(lines) => lines,
            Err(code) => return code,
        }
    } else if !from_env.is_empty() {
        from_env
    } else {
        if args.secret.config.is_none() {
            return fail(
                2,
                "no Standard Webhooks secret: give HOOKRELAY_STANDARD_SECRETS, --standard-secret-file or --config",
            );
        }
        match load(args.secret.config.as_deref()) {
            Ok(c) => c
                .delivery
                .standard_webhooks
                .secrets
                .iter()
                .map(|s| s.expose().to_string())
                .collect(),
            Err(code) => return code,
        }
    };
    if secrets.is_empty() {
        return fail(
            2,
            "no Standard Webhooks secret: give HOOKRELAY_STANDARD_SECRETS or --standard-secret-file",
        );
    }
    for (i, secret) in secrets.iter().enumerate() {
        let key = match standard_webhooks::key_of(secret, i + 1) {
            Ok(k) => k,
            Err(e) => return fail(2, &e.to_string()),
        };
        if standard_webhooks::verify(&key, id, ts, body.as_bytes(), header) {
            println!("ok: webhook-signature by secret {}", i + 1);
            return ExitCode::SUCCESS;
        }
    }
    fail(
        REFUSED,
        "webhook-signature mismatch: no v1 signature matches id.timestamp.body with the given secrets",
    )
}
