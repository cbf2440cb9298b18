//! The start's phase that serves HTTP: the API, the metrics (with the local exporters they
//! merge) and the admin API (on TCP with its token, or on a Unix socket whose mode is its
//! access control).

use std::sync::Arc;

use super::{
    listen::{AdminSocket, Listeners},
    serve::{metrics_router, serve, serve_tcp},
    start::{Start, retain_bounds},
};
use crate::{
    admin_api::{self, AdminState},
    api::{self, ApiState, TenantLimits},
    audit::Audit,
    base::callback_url::Guard,
    hooks::HookStore,
    metrics::{Access, Hosts},
    store_conn::StoreConn,
};

impl Start<'_> {
    /// Serves the API and, when enabled, the metrics and the admin API.
    pub(super) fn serve_http(
        &self,
        listeners: Listeners,
        store: &Arc<HookStore>,
        conn: &StoreConn,
        guard: &Arc<Guard>,
        audit: &Audit,
    ) -> anyhow::Result<()> {
        self.serve_api(listeners.api, store, conn, guard, audit);
        if let Some(l) = listeners.metrics {
            self.serve_metrics(l)?;
        }
        if listeners.admin.is_some() || listeners.admin_socket.is_some() {
            let state = Arc::new(AdminState {
                store: store.clone(),
                conn: conn.clone(),
                retain: retain_bounds(&self.config.delivery),
                max_queue: self.config.delivery.max_queue,
                tenants: self.tenants.clone(),
                circuits: self.circuits.clone(),
                audit: audit.clone(),
                trusted_proxies: self.config.api.trusted_proxies.clone(),
                scalelite: self.config.scalelite.is_some(),
                hook_secret_overlap_ms: self
                    .config
                    .delivery
                    .hook_secret_overlap_s
                    .saturating_mul(1000),
                removed_grace_ms: self.config.tenancy.removed_grace_s.saturating_mul(1000),
                destinations: self.config.destinations.clone(),
            });
            self.serve_admin(listeners.admin, listeners.admin_socket, &state);
        }
        Ok(())
    }

    /// The API (`hooks/create|destroy|list`), with its health beat.
    fn serve_api(
        &self,
        listener: tokio::net::TcpListener,
        store: &Arc<HookStore>,
        conn: &StoreConn,
        guard: &Arc<Guard>,
        audit: &Audit,
    ) {
        let (config, metrics) = (self.config, self.metrics);
        let sources = config.effective_sources().into_iter().map(|s| s.name);
        let health = api::Health::new(
            conn.clone(),
            metrics.bus.connected.clone(),
            sources.collect(),
        );
        self.tracker.spawn(health.clone().beat(self.token.clone()));
        let api_state = Arc::new(ApiState {
            health,
            guard: guard.clone(),
            store: store.clone(),
            secret: config.bbb.secret.clone(),
            path: config.api.path.trim_end_matches('/').to_string(),
            algorithms: config.api.checksum_algorithms.clone(),
            metrics: metrics.clone(),
            list_cache: Default::default(),
            tenants: self.tenants.clone(),
            limits: TenantLimits::new(&config.tenancy),
            audit: audit.clone(),
            hook_secrets: config.delivery.hook_secrets,
            trusted_proxies: config.api.trusted_proxies.clone(),
        });
        let router = api::router(api_state);
        serve_tcp(self.tracker, self.token, listener, router, "api");
    }

    /// The metrics, and the local exporters they merge. Beyond loopback `[metrics.auth]` is
    /// required (the configuration's validation).
    fn serve_metrics(&self, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
        let merged = self.config.metrics.merge.sources.clone();
        let router = metrics_router(self.config, self.metrics, merged)?;
        serve_tcp(self.tracker, self.token, listener, router, "metrics");
        Ok(())
    }

    /// The admin API: on TCP with its token; on a Unix socket, whose file mode is its access
    /// control, without one (and with its own host names).
    fn serve_admin(
        &self,
        tcp: Option<tokio::net::TcpListener>,
        socket: Option<AdminSocket>,
        state: &Arc<AdminState>,
    ) {
        let config = self.config;
        if let Some(l) = tcp {
            let access = Arc::new(Access::bearer(
                &config.admin.token(&config.bbb.secret),
                "the admin API needs its token (admin.bearer_token, or the one `hookrelay admin-token` prints): send it as a bearer token, or in a browser as the password of user admin\n",
            ));
            let router = admin_api::router(state.clone(), access);
            serve_tcp(self.tracker, self.token, l, router, "admin API");
        }
        if let Some(socket) = socket {
            let hosts = Hosts::new(None, &config.admin.allowed_hosts);
            let router = admin_api::router(state.clone(), Arc::new(Access::default())).layer(
                axum::middleware::from_fn_with_state(Arc::new(hosts), crate::metrics::require),
            );
            serve(
                self.tracker,
                self.token,
                socket.listener,
                router,
                "admin API",
            );
            let token = self.token.clone();
            self.tracker.spawn(async move {
                token.cancelled().await;
                super::listen::remove_socket(&socket.path);
            });
        }
    }
}
