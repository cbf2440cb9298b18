//! The store on a Redis Cluster. Single commands and scripts go where their first key's slot
//! lives (the cluster client routes them and follows `MOVED`, resharding and failovers). A
//! pipeline whose keys fall in several slots, which the cluster would refuse, is cut into one
//! pipeline (or one transaction, when it was one) per slot; they are sent together, except the
//! one holding the pipeline's last command, which goes once the others have succeeded: a caller
//! that puts its commit mark (a cursor, an index entry) last never has it written before the
//! rest. Key scans ask every primary; subscriptions use one node, which hears every node's
//! publications.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use crate::redis_conn::Ca;
use redis::{
    Arg, Cmd, IntoConnectionInfo, Pipeline, RedisResult, Value,
    aio::ConnectionLike,
    cluster::ClusterClient,
    cluster_async::ClusterConnection,
    cluster_routing::{RoutingInfo, SingleNodeRoutingInfo, Slot},
};

/// A connection to the cluster, and clients of its seed nodes for pub/sub.
pub(super) struct Cluster {
    conn: ClusterConnection,
    nodes: Vec<redis::Client>,
    /// The seed node the next subscription uses (each failed one moves on to the next).
    next: AtomicUsize,
}

impl Cluster {
    /// Connects to the cluster that `nodes` belong to; `auth` (a store URL) may give the
    /// password and user.
    pub(super) async fn connect(
        nodes: &[&str],
        auth: Option<&str>,
        ca: Option<&Ca>,
    ) -> RedisResult<Self> {
        let mut builder = ClusterClient::builder(nodes.to_vec())
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(2))
            .retries(3);
        if let Some(ca) = ca
            && nodes.iter().any(|n| n.starts_with("rediss://"))
        {
            crate::redis_conn::install_provider();
            builder = builder.certs(crate::redis_conn::certificates(ca));
        }
        let mut clients = Vec::new();
        let auth = auth
            .map(IntoConnectionInfo::into_connection_info)
            .transpose()?;
        if let Some(info) = &auth {
            let settings = info.redis_settings();
            if let Some(p) = settings.password() {
                builder = builder.password(p);
            }
            if let Some(u) = settings.username() {
                builder = builder.username(u);
            }
        }
        for node in nodes {
            let mut info = (*node).into_connection_info()?;
            if let Some(auth) = &auth {
                info = info.set_redis_settings(auth.redis_settings().clone());
            }
            clients.push(crate::redis_conn::redis_client_trusting_info(info, ca)?);
        }
        let conn = builder.build()?.get_async_connection().await?;
        Ok(Self {
            conn,
            nodes: clients,
            next: AtomicUsize::new(0),
        })
    }

    /// A client of one node, for a subscription; each call names the next one.
    pub(super) fn client(&self) -> redis::Client {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.nodes[i % self.nodes.len()].clone()
    }

    pub(super) fn conn(&self) -> ClusterConnection {
        self.conn.clone()
    }

    /// The keys matching `pattern` on every primary.
    pub(super) async fn keys_matching(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut conn = self.conn.clone();
        let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let nodes = conn
            .route_command(redis::cmd("CLUSTER").arg("NODES").clone(), random)
            .await?;
        let nodes: String = redis::from_redis_value(nodes)?;
        let mut keys = Vec::new();
        for (host, port) in primaries(&nodes) {
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                host: host.clone(),
                port,
            });
            let mut cursor = 0u64;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let reply = conn.route_command(scan, route.clone()).await?;
                let (next, page): (u64, Vec<String>) = redis::from_redis_value(reply)?;
                keys.extend(page);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(keys)
    }

    /// Sends `pipeline` (see the module's doc); answers as one connection would.
    pub(super) async fn pipeline(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
        let groups = slot_groups(&cmds);
        if groups.len() <= 1 {
            return self
                .conn()
                .req_packed_commands(pipeline, offset, count)
                .await;
        }
        let atomic = pipeline.is_transaction();
        let subs: Vec<Pipeline> = groups
            .iter()
            .map(|indices| {
                let mut sub = redis::pipe();
                if atomic {
                    sub.atomic();
                }
                for &i in indices {
                    sub.add_command(cmds[i].clone());
                }
                sub
            })
            .collect();
        // The group holding the last command goes last.
        let Some((last, first)) = subs.split_last() else {
            return Ok(Vec::new());
        };
        let send = |sub| send_part(self.conn.clone(), sub);
        let mut replies = futures_util::future::try_join_all(first.iter().map(send)).await?;
        replies.push(send(last).await?);
        let mut out = vec![Value::Nil; cmds.len()];
        for (indices, values) in groups.iter().zip(replies) {
            for (&i, v) in indices.iter().zip(values) {
                out[i] = v;
            }
        }
        Ok(if atomic { vec![Value::Array(out)] } else { out })
    }
}

/// Sends one slot's part of a pipeline; returns its commands' replies.
async fn send_part(mut conn: ClusterConnection, sub: &Pipeline) -> RedisResult<Vec<Value>> {
    if !sub.is_transaction() {
        return conn.req_packed_commands(sub, 0, sub.len()).await;
    }
    let mut reply = conn.req_packed_commands(sub, sub.len() + 1, 1).await?;
    match reply.pop() {
        Some(Value::Array(items)) if items.len() == sub.len() => Ok(items),
        _ => Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "a transaction's part answered with something else than its replies",
        ))),
    }
}

/// The key a command is routed by: the first key of a script call, none for the keyless
/// commands the relay pipelines, else its first argument.
fn routing_key(cmd: &Cmd) -> Option<&[u8]> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        Arg::Simple(b) => Some(b),
        _ => None,
    });
    let name = args.next()?.to_ascii_uppercase();
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            args.next()?;
            let keys = args.next()?;
            (keys != b"0").then(|| args.next()).flatten()
        }
        b"PING" | b"PUBLISH" | b"SCRIPT" | b"INFO" | b"TIME" | b"CLUSTER" => None,
        _ => args.next(),
    }
}

/// The indices of `cmds` grouped by slot, in order of first appearance but with the group of
/// the last command last. A keyless command joins the group of the keyed one before it (the
/// first keyed one, at the start).
fn slot_groups(cmds: &[&Cmd]) -> Vec<Vec<usize>> {
    let slots: Vec<Option<Slot>> = cmds
        .iter()
        .map(|c| routing_key(c).map(Slot::for_key))
        .collect();
    let Some(first) = slots.iter().flatten().next().copied() else {
        return vec![(0..cmds.len()).collect()];
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<Slot, usize> = HashMap::new();
    let mut current = first;
    for (i, slot) in slots.iter().enumerate() {
        current = slot.unwrap_or(current);
        let g = *index.entry(current).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    let last = index.get(&current).copied().unwrap_or(0);
    let tail = groups.remove(last);
    groups.push(tail);
    groups
}

/// The `host:port` of each live primary in a `CLUSTER NODES` reply.
fn primaries(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let flags = fields.get(2)?;
            let live_primary =
                flags.contains("master") && !flags.contains("fail") && !flags.contains("noaddr");
            if !live_primary {
                return None;
            }
            // `ip:port@cport[,hostname]`
            let addr = fields.get(1)?.split('@').next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups_of(pipe: &Pipeline) -> Vec<Vec<usize>> {
        let cmds: Vec<&Cmd> = pipe.cmd_iter().collect();
        slot_groups(&cmds)
    }

    #[test]
    fn one_slot_is_one_group() {
        let mut pipe = redis::pipe();
        pipe.set("a{x}", 1).hset("b{x}", "f", 2).cmd("PING");
        assert_eq!(groups_of(&pipe), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn slots_are_grouped_and_the_last_commands_group_goes_last() {
        let mut pipe = redis::pipe();
        pipe.set("{a}:1", 1) // 0: a
            .set("{b}:1", 1) // 1: b
            .cmd("PUBLISH") // 2: keyless, with b
            .arg("ch")
            .arg("m")
            .cmd("EVALSHA") // 3: by its first key, c
            .arg("sha")
            .arg(2)
            .arg("{c}:k")
            .arg("{a}:k")
            .set("{a}:2", 2) // 4: a
            .set("{b}:2", 2); // 5: b, the last
        assert_eq!(groups_of(&pipe), vec![vec![0, 4], vec![3], vec![1, 2, 5]]);
    }

    #[test]
    fn script_calls_without_keys_and_keyless_pipelines_stay_whole() {
        let mut pipe = redis::pipe();
        pipe.cmd("EVALSHA").arg("sha").arg(0).arg("x").cmd("PING");
        assert_eq!(groups_of(&pipe), vec![vec![0, 1]]);
        assert_eq!(
            routing_key(redis::cmd("EVALSHA").arg("s").arg(1).arg("k")),
            Some(&b"k"[..])
        );
    }

    #[test]
    fn primaries_are_read_from_cluster_nodes() {
        let nodes = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1 4 connected
e7d1 127.0.0.1:30001@40001,host-a myself,master - 0 0 1 connected 0-5460
67ed 127.0.0.1:30002@40002 master,fail - 0 1 2 disconnected 5461-10922
292f ::1:30003@40003 master - 0 1 3 connected 10923-16383
";
        assert_eq!(
            primaries(nodes),
            vec![("127.0.0.1".into(), 30001), ("::1".into(), 30003)]
        );
    }
}
