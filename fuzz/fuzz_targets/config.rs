//! The configuration file, from TOML through validation (see `mptd::fuzz::config`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mptd::fuzz::config(data));
