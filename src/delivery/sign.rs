//! Signing callbacks. The pure parts: the body, its checksum, the signed URL. And the one
//! rule of whose secrets sign a hook's callback, [`Signer::sign_attempt`]: a tenant's hook its
//! tenant's (read live, so that a rotation applies to the next attempt), the operator's hooks
//! the operator's, each hook's own secrets besides; a hook whose tenant is gone is refused.

use crate::base::ids::HookId;

use std::sync::Arc;

use crate::base::standard_webhooks::{Headers, StandardSigner, key_of};
use crate::{
    base::{
        digest::Algorithm,
        form::form_encode,
        sources::{SourceId, SourceTable},
    },
    config::{
        CallbackAuth, CallbackBody, Compat, Config, Secret,
        compat::{CallbackFormat, Why},
    },
    event::Payload,
    hooks::Hook,
    tenants::{Tenant, Tenants},
};

/// `event=<encoded json>&timestamp=<ms>`: the specification's body. `encoded_event` is already
/// form-encoded, so that one event is encoded once, whatever the number of hooks.
pub fn spec_body(encoded_event: &str, timestamp_ms: u64) -> String {
    format!("event={encoded_event}&timestamp={timestamp_ms}")
}

/// The reference service's body: `domain=…&event=[<json>]&timestamp=…`.
pub(crate) fn reference_body(domain: &str, encoded_event: &str, timestamp_ms: u64) -> String {
    format!(
        "domain={}&event=%5B{encoded_event}%5D&timestamp={timestamp_ms}",
        form_encode(domain)
    )
}

/// Checksum of a callback: digest of (URL as registered + body exactly as sent + secret).
pub fn callback_checksum(alg: Algorithm, callback_url: &str, body: &str, secret: &str) -> String {
    alg.hex_digest(&[callback_url.as_bytes(), body.as_bytes(), secret.as_bytes()])
}

/// The URL to POST to: the registered URL with `checksum=` appended with `?` or `&`. A fragment
/// is never sent by HTTP clients, so the parameter goes before it.
pub fn signed_url(callback_url: &str, checksum: &str) -> String {
    let (base, fragment) = match callback_url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (callback_url, None),
    };
    let sep = if base.contains('?') { '&' } else { '?' };
    match fragment {
        Some(f) => format!("{base}{sep}checksum={checksum}#{f}"),
        None => format!("{base}{sep}checksum={checksum}"),
    }
}

/// [`signed_url`] of `registered`, made from `parsed` (`registered` parsed once, for all its
/// callbacks) rather than by parsing the signed URL again; `signed` is what `signed_url` gave.
/// `None` when `signed` is not `registered` with a parameter added.
pub(crate) fn signed_parsed(
    registered: &str,
    parsed: &reqwest::Url,
    signed: &str,
) -> Option<reqwest::Url> {
    let base = registered.split_once('#').map_or(registered, |(b, _)| b);
    if signed == registered {
        return Some(parsed.clone());
    }
    let rest = signed.strip_prefix(base)?;
    let rest = rest.split_once('#').map_or(rest, |(a, _)| a);
    let added = rest.strip_prefix(['?', '&'])?;
    let mut url = parsed.clone();
    match parsed.query() {
        Some(q) => url.set_query(Some(&format!("{q}&{added}"))),
        None => url.set_query(Some(added)),
    }
    Some(url)
}

/// The inverse of [`signed_url`]: the URL as registered and the checksum, from the URL a
/// callback came to; `None` when it does not end with a `checksum` parameter.
pub fn unsign_url(url: &str) -> Option<(String, &str)> {
    let (base, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let at = base.rfind("checksum=")?;
    let sep = base[..at].chars().next_back()?;
    if sep != '?' && sep != '&' {
        return None;
    }
    let checksum = &base[at + "checksum=".len()..];
    let registered = &base[..at - 1];
    Some(match fragment {
        Some(f) => (format!("{registered}#{f}"), checksum),
        None => (registered.to_string(), checksum),
    })
}

/// How callbacks are signed, from the configuration; shared by the delivery workers and
/// `hookrelay replay --send`.
#[derive(Debug, Clone)]
pub struct Signer {
    secret: Secret,
    algorithm: Algorithm,
    compat: Compat,
    auth: CallbackAuth,
    /// The sources' domains: the `domain` of the reference body form.
    sources: Arc<SourceTable>,
    /// Standard Webhooks headers, when configured.
    standard: Option<StandardSigner>,
    /// Which callbacks have the JSON body.
    json: JsonBodies,
    /// The tenants, whose hooks' callbacks are signed with their own first secret.
    tenants: Arc<Tenants>,
}

/// The secrets that sign one hook's attempt ([`Signer::keys_for`]).
pub struct HookKeys<'s> {
    signer: &'s Signer,
    /// The hook's tenant (`None`: the operator's hook).
    tenant: Option<Arc<Tenant>>,
    /// The hook's own secrets in force, as a Standard Webhooks signer.
    own: Option<StandardSigner>,
}

impl HookKeys<'_> {
    /// The secret of the checksum and of bearer mode: the tenant's first, else the operator's.
    pub fn secret(&self) -> &Secret {
        self.tenant
            .as_deref()
            .map_or(&self.signer.secret, Tenant::signing_secret)
    }

    /// The `Authorization: Bearer` token: [`HookKeys::secret`] in bearer mode.
    pub fn bearer(&self) -> Option<&str> {
        (self.signer.auth == CallbackAuth::Bearer).then(|| self.secret().expose())
    }

    /// The Standard Webhooks headers of an attempt made now at callback `ts` of hook `hook`:
    /// a signature per secret of the hook's own, then (where Standard Webhooks signatures are
    /// configured) one per secret of its tenant's first two, or of the configured ones.
    pub fn standard_headers(&self, hook: HookId, ts: u64, body: &[u8]) -> Option<Headers> {
        let now_s = crate::base::time::now_ms() / 1000;
        let tenant = self.tenant.as_ref().map(|t| t.standard_signer());
        let base = match (&tenant, &self.signer.standard) {
            (_, None) => None,
            (Some(t), Some(_)) => Some(t),
            (None, Some(configured)) => Some(configured),
        };
        let merged;
        let signer = match (&self.own, base) {
            (Some(own), Some(base)) => {
                merged = own.clone().and(base);
                &merged
            }
            (Some(own), None) => own,
            (None, Some(base)) => base,
            (None, None) => return None,
        };
        Some(signer.headers(hook, ts, now_s, body))
    }
}

/// A tenant's hook whose tenant the relay no longer knows: its callbacks are not signed with
/// any secret (certainly not the operator's) and not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant {0} is not known (removed from Scalelite or the configuration)")]
pub struct UnknownTenant(pub String);

/// Which callbacks carry the event's JSON as their body (`[delivery.standard_webhooks] body`
/// and `json_url_prefixes`).
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonBodies {
    all: bool,
    url_prefixes: Vec<String>,
}

impl JsonBodies {
    /// Whether callbacks to `callback_url` carry JSON.
    fn applies_to(&self, callback_url: &str) -> bool {
        self.all
            || self
                .url_prefixes
                .iter()
                .any(|p| callback_url.starts_with(p.as_str()))
    }
}

/// One callback ready to POST.
pub struct SignedCallback {
    pub(crate) url: String,
    pub(crate) body: String,
    pub(crate) content_type: &'static str,
    /// The callback's timestamp, for `X-Hookrelay-Timestamp`: JSON bodies carry none.
    pub(crate) timestamp_header: Option<u64>,
}

/// The JSON body's Content-Type.
pub(crate) const JSON_CONTENT_TYPE: &str = "application/json";

/// The reference's callback Content-Type, charset included (its receivers may check it).
pub(crate) const REFERENCE_CONTENT_TYPE: &str = "application/x-www-form-urlencoded;charset=UTF-8";
/// The plain form's Content-Type (the specification's).
pub(crate) const CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

impl Signer {
    /// The signer of `config`, sending callbacks in the form `format` decided.
    pub fn new(config: &Config, format: &CallbackFormat) -> Self {
        Self {
            secret: config.bbb.secret.clone(),
            algorithm: config.delivery.checksum_algorithm,
            compat: format.compat,
            auth: config.delivery.auth,
            sources: Arc::new(source_table(config)),
            // Validated with the configuration.
            standard: StandardSigner::new(&config.delivery.standard_webhooks.secrets)
                .ok()
                .flatten(),
            json: JsonBodies {
                all: config.delivery.standard_webhooks.body == CallbackBody::Json,
                url_prefixes: config.delivery.standard_webhooks.json_url_prefixes.clone(),
            },
            tenants: Tenants::of_config(config),
        }
    }

    /// This signer, with the relay's tenants in force (followed in Scalelite's Redis).
    pub fn with_tenants(self, tenants: Arc<Tenants>) -> Self {
        Self { tenants, ..self }
    }

    /// The sources' names and domains.
    pub(crate) fn sources(&self) -> &Arc<SourceTable> {
        &self.sources
    }

    /// The tenants in force.
    pub(crate) fn tenants(&self) -> &Tenants {
        &self.tenants
    }

    /// An attempt at `hook`'s callback of `payload` (from `source`, timestamped `ts`) made now
    /// (`now_ms`), signed: the callback to POST and the secrets that sign it, for its bearer
    /// token and Standard Webhooks headers. The one place that signs a hook's callback.
    ///
    /// # Errors
    /// When the hook is a tenant's the relay does not know (any more): nothing is signed.
    pub fn sign_attempt(
        &self,
        hook: &Hook,
        payload: &Payload,
        (ts, source): (u64, SourceId),
        now_ms: u64,
    ) -> Result<(SignedCallback, HookKeys<'_>), UnknownTenant> {
        let keys = self.keys_for(hook, now_ms)?;
        let signed = self.sign_with(keys.secret(), &hook.callback_url, payload, ts, source);
        Ok((signed, keys))
    }

    /// The secrets that sign an attempt at `hook`'s callback made now (`now_ms`): the one
    /// place that chooses them. A tenant's hook is signed with its tenant's secrets as they are
    /// now (so that a rotation applies to the next attempt), the operator's with the
    /// operator's; a hook's own secrets ([`Hook::signing`]) sign Standard Webhooks too.
    ///
    /// # Errors
    /// When the hook is a tenant's the relay does not know (any more): it is signed with
    /// nothing, certainly not the operator's secret.
    fn keys_for(&self, hook: &Hook, now_ms: u64) -> Result<HookKeys<'_>, UnknownTenant> {
        let tenant = match &hook.tenant {
            None => None,
            Some(id) => match self.tenants.load().by_id(id) {
                Some(t) => Some(t.clone()),
                None => return Err(UnknownTenant(id.clone())),
            },
        };
        let own = hook.signing.as_ref().map(|s| {
            StandardSigner::of_raw_keys(
                s.in_force(now_ms)
                    .filter_map(|secret| key_of(secret.expose(), 1).ok())
                    .collect::<Vec<_>>()
                    .iter()
                    .map(Vec::as_slice),
            )
        });
        Ok(HookKeys {
            signer: self,
            tenant,
            own,
        })
    }

    /// The signer of `config` as it says, without looking for bbb-webhooks (`replay --send`).
    pub fn from_config(config: &Config) -> Self {
        let format = CallbackFormat {
            compat: config.delivery.compat.unwrap_or_default(),
            why: Why::Explicit,
        };
        Self::new(config, &format)
    }

    /// The form callbacks' `Content-Type`: the reference's form sends its header as it does.
    pub fn content_type(&self) -> &'static str {
        match self.compat {
            Compat::Spec => CONTENT_TYPE,
            Compat::Reference => REFERENCE_CONTENT_TYPE,
        }
    }

    /// The body for `payload` of `source`, timestamped `ts`, and the URL to POST it to, signed
    /// with `secret`: with `checksum=` (of the URL, the body as sent and the secret) in checksum
    /// mode, as registered in bearer mode. The body is the form, or the payload itself where
    /// [`JsonBodies`] says.
    fn sign_with(
        &self,
        secret: &Secret,
        callback_url: &str,
        payload: &Payload,
        ts: u64,
        source: SourceId,
    ) -> SignedCallback {
        let json = self.json.applies_to(callback_url);
        let body = match (json, self.compat) {
            (true, _) => payload.text().to_string(),
            (false, Compat::Spec) => spec_body(payload.form_encoded(), ts),
            (false, Compat::Reference) => {
                reference_body(&self.sources.domain(source), payload.form_encoded(), ts)
            }
        };
        let url = match self.auth {
            CallbackAuth::Checksum => {
                let checksum =
                    callback_checksum(self.algorithm, callback_url, &body, secret.expose());
                signed_url(callback_url, &checksum)
            }
            CallbackAuth::Bearer => callback_url.to_string(),
        };
        SignedCallback {
            url,
            body,
            content_type: if json {
                JSON_CONTENT_TYPE
            } else {
                self.content_type()
            },
            timestamp_header: json.then_some(ts),
        }
    }
}

/// The configured sources' names and domains, in order.
pub(crate) fn source_table(config: &Config) -> SourceTable {
    let domain = match config.bbb.server_domain.as_str() {
        "" => "localhost",
        d => d,
    };
    SourceTable::with_fallback_domain(
        config
            .effective_sources()
            .into_iter()
            .map(|s| (s.name, s.server_domain)),
        domain,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_test_vectors() {
        // bbb-events.md 5.3: v3 body signed with sha1 and sha256.
        let body = reference_body(
            "d.example",
            &form_encode(r#"{"data":{"id":"x"}}"#),
            1_700_000_000_000,
        );
        assert_eq!(
            body,
            "domain=d.example&event=%5B%7B%22data%22%3A%7B%22id%22%3A%22x%22%7D%7D%5D&timestamp=1700000000000"
        );
        let url = "http://h.example/cb";
        assert_eq!(
            callback_checksum(Algorithm::Sha1, url, &body, "s3cr3t"),
            "fe01d5d34df5c685f5339ba3a667035f59e7a43e"
        );
        assert_eq!(
            callback_checksum(Algorithm::Sha256, url, &body, "s3cr3t"),
            "ac807574cc78c1c3000d9299e7fcc857882b02599a3873723e960dde264ce181"
        );
    }

    impl Signer {
        /// An operator's callback, signed.
        fn sign(&self, url: &str, payload: &Payload, ts: u64, source: SourceId) -> SignedCallback {
            self.sign_with(&self.secret, url, payload, ts, source)
        }
    }

    fn signer(toml: &str) -> Signer {
        let config =
            Config::from_toml(&format!("[bbb]\nsecret = 'sec-sec-sec-sec'\n{toml}")).unwrap();
        Signer::from_config(&config)
    }

    #[test]
    fn a_json_body_is_the_event_itself_signed_like_any_body() {
        let event = r#"{"data":{"id":"x"}}"#;
        let payload = Payload::new(event);
        let form = signer("").sign("http://h/cb", &payload, 7, 0);
        assert_eq!(form.content_type, CONTENT_TYPE);
        assert_eq!(form.timestamp_header, None);
        assert!(form.body.starts_with("event="));
        let json = signer("[delivery.standard_webhooks]\nbody = 'json'\n").sign(
            "http://h/cb",
            &payload,
            7,
            0,
        );
        assert_eq!(json.body, event);
        assert_eq!(json.content_type, "application/json");
        assert_eq!(json.timestamp_header, Some(7));
        let checksum = callback_checksum(Algorithm::Sha1, "http://h/cb", event, "sec-sec-sec-sec");
        assert_eq!(json.url, format!("http://h/cb?checksum={checksum}"));
    }

    #[test]
    fn json_url_prefixes_choose_the_json_body_per_receiver() {
        let s =
            signer("[delivery.standard_webhooks]\njson_url_prefixes = ['https://sw.example/']\n");
        let payload = Payload::new("{}");
        assert_eq!(s.sign("https://sw.example/in", &payload, 1, 0).body, "{}");
        assert!(
            s.sign("https://other.example/in", &payload, 1, 0)
                .body
                .starts_with("event=")
        );
    }

    #[test]
    fn spec_body_encodes_like_a_form() {
        let body = spec_body(&form_encode(r#"{"a":"b c/é"}"#), 7);
        assert_eq!(body, "event=%7B%22a%22%3A%22b+c%2F%C3%A9%22%7D&timestamp=7");
        let parsed: Vec<_> = form_urlencoded::parse(body.as_bytes()).collect();
        assert_eq!(parsed[0].1, r#"{"a":"b c/é"}"#);
        assert_eq!(parsed[1].1, "7");
    }

    /// Callback URLs of every shape signing must keep: with and without a query (empty too),
    /// a fragment.
    const URLS: [&str; 5] = [
        "http://h/cb",
        "http://h/cb?x=1",
        "http://h/cb?",
        "http://h/cb#f",
        "http://h/c?a=b#f",
    ];

    #[test]
    fn a_signed_url_made_from_the_parsed_one_is_the_signed_one_parsed() {
        let odd = [
            "http://h:8080/c%20d/e?a=b c&é=1",
            "https://[::1]/x?y",
            "HTTP://Example.COM/./a/../b?q=%41",
        ];
        for url in URLS.into_iter().chain(odd) {
            let parsed = reqwest::Url::parse(url).unwrap();
            let signed = signed_url(url, "ab12");
            assert_eq!(
                signed_parsed(url, &parsed, &signed),
                Some(reqwest::Url::parse(&signed).unwrap()),
                "{url}"
            );
            assert_eq!(signed_parsed(url, &parsed, url), Some(parsed.clone()));
        }
        let parsed = reqwest::Url::parse("http://h/cb").unwrap();
        assert_eq!(
            signed_parsed("http://h/cb", &parsed, "http://other/cb?checksum=1"),
            None
        );
    }

    #[test]
    fn unsign_url_gives_back_what_signed_url_signed() {
        for url in URLS {
            assert_eq!(
                unsign_url(&signed_url(url, "ab")),
                Some((url.to_string(), "ab"))
            );
        }
        assert_eq!(unsign_url("http://h/cb?xchecksum=ab"), None);
        assert_eq!(unsign_url("http://h/cb"), None);
        assert_eq!(unsign_url("checksum=ab"), None);
    }

    #[test]
    fn signed_url_separator() {
        assert_eq!(signed_url("http://h/cb", "ab"), "http://h/cb?checksum=ab");
        assert_eq!(
            signed_url("http://h/cb?x=1", "ab"),
            "http://h/cb?x=1&checksum=ab"
        );
        assert_eq!(signed_url("http://h/cb?", "ab"), "http://h/cb?&checksum=ab");
        assert_eq!(
            signed_url("http://h/cb#f", "ab"),
            "http://h/cb?checksum=ab#f"
        );
    }
}
