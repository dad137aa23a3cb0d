//! What the receiver's header rebuilding uses again instead of allocating per packet: the
//! buffers of packed bodies it refused, and the boxes of references it stored.

use mpt_core::hc::Reference;

/// Buffers kept for packed bodies.
const BUFS: usize = 256;
/// Boxes kept for references.
const BOXES: usize = 64;

#[derive(Debug, Default)]
pub(super) struct Spares {
    /// Buffers of bodies refused.
    bufs: Vec<Vec<u8>>,
    /// Boxes of references stored (the boxes are what is kept, not the references).
    #[allow(clippy::vec_box)]
    boxes: Vec<Box<Reference>>,
}

impl Spares {
    /// A buffer kept before, or `fresh`.
    pub(super) fn buf(&mut self, fresh: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
        self.bufs.pop().unwrap_or_else(fresh)
    }

    /// `buf` kept for use again, while there are fewer than [`BUFS`].
    pub(super) fn recycle(&mut self, buf: Vec<u8>) {
        if self.bufs.len() < BUFS {
            self.bufs.push(buf);
        }
    }

    /// `r` in a box, one kept before if there is one (a reference for every whole TCP
    /// packet, allocated and freed each time, cost more than making it).
    pub(super) fn boxed(&mut self, r: Reference) -> Box<Reference> {
        match self.boxes.pop() {
            Some(mut b) => {
                *b = r;
                b
            }
            None => Box::new(r),
        }
    }

    /// `b` kept for use again, while there are fewer than [`BOXES`].
    pub(super) fn unbox(&mut self, b: Box<Reference>) {
        if self.boxes.len() < BOXES {
            self.boxes.push(b);
        }
    }
}
