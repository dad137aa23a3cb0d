//! Sealed datagrams on a byte stream (a TCP or TLS path): each goes as a frame, its length in
//! two bytes (big-endian) and then its bytes. The stream keeps them whole and in order; the
//! reader cuts them out again ([`Deframer`]). A length the tunnel never sends (below a
//! header's, or above the largest datagram) is a broken or hostile stream: it is not
//! resynchronised, the connection is closed.

/// The bytes before each datagram on a stream: its length.
pub const FRAME_HEADER: usize = 2;

/// Why a stream's bytes are no frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A length below the smallest datagram the tunnel sends.
    #[error("a frame of {0} bytes is below the smallest datagram")]
    Undersized(usize),
    /// A length above the largest datagram the tunnel sends.
    #[error("a frame of {0} bytes is above the largest datagram")]
    Oversized(usize),
}

/// The sizes of the datagrams a stream carries: a frame of another length breaks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub min: usize,
    pub max: usize,
}

/// Put `datagram` on `out` as a frame.
pub fn encode(datagram: &[u8], out: &mut Vec<u8>) {
    debug_assert!(datagram.len() <= usize::from(u16::MAX));
    out.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
    out.extend_from_slice(datagram);
}

/// Cuts the frames out of what a stream gives, however the reads split them: read into
/// [`Deframer::spare`], say how much came with [`Deframer::filled`], then take the frames
/// with [`Deframer::next`]. It holds at most two of the largest frames: nothing grows.
#[derive(Debug)]
pub struct Deframer {
    buf: Box<[u8]>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    min: usize,
    max: usize,
}

impl Deframer {
    /// Frames of `min` to `max` bytes (datagrams; the length bytes not counted).
    pub fn new(min: usize, max: usize) -> Deframer {
        let max = max.clamp(min.max(1), usize::from(u16::MAX));
        Deframer {
            buf: vec![0; 2 * (FRAME_HEADER + max)].into_boxed_slice(),
            start: 0,
            end: 0,
            min,
            max,
        }
    }

    /// Where the next read goes (never empty: what is unread moves to the front first).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 && self.buf.len() - self.end < FRAME_HEADER + self.max {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`Deframer::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// The next whole frame's datagram, `None` until more is read, or why the stream is
    /// broken (the deframer is of no further use then).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let have = &self.buf[self.start..self.end];
        let Some(len) = have.get(..FRAME_HEADER) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if len < self.min {
            return Err(FrameError::Undersized(len));
        }
        if len > self.max {
            return Err(FrameError::Oversized(len));
        }
        if have.len() < FRAME_HEADER + len {
            return Ok(None);
        }
        let at = self.start + FRAME_HEADER;
        self.start = at + len;
        Ok(Some(&self.buf[at..at + len]))
    }

    /// Bytes read and not yet taken as frames.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(d: &mut Deframer) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        while let Some(f) = d.next()? {
            out.push(f.to_vec());
        }
        Ok(out)
    }

    /// Feed `bytes` in pieces of the sizes `cuts` gives (cycled), taking frames as they come.
    fn feed(d: &mut Deframer, bytes: &[u8], cuts: &[usize]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut out = Vec::new();
        let mut at = 0;
        let mut k = 0;
        while at < bytes.len() {
            let spare = d.spare();
            let n = cuts[k % cuts.len()]
                .max(1)
                .min(spare.len())
                .min(bytes.len() - at);
            spare[..n].copy_from_slice(&bytes[at..at + n]);
            d.filled(n);
            at += n;
            k += 1;
            out.extend(all(d)?);
        }
        Ok(out)
    }

    proptest! {
        #[test]
        fn frames_come_out_whole_and_in_order_however_the_reads_cut_them(
            frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 20..1500), 1..20),
            cuts in prop::collection::vec(1usize..4000, 1..10),
        ) {
            let mut bytes = Vec::new();
            for f in &frames {
                encode(f, &mut bytes);
            }
            let mut d = Deframer::new(20, 1500);
            let got = feed(&mut d, &bytes, &cuts).expect("frames");
            prop_assert_eq!(got, frames);
            prop_assert_eq!(d.pending(), 0);
        }

        #[test]
        fn any_bytes_give_frames_or_an_error_and_never_panic(
            bytes in prop::collection::vec(any::<u8>(), 0..5000),
            cuts in prop::collection::vec(1usize..3000, 1..5),
        ) {
            let mut d = Deframer::new(20, 1500);
            if let Ok(frames) = feed(&mut d, &bytes, &cuts) {
                prop_assert!(frames.iter().all(|f| (20..=1500).contains(&f.len())));
            }
        }
    }

    #[test]
    fn lengths_the_tunnel_never_sends_break_the_stream() {
        let mut d = Deframer::new(20, 1500);
        d.spare()[..2].copy_from_slice(&0u16.to_be_bytes());
        d.filled(2);
        assert_eq!(d.next(), Err(FrameError::Undersized(0)));
        let mut d = Deframer::new(20, 1500);
        d.spare()[..2].copy_from_slice(&0xFFFFu16.to_be_bytes());
        d.filled(2);
        assert_eq!(d.next(), Err(FrameError::Oversized(0xFFFF)));
        let mut d = Deframer::new(20, 1500);
        d.spare()[..3].copy_from_slice(&[0x05, 0xDD, 1]);
        d.filled(3);
        assert_eq!(
            d.next(),
            Err(FrameError::Oversized(1501)),
            "known from the length"
        );
        let mut d = Deframer::new(20, 1500);
        d.spare()[..3].copy_from_slice(&[0x05, 0xDC, 1]);
        d.filled(3);
        assert_eq!(d.next(), Ok(None), "1500 bytes: waits for the rest");
    }
}
