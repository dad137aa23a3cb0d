//! The flooder beside the sites lab's server: its namespace and addresses, and the forged
//! initiations it sends.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{sh, Host, Sites, PORT};

impl Sites {
    /// The flooder's namespace (see [`Sites::add_flooder`]).
    pub fn ns_flooder(&self) -> String {
        format!("{}f", self.tag)
    }

    /// A host beside the server (its own link, not through the router) that owns
    /// `addresses` addresses, 198.18.101.10 and up; the server is 198.18.101.1 on that link.
    pub fn add_flooder(&self, addresses: usize) -> Result<()> {
        let (v, f) = (self.ns(Host::Server), self.ns_flooder());
        let mut s = format!("ip netns add {f}\nip -n {f} link set lo up\n");
        writeln!(
            s,
            "ip link add fl netns {v} type veth peer name fl netns {f}"
        )?;
        writeln!(
            s,
            "ip -n {v} addr add 198.18.101.1/24 dev fl\nip -n {v} link set fl up"
        )?;
        for k in 0..addresses.min(200) {
            writeln!(s, "ip -n {f} addr add 198.18.101.{}/24 dev fl", 10 + k)?;
        }
        writeln!(s, "ip -n {f} link set fl up")?;
        sh(&s)?;
        Ok(())
    }

    /// Send forged initiations to the server at `rate` a second for `secs`, from `addresses`
    /// source addresses of the flooder and a new source port each time: a valid header, a
    /// random Noise message with a valid mac1 (the server's public key is public: mac1 stops
    /// only those who lack it), and no mac2 (a flooder with spoofed sources never sees its
    /// cookies). Each costs the server a key exchange unless something bounds them. Returns
    /// how many were sent.
    pub fn flood(&self, rate: u64, secs: f64, addresses: usize) -> Result<u64> {
        self.flooder(rate, secs, addresses)?()
    }

    /// [`Sites::flood`], to run later (in a thread of its own while the lab goes on).
    pub fn flooder(
        &self,
        rate: u64,
        secs: f64,
        addresses: usize,
    ) -> Result<impl FnOnce() -> Result<u64> + Send + 'static> {
        use mpt_core::wire::{HeaderRepr, Kind, HEADER_LEN, INITIATION_LEN, NOISE_INITIATION_LEN};
        let ns = self.ns_flooder();
        let server = mpt_core::seal::PublicKey::parse(&self.public_key(Host::Server)?)?;
        let macs = mpt_core::seal::MacKeys::new(&server);
        Ok(move || {
            crate::harness::in_netns(&ns, move || -> Result<u64> {
                let socks: Vec<std::net::UdpSocket> = (0..addresses.clamp(1, 200))
                    .map(|k| std::net::UdpSocket::bind(format!("198.18.101.{}:0", 10 + k)))
                    .collect::<std::io::Result<_>>()?;
                let mut rng = mpt_core::rng::Rng::new(7);
                let mut d = vec![0u8; INITIATION_LEN];
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed().as_secs_f64() < secs {
                    let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                    while sent < due {
                        HeaderRepr {
                            kind: Kind::Initiation,
                            path: mpt_core::PathId(0),
                            path_seq: 0,
                            session: 0,
                            seq: 0,
                            timestamp: 0,
                        }
                        .emit(&mut d);
                        let noise_end = HEADER_LEN + NOISE_INITIATION_LEN;
                        rng.fill(&mut d[HEADER_LEN..noise_end]);
                        let mac1 = macs.mac1(&d[HEADER_LEN..noise_end]);
                        d[noise_end..noise_end + 16].copy_from_slice(&mac1);
                        let s = &socks[(sent as usize) % socks.len()];
                        let _ = s.send_to(&d, format!("198.18.101.1:{PORT}"));
                        sent += 1;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(sent)
            })?
        })
    }
}
