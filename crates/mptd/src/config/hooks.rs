//! `[hooks]`: the commands run when the tunnel, a path or a peer changes.

use std::time::Duration;

/// `[hooks]`: shell commands run when a path or a peer goes up or down (`crate::hooks`).
#[derive(Debug, Clone, PartialEq)]
pub struct HooksConfig {
    /// Run once the TUN device is configured, before the daemon is ready.
    pub up: Option<String>,
    /// Run when the daemon stops, before the TUN device goes.
    pub down: Option<String>,
    pub path_up: Option<String>,
    pub path_down: Option<String>,
    pub peer_up: Option<String>,
    pub peer_down: Option<String>,
    /// Another peer carries a prefix several peers share (`crate::standby`).
    pub peer_active: Option<String>,
    /// A path's data budget crossed 80 % or its limit, or began again (`crate::budget`).
    pub path_budget: Option<String>,
    /// A hook still running after this is killed.
    pub timeout: Duration,
}

/// What happened, for a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// The tunnel is up (`hooks.up`).
    Up,
    /// The tunnel is about to go (`hooks.down`).
    Down,
    PathUp,
    PathDown,
    PeerUp,
    PeerDown,
    PeerActive,
    PathBudget,
}

impl HookEvent {
    /// The name in `MPTD_EVENT`, and of its `[hooks]` key.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::Up => "up",
            HookEvent::Down => "down",
            HookEvent::PathUp => "path_up",
            HookEvent::PathDown => "path_down",
            HookEvent::PeerUp => "peer_up",
            HookEvent::PeerDown => "peer_down",
            HookEvent::PeerActive => "peer_active",
            HookEvent::PathBudget => "path_budget",
        }
    }
}

/// Default of `hooks.timeout_ms`.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            up: None,
            down: None,
            path_up: None,
            path_down: None,
            peer_up: None,
            peer_down: None,
            peer_active: None,
            path_budget: None,
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

impl HooksConfig {
    /// The command for `event`, if one is configured.
    pub fn command(&self, event: HookEvent) -> Option<&str> {
        use HookEvent::*;
        match event {
            Up => self.up.as_deref(),
            Down => self.down.as_deref(),
            PathUp => self.path_up.as_deref(),
            PathDown => self.path_down.as_deref(),
            PeerUp => self.peer_up.as_deref(),
            PeerDown => self.peer_down.as_deref(),
            PeerActive => self.peer_active.as_deref(),
            PathBudget => self.path_budget.as_deref(),
        }
    }

    /// Whether no path or peer hook is configured (`up` and `down` are not queued).
    pub fn is_empty(&self) -> bool {
        self.path_up.is_none()
            && self.path_down.is_none()
            && self.peer_up.is_none()
            && self.peer_down.is_none()
            && self.peer_active.is_none()
            && self.path_budget.is_none()
    }
}
