//! Handshake messages and cookie replies between a site and a server (see `mpt_tunnel::fuzz::handshake`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_tunnel::fuzz::handshake(data));
