//! The datagram parser and decryptor on arbitrary input (see `mpt_core::seal::fuzz`).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| mpt_core::seal::fuzz::datagram(data));
