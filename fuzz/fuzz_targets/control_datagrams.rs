//! Every control datagram, sealed in a session, in sequences (see `mpt_tunnel::fuzz::control_datagrams`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_tunnel::fuzz::control_datagrams(data));
