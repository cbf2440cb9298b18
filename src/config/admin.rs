//! `[admin]`: the admin API (JSON, and a status page for people), on a listener of its own,
//! never under the BBB API's path: what each hook got, its state, its recent attempts
//! (`docs/admin.md`).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::base::secret::Secret;

/// The admin API's listener and credentials.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// `false` serves no admin API (the `hooks show` and `deliveries` commands then cannot
    /// reach the relay).
    pub enabled: bool,
    /// Loopback by default. Any other address needs `bearer_token`: the relay refuses to start
    /// without one.
    pub bind: SocketAddr,
    /// Calls must send `Authorization: Bearer <token>` (compared in constant time); empty: no
    /// credentials, allowed on loopback only.
    pub bearer_token: Secret,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 3006)),
            bearer_token: Secret::default(),
        }
    }
}
