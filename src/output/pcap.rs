//! pcap files, libpcap's classic format: a file header, then each packet after a record header of its time
//! (seconds and microseconds) and lengths, all in the machine's byte order (readers tell it by the magic).
//! `skboutput()` writes raw IP packets (link type 101, LINKTYPE_RAW), as bpftrace's files are.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

const MAGIC_MICROSECONDS: u32 = 0xa1b2_c3d4;
const LINKTYPE_RAW: u32 = 101;
/// The largest packet the header announces (bpftrace's).
const SNAPLEN: u32 = 65535;

pub struct PcapWriter<W: Write> {
    out: W,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or empties) `path` and writes the file header.
    pub fn create(path: &Path) -> io::Result<PcapWriter<BufWriter<File>>> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut header = Vec::with_capacity(24);
        header.extend(MAGIC_MICROSECONDS.to_ne_bytes());
        header.extend(2u16.to_ne_bytes());
        header.extend(4u16.to_ne_bytes());
        header.extend(0i32.to_ne_bytes()); // time zone: UTC
        header.extend(0u32.to_ne_bytes()); // accuracy of the times
        header.extend(SNAPLEN.to_ne_bytes());
        header.extend(LINKTYPE_RAW.to_ne_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter { out })
    }

    /// Writes `packet`, taken at `wall_ns` (nanoseconds since the epoch).
    pub fn write(&mut self, wall_ns: i128, packet: &[u8]) -> io::Result<()> {
        let (seconds, nanos) = (wall_ns.div_euclid(1_000_000_000), wall_ns.rem_euclid(1_000_000_000));
        let length = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        let mut header = Vec::with_capacity(16);
        header.extend((seconds as u32).to_ne_bytes());
        header.extend(((nanos / 1000) as u32).to_ne_bytes());
        header.extend(length.to_ne_bytes());
        header.extend(length.to_ne_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(packet)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(bytes: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn a_file_has_libpcaps_header_and_each_packet_its_time_and_length() {
        let mut writer = PcapWriter::new(Vec::new()).unwrap();
        writer.write(1_700_000_000_123_456_789, b"\x45\x00abc").unwrap();
        writer.write(1_700_000_001_000_000_999, b"").unwrap();
        let bytes = writer.out;
        assert_eq!(u32_at(&bytes, 0), 0xa1b2_c3d4);
        assert_eq!(&bytes[4..8], [2u16.to_ne_bytes(), 4u16.to_ne_bytes()].concat());
        assert_eq!((u32_at(&bytes, 16), u32_at(&bytes, 20)), (65535, 101));
        assert_eq!((u32_at(&bytes, 24), u32_at(&bytes, 28)), (1_700_000_000, 123_456));
        assert_eq!((u32_at(&bytes, 32), u32_at(&bytes, 36)), (5, 5));
        assert_eq!(&bytes[40..45], b"\x45\x00abc");
        assert_eq!((u32_at(&bytes, 45), u32_at(&bytes, 49), u32_at(&bytes, 53)), (1_700_000_001, 0, 0));
        assert_eq!(bytes.len(), 45 + 16);
    }
}
