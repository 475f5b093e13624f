//! The packets `skboutput()` captures. `bpf_skb_output` writes only into a perf event array, so they come
//! through rings of their own: a BPF-output perf event per CPU (kept through hotplug, [`CpuRings`]), its
//! descriptor at the CPU's slot of the packets map, read by a thread of its own into the pcap files.

use super::cpu_rings::CpuRings;
use crate::codegen::packets::PACKET_HEADER_BYTES;
use crate::codegen::record::Capture;
use crate::output::pcap::PcapWriter;
use bpf::perf_output::{Output, PerfOutput};
use bpf::Map;
use std::fs::File;
use std::io::BufWriter;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the rings are read.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// Data pages of each CPU's ring when config `perf_rb_pages` does not say: 256 KiB.
const DEFAULT_RING_PAGES: usize = 64;

pub struct CaptureThread {
    stop: UnixStream,
    thread: JoinHandle<Result<Captured, String>>,
}

/// What a run captured: packets written, and lost by the kernel for a full ring.
pub struct Captured {
    pub written: u64,
    pub lost: u64,
}

/// Where each capture's packets go.
struct Files {
    writers: Vec<(String, PcapWriter<BufWriter<File>>)>,
    /// Each capture's file (an index into `writers`) and the bytes it leaves out of each packet.
    captures: Vec<(usize, u64)>,
    written: u64,
    lost: u64,
    /// The first failed write.
    failed: Option<String>,
}

impl Files {
    /// Creates every capture's file (once per path), as bpftrace does before tracing starts.
    fn create(captures: &[Capture]) -> Result<Files, String> {
        let mut writers: Vec<(String, PcapWriter<BufWriter<File>>)> = vec![];
        let mut placed = vec![];
        for capture in captures {
            let at = match writers.iter().position(|(path, _)| *path == capture.path) {
                Some(at) => at,
                None => {
                    let writer = PcapWriter::create(Path::new(&capture.path))
                        .map_err(|e| format!("cannot create the pcap file {}: {e}", capture.path))?;
                    writers.push((capture.path.clone(), writer));
                    writers.len() - 1
                }
            };
            placed.push((at, capture.offset));
        }
        Ok(Files { writers, captures: placed, written: 0, lost: 0, failed: None })
    }

    fn take(&mut self, output: Output<'_>) {
        let sample = match output {
            Output::Lost(count) => {
                self.lost += count;
                return;
            }
            Output::Sample(sample) => sample,
        };
        let word =
            |at: usize| sample.get(at..at + 8).map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")));
        let (Some(id), Some(boot_ns), Some(length)) = (word(0), word(8), word(16)) else { return };
        let Some(&(file, offset)) = usize::try_from(id).ok().and_then(|id| self.captures.get(id)) else {
            return;
        };
        // The kernel pads a sample to 8 bytes: the header's length says where the packet ends.
        let bytes = &sample[PACKET_HEADER_BYTES..];
        let packet = &bytes[..bytes.len().min(usize::try_from(length).unwrap_or(usize::MAX))];
        let Some(kept) =
            packet.get(usize::try_from(offset).unwrap_or(usize::MAX)..).filter(|k| !k.is_empty())
        else {
            return;
        };
        let wall_ns = crate::output::timestamp::boot_time() + i128::from(boot_ns);
        let (path, writer) = &mut self.writers[file];
        match writer.write(wall_ns, kept) {
            Ok(()) => self.written += 1,
            Err(e) => {
                self.failed.get_or_insert_with(|| format!("cannot write the pcap file {path}: {e}"));
            }
        }
    }

    fn finish(mut self) -> Result<Captured, String> {
        for (path, writer) in &mut self.writers {
            if let Err(e) = writer.flush() {
                self.failed.get_or_insert_with(|| format!("cannot write the pcap file {path}: {e}"));
            }
        }
        match self.failed {
            Some(failed) => Err(failed),
            None => Ok(Captured { written: self.written, lost: self.lost }),
        }
    }
}

impl CaptureThread {
    /// Creates the files of `captures`, opens a ring on every online CPU into `map` (the packets map), and
    /// starts reading them; `pages`: each ring's data pages, when config `perf_rb_pages` says.
    pub fn start(captures: &[Capture], map: Map, pages: Option<usize>) -> Result<CaptureThread, String> {
        let mut files = Files::create(captures)?;
        let cpus: Vec<u32> = crate::online_cpus::online()
            .map_err(|e| format!("cannot read the online CPUs: {e}"))?
            .into_iter()
            .collect();
        let pages = pages.unwrap_or(DEFAULT_RING_PAGES);
        let mut rings = CpuRings::open(&cpus, move |cpu| PerfOutput::open(cpu, pages))
            .map_err(|e| format!("cannot open the rings skboutput() writes into: {e}"))?;
        for ring in rings.events() {
            place(&map, ring).map_err(|e| format!("cannot fill the packets map: {e}"))?;
        }
        let (stop, stopped) = UnixStream::pair().map_err(|e| e.to_string())?;
        let thread = std::thread::Builder::new()
            .name("steadytrace-pcap".into())
            .spawn(move || {
                let timeout =
                    nix::poll::PollTimeout::try_from(DRAIN_EVERY).unwrap_or(nix::poll::PollTimeout::MAX);
                loop {
                    let stopping = crate::sys::poll_readable(&[stopped.as_raw_fd()], timeout)
                        .unwrap_or_default()
                        .first()
                        .copied()
                        .unwrap_or(false);
                    for ring in rings.events_mut() {
                        ring.drain(|output| files.take(output));
                    }
                    rings.keep_alive(Instant::now(), |fresh, replaced| {
                        // A CPU without its slot filled writes nothing (the helper gives -ENOENT).
                        let _ = place(&map, fresh);
                        if let Some(mut old) = replaced {
                            old.drain(|output| files.take(output));
                        }
                    });
                    if stopping {
                        return files.finish();
                    }
                }
            })
            .map_err(|e| format!("cannot start the packet capture thread: {e}"))?;
        Ok(CaptureThread { stop, thread })
    }

    /// Reads what is left in the rings, closes the files, and says what was captured.
    pub fn stop(self) -> Result<Captured, String> {
        drop(self.stop);
        self.thread.join().unwrap_or_else(|_| Err("the packet capture thread failed".into()))
    }
}

/// Stores `ring`'s descriptor at its CPU's slot of the packets map.
fn place(map: &Map, ring: &PerfOutput) -> std::io::Result<()> {
    let ring = ring.ring();
    map.update(&ring.cpu().to_ne_bytes(), &ring.fd().as_raw_fd().to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(id: u64, boot_ns: u64, length: u64, bytes: &[u8]) -> Vec<u8> {
        let mut sample = [id, boot_ns, length].map(u64::to_ne_bytes).concat();
        sample.extend(bytes);
        sample
    }

    #[test]
    fn packets_lose_their_offset_and_the_kernels_padding() {
        let dir = std::env::temp_dir().join(format!("steadytrace-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.pcap"), dir.join("b.pcap"));
        let capture = |path: &Path, offset| Capture { path: path.to_string_lossy().into(), offset };
        let mut files = Files::create(&[capture(&a, 0), capture(&b, 2), capture(&a, 10)]).unwrap();
        files.take(Output::Sample(&sample(0, 5, 3, b"abc\0\0\0\0\0")));
        files.take(Output::Sample(&sample(1, 5, 4, b"xyzw\0\0\0\0")));
        // Nothing is left after the offset: nothing is written.
        files.take(Output::Sample(&sample(2, 5, 4, b"abcd\0\0\0\0")));
        // An unknown capture and a cut header are dropped.
        files.take(Output::Sample(&sample(9, 5, 1, b"q")));
        files.take(Output::Sample(&[1, 2, 3]));
        files.take(Output::Lost(4));
        let captured = files.finish().unwrap();
        assert_eq!((captured.written, captured.lost), (2, 4));
        let (a, b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        assert_eq!((a.len(), &a[40..]), (24 + 16 + 3, &b"abc"[..]));
        assert_eq!((b.len(), &b[40..]), (24 + 16 + 2, &b"zw"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
