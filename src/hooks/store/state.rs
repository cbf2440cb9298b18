//! A registered hook's state, changed in place: disabled (and why) or enabled again, and its
//! own signing secrets rotated. Each change is written to the store first, then to the
//! registry, and announced to a fleet's other instances.

use redis::AsyncCommands;

use super::HookStore;
use crate::{
    base::{ids::HookId, redis_keys::hook_key, standard_webhooks::new_secret, time::now_ms},
    hooks::{
        Hook,
        model::{Disabled, DisabledReason, HookSecrets},
        record::{DISABLED_FIELDS, StoreError, disabled_fields, signing_fields},
    },
};

impl HookStore {
    /// Disables hook `id` for `reason` (its retries ran out, its tenant is gone), or enables
    /// it again (`None`); `Ok(false)` when there is no such hook or it already was so (a hook
    /// disabled for another reason takes the new one, and its time).
    ///
    /// # Errors
    /// When Redis fails; the hook stays as it was then.
    pub(crate) async fn set_disabled(
        &self,
        id: HookId,
        reason: Option<DisabledReason>,
    ) -> Result<bool, StoreError> {
        let _turn = self.state_changes.lock().await;
        let Some(hook) = self.registry.load().get(id).cloned() else {
            return Ok(false);
        };
        if hook.disabled.map(|d| d.reason) == reason {
            return Ok(false);
        }
        let disabled = reason.map(|reason| Disabled {
            reason,
            since: now_ms(),
        });
        let changed = Hook {
            disabled,
            ..(*hook).clone()
        };
        let fields = match &disabled {
            Some(d) => disabled_fields(d).to_vec(),
            None => Vec::new(),
        };
        if !self.write_fields(id, &fields, &DISABLED_FIELDS).await? {
            return Ok(false);
        }
        self.registry.upsert(changed);
        self.fleet.announce(&mut self.conn.clone(), id).await;
        Ok(true)
    }

    /// Enables hook `id` again if it is disabled for its failures (a hook whose tenant is gone
    /// stays disabled until its tenant is back).
    pub(super) async fn enable_if_disabled(&self, id: HookId) -> Result<(), StoreError> {
        let disabled = self.registry.load().get(id).and_then(|h| h.disabled);
        if disabled.is_some_and(|d| d.reason == DisabledReason::Failures) {
            self.set_disabled(id, None).await?;
            tracing::info!(
                hook_id = id.0,
                "hooks/create of a disabled hook's URL: enabled again"
            );
        }
        Ok(())
    }

    /// Gives hook `id` a new signing secret; the one it had signs too for `overlap_ms`. The new
    /// secret, `None` when there is no such hook.
    ///
    /// # Errors
    /// When Redis fails; the hook keeps its secrets then.
    pub(crate) async fn rotate_secret(
        &self,
        id: HookId,
        overlap_ms: u64,
    ) -> Result<Option<HookSecrets>, StoreError> {
        let _turn = self.state_changes.lock().await;
        let Some(hook) = self.registry.load().get(id).cloned() else {
            return Ok(None);
        };
        let secrets = HookSecrets {
            current: new_secret()?,
            previous: hook
                .signing
                .as_ref()
                .map(|s| (s.current.clone(), now_ms().saturating_add(overlap_ms))),
        };
        self.set_signing(&hook, secrets).await
    }

    /// Gives `hook`, which has none, a signing secret (a `hooks/create` of its URL once
    /// `delivery.hook_secrets` is on). Its secrets, `None` when it is gone.
    ///
    /// # Errors
    /// When Redis fails.
    pub(crate) async fn ensure_secret(
        &self,
        id: HookId,
    ) -> Result<Option<HookSecrets>, StoreError> {
        let _turn = self.state_changes.lock().await;
        let Some(hook) = self.registry.load().get(id).cloned() else {
            return Ok(None);
        };
        if let Some(s) = &hook.signing {
            return Ok(Some(s.clone()));
        }
        let secrets = HookSecrets {
            current: new_secret()?,
            previous: None,
        };
        self.set_signing(&hook, secrets).await
    }

    async fn set_signing(
        &self,
        hook: &Hook,
        secrets: HookSecrets,
    ) -> Result<Option<HookSecrets>, StoreError> {
        let fields = signing_fields(&secrets);
        // A rotation without a previous secret leaves none behind.
        let gone: &[&str] = if secrets.previous.is_none() {
            &["previousSigningSecret", "previousSigningUntil"]
        } else {
            &[]
        };
        if !self.write_fields(hook.id, &fields, gone).await? {
            return Ok(None);
        }
        self.registry.upsert(Hook {
            signing: Some(secrets.clone()),
            ..hook.clone()
        });
        self.fleet.announce(&mut self.conn.clone(), hook.id).await;
        Ok(Some(secrets))
    }

    /// Writes `fields` of hook `id`'s record, after removing those of `removed` that `fields`
    /// does not set; `false` when the record is gone (a destroy in between must not leave a
    /// stray hash).
    async fn write_fields(
        &self,
        id: HookId,
        fields: &[(&'static str, String)],
        removed: &[&str],
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let key = hook_key(id);
        let exists: bool = conn.exists(&key).await?;
        if !exists {
            return Ok(false);
        }
        let removed: Vec<&str> = removed
            .iter()
            .filter(|r| !fields.iter().any(|(f, _)| f == *r))
            .copied()
            .collect();
        let mut pipe = redis::pipe();
        pipe.atomic();
        if !removed.is_empty() {
            pipe.hdel(&key, removed).ignore();
        }
        if !fields.is_empty() {
            pipe.hset_multiple(&key, fields).ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        Ok(true)
    }
}
