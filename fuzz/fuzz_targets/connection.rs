//! A connection fed sealed datagrams of every kind (pieces, bundles, parity, control) in sequences (see `mpt_tunnel::fuzz::connection`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_tunnel::fuzz::connection(data));
