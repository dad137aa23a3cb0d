//! The traffic classes: `[[class]]`.

use mpt_tunnel::{ClassRule, Mode};

use super::super::*;
use super::Validator;

/// Most `[[class]]` entries: each packet is matched against them in turn.
const MAX_CLASSES: usize = 32;

impl Validator<'_> {
    /// The configured classes, in file order.
    pub(super) fn classes(&self, raw: Vec<ClassFile>) -> Result<Vec<ClassRule>, ConfigError> {
        if raw.len() > MAX_CLASSES {
            return Err(self.err(
                "class",
                format!("{} classes, expected at most {MAX_CLASSES}", raw.len()),
            ));
        }
        let mut classes: Vec<ClassRule> = Vec::new();
        for (i, r) in raw.into_iter().enumerate() {
            let name =
                self.unique_name("class", i, r.name, classes.iter().map(|c| c.name.as_str()))?;
            let key = |k: &str| format!("class[{i}].{k}");
            let mode = match r.mode {
                None => Mode::Bond,
                Some(m) => Mode::parse(m.trim()).ok_or_else(|| {
                    self.err(
                        key("mode"),
                        format!(
                            "{m:?} is not a mode, expected \"bond\", \"fastest\" or \"duplicate\""
                        ),
                    )
                })?,
            };
            let dscp = match r.dscp {
                None => Vec::new(),
                Some(v) if v.is_empty() => return Err(self.err(
                    key("dscp"),
                    "empty, expected a list of DSCP values 0..=63 (e.g. [46] for EF), or no key",
                )),
                Some(v) => v
                    .into_iter()
                    .map(|d| self.int_in::<u8>(&key("dscp"), Some(d), 0, 0, 63))
                    .collect::<Result<_, _>>()?,
            };
            let protocol = match r.protocol {
                None => None,
                Some(ProtocolFile::Number(n)) => {
                    Some(self.int_in::<u8>(&key("protocol"), Some(n), 0, 0, 255)?)
                }
                Some(ProtocolFile::Name(n)) => Some(
                    mpt_tunnel::protocol_number(n.trim()).ok_or_else(|| {
                        self.err(
                            key("protocol"),
                            format!("{n:?} is not a protocol, expected \"tcp\", \"udp\", \"icmp\", \"icmpv6\" or a number 0..=255"),
                        )
                    })?,
                ),
            };
            let ports = match r.port {
                None => None,
                Some(PortFile::Number(p)) => {
                    let p = self.int_in::<u16>(&key("port"), Some(p), 0, 1, 65535)?;
                    Some((p, p))
                }
                Some(PortFile::Range(text)) => Some(self.port_range(&key("port"), &text)?),
            };
            if ports.is_some() && protocol.is_some_and(|p| !matches!(p, 6 | 17)) {
                return Err(self.err(
                    key("port"),
                    "only TCP and UDP packets have ports, expected protocol \"tcp\" or \"udp\" (or no protocol) with a port",
                ));
            }
            let tcp_syn = r.tcp_syn.unwrap_or(false);
            if tcp_syn && protocol.is_some_and(|p| p != 6) {
                return Err(self.err(
                    key("tcp_syn"),
                    "a SYN is a TCP flag, expected protocol \"tcp\" (or no protocol) with tcp_syn",
                ));
            }
            let tcp_ack = r.tcp_ack.unwrap_or(false);
            if tcp_ack && (tcp_syn || protocol.is_some_and(|p| p != 6)) {
                return Err(self.err(
                    key("tcp_ack"),
                    "a pure acknowledgement is a TCP segment without SYN, expected protocol \"tcp\" (or no protocol) and no tcp_syn with tcp_ack",
                ));
            }
            let max_size = match r.max_size {
                None => None,
                Some(m) => Some(self.int_in::<usize>(&key("max_size"), Some(m), 0, 20, 65535)?),
            };
            classes.push(ClassRule {
                name,
                dscp,
                protocol,
                ports,
                tcp_syn,
                tcp_ack,
                max_size,
                mode,
            });
        }
        Ok(classes)
    }

    /// `"5000-5100"` (or `"5060"`): an inclusive range of ports.
    fn port_range(&self, key: &str, text: &str) -> Result<(u16, u16), ConfigError> {
        let bad = || {
            self.err(
                key,
                format!("{text:?} is not a port or range, expected e.g. 5060 or \"5000-5100\""),
            )
        };
        let port = |s: &str| s.trim().parse::<u16>().ok().filter(|&p| p > 0);
        let (lo, hi) = match text.split_once('-') {
            Some((a, b)) => (port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?),
            None => {
                let p = port(text).ok_or_else(bad)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(self.err(key, format!("{text:?} runs backwards, expected low-high")));
        }
        Ok((lo, hi))
    }
}
