use std::{collections::HashMap, sync::Arc};

use super::{
    Refusal, Tenant, Tenants, View, refusal,
    scalelite::{Problem, Records, interpret},
};
use crate::{base::secret::Secret, config::tenants::TenantConfig};

fn tenant(id: &str, name: &str, secrets: &[&str]) -> Arc<Tenant> {
    Arc::new(
        Tenant::new(id, name, secrets.iter().map(|s| Secret::new(*s)).collect()).expect("secrets"),
    )
}

fn record(name: &str, secrets: &str) -> HashMap<String, String> {
    [("name", name), ("secrets", secrets), ("lrs_endpoint", "")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_host_names_its_tenant_by_its_first_label() {
    let view = View::of([
        tenant("id-1", "Acme", &["s1"]),
        tenant("id-2", "beta", &["s2"]),
    ]);
    let id = |host: &str| view.of_host(host).map(|t| t.id.as_str());
    assert_eq!(id("acme.sl.example.com"), Some("id-1"));
    assert_eq!(id("ACME.sl.example.com:8443"), Some("id-1"));
    assert_eq!(id("beta"), Some("id-2"));
    assert_eq!(id("sl.example.com"), None);
    assert_eq!(id("acme-2.sl.example.com"), None);
    assert_eq!(id(""), None);
    assert_eq!(view.resolve(Some("id-2"), Some("acme")), Some("id-2"));
    assert_eq!(view.resolve(Some("gone"), Some("ACME")), Some("id-1"));
    assert_eq!(view.resolve(Some("gone"), None), None);
    assert_eq!(View::default().resolve(Some("id-1"), None), None);
}

#[test]
fn a_tenant_without_secrets_is_not_made_and_the_first_secret_signs() {
    assert!(Tenant::new("t", "t", vec![]).is_none());
    assert!(Tenant::new("t", "t", vec![Secret::new("")]).is_none());
    let t = tenant("t", "t", &["new", "old"]);
    assert_eq!(t.signing_secret().expose(), "new");
    assert_eq!(t.secrets().len(), 2);
    assert!(!format!("{t:?}").contains("new"));
}

#[test]
fn configured_tenants_win_over_scalelites_of_one_name_or_id() {
    let tenants = Tenants::new(
        &[TenantConfig {
            name: "acme".into(),
            secrets: vec![Secret::new("configured")],
            id: None,
        }],
        vec![],
        true,
    );
    let n = tenants.set_scalelite([
        tenant("uuid-1", "acme", &["scalelite"]),
        tenant("uuid-2", "beta", &["b"]),
    ]);
    assert_eq!(n, 2);
    let view = tenants.load();
    assert_eq!(view.by_name("acme").map(|t| t.id.as_str()), Some("acme"));
    assert_eq!(
        view.by_name("acme").map(|t| t.signing_secret().expose()),
        Some("configured")
    );
    assert_eq!(view.by_id("uuid-2").map(|t| t.name.as_str()), Some("beta"));
    assert_eq!(
        view.all()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["acme", "beta"]
    );
}

#[test]
fn bad_records_keep_their_last_good_version_and_are_named() {
    let mut records = Records::default();
    records.tenants.insert(
        "u1".into(),
        record("acme", "s-new-secret-01:s-old-secret-02"),
    );
    records.tenants.insert("u2".into(), record("beta", ""));
    records.tenants.insert("u3".into(), HashMap::new());
    records
        .tenants
        .insert("u4".into(), record("", "s4-secret-00004"));
    records.index.insert("acme".into(), Some("u1".into()));
    records.index.insert("beta".into(), Some("u2".into()));
    records.index.insert("ghost".into(), Some("u9".into()));
    let last = View::of([tenant("u2", "beta", &["s-beta"])]);
    let (tenants, problems) = interpret(&records, &last, &[]);
    let names: Vec<_> = tenants
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(names, [("u1", "acme"), ("u2", "beta")]);
    assert_eq!(tenants[0].signing_secret().expose(), "s-new-secret-01");
    assert_eq!(tenants[0].secrets().len(), 2);
    assert_eq!(
        tenants[1].signing_secret().expose(),
        "s-beta",
        "the last good"
    );
    assert_eq!(
        problems,
        [
            Problem::NoRecord("u3".into()),
            Problem::NoName("u4".into()),
            Problem::NoSecrets("u2".into()),
            Problem::NameIndex("ghost".into(), Some("u9".into())),
        ]
    );
    // A good record whose index is missing is still a tenant, and the index is named.
    records.index.remove("acme");
    let (tenants, problems) = interpret(&records, &last, &[]);
    assert!(tenants.iter().any(|t| t.id == "u1"));
    assert!(problems.contains(&Problem::NameIndex("acme".into(), None)));
}

#[test]
fn a_tenant_with_the_operators_secret_or_a_weak_one_is_refused_even_its_last_version() {
    let operator = [Secret::new("operator-secret-0123")];
    let mut records = Records::default();
    records
        .tenants
        .insert("u1".into(), record("acme", "acme-secret-00001"));
    records.tenants.insert(
        "u2".into(),
        record("beta", "beta-secret-00002:operator-secret-0123"),
    );
    records
        .tenants
        .insert("u3".into(), record("gamma", "short"));
    for (name, id) in [("acme", "u1"), ("beta", "u2"), ("gamma", "u3")] {
        records.index.insert(name.into(), Some(id.into()));
    }
    // Both had a good version before: neither keeps it.
    let last = View::of([
        tenant("u2", "beta", &["beta-secret-00002"]),
        tenant("u3", "gamma", &["gamma-secret-0003"]),
    ]);
    let (tenants, problems) = interpret(&records, &last, &operator);
    let ids: Vec<_> = tenants.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["u1"]);
    assert_eq!(
        problems,
        [
            Problem::Refused("u2".into(), Refusal::OperatorSecret),
            Problem::Refused("u3".into(), Refusal::WeakSecret),
        ]
    );
    let reasons: Vec<_> = problems.iter().map(Problem::reason).collect();
    assert_eq!(reasons, ["operator_secret", "weak_secret"]);
    assert!(!format!("{problems:?}").contains("operator-secret"));
}

#[test]
fn refusal_names_the_operators_secret_before_a_weak_one() {
    let op = [Secret::new("operator-secret-0123"), Secret::new("")];
    let s = |v: &[&str]| v.iter().map(|s| Secret::new(*s)).collect::<Vec<_>>();
    assert_eq!(refusal(&s(&["a-long-secret-000"]), &op), None);
    assert_eq!(
        refusal(&s(&["short", "operator-secret-0123"]), &op),
        Some(Refusal::OperatorSecret)
    );
    assert_eq!(
        refusal(&s(&["a-long-secret-000", "short"]), &op),
        Some(Refusal::WeakSecret)
    );
    // An empty operator secret (a source without its own) matches nothing.
    assert_eq!(
        refusal(&s(&["a-long-secret-000"]), &[Secret::new("")]),
        None
    );
}
