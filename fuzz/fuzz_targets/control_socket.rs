//! The control socket's requests, and mptctl's reading of replies (see `mptd::fuzz::control_socket`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mptd::fuzz::control_socket(data));
