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

/// Where a callback's secret comes from.
#[derive(Args)]
pub struct SecretArgs {
    /// The shared secret (default: bbb.secret of the configuration).
    #[arg(long, env = "HOOKRELAY_SIGN_SECRET", hide_env_values = true)]
    secret: Option<String>,
    /// The relay's configuration, for its secret.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub struct SignArgs {
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
pub struct VerifyArgs {
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
    /// A `whsec_` secret to check the signature with (repeatable; default: the configuration's
    /// delivery.standard_webhooks.secrets).
    #[arg(long)]
    standard_secret: Vec<String>,
}

fn secret(args: &SecretArgs) -> Result<String, ExitCode> {
    match &args.secret {
        Some(s) => Ok(s.clone()),
        None => Ok(load(args.config.as_deref())?
            .bbb
            .secret
            .expose()
            .to_string()),
    }
}

fn body(arg: &str) -> Result<String, ExitCode> {
    if arg != "-" {
        return Ok(arg.to_string());
    }
    std::io::read_to_string(std::io::stdin()).map_err(|e| fail(2, &format!("stdin: {e}")))
}

/// `hookrelay sign`: the checksum of a callback and the URL it is posted to.
pub fn sign(args: &SignArgs) -> ExitCode {
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
pub fn verify(args: &VerifyArgs) -> ExitCode {
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
        if !expected.eq_ignore_ascii_case(checksum) {
            return fail(
                REFUSED,
                &format!(
                    "checksum mismatch: expected {expected} for {registered} (is the body exactly as received, and the secret the server's?)"
                ),
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
    let secrets = if args.standard_secret.is_empty() {
        if args.secret.config.is_none() {
            return fail(
                2,
                "no Standard Webhooks secret: give --standard-secret or --config",
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
    } else {
        args.standard_secret.clone()
    };
    if secrets.is_empty() {
        return fail(2, "no Standard Webhooks secret: give --standard-secret");
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
