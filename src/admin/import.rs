//! `hookrelay import-reference`: the reference service's hooks imported on demand.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, time::Duration};

use clap::Args;
use hookrelay::{
    Hook,
    config::callback_guard,
    import::{self, Action, Found, Layout},
};

use super::{UNREACHABLE, fail};

#[derive(Args)]
pub(crate) struct ImportArgs {
    /// The relay's configuration: its Redis, and the rules for callback URLs.
    #[arg(long, short, env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
    /// The reference service's YAML configuration, as for serve (default: bbb-webhooks'
    /// configuration installed on this server): its permanent URLs decide which of its
    /// permanent hooks are kept.
    #[arg(long, num_args = 1..)]
    reference_config: Vec<PathBuf>,
    /// Print what would be imported, skipped or refused, and change nothing.
    #[arg(long, conflicts_with = "finish")]
    dry_run: bool,
    /// The switch is final: remove the records bbb-webhooks left that were imported (or
    /// skipped). Until then they stay, so that bbb-webhooks finds its hooks if you go back.
    #[arg(long)]
    finish: bool,
}

/// `hookrelay import-reference`: imports the hooks bbb-webhooks left in Redis (both layouts),
/// as the relay does at start, printing one line per record.
pub(crate) fn import_reference(args: &ImportArgs) -> ExitCode {
    let config = match hookrelay::Config::load_with_reference(
        args.config.as_deref(),
        &args.reference_config,
    ) {
        Ok((c, _)) => c,
        Err(e) => return fail(2, &e.to_string()),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(UNREACHABLE, &e.to_string()),
    };
    let api = local_api(&config);
    let running = runtime.block_on(listening(api));
    if args.finish {
        // Only the reference's own records go: a running relay is not in the way.
        return finish(&runtime, &config);
    }
    if running && !args.dry_run {
        // A running relay would not see the imported hooks, and could register their URLs
        // again meanwhile; it imports the same records at start. The reference service itself
        // listens there too while it is still installed.
        return fail(
            2,
            &format!(
                "something listens on api.bind ({api}): stop bbb-webhooks (systemctl stop bbb-webhooks) or hookrelay first (hookrelay imports these hooks itself when it starts); --dry-run works meanwhile"
            ),
        );
    }
    let (found, imported) = match runtime.block_on(plan_and_apply(&config, args.dry_run)) {
        Ok(r) => r,
        Err(why) => return fail(UNREACHABLE, &why),
    };
    report(&found, &imported, args.dry_run);
    ExitCode::SUCCESS
}

/// Where the API of a relay (or of bbb-webhooks) on this host listens: `api.bind`, on the
/// loopback address when it binds them all.
fn local_api(config: &hookrelay::Config) -> SocketAddr {
    let mut api = config.api.bind;
    if api.ip().is_unspecified() {
        api.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    api
}

/// Whether something accepts connections at `api` within a second.
async fn listening(api: SocketAddr) -> bool {
    let connect = tokio::net::TcpStream::connect(api);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), connect).await,
        Ok(Ok(_))
    )
}

/// Plans the import of the reference's records against the configuration's callback URL
/// policy and permanent URLs, and (unless `dry_run`) carries it out: what was found, and the
/// hooks imported.
async fn plan_and_apply(
    config: &hookrelay::Config,
    dry_run: bool,
) -> Result<(Vec<Found>, Vec<Hook>), String> {
    let guard = callback_guard(&config.delivery);
    let permanent: Vec<String> = config
        .delivery
        .permanent_hooks
        .iter()
        .map(|p| p.url.clone())
        .collect();
    let mut conn = store(config).await?;
    let own = import::stored_own(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let found = import::plan(&mut conn, &guard, &own, &permanent)
        .await
        .map_err(|e| e.to_string())?;
    let imported = if dry_run {
        Vec::new()
    } else {
        let max = own.iter().map(|h| h.id).max().unwrap_or_default();
        import::apply(&mut conn, &found, max)
            .await
            .map_err(|e| e.to_string())?
    };
    Ok((found, imported))
}

/// Prints one line per record found (what was or would be done with it), then the counts.
fn report(found: &[Found], imported: &[Hook], dry_run: bool) {
    let mut new_ids = imported.iter().map(|h| h.id);
    let (mut to_import, mut skipped, mut refused) = (0, 0, 0);
    for f in found {
        let layout = match f.layout {
            Layout::V2 => "2.x",
            Layout::V3 => "3.x",
        };
        let url = f
            .hook
            .as_ref()
            .map_or("(no callback URL)", |h| h.callback_url.as_str());
        let what = match &f.action {
            Action::Import => {
                to_import += 1;
                match new_ids.next() {
                    Some(id) => format!("imported as hook {id}"),
                    None => "would import".to_string(),
                }
            }
            Action::Drop(why) => {
                skipped += 1;
                format!("skip ({why})")
            }
            Action::Refuse(why) => {
                refused += 1;
                format!("refuse ({why})")
            }
            Action::Unreadable => {
                skipped += 1;
                "skip (unreadable)".to_string()
            }
            Action::Seen(what) => format!("looked at before ({what})"),
        };
        let pending = match f.pending {
            0 => String::new(),
            1 => " (1 event it had queued is not sent again)".to_string(),
            n => format!(" ({n} events it had queued are not sent again)"),
        };
        println!("{layout} hook {}: {url}: {what}{pending}", f.member);
    }
    let verb = if dry_run { "to import" } else { "imported" };
    println!("{to_import} {verb}, {skipped} skipped, {refused} refused");
    if !dry_run && to_import > 0 {
        println!("restart the relay to deliver to them (systemctl restart hookrelay)");
    }
}

/// The store as the relay reaches it: one Redis, Sentinel's master or a Cluster.
async fn store(config: &hookrelay::Config) -> Result<hookrelay::StoreConn, String> {
    let connect = hookrelay::StoreConn::connect_once(config);
    tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .map_err(|_| "Redis (the store) did not answer within 5 s".to_string())?
        .map_err(|e| format!("cannot reach Redis (the store): {e}"))
}

/// `import-reference --finish`.
fn finish(runtime: &tokio::runtime::Runtime, config: &hookrelay::Config) -> ExitCode {
    let removed = runtime.block_on(async {
        let mut conn = store(config).await?;
        hookrelay::import::finish(&mut conn)
            .await
            .map_err(|e| e.to_string())
    });
    match removed {
        Ok(n) => {
            println!(
                "the switch from bbb-webhooks is final: {n} of its records removed (hooks it left that were not imported stay)"
            );
            ExitCode::SUCCESS
        }
        Err(why) => fail(UNREACHABLE, &why),
    }
}
