//! A ring of "received" bits over extended sequence numbers.

/// Bits for the extended seqs in `[head - half, head + half)`, stored in a ring of `2 * half`
/// bits indexed by `seq mod 2 * half`. The caller moves the window with [`advance`]
/// (clearing the bits that enter it) and only asks about seqs inside it.
///
/// [`advance`]: SeqBitmap::advance
#[derive(Debug, Clone)]
pub(crate) struct SeqBitmap {
    words: Vec<u64>,
    /// `2 * half - 1`
    mask: u64,
    half: u64,
}

impl SeqBitmap {
    /// `half` must be a power of two of at least 64.
    pub(crate) fn new(half: u64) -> Self {
        debug_assert!(half.is_power_of_two() && half >= 64);
        let nbits = half * 2;
        SeqBitmap {
            words: vec![0; (nbits / 64) as usize],
            mask: nbits - 1,
            half,
        }
    }

    /// How far the window reaches each side of the head.
    pub(crate) fn half(&self) -> u64 {
        self.half
    }

    /// Number of 64-bit words (constant).
    #[cfg(test)]
    pub(crate) fn words(&self) -> usize {
        self.words.len()
    }

    #[inline]
    fn pos(&self, seq: u64) -> (usize, u64) {
        let b = seq & self.mask;
        ((b >> 6) as usize, 1u64 << (b & 63))
    }

    #[inline]
    pub(crate) fn get(&self, seq: u64) -> bool {
        let (w, m) = self.pos(seq);
        self.words.get(w).is_some_and(|x| x & m != 0)
    }

    #[inline]
    pub(crate) fn set(&mut self, seq: u64) {
        let (w, m) = self.pos(seq);
        if let Some(x) = self.words.get_mut(w) {
            *x |= m;
        }
    }

    #[inline]
    fn clear(&mut self, seq: u64) {
        let (w, m) = self.pos(seq);
        if let Some(x) = self.words.get_mut(w) {
            *x &= !m;
        }
    }

    pub(crate) fn clear_all(&mut self) {
        self.words.fill(0);
    }

    /// The head moves from `old` to `new`: the seqs `[old + half, new + half)` enter the window
    /// (their slots held `[old - half, new - half)`, which leave it) and are cleared.
    /// O(min(new - old, 2 * half)).
    #[inline]
    pub(crate) fn advance(&mut self, old: u64, new: u64) {
        if new <= old {
            return;
        }
        if new - old > self.mask {
            self.clear_all();
            return;
        }
        for s in old..new {
            self.clear(s.wrapping_add(self.half));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_moves_and_clears() {
        let mut b = SeqBitmap::new(64);
        assert_eq!(b.words(), 2);
        for s in 100..164 {
            b.set(s);
        }
        assert!(b.get(100) && b.get(163) && !b.get(99) && !b.get(164));
        // head 100 -> 130: seqs 164..194 enter (slots of 36..66), nothing set there
        b.advance(100, 130);
        assert!(b.get(100) && b.get(163));
        // head 130 -> 180: seqs 194..244 enter, their slots held 66..116 -> 100..115 cleared
        b.advance(130, 180);
        assert!(!b.get(115) && b.get(116) && b.get(163));
        assert!(!b.get(244 - 1));
        // a big jump clears everything
        b.advance(180, 10_000);
        assert!((0..128).all(|s| !b.get(s)));
    }
}
