//! Drivers for the cargo-fuzz targets `config` and `control_socket` (`fuzz/`); the suite replays their
//! corpora through the same functions (`tests/fuzz_corpus`). Neither may panic.

use std::path::Path;

use crate::config::Config;
use crate::control::{parse_answer, parse_request, parse_status};

/// The configuration file: `data` (as text, invalid UTF-8 replaced) read from TOML and
/// validated as `mptd` does at start and on reload. A configuration it takes, it takes again,
/// and its errors can be printed.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("/etc/mptd/fuzz.toml");
    match Config::parse(&text, file) {
        Ok(cfg) => {
            assert_eq!(cfg.source.1, text);
            assert!(
                Config::parse(&cfg.source.1, file).is_ok(),
                "taken once only"
            );
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// The control socket: `data` as the daemon reads a request from it (at most 256 bytes, to
/// the first newline; not UTF-8, unread), then parsed; its words alone (however spaced) make
/// the same request. And `data` as a reply `mptctl` reads: an answer, a status.
pub fn control_socket(data: &[u8]) {
    let read = &data[..data.len().min(256)];
    let line = match read.iter().position(|&b| b == b'\n') {
        Some(end) => &read[..=end],
        None => read,
    };
    if let Ok(line) = std::str::from_utf8(line) {
        let request = parse_request(line);
        let words = line.split_whitespace().collect::<Vec<_>>().join(" ");
        match (&request, parse_request(&words)) {
            (Ok(a), Ok(b)) => assert_eq!(*a, b),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("{line:?} and its words {words:?}: {a:?} but {b:?}"),
        }
    }
    let reply = String::from_utf8_lossy(data);
    let _ = parse_answer(&reply).map_err(|e| e.to_string());
    let _ = parse_status(&reply).map_err(|e| e.to_string());
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    #[test]
    fn requests_parse() {
        use crate::control::{parse_request, Request};
        use crate::uplinks::PathChange;
        assert_eq!(parse_request("status\n"), Ok(Request::Status));
        assert_eq!(
            parse_request(" path  lte weight 5\n"),
            Ok(Request::Change {
                path: "lte",
                change: PathChange::Weight(5)
            })
        );
        assert!(parse_request("path lte weight 0").is_err());
        assert!(parse_request("").is_err());
        super::control_socket(b"path x rate 20mbit\n{\"ok\": 1}");
        super::config(b"[tunnel]\nname = 1\n");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The drivers on random inputs.
        #[test]
        fn the_drivers_hold_on_arbitrary_input(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            super::config(&data);
            super::control_socket(&data);
        }
    }
}
