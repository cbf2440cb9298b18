//! The label sets of the relay's own series: each a bounded set of values (never a URL, never
//! a free-form id).

use prometheus_client::encoding::EncodeLabelSet;

/// A tenant's series: its id, empty for the operator's hooks and calls.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantLabel {
    pub tenant: String,
}

impl TenantLabel {
    /// Of the hook or call of `tenant` (`None`: the operator's).
    pub fn of(tenant: Option<&str>) -> Self {
        Self {
            tenant: tenant.unwrap_or_default().to_string(),
        }
    }
}

/// A tenant's series by reason (failed attempts, hooks disabled or removed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantReasonLabels {
    pub tenant: String,
    pub reason: String,
}

impl TenantReasonLabels {
    pub fn of(tenant: Option<&str>, reason: &str) -> Self {
        Self {
            tenant: tenant.unwrap_or_default().to_string(),
            reason: reason.to_string(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    pub call: String,
    pub returncode: String,
    pub message_key: String,
    /// The tenant (its id) that made the call; empty for the operator and for calls whose
    /// checksum matched no one.
    pub tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabel {
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginActionLabels {
    pub plugin: String,
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginRuleLabels {
    pub plugin: String,
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginErrorLabels {
    pub plugin: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceResultLabels {
    pub source: String,
    pub result: String,
}

/// One hook's series: its id, and the tenant whose hook it is (its id), absent for the
/// operator's hooks (so that a relay without tenants shows the labels it always did).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct HookLabel {
    pub hook: String,
    pub tenant: Option<String>,
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
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabel {
    pub version: &'static str,
}

/// The labels of `bbb_api_latency`: the API call and its parameters (`state=published`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiCallLabels {
    pub endpoint: String,
    pub parameters: String,
}

/// A `[[delivery.receivers]]` entry (its name, or its prefix's host): bounded by the
/// configuration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReceiverLabel {
    pub receiver: String,
}

/// An event about hooks (`hook-failing`, ...): four values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventIdLabel {
    pub event: String,
}
