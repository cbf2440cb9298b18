//! The label sets of the relay's own series: each a bounded set of values (never a URL, never
//! a free-form id).

use prometheus_client::encoding::EncodeLabelSet;

/// A tenant's series: its id, empty for the operator's hooks and calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantLabel {
    tenant: String,
}

impl TenantLabel {
    /// Of the hook or call of `tenant` (`None`: the operator's).
    pub(crate) fn of(tenant: Option<&str>) -> Self {
        Self {
            tenant: tenant.unwrap_or_default().to_string(),
        }
    }
}

/// A tenant's series by reason (failed attempts, hooks disabled or removed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantReasonLabels {
    tenant: String,
    reason: String,
}

impl TenantReasonLabels {
    pub(crate) fn of(tenant: Option<&str>, reason: &str) -> Self {
        Self {
            tenant: tenant.unwrap_or_default().to_string(),
            reason: reason.to_string(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ApiLabels {
    pub(crate) call: String,
    pub(crate) returncode: String,
    pub(crate) message_key: String,
    /// The tenant (its id) that made the call; empty for the operator and for calls whose
    /// checksum matched no one.
    pub(crate) tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PluginLabel {
    pub(crate) plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PluginActionLabels {
    pub(crate) plugin: String,
    pub(crate) action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PluginRuleLabels {
    pub(crate) plugin: String,
    pub(crate) rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PluginErrorLabels {
    pub(crate) plugin: String,
    pub(crate) kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub(crate) source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    pub(crate) result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SourceResultLabels {
    pub(crate) source: String,
    pub(crate) result: String,
}

/// One hook's series: its id, and the tenant whose hook it is (its id), absent for the
/// operator's hooks (so that a relay without tenants shows the labels it always did).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct HookLabel {
    pub(super) hook: String,
    pub(super) tenant: Option<String>,
}

impl EncodeLabelSet for HookLabel {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        ("hook", self.hook.as_str()).encode(encoder.encode_label())?;
        if let Some(t) = &self.tenant {
            ("tenant", t.as_str()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub(super) kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VersionLabel {
    pub(super) version: &'static str,
}

/// The labels of `bbb_api_latency`: the API call and its parameters (`state=published`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ApiCallLabels {
    pub(super) endpoint: String,
    pub(super) parameters: String,
}

/// A `[[delivery.receivers]]` entry (its name, or its prefix's host): bounded by the
/// configuration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReceiverLabel {
    pub(crate) receiver: String,
}

/// An event about hooks (`hook-failing`, ...): four values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EventIdLabel {
    pub(super) event: String,
}
