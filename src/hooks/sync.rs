//! Hooks shared by the instances of a fleet: every instance applies the changes the others
//! announce ([`super::announce`]) to its registry, reading the hook back from the store; at each
//! (re)subscription, in case something was missed, every hook is read again.

use crate::base::ids::HookId;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{HookStore, announce::CHANNEL};
use crate::store_conn::StoreConn;

/// Applies announced changes to `store`'s registry until `token` is cancelled.
pub(crate) async fn follow(store: Arc<HookStore>, conn: StoreConn, token: CancellationToken) {
    conn.keep_listening("hook changes of other instances", &token, |client| {
        let (store, token) = (store.clone(), token.clone());
        async move { listen(&store, &client, &token).await }
    })
    .await;
}

async fn listen(
    store: &HookStore,
    client: &redis::Client,
    token: &CancellationToken,
) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(CHANNEL).await?;
    // Whatever changed while not subscribed.
    let n = store.reload().await?;
    tracing::debug!(hooks = n, "hooks read again from the store");
    let mut messages = pubsub.into_on_message();
    while let Some(text) = StoreConn::next_message(&mut messages, token).await? {
        match text.parse::<HookId>() {
            Ok(id) => store.refresh(id).await?,
            Err(_) => tracing::debug!("ignoring a hook change that names no hook id"),
        }
    }
    Ok(())
}
