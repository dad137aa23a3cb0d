//! `[connection]`: how packets are spread and put back in order.

use super::super::*;
use super::Validator;

impl Validator<'_> {
    pub(super) fn connection(&self, raw: ConnectionFile) -> Result<Connection, ConfigError> {
        let scheduler = match raw.scheduler {
            None => SchedulerKind::Adaptive,
            Some(s) => s
                .parse()
                .map_err(|m: String| self.err("connection.scheduler", m))?,
        };
        let reorder_window = self.int_in(
            "connection.reorder_window",
            raw.reorder_window,
            defaults::REORDER_WINDOW,
            0,
            MAX_REORDER_WINDOW as i64,
        )?;
        let ms = |key, v, default, lo, hi| -> Result<Duration, ConfigError> {
            Ok(Duration::from_millis(self.int_in(key, v, default, lo, hi)?))
        };
        let reorder_timeout = ms(
            "connection.reorder_timeout_ms",
            raw.reorder_timeout_ms,
            defaults::REORDER_TIMEOUT_MS,
            1,
            10_000,
        )?;
        let keepalive = ms(
            "connection.keepalive_ms",
            raw.keepalive_ms,
            defaults::KEEPALIVE_MS,
            10,
            60_000,
        )?;
        let dead = ms(
            "connection.dead_ms",
            raw.dead_ms,
            defaults::DEAD_MS,
            20,
            600_000,
        )?;
        if dead < keepalive * 2 {
            return Err(self.err(
                "connection.dead_ms",
                format!(
                    "{} ms is too short, expected at least twice keepalive_ms ({} ms)",
                    dead.as_millis(),
                    keepalive.as_millis() * 2
                ),
            ));
        }
        let idle = self.int_in(
            "connection.idle_keepalive_ms",
            raw.idle_keepalive_ms,
            defaults::IDLE_KEEPALIVE_MS,
            0,
            600_000,
        )?;
        let idle_keepalive = (idle > 0).then(|| Duration::from_millis(idle));
        if idle_keepalive.is_some_and(|i| i < keepalive) {
            return Err(self.err(
                "connection.idle_keepalive_ms",
                format!(
                    "{idle} ms is shorter than keepalive_ms ({} ms), expected at least that, or 0 (paths are never idle)",
                    keepalive.as_millis()
                ),
            ));
        }
        let pace = raw.pace.unwrap_or(false);
        if pace && !scheduler.can_pace() {
            return Err(self.err(
                "connection.pace",
                format!(
                    "true needs the `rate` or `adaptive` scheduler, not `{scheduler}`: `rr` and `wrr` keep no clock of what the paths carry to pace by"
                ),
            ));
        }
        Ok(Connection {
            scheduler,
            reorder_window,
            reorder_timeout,
            keepalive,
            dead,
            idle_keepalive,
            bundle: raw.bundle.unwrap_or(true),
            resend: raw.resend.unwrap_or(true),
            parity: raw.parity.unwrap_or(true),
            equalise: raw.equalise.unwrap_or(true),
            compress: raw.compress.unwrap_or(true),
            pace,
            // [[class]] is read after the connection: see `classes`
            classes: if raw.default_classes.unwrap_or(true) {
                mpt_tunnel::default_classes()
            } else {
                Vec::new()
            },
        })
    }
}
