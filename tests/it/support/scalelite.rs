//! Scalelite's tenants in a real redis-server, written as Scalelite writes them
//! (blindsidenetworks/scalelite, `app/models/tenant.rb` at 1718168): `save!` in one MULTI sets
//! the name index `tenant_name:<name>` (field `id`), the hash `tenant:<id>` (fields `name`
//! and `secrets`, several secrets joined by `:`) and adds the id to the set `tenants`; a
//! rotation rewrites `secrets` alone; `destroy!` deletes the hash and the index and removes
//! the id. Every key is under `REDIS_NAMESPACE` (`lib/redis_store.rb`, default `scalelite`).

use redis::AsyncCommands;

use super::{
    TestRedis,
    relay::{http_client, signed_call_at},
};

/// Scalelite's default namespace.
pub(crate) const NS: &str = "scalelite";

/// `Tenant#save!`: creates or updates tenant `id`.
pub(crate) async fn save_tenant(redis: &TestRedis, id: &str, name: &str, secrets: &[&str]) {
    let mut conn = redis.conn().await.expect("Scalelite's redis");
    let key = format!("{NS}:tenant:{id}");
    let _: () = redis::pipe()
        .atomic()
        .hset(format!("{NS}:tenant_name:{name}"), "id", id)
        .ignore()
        .hset(&key, "name", name)
        .ignore()
        .hset(&key, "secrets", secrets.join(":"))
        .ignore()
        .sadd(format!("{NS}:tenants"), id)
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("save tenant");
}

/// `Tenant#destroy!`.
pub(crate) async fn destroy_tenant(redis: &TestRedis, id: &str, name: &str) {
    let mut conn = redis.conn().await.expect("Scalelite's redis");
    let _: () = redis::pipe()
        .atomic()
        .del(format!("{NS}:tenant:{id}"))
        .ignore()
        .srem(format!("{NS}:tenants"), id)
        .ignore()
        .del(format!("{NS}:tenant_name:{name}"))
        .ignore()
        .query_async(&mut conn)
        .await
        .expect("destroy tenant");
}

/// A rotation (`tenant.secrets = ...; tenant.save!`): `secrets` rewritten alone.
pub(crate) async fn rotate(redis: &TestRedis, id: &str, secrets: &[&str]) {
    set_field(
        redis,
        &format!("tenant:{id}"),
        "secrets",
        &secrets.join(":"),
    )
    .await;
}

/// Writes one field of a stored hash as it is (to make bad records).
pub(crate) async fn set_field(redis: &TestRedis, key: &str, field: &str, value: &str) {
    let mut conn = redis.conn().await.expect("Scalelite's redis");
    let _: () = conn
        .hset(format!("{NS}:{key}"), field, value)
        .await
        .expect("hset");
}

/// The host name tenant `name` is called at (`<name>.sl.example.com`, as Scalelite's
/// `URL_HOST` makes it).
pub(crate) fn host(name: &str) -> String {
    format!("{name}.sl.example.com")
}

/// A call `call` of the API at `api`, made to tenant `at`'s host (the operator's without) and
/// signed with SHA-1 and `secret`: the XML answer.
pub(crate) async fn call_at(
    api: std::net::SocketAddr,
    at: Option<&str>,
    call: &str,
    query: &str,
    secret: &str,
) -> String {
    let at = at.map(host);
    signed_call_at(
        &http_client(),
        api,
        at.as_deref(),
        call,
        query,
        (hookrelay::base::digest::Algorithm::Sha1, secret),
    )
    .await
}

/// The id in a `hooks/create` answer.
pub(crate) fn hook_id(xml: &str) -> u64 {
    super::relay::hook_id_of(xml).unwrap_or_else(|| panic!("no hook id: {xml}"))
}
