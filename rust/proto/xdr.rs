// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked XDR (RFC 4506) cursors over byte slices: big-endian 32-bit words,
//! everything 4-byte aligned. No operation reads or writes outside its slice.

/// The buffer ended before the item did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Short;

/// Rounds `len` up to the XDR unit of four octets, or `None` on overflow.
pub const fn xdr_align(len: usize) -> Option<usize> {
    match len.checked_add(3) {
        Some(n) => Some(n & !3),
        None => None,
    }
}

/// Reads XDR items from the front of a slice.
#[derive(Clone, Debug)]
pub struct XdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> XdrReader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        XdrReader { buf, pos: 0 }
    }

    /// Octets consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Octets left.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The octets from `start` to `end` of the buffer, both at most the current
    /// position (already consumed and checked); empty if the range is not.
    pub fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        if start <= end && end <= self.pos {
            self.buf.get(start..end).unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// Takes the next `len` octets as a slice.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], Short> {
        let end = self.pos.checked_add(len).ok_or(Short)?;
        let s = self.buf.get(self.pos..end).ok_or(Short)?;
        self.pos = end;
        Ok(s)
    }

    /// Reads one unsigned 32-bit word.
    pub fn u32(&mut self) -> Result<u32, Short> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// Reads one unsigned 64-bit hyper.
    pub fn u64(&mut self) -> Result<u64, Short> {
        let hi = self.u32()?;
        let lo = self.u32()?;
        Ok((u64::from(hi) << 32) | u64::from(lo))
    }

    /// Reads a variable-length opaque (length word, bytes, pad to 4) no longer than
    /// `max` octets; a longer one is `Short` as well, as no sane buffer holds it.
    pub fn opaque(&mut self, max: usize) -> Result<&'a [u8], Short> {
        let len = usize::try_from(self.u32()?).map_err(|_| Short)?;
        if len > max {
            return Err(Short);
        }
        let padded = xdr_align(len).ok_or(Short)?;
        let s = self.take(padded)?;
        Ok(&s[..len])
    }
}

/// Writes XDR items into a slice.
#[derive(Debug)]
pub struct XdrWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> XdrWriter<'a> {
    /// A writer at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        XdrWriter { buf, pos: 0 }
    }

    /// Octets written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Appends `data` unchanged.
    pub fn put_bytes(&mut self, data: &[u8]) -> Result<(), Short> {
        let end = self.pos.checked_add(data.len()).ok_or(Short)?;
        self.buf
            .get_mut(self.pos..end)
            .ok_or(Short)?
            .copy_from_slice(data);
        self.pos = end;
        Ok(())
    }

    /// Appends one unsigned 32-bit word.
    pub fn u32(&mut self, v: u32) -> Result<(), Short> {
        self.put_bytes(&v.to_be_bytes())
    }

    /// Appends one unsigned 64-bit hyper.
    pub fn u64(&mut self, v: u64) -> Result<(), Short> {
        self.put_bytes(&v.to_be_bytes())
    }

    /// Appends a variable-length opaque: length word, bytes, zero pad to 4.
    pub fn opaque(&mut self, data: &[u8]) -> Result<(), Short> {
        self.u32(u32::try_from(data.len()).map_err(|_| Short)?)?;
        self.put_bytes(data)?;
        let pad = xdr_align(data.len()).ok_or(Short)? - data.len();
        self.put_bytes(&[0u8; 3][..pad])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_round_trip_pads_to_four() {
        let mut buf = [0xffu8; 16];
        let mut w = XdrWriter::new(&mut buf);
        w.opaque(b"abcde").unwrap();
        assert_eq!(w.position(), 12);
        assert_eq!(&buf[..12], b"\0\0\0\x05abcde\0\0\0");
        let mut r = XdrReader::new(&buf);
        assert_eq!(r.opaque(64).unwrap(), b"abcde");
        assert_eq!(r.position(), 12);
    }

    #[test]
    fn reader_refuses_to_run_past_the_end() {
        let buf = [0u8, 0, 0, 9, 1, 2];
        assert_eq!(XdrReader::new(&buf).opaque(64), Err(Short));
        assert_eq!(XdrReader::new(&buf[..3]).u32(), Err(Short));
        let huge = [0xffu8, 0xff, 0xff, 0xff];
        assert_eq!(XdrReader::new(&huge).opaque(usize::MAX), Err(Short));
    }
}
