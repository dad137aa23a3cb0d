//! A reloaded configuration's paths, matched with those before.

use mpt_core::Time;

use super::PathState;
use crate::PathSettings;

/// The paths of a reloaded configuration `new` at `now`, matched by id with those of the one
/// before (`old`, whose paths' state is `paths`): one whose name is unchanged keeps its state
/// (its remote updated if configured anew); one new at its id starts afresh (listed in the
/// second vector: it carries no data until the peer is heard on it).
pub(crate) fn reconfigured(
    old: &[PathSettings],
    paths: &[PathState],
    new: &crate::ConnectionConfig,
    now: Time,
) -> (Vec<PathState>, Vec<usize>) {
    let mut fresh = Vec::new();
    let mut out = Vec::with_capacity(new.paths.len());
    for (i, p) in new.paths.iter().enumerate() {
        let kept = old.get(i).filter(|o| o.name == p.name);
        let mut state = match (kept, paths.get(i)) {
            (Some(old), Some(s)) => {
                let mut s = s.clone();
                if p.remote.is_some() && p.remote != old.remote {
                    s.remote = p.remote;
                }
                s
            }
            (None, Some(s)) => {
                fresh.push(i);
                s.replaced(p.remote, now, new.datagram_ceiling(i))
            }
            (_, None) => {
                fresh.push(i);
                PathState::new(p.remote, now, new.datagram_ceiling(i))
            }
        };
        state.pmtu.set_ceiling(now, new.datagram_ceiling(i));
        out.push(state);
    }
    (out, fresh)
}
