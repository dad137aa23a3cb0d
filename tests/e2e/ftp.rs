use std::process::Command;

use mpt_lab::netns::{run, tunnel_addr, Lab, Side, TunnelOpts};

use crate::{four_paths, need};

fn sha256(path: &std::path::Path) -> String {
    let out = run(Command::new("sha256sum").arg(path)).expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn ftp_download_and_upload_through_the_tunnel_are_intact() {
    need!("ftp", "vsftpd", "curl");
    let mut lab = Lab::new(&four_paths()).expect("lab");
    lab.start_tunnel(&TunnelOpts::default()).expect("tunnel");

    // vsftpd serves an anonymous root (owned by root, not writable) with a writable upload dir.
    let root = lab.dir.join("ftproot");
    let upload = root.join("upload");
    let empty = lab.dir.join("empty");
    std::fs::create_dir_all(&upload).expect("dirs");
    std::fs::create_dir_all(&empty).expect("dirs");
    run(Command::new("chmod").args(["755", root.to_str().unwrap()])).expect("chmod");
    run(Command::new("chmod").args(["777", upload.to_str().unwrap()])).expect("chmod");
    let file = root.join("random.bin");
    run(Command::new("head")
        .args(["-c", "20000000", "/dev/urandom"])
        .stdout(std::fs::File::create(&file).expect("file")))
    .expect("random file");
    run(Command::new("chmod").args(["644", file.to_str().unwrap()])).expect("chmod");
    let conf = lab.dir.join("vsftpd.conf");
    std::fs::write(
        &conf,
        format!(
            "listen=YES\nlisten_ipv6=NO\nlisten_address={}\nlisten_port=2121\nbackground=NO\nanonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root={}\nwrite_enable=YES\nanon_upload_enable=YES\nanon_mkdir_write_enable=YES\nanon_umask=022\nftp_username=ftp\nsecure_chroot_dir={}\nseccomp_sandbox=NO\nisolate_network=NO\nisolate=NO\npasv_enable=YES\npasv_min_port=30000\npasv_max_port=30100\nxferlog_enable=NO\nuse_localtime=NO\n",
            tunnel_addr(Side::B),
            root.display(),
            empty.display()
        ),
    )
    .expect("vsftpd.conf");
    let mut vsftpd = lab.cmd(Side::B, "vsftpd");
    vsftpd.arg(&conf);
    let pid = lab.spawn(Side::B, "vsftpd", &mut vsftpd).expect("vsftpd");
    std::thread::sleep(std::time::Duration::from_millis(500));

    let url = format!("ftp://{}:2121", tunnel_addr(Side::B));
    let got = lab.dir.join("downloaded.bin");
    let t0 = std::time::Instant::now();
    let dl = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-o",
            got.to_str().unwrap(),
            &format!("{url}/random.bin"),
        ])
        .output()
        .expect("curl");
    let dl_time = t0.elapsed();
    assert!(
        dl.status.success(),
        "download failed: {}\n{}",
        String::from_utf8_lossy(&dl.stderr),
        lab.log("vsftpd")
    );
    assert_eq!(sha256(&got), sha256(&file), "downloaded file differs");

    let t0 = std::time::Instant::now();
    let ul = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-T",
            got.to_str().unwrap(),
            &format!("{url}/upload/back.bin"),
        ])
        .output()
        .expect("curl");
    let ul_time = t0.elapsed();
    assert!(
        ul.status.success(),
        "upload failed: {}\n{}",
        String::from_utf8_lossy(&ul.stderr),
        lab.log("vsftpd")
    );
    assert_eq!(
        sha256(&upload.join("back.bin")),
        sha256(&file),
        "uploaded file differs"
    );
    lab.reap(pid);
    eprintln!(
        "RESULT ftp: 20 MB down in {:.2}s ({:.2} Mbit/s), up in {:.2}s ({:.2} Mbit/s), SHA-256 equal",
        dl_time.as_secs_f64(),
        160.0 / dl_time.as_secs_f64(),
        ul_time.as_secs_f64(),
        160.0 / ul_time.as_secs_f64()
    );
}
