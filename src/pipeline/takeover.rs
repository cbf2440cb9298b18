//! What a takeover from bbb-webhooks left in the store, read at the start: the callbacks' form,
//! the domain and bbb-webhooks' permanent hooks, recorded so that they stay when bbb-webhooks
//! is purged.

use crate::{
    config::{Config, compat::CallbackFormat},
    store_conn::StoreConn,
};

/// `config` with what the takeover from bbb-webhooks recorded applied
/// ([`crate::config::compat::Recorded::apply`]).
pub(super) async fn with_takeover(config: &Config, conn: &StoreConn) -> Config {
    match crate::hooks::takeover::read(&mut conn.clone()).await {
        Ok(Some(recorded)) => recorded.apply(config),
        Ok(None) => config.clone(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the recorded takeover from bbb-webhooks");
            config.clone()
        }
    }
}

/// The callbacks' form, said in the log: bbb-webhooks' on every path that takes over from it
/// (its hooks imported into the store included), unless `delivery.compat` says; a takeover is
/// recorded in the store (with the domain and bbb-webhooks' permanent hooks), so that they
/// stay when bbb-webhooks is purged.
pub(super) async fn callback_format(config: &Config, conn: &StoreConn) -> CallbackFormat {
    let mut conn = conn.clone();
    let imported = crate::hooks::import::reference_hooks_imported(&mut conn)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read whether bbb-webhooks' hooks were imported");
            false
        });
    let recorded = crate::hooks::takeover::read(&mut conn)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the recorded takeover from bbb-webhooks");
            None
        });
    let format = CallbackFormat::resolve(config, imported, recorded.as_ref());
    if let Some(record) = format.to_record(config, recorded.as_ref()) {
        match crate::hooks::takeover::write(&mut conn, &record).await {
            Ok(()) => tracing::info!(
                domain = %record.domain,
                permanent_hooks = record.permanent.len(),
                "recorded the takeover from bbb-webhooks: its callback form, domain and permanent hooks stay if it is purged"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot record the takeover from bbb-webhooks"),
        }
    }
    tracing::info!("{}", format.describe());
    format
}
