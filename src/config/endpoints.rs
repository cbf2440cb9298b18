//! Every Redis the relay connects to, each named by its configuration key, with the CA file
//! its `rediss://` server is verified against: what the start checks before it connects, and
//! what `check-config` checks of the CA files.

use std::path::Path;

use super::{Config, ConfigError, SecretUrl};
use crate::base::ca::Ca;

/// One Redis the relay connects to.
pub struct RedisEndpoint<'a> {
    /// Its key (`store.url`, `sources[1].url`, ...).
    pub key: String,
    pub url: &'a SecretUrl,
    /// The CA file's key and path, when one is set.
    pub ca_file: Option<(String, &'a Path)>,
}

impl Config {
    /// Every Redis the relay connects to: the buses, the store (its URL, its sentinels or its
    /// cluster's nodes) and Scalelite's.
    pub fn redis_endpoints(&self) -> Vec<RedisEndpoint<'_>> {
        let mut out = Vec::new();
        fn at<'a>(
            key: String,
            url: &'a SecretUrl,
            ca: Option<(String, &'a std::path::PathBuf)>,
        ) -> RedisEndpoint<'a> {
            RedisEndpoint {
                key,
                url,
                ca_file: ca.map(|(k, p)| (k, p.as_path())),
            }
        }
        if self.sources.is_empty() {
            let ca = self
                .redis
                .ca_file
                .as_ref()
                .map(|p| ("redis.ca_file".into(), p));
            out.push(at("redis.url".into(), &self.redis.url, ca));
        }
        for (i, s) in self.sources.iter().enumerate() {
            let ca = s
                .ca_file
                .as_ref()
                .map(|p| (format!("sources[{i}].ca_file"), p));
            out.push(at(format!("sources[{i}].url"), &s.url, ca));
        }
        let store_ca = self.store_ca_file().map(|(k, p)| (k.to_string(), p));
        let store = |key: String, url| RedisEndpoint {
            key,
            url,
            ca_file: store_ca.clone(),
        };
        let s = &self.store;
        if !s.cluster_nodes.is_empty() {
            for (i, u) in s.cluster_nodes.iter().enumerate() {
                out.push(store(format!("store.cluster_nodes[{i}]"), u));
            }
        } else if !s.sentinels.is_empty() {
            for (i, u) in s.sentinels.iter().enumerate() {
                out.push(store(format!("store.sentinels[{i}]"), u));
            }
        } else if let Some(u) = &s.url {
            out.push(store("store.url".into(), u));
        } else if !self.sources.is_empty() {
            out.push(store("redis.url".into(), &self.redis.url));
        }
        if let Some(sl) = &self.scalelite {
            let ca = sl.ca_file.as_ref().map(|p| ("scalelite.ca_file".into(), p));
            out.push(at("scalelite.redis_url".into(), &sl.redis_url, ca));
        }
        if let Some(edge) = &self.edge {
            let ca = edge.ca_file.as_ref().map(|p| ("edge.ca_file".into(), p));
            out.push(at("edge.store_url".into(), &edge.store_url, ca));
        }
        out
    }

    /// Checks that every CA file set can be read and holds a certificate.
    pub(super) fn validate_ca_files(&self) -> Result<(), ConfigError> {
        let mut files: Vec<(String, Option<&Path>)> = vec![
            ("redis.ca_file".into(), self.redis.ca_file.as_deref()),
            ("store.ca_file".into(), self.store.ca_file.as_deref()),
        ];
        for (i, s) in self.sources.iter().enumerate() {
            files.push((format!("sources[{i}].ca_file"), s.ca_file.as_deref()));
        }
        if let Some(sl) = &self.scalelite {
            files.push(("scalelite.ca_file".into(), sl.ca_file.as_deref()));
        }
        if let Some(edge) = &self.edge {
            files.push(("edge.ca_file".into(), edge.ca_file.as_deref()));
        }
        for (key, path) in files {
            if let Some(path) = path {
                Ca::read(path).map_err(|e| ConfigError(format!("{key}: {e}")))?;
            }
        }
        Ok(())
    }
}
