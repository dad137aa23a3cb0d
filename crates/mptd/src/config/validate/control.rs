//! `[control]`: the control socket, the metrics' address, and the status page's address and
//! token.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::*;

/// The shortest `web_token` accepted: 16 characters (`openssl rand -hex 16` gives 32).
const MIN_TOKEN: usize = 16;

impl Validator<'_> {
    /// `[control]` of the tunnel named `tunnel`.
    pub(super) fn control(&self, raw: ControlFile, tunnel: &str) -> Result<Control, ConfigError> {
        let metrics = self.listen_addr("control.metrics", raw.metrics, "127.0.0.1:9754")?;
        let web = self.listen_addr("control.web", raw.web, "127.0.0.1:9190")?;
        let web_token = match raw.web_token {
            None => None,
            Some(_) if web.is_none() => {
                return Err(self.err(
                    "control.web_token",
                    "given without control.web, expected control.web = \"address:port\" too",
                ))
            }
            Some(t) if t.len() < MIN_TOKEN || !t.bytes().all(|b| b.is_ascii_graphic()) => {
                return Err(self.err(
                    "control.web_token",
                    format!(
                        "expected at least {MIN_TOKEN} visible ASCII characters without spaces \
                         (e.g. the output of `openssl rand -hex 16`)"
                    ),
                ))
            }
            Some(t) => Some(t),
        };
        // off loopback, anyone on the way could read the page: it needs a token
        if let Some(addr) = web.filter(|a| !a.ip().is_loopback()) {
            if web_token.is_none() {
                return Err(self.err(
                    "control.web_token",
                    format!(
                        "missing, expected a token when control.web ({addr}) is not a loopback \
                         address (or control.web = \"127.0.0.1:{}\")",
                        addr.port()
                    ),
                ));
            }
        }
        let socket = match raw.socket {
            Some(s) if s.trim().is_empty() => {
                return Err(self.err("control.socket", "empty, expected a filesystem path"))
            }
            Some(s) => PathBuf::from(s),
            // under systemd (RuntimeDirectory=mptd/%i), in the instance's own directory
            None => match std::env::var_os("RUNTIME_DIRECTORY") {
                Some(dir) => Path::new(&dir).join("control.sock"),
                None => Path::new(defaults::CONTROL_DIR).join(format!("{tunnel}.sock")),
            },
        };
        Ok(Control {
            socket,
            metrics,
            web,
            web_token,
        })
    }

    /// An `address:port` to listen on, if given (`example` in the message when it is not one).
    fn listen_addr(
        &self,
        key: &str,
        v: Option<String>,
        example: &str,
    ) -> Result<Option<SocketAddr>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        SocketAddr::from_str(v.trim()).map(Some).map_err(|_| {
            self.err(
                key,
                format!("{v:?} is not address:port, expected e.g. \"{example}\""),
            )
        })
    }
}
