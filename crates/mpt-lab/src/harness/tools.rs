//! The applications the experiments run through the tunnel: iperf3, a bulk TCP transfer,
//! ping and an FTP server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::*;

/// A running vsftpd started by [`Lab::ftp_server`].
#[derive(Debug)]
pub struct FtpServer {
    /// `ftp://address:port`
    pub url: String,
    /// The served file (`/random.bin`).
    pub file: PathBuf,
    /// The writable upload directory (`/upload/`).
    pub upload: PathBuf,
    pub pid: u32,
}

/// Datagrams the receiving iperf3 saw out of order in a UDP run made with
/// `--get-server-output` (the client's own JSON counts none); `None` without the server's JSON.
pub fn iperf3_receiver_out_of_order(v: &serde_json::Value) -> Option<u64> {
    v["server_output_json"]["end"]["streams"][0]["udp"]["out_of_order"].as_u64()
}

/// Throughput in bits per second that an iperf3 JSON result reports at the receiver.
pub fn iperf3_bps(v: &serde_json::Value) -> f64 {
    let end = &v["end"];
    end["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| end["sum"]["bits_per_second"].as_f64())
        .unwrap_or(0.0)
}

impl Lab {
    /// Run an iperf3 client in `client` against a server started in the other namespace on
    /// `server_addr`; returns iperf3's JSON.
    pub fn iperf3(
        &mut self,
        client: Side,
        server_addr: &str,
        port: u16,
        args: &[&str],
    ) -> Result<serde_json::Value> {
        let mut v = self.iperf3_many(client, &[(server_addr.to_owned(), port)], args)?;
        Ok(v.remove(0))
    }

    /// Run one iperf3 client per `(server address, port)` at the same time, each against its
    /// own server in the other namespace; returns their JSON results in order.
    pub fn iperf3_many(
        &mut self,
        client: Side,
        targets: &[(String, u16)],
        args: &[&str],
    ) -> Result<Vec<serde_json::Value>> {
        let each: Vec<(String, u16, Vec<String>)> = targets
            .iter()
            .map(|(a, p)| {
                (
                    a.clone(),
                    *p,
                    args.iter().map(|s| (*s).to_owned()).collect(),
                )
            })
            .collect();
        self.iperf3_each(client, &each)
    }

    /// [`Lab::iperf3_many`] with each client's own arguments: `(server address, port, args)`.
    pub fn iperf3_each(
        &mut self,
        client: Side,
        targets: &[(String, u16, Vec<String>)],
    ) -> Result<Vec<serde_json::Value>> {
        let server = client.other();
        let mut servers = Vec::new();
        for (addr, port, _) in targets {
            let name = format!("iperf3-server-{port}");
            let mut cmd = self.cmd(server, "iperf3");
            // -J: the server's own JSON reaches the client with --get-server-output.
            cmd.args(["-s", "-1", "-J", "-B", addr, "-p", &port.to_string()]);
            servers.push(self.spawn(server, &name, &mut cmd)?);
        }
        for (_, port, _) in targets {
            let t0 = Instant::now();
            while self
                .sh(server, &format!("ss -ltnH 'sport = :{port}' | grep -q ."))
                .is_err()
            {
                if t0.elapsed() > Duration::from_secs(5) {
                    bail!(
                        "iperf3 server on port {port} did not start: {}",
                        self.log(&format!("iperf3-server-{port}"))
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let clients: Vec<Child> = targets
            .iter()
            .map(|(addr, port, args)| {
                self.cmd(client, "timeout")
                    .args(["90", "iperf3", "-J", "-c", addr, "-p", &port.to_string()])
                    .args(args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("cannot start iperf3")
            })
            .collect::<Result<_>>()?;
        let mut results = Vec::new();
        for c in clients {
            let out = c.wait_with_output()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
                format!(
                    "iperf3 gave no JSON: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
            if let Some(e) = v.get("error") {
                bail!("iperf3 failed: {e}\n{}", self.diagnostics());
            }
            results.push(v);
        }
        for pid in servers {
            self.reap(pid);
        }
        Ok(results)
    }

    /// Start an iperf3 TCP transfer of `secs` seconds from A to B through the tunnel and
    /// return at once: the server's pid (for [`Lab::reap`]) and the client, whose JSON comes
    /// out on its stdout.
    pub fn tcp_transfer_in_background(&mut self, port: u16, secs: u64) -> Result<(u32, Child)> {
        let mut server = self.cmd(Side::B, "iperf3");
        server.args([
            "-s",
            "-1",
            "-B",
            &tunnel_addr(Side::B),
            "-p",
            &port.to_string(),
        ]);
        let spid = self.spawn(Side::B, &format!("iperf3-server-{port}"), &mut server)?;
        let t0 = Instant::now();
        while self
            .sh(Side::B, &format!("ss -ltnH 'sport = :{port}' | grep -q ."))
            .is_err()
        {
            if t0.elapsed() > Duration::from_secs(5) {
                bail!("iperf3 server on port {port} did not start");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let client = self
            .cmd(Side::A, "timeout")
            .args([
                &(secs + 30).to_string(),
                "iperf3",
                "-J",
                "-c",
                &tunnel_addr(Side::B),
            ])
            .args(["-p", &port.to_string(), "-t", &secs.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start iperf3")?;
        Ok((spid, client))
    }

    /// Ping `addr` from `side` with `args` (e.g. `-c 20 -i 0.05`); the average RTT in ms.
    pub fn ping_avg_ms(&self, side: Side, addr: &str, args: &[&str]) -> Result<f64> {
        let out = self
            .cmd(side, "ping")
            .args(args)
            .args(["-q", addr])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.contains("min/avg/max"))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.trim().split('/').nth(1))
            .and_then(|v| v.parse().ok())
            .with_context(|| {
                format!(
                    "no ping summary: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    /// Start vsftpd on `side`'s tunnel address (port 2121) serving an anonymous root that
    /// holds `random.bin` (`file_bytes` random bytes) and a writable `upload/`.
    pub fn ftp_server(&mut self, side: Side, file_bytes: u64) -> Result<FtpServer> {
        let root = self.dir.join("ftproot");
        let upload = root.join("upload");
        let empty = self.dir.join("empty");
        std::fs::create_dir_all(&upload)?;
        std::fs::create_dir_all(&empty)?;
        use std::os::unix::fs::PermissionsExt;
        // vsftpd refuses an anonymous root the ftp user can write to.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(&upload, std::fs::Permissions::from_mode(0o777))?;
        let file = root.join("random.bin");
        run(Command::new("head")
            .args(["-c", &file_bytes.to_string(), "/dev/urandom"])
            .stdout(std::fs::File::create(&file)?))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
        let conf = self.dir.join("vsftpd.conf");
        let addr = tunnel_addr(side);
        std::fs::write(
            &conf,
            format!(
                "listen=YES\nlisten_ipv6=NO\nlisten_address={addr}\nlisten_port=2121\nbackground=NO\n\
                 anonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root={}\n\
                 write_enable=YES\nanon_upload_enable=YES\nanon_mkdir_write_enable=YES\nanon_umask=022\n\
                 ftp_username=ftp\nsecure_chroot_dir={}\nseccomp_sandbox=NO\nisolate_network=NO\n\
                 isolate=NO\npasv_enable=YES\npasv_min_port=30000\npasv_max_port=30100\n\
                 xferlog_enable=NO\n",
                root.display(),
                empty.display()
            ),
        )?;
        let mut cmd = self.cmd(side, "vsftpd");
        cmd.arg(&conf);
        let pid = self.spawn(side, "vsftpd", &mut cmd)?;
        let t0 = Instant::now();
        while self
            .sh(side, "ss -ltnH 'sport = :2121' | grep -q .")
            .is_err()
        {
            if self.exited(pid) || t0.elapsed() > Duration::from_secs(5) {
                bail!("vsftpd did not start: {}", self.log("vsftpd"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(FtpServer {
            url: format!("ftp://{addr}:2121"),
            file,
            upload,
            pid,
        })
    }
}
