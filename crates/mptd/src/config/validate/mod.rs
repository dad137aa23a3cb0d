//! From the file as written ([`ConfigFile`]) to a validated [`Config`]: every error names the
//! file, the key and what was expected. The whole and the hooks here; the tunnel in `tunnel.rs`,
//! the connection in `connection.rs`, the keys and peers in `peers.rs`, the paths in
//! `paths.rs`, the traffic classes in `classes.rs`, `[control]` in `control.rs`.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use super::*;

mod classes;
mod connection;
mod control;
mod paths;
mod peers;
mod tunnel;

pub use paths::parse_bytes;

pub(super) struct Validator<'a> {
    pub(super) file: &'a Path,
}

impl Validator<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_owned(),
            key: key.into(),
            message: message.into(),
        }
    }

    /// The `name` of `section[i]`: given, 1 to 32 characters, and not the name of an earlier
    /// entry of the section (`taken`, in order).
    fn unique_name<'n>(
        &self,
        section: &str,
        i: usize,
        name: Option<String>,
        taken: impl Iterator<Item = &'n str>,
    ) -> Result<String, ConfigError> {
        let key = format!("{section}[{i}].name");
        let name = name.ok_or_else(|| self.err(&key, "missing, expected a short unique name"))?;
        if name.trim().is_empty() || name.len() > 32 {
            return Err(self.err(&key, "expected 1 to 32 characters"));
        }
        let mut taken = taken;
        if let Some(j) = taken.position(|other| other == name) {
            return Err(self.err(
                &key,
                format!("{name:?} is already the name of {section}[{j}]"),
            ));
        }
        Ok(name)
    }

    fn int_in<T: TryFrom<i64>>(
        &self,
        key: &str,
        v: Option<i64>,
        default: T,
        lo: i64,
        hi: i64,
    ) -> Result<T, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        if v < lo || v > hi {
            return Err(self.err(key, format!("{v} is out of range, expected {lo}..={hi}")));
        }
        T::try_from(v).map_err(|_| self.err(key, format!("{v} does not fit")))
    }

    pub(super) fn config(&self, raw: ConfigFile) -> Result<Config, ConfigError> {
        let raw_tunnel = raw.tunnel.ok_or_else(|| {
            self.err(
                "tunnel",
                "missing section, expected [tunnel] with name and address",
            )
        })?;
        let tunnel = self.tunnel(raw_tunnel)?;
        let explicit_scheduler = raw.connection.scheduler.clone();
        let explicit_pace = raw.connection.pace;
        let connection = self.connection(raw.connection)?;
        let mut connection = connection;
        let mut classes = self.classes(raw.class)?;
        classes.append(&mut connection.classes);
        connection.classes = classes;
        let listen_tcp = raw
            .listen
            .iter()
            .enumerate()
            .map(|(i, l)| self.listen_tcp(i, l))
            .collect::<Result<Vec<_>, _>>()?;
        let listen = self.listen(raw.listen)?;
        let listen_tcp = listen
            .iter()
            .zip(listen_tcp)
            .filter_map(|(a, tcp)| tcp.then_some(*a))
            .collect();
        let peers = self.peers(raw.peer)?;

        let initiating = peers.iter().find(|p| p.endpoint.is_some());
        let paths = if raw.path.is_empty() && initiating.is_none() && !listen.is_empty() {
            // a server: every path comes to its [[listen]] sockets
            Vec::new()
        } else {
            self.paths(raw.path, connection.scheduler, initiating)?
        };
        // No scheduler named: `rate` when every path has a rate (it measures better than
        // learning them), else `adaptive`.
        if explicit_scheduler.is_none()
            && !paths.is_empty()
            && paths.iter().all(|p| p.rate_bps.is_some())
        {
            connection.scheduler = SchedulerKind::Rate;
        }
        // Not said: paced under the schedulers that keep a clock of what each path carries,
        // `rate` (at the lines' own rates) and `adaptive` (at the rates learned): what TCP
        // would push into the links' drops waits in mptd instead.
        if explicit_pace.is_none() {
            connection.pace = connection.scheduler.can_pace();
        }
        let control = self.control(raw.control, &tunnel.name)?;
        let security = self.security(raw.security)?;
        let hooks = self.hooks(raw.hooks.unwrap_or_default())?;
        Ok(Config {
            tunnel,
            connection,
            listen,
            listen_tcp,
            peers,
            paths,
            control,
            security,
            hooks,
            source: (self.file.to_owned(), String::new()),
        })
    }

    fn hooks(&self, raw: HooksFile) -> Result<HooksConfig, ConfigError> {
        let command = |key: &str, v: Option<String>| match v {
            Some(c) if c.trim().is_empty() => Err(self.err(
                key,
                "empty, expected a shell command (run with /bin/sh -c), or no key",
            )),
            v => Ok(v),
        };
        Ok(HooksConfig {
            up: command("hooks.up", raw.up)?,
            down: command("hooks.down", raw.down)?,
            path_up: command("hooks.path_up", raw.path_up)?,
            path_down: command("hooks.path_down", raw.path_down)?,
            peer_up: command("hooks.peer_up", raw.peer_up)?,
            peer_down: command("hooks.peer_down", raw.peer_down)?,
            peer_active: command("hooks.peer_active", raw.peer_active)?,
            path_budget: command("hooks.path_budget", raw.path_budget)?,
            timeout: Duration::from_millis(self.int_in(
                "hooks.timeout_ms",
                raw.timeout_ms,
                DEFAULT_HOOK_TIMEOUT.as_millis() as u64,
                100,
                600_000,
            )?),
        })
    }

    fn socket_addr(&self, key: &str, v: Option<String>) -> Result<SocketAddr, ConfigError> {
        let v = v.ok_or_else(|| self.err(key, "missing, expected address:port such as \"198.18.1.1:4754\" or \"[2001:db8::1]:4754\""))?;
        let a = SocketAddr::from_str(v.trim()).map_err(|_| {
            self.err(key, format!("{v:?} is not address:port, expected e.g. \"198.18.1.1:4754\" or \"[2001:db8::1]:4754\""))
        })?;
        if a.port() == 0 {
            return Err(self.err(key, format!("{v:?} has port 0, expected a fixed port")));
        }
        let ip: IpAddr = a.ip();
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(self.err(key, format!("{v:?} is not a unicast address")));
        }
        Ok(a)
    }

    fn ifname(&self, key: &str, name: &str) -> Result<(), ConfigError> {
        let ok = !name.is_empty()
            && name.len() <= 15
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
        if ok {
            Ok(())
        } else {
            Err(self.err(key, format!("{name:?} is not a valid interface name, expected 1 to 15 characters without '/', ':' or spaces")))
        }
    }

    fn rate(&self, key: &str, v: RateFile) -> Result<u64, ConfigError> {
        let bps = match v {
            RateFile::Bits(b) => u64::try_from(b).ok(),
            RateFile::Text(t) => parse_rate(&t),
        };
        match bps {
            Some(b) if (1_000..=1_000_000_000_000).contains(&b) => Ok(b),
            _ => Err(self.err(key, "expected a rate between 1kbit and 1000gbit, such as \"20mbit\", \"128kbit\" or a number of bits per second")),
        }
    }
}

/// Parse `"20mbit"`, `"128kbit"`, `"1.5gbit"`, `"64000bit"` or `"64000"` into bits per second.
pub fn parse_rate(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim() {
        "" | "bit" | "bps" => 1.0,
        "kbit" | "k" => 1e3,
        "mbit" | "m" => 1e6,
        "gbit" | "g" => 1e9,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    let bps = n * factor;
    (1.0..1e18).contains(&bps).then(|| bps.round() as u64)
}
