//! The SSRF guard at connection time: the resolver handed to the HTTP client resolves callback
//! host names itself and passes on only the addresses the [`Guard`] allows, so nothing is
//! resolved again between the check and the connection.

use std::{net::SocketAddr, sync::Arc};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::base::callback_url::Guard;

/// The resolver handed to reqwest: resolves, keeps only allowed addresses, fails when none is.
pub(crate) struct GuardedResolver {
    pub(crate) guard: Arc<Guard>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|a| guard.allows(a.ip()))
                .collect();
            if allowed.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> =
                    format!("blocked: {host} resolves only to loopback, private, link-local or reserved addresses").into();
                return Err(err);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolver_filters_names() {
        let r = GuardedResolver {
            guard: Arc::new(Guard::new(true, vec![])),
        };
        let name: Name = "localhost".parse().unwrap();
        assert!(r.resolve(name).await.is_err());
        let r = GuardedResolver {
            guard: Arc::new(Guard::new(true, vec!["127.0.0.0/8".parse().unwrap()])),
        };
        let addrs: Vec<SocketAddr> = r
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback() && a.is_ipv4()));
    }
}
