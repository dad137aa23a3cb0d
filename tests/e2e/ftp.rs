use mpt_lab::harness::{Lab, Side, TunnelOpts};

use crate::{four_paths, need, sha256};

#[test]
fn ftp_download_and_upload_through_the_tunnel_are_intact() {
    need!("ftp", "vsftpd", "curl");
    let mut lab = Lab::new(&four_paths()).expect("lab");
    lab.start_tunnel(&TunnelOpts::default()).expect("tunnel");

    let ftp = lab.ftp_server(Side::B, 20_000_000).expect("vsftpd");
    let (file, upload, pid) = (ftp.file.clone(), ftp.upload.clone(), ftp.pid);
    let url = ftp.url.clone();
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
