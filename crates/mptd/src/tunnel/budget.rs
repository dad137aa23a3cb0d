//! The tunnel's side of the paths' data budgets ([`crate::budget`]): a task counts each
//! budgeted path's bytes on the wire (its socket's [`super::socket::Wire`]) every
//! [`TICK`], runs `hooks.path_budget` at 80 %, at the limit and when a period begins again,
//! and acts on a spent budget: `backup` puts the path below every tier for every peer (as
//! `mptctl path NAME backup` does), `off` takes its uplink down
//! ([`mpt_tunnel::UplinkDown::Budget`]). A new period or `mptctl path NAME budget reset` undoes
//! either. The counts are written to `budget.json` in the state directory at most once a
//! minute when they changed, and at exit, and read back at start ([`crate::budget::store`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Result;
use mpt_core::PathId;
use tracing::{info, warn};

use super::{SockIo, Tunnel};
use crate::budget::calendar::Reset;
use crate::budget::ledger::{Entry, Ledger};
use crate::budget::{store, Budget, Crossing};
use crate::config::{Exhausted, PathConfig};
use crate::hooks::{HookEvent, HookRun};
use crate::status::BudgetStatus;

/// How often the counts are brought up to date while a path has a budget: a budget is
/// overshot by at most what a path carries in this long (250 kB at 20 Mbit/s).
pub const TICK: Duration = Duration::from_millis(100);

/// How often a configuration without budgets is looked at again (a reload may add one).
const IDLE: Duration = Duration::from_secs(1);

/// At most one write of `budget.json` this often (a router's flash wears).
pub const WRITE_EVERY: Duration = Duration::from_secs(60);

/// The budgets' state: the counts, and what the task did about them.
#[derive(Debug, Default)]
pub struct Budgets {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    ledger: Ledger,
    /// Per path name: its socket (by address, as identity) and the sum of its wire counters
    /// when last read.
    seen: BTreeMap<String, (usize, u64)>,
    /// The paths this task put below every tier.
    demoted: BTreeSet<String>,
}

impl State {
    /// The bytes `s` carried since it was last read for path `name` (all of them for a
    /// socket not read before: a new one, a reload's).
    fn delta(&mut self, name: &str, s: &Arc<SockIo>) -> u64 {
        let id = Arc::as_ptr(s) as usize;
        let (tx, rx) = s.wire.get();
        let total = tx + rx;
        let before = match self.seen.get(name) {
            Some(&(i, t)) if i == id => t,
            _ => 0,
        };
        self.seen.insert(name.to_owned(), (id, total));
        total.saturating_sub(before)
    }
}

impl Budgets {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a path's budget asks for now, acted on outside the lock.
struct Act {
    id: PathId,
    name: String,
    /// Spent, and what then.
    spent: Option<Exhausted>,
    /// Its configured `backup`, which a demotion undone goes back to.
    backup: bool,
}

/// `hooks.path_budget`'s run for path `p` crossing `c`, its budget and count being `e`.
fn hook_run(p: &PathConfig, e: &Entry, c: Crossing, action: Exhausted) -> HookRun {
    let percent = match c {
        Crossing::NewPeriod => 0,
        Crossing::Warn => 80,
        Crossing::Exhausted => 100,
    };
    HookRun {
        event: HookEvent::PathBudget,
        vars: vec![
            ("MPTD_PATH", p.name.clone()),
            ("MPTD_PATH_ID", p.id.0.to_string()),
            ("MPTD_BUDGET_PERCENT", percent.to_string()),
            ("MPTD_BUDGET_USED", e.count.used.to_string()),
            ("MPTD_BUDGET_LIMIT", e.budget.limit.to_string()),
            ("MPTD_BUDGET_PERIOD_END", e.count.window.end.to_string()),
            ("MPTD_BUDGET_ACTION", action.name().to_owned()),
        ],
    }
}

/// Log crossing `c` of path `name`.
fn log_crossing(name: &str, e: &Entry, c: Crossing, action: Exhausted) {
    let (used, limit, end) = (e.count.used, e.budget.limit, e.count.window.end);
    match c {
        Crossing::NewPeriod => info!(
            path = name,
            limit,
            period_end = end,
            "data budget: a new period"
        ),
        Crossing::Warn => warn!(path = name, used, limit, "data budget: 80 % used"),
        Crossing::Exhausted => warn!(
            path = name,
            used,
            limit,
            action = action.name(),
            "data budget spent: the path is {} until the period ends",
            match action {
                Exhausted::Backup => "below every tier",
                Exhausted::Off => "off",
            }
        ),
    }
}

impl Tunnel {
    /// The state directory: `tunnel.state_dir`, or else systemd's `$STATE_DIRECTORY` (its
    /// first, if it lists several).
    pub fn state_dir(&self) -> Option<PathBuf> {
        self.cfg().tunnel.state_dir.clone().or_else(|| {
            let v = std::env::var_os("STATE_DIRECTORY")?;
            let first = v.to_string_lossy().split(':').next()?.to_owned();
            (!first.is_empty()).then(|| PathBuf::from(first))
        })
    }

    /// Count, act and write for as long as the daemon runs.
    pub async fn budget_task(self: Arc<Self>) -> Result<()> {
        self.load_budgets();
        let mut written = tokio::time::Instant::now();
        loop {
            let any = self.cfg().paths.iter().any(|p| p.budget.is_some());
            tokio::time::sleep(if any { TICK } else { IDLE }).await;
            self.account_budgets();
            if written.elapsed() >= WRITE_EVERY {
                written = tokio::time::Instant::now();
                let t = self.clone();
                let _ = tokio::task::spawn_blocking(move || t.save_budgets()).await;
            }
        }
    }

    /// Read the counts kept in the state directory.
    fn load_budgets(&self) {
        let budgeted = self.cfg().paths.iter().any(|p| p.budget.is_some());
        let Some(dir) = self.state_dir() else {
            if budgeted {
                warn!(
                    "no state directory (tunnel.state_dir, or systemd's StateDirectory=): \
                    the data budgets' counts start from 0 at every start"
                );
            }
            return;
        };
        let loaded = store::load(&dir);
        if let Some(why) = &loaded.corrupt {
            warn!(dir = %dir.display(), "data budgets: {why}; the counts start from 0");
        }
        if !loaded.counts.is_empty() {
            info!(dir = %dir.display(), paths = loaded.counts.len(), "data budgets: counts read back");
        }
        self.budgets.lock().ledger.restore(loaded.counts);
    }

    /// Write the counts to the state directory if they changed since the last write (at
    /// most every [`WRITE_EVERY`], and at exit). Blocks: call it off the datapath.
    pub fn save_budgets(&self) {
        let Some(dir) = self.state_dir() else { return };
        let Some(counts) = self.budgets.lock().ledger.written() else {
            return;
        };
        let saved = std::fs::create_dir_all(&dir).and_then(|()| store::save(&dir, &counts));
        if let Err(e) = saved {
            warn!(dir = %dir.display(), error = %e, "data budgets: cannot write the counts");
            self.budgets.lock().ledger.unwritten();
        }
    }

    /// Bring every budgeted path's count up to date, run the hooks for the lines crossed,
    /// and act on the budgets spent (or no longer spent).
    pub fn account_budgets(&self) {
        let (unix, offset) = self.clock.wall();
        let cfg = self.cfg();
        let socks = self.sockets();
        let mut runs = Vec::new();
        let mut acts = Vec::with_capacity(cfg.paths.len());
        {
            let mut st = self.budgets.lock();
            for p in &cfg.paths {
                let sock = socks.iter().find(|s| s.path() == Some(p.id));
                let bytes = sock.map_or(0, |s| st.delta(&p.name, s));
                let mut act = Act {
                    id: p.id,
                    name: p.name.clone(),
                    spent: None,
                    backup: p.backup,
                };
                if let Some(b) = p.budget {
                    let reset = Reset {
                        period: b.period,
                        day: b.reset_day,
                        utc_offset: offset,
                    };
                    let budget = Budget {
                        limit: b.limit,
                        reset,
                    };
                    let mut crossed: Vec<Crossing> =
                        st.ledger.configure(&p.name, budget, unix).iter().collect();
                    crossed.extend(st.ledger.add(&p.name, unix, bytes).iter());
                    if let Some(e) = st.ledger.get(&p.name).copied() {
                        for c in crossed {
                            log_crossing(&p.name, &e, c, b.exhausted);
                            runs.push(hook_run(p, &e, c, b.exhausted));
                        }
                        act.spent = e.count.exhausted.then_some(b.exhausted);
                    }
                }
                acts.push(act);
            }
            st.ledger
                .keep_only(|n| cfg.paths.iter().any(|p| p.name == n && p.budget.is_some()));
            st.seen
                .retain(|n, _| cfg.paths.iter().any(|p| p.name == *n));
        }
        for r in runs {
            self.hooks.fire(r);
        }
        self.enforce(&acts);
    }

    /// Put each path where its budget says: below every tier, down, or as configured.
    fn enforce(&self, acts: &[Act]) {
        let socks = self.sockets();
        let mut uplinks_changed = false;
        for a in acts {
            let off = a.spent == Some(Exhausted::Off);
            if let Some(s) = socks.iter().find(|s| s.path() == Some(a.id)) {
                let mut u = s.lock_uplink();
                uplinks_changed |= std::mem::replace(&mut u.budget_off, off) != off;
            }
            if a.spent == Some(Exhausted::Backup) {
                self.set_backup(a.id, true);
                self.budgets.lock().demoted.insert(a.name.clone());
            } else if self.budgets.lock().demoted.remove(&a.name) {
                info!(path = %a.name, "data budget: the path is back in its tier");
                self.set_backup(a.id, a.backup);
            }
        }
        if uplinks_changed {
            self.check_uplinks();
        }
    }

    /// Path `path`'s backup flag for every peer of ours that has it otherwise.
    fn set_backup(&self, path: PathId, backup: bool) {
        let now = self.clock.now();
        for peer in self.peers.list().iter().filter(|p| !p.listening) {
            if let Some(ep) = peer.lock().as_mut() {
                if ep
                    .config()
                    .paths
                    .get(path.index())
                    .is_some_and(|p| p.backup != backup)
                {
                    ep.set_path_spec(now, path, None, None, Some(backup));
                    peer.note_deadline(ep);
                }
            }
        }
    }

    /// The operator starts the `[[path]]` named `name`'s budget count again (`mptctl path
    /// NAME budget reset`): 0 until its period's end, the path back in its tier, and the hook
    /// run with 0 %.
    pub fn budget_reset(&self, name: &str) -> Result<String, String> {
        let id = self.path_named(name)?;
        let (unix, _) = self.clock.wall();
        let cfg = self.cfg();
        let (Some(p), Some(b)) = (
            cfg.paths.get(id.index()),
            cfg.paths.get(id.index()).and_then(|p| p.budget),
        ) else {
            return Err(format!("path {name} has no budget"));
        };
        let Some(e) = self.budgets.lock().ledger.reset(name, unix) else {
            return Err(format!("path {name} has no budget counted yet"));
        };
        info!(
            path = name,
            "the operator reset the path's data budget count"
        );
        self.hooks
            .fire(hook_run(p, &e, Crossing::NewPeriod, b.exhausted));
        self.account_budgets();
        Ok(format!(
            "path {name}: budget count reset: 0 of {} bytes until {}",
            e.budget.limit, e.count.window.end
        ))
    }

    /// The status of the `[[path]]` named `name`'s budget, if it has one.
    pub fn budget_status(&self, name: &str) -> Option<BudgetStatus> {
        let cfg = self.cfg();
        let action = cfg.paths.iter().find(|p| p.name == name)?.budget?.exhausted;
        let e = *self.budgets.lock().ledger.get(name)?;
        Some(BudgetStatus {
            limit: e.budget.limit,
            used: e.count.used,
            left: e.count.left(&e.budget),
            period_start: e.count.window.start,
            period_end: e.count.window.end,
            exhausted: e.count.exhausted,
            action: action.name().to_owned(),
        })
    }
}
