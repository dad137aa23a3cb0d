//! Parity ([`Kind::Parity`]): forward error correction on a path that loses packets. The
//! sender XORs the inner packets of `k` consecutive data datagrams of one path (a *group*:
//! consecutive path sequences) and sends the sum after them on the same path; a receiver that
//! got all but one of the group XORs the parity with the packets it got and has the missing
//! one, without asking for it.
//!
//! The header's fields say which group it covers (a parity is no fence and is not measured):
//!
//! * path sequence: the group's first; the group is `k` path sequences from it;
//! * global sequence: the XOR of the group's packets' global sequences;
//! * send timestamp: `k`, 2..=[`MAX_PARITY_GROUP`], in its low 16 bits; in its high 16 bits,
//!   the XOR of the group's bodies' lengths (version 4: 0).
//!
//! The body is the XOR of the group's inner packets, each padded with zeros to the longest:
//! as long as the longest packet, so that a parity fits wherever its packets did. The missing
//! packet's length is the XOR of the lengths with those of the packets kept (version 4: its IP
//! header's length field, as a compressed body has none).

use super::*;

/// Most packets one parity covers.
pub const MAX_PARITY_GROUP: usize = 64;

/// Fewest packets one parity covers (one would be a copy).
pub const MIN_PARITY_GROUP: usize = 2;

/// Check a parity: the group size its header gives (`timestamp`'s low 16 bits), and a body
/// that can hold an IP header.
pub fn check_parity(header: &HeaderRepr, body: &[u8]) -> Result<usize, WireError> {
    let k = header.timestamp & 0xffff;
    if !(MIN_PARITY_GROUP as u32..=MAX_PARITY_GROUP as u32).contains(&k) {
        return Err(WireError::ParityGroup(k));
    }
    if body.len() < 20 {
        return Err(WireError::Truncated {
            need: HEADER_LEN + 20,
            got: HEADER_LEN + body.len(),
        });
    }
    Ok(k as usize)
}

/// XOR `packet` into `sum`, which grows (with zeros) to the longer of the two.
#[inline]
pub fn xor_into(sum: &mut Vec<u8>, packet: &[u8]) {
    if sum.len() < packet.len() {
        sum.resize(packet.len(), 0);
    }
    let (head, _) = sum.split_at_mut(packet.len());
    // eight bytes at a time: the compiler turns this into vector code
    let mut a = head.chunks_exact_mut(8);
    let mut b = packet.chunks_exact(8);
    for (x, y) in a.by_ref().zip(b.by_ref()) {
        let v = u64::from_ne_bytes(x[..8].try_into().expect("8"))
            ^ u64::from_ne_bytes(y.try_into().expect("8"));
        x.copy_from_slice(&v.to_ne_bytes());
    }
    for (x, y) in a.into_remainder().iter_mut().zip(b.remainder()) {
        *x ^= y;
    }
}

/// The length an IPv4 or IPv6 packet's header gives, if `packet` starts with one that says
/// no more than `packet` holds.
pub fn ip_length(packet: &[u8]) -> Option<usize> {
    crate::inner::claimed_len(packet).filter(|len| (20..=packet.len()).contains(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xor_of_all_but_one_and_the_parity_is_the_missing_packet() {
        let packets: Vec<Vec<u8>> = (0..5u8)
            .map(|i| {
                (0..(20 + 13 * usize::from(i)))
                    .map(|b| b as u8 ^ i)
                    .collect()
            })
            .collect();
        let mut parity = Vec::new();
        for p in &packets {
            xor_into(&mut parity, p);
        }
        assert_eq!(parity.len(), packets[4].len());
        for missing in 0..packets.len() {
            let mut sum = parity.clone();
            for (j, p) in packets.iter().enumerate() {
                if j != missing {
                    xor_into(&mut sum, p);
                }
            }
            assert_eq!(&sum[..packets[missing].len()], &packets[missing][..]);
            assert!(sum[packets[missing].len()..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn a_group_size_out_of_range_or_a_short_body_is_refused() {
        let h = |k| HeaderRepr {
            kind: Kind::Parity,
            path: crate::PathId(0),
            path_seq: 0,
            session: 1,
            seq: 0,
            timestamp: k,
        };
        assert_eq!(check_parity(&h(2), &[0; 20]), Ok(2));
        assert_eq!(check_parity(&h(64), &[0; 1400]), Ok(64));
        assert_eq!(check_parity(&h(64 | 1434 << 16), &[0; 1400]), Ok(64));
        assert_eq!(
            check_parity(&h(1), &[0; 20]),
            Err(WireError::ParityGroup(1))
        );
        assert_eq!(
            check_parity(&h(65), &[0; 20]),
            Err(WireError::ParityGroup(65))
        );
        assert!(check_parity(&h(8), &[0; 19]).is_err());
    }

    #[test]
    fn ip_length_reads_either_family_and_refuses_what_does_not_fit() {
        let mut v4 = vec![0u8; 60];
        v4[0] = 0x45;
        v4[2..4].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(ip_length(&v4), Some(40));
        v4[2..4].copy_from_slice(&61u16.to_be_bytes());
        assert_eq!(ip_length(&v4), None);
        let mut v6 = vec![0u8; 100];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(ip_length(&v6), Some(48));
        assert_eq!(ip_length(&[0u8; 40]), None);
    }
}
