//! What a reload changes, compared before it is applied: the paths new at their ids, what only
//! a restart can change, and the changes in words for the log.

use crate::config::Config;

/// The ids of `new`'s paths that `old` did not have, or had under another name.
pub(super) fn fresh_paths(old: &Config, new: &Config) -> Vec<usize> {
    new.paths
        .iter()
        .enumerate()
        .filter(|(i, p)| old.paths.get(*i).is_none_or(|o| o.name != p.name))
        .map(|(i, _)| i)
        .collect()
}

/// What a reload from `old` to `new` changed, in words: the paths, the connection settings
/// and hooks, the sockets `bound`, and the peers (`peers`, from `PeerPlan::said`).
pub(super) fn changes(old: &Config, new: &Config, bound: usize, peers: Vec<String>) -> String {
    let mut said = path_changes(old, new);
    if new.connection != old.connection {
        said.push("connection settings".to_owned());
    }
    if new.hooks != old.hooks {
        said.push("hooks".to_owned());
    }
    if bound > 0 {
        said.push(format!("{bound} socket(s) bound"));
    }
    said.extend(peers);
    said.join(", ")
}

/// What `new` changes that only a restart applies, by key.
pub(super) fn restart_only(old: &Config, new: &Config) -> Vec<String> {
    let mut r = Vec::new();
    let mut differs = |key: &str, changed: bool| {
        if changed {
            r.push(key.to_owned());
        }
    };
    let (o, n) = (&old.tunnel, &new.tunnel);
    differs("tunnel.name", o.name != n.name);
    differs("tunnel.address", o.addresses != n.addresses);
    differs("tunnel.mtu", o.mtu != n.mtu);
    differs("tunnel.queues", o.queues != n.queues);
    differs("tunnel.routes", o.routes != n.routes);
    differs("tunnel.route_table", o.route_table != n.route_table);
    differs(
        "tunnel.route_protocol",
        o.route_protocol != n.route_protocol,
    );
    differs("tunnel.fail_closed", o.fail_closed != n.fail_closed);
    differs(
        "peer.allowed (a full tunnel's 0.0.0.0/0 or ::/0)",
        crate::fulltunnel::FullTunnel::of(old) != crate::fulltunnel::FullTunnel::of(new),
    );
    differs(
        "connection.reorder_window",
        old.connection.reorder_window != new.connection.reorder_window,
    );
    differs(
        "[[listen]]",
        old.listen != new.listen || old.listen_tcp != new.listen_tcp,
    );
    differs("control.socket", old.control.socket != new.control.socket);
    differs(
        "control.metrics",
        old.control.metrics != new.control.metrics,
    );
    differs("control.web", old.control.web != new.control.web);
    differs(
        "control.web_token",
        old.control.web_token != new.control.web_token,
    );
    differs(
        "security.encryption",
        old.security.cipher != new.security.cipher,
    );
    differs(
        "security.rekey_after_s",
        old.security.rekey_after != new.security.rekey_after,
    );
    r
}

/// The paths `new` adds, removes and changes, in words.
fn path_changes(old: &Config, new: &Config) -> Vec<String> {
    let mut said = Vec::new();
    for (i, p) in new.paths.iter().enumerate() {
        match old.paths.get(i) {
            Some(o) if o == p => {}
            Some(o) if o.name == p.name => said.push(format!("path {:?} changed", p.name)),
            Some(o) => said.push(format!(
                "path {:?} removed, path {:?} added at id {i}",
                o.name, p.name
            )),
            None => said.push(format!("path {:?} added", p.name)),
        }
    }
    for o in old.paths.iter().skip(new.paths.len()) {
        said.push(format!("path {:?} removed", o.name));
    }
    said
}
