//! Reading the BPF ring buffer that carries every event record to userspace.

use crate::sys::map::Map;
use std::io;
use std::os::fd::RawFd;

/// A consumer of one ring buffer map; `on_record` sees each record in order.
pub struct RingBufReader<'a> {
    inner: libbpf_rs::RingBuffer<'a>,
}

impl<'a> RingBufReader<'a> {
    pub fn new(map: &'a Map, mut on_record: impl FnMut(&[u8]) + 'a) -> io::Result<RingBufReader<'a>> {
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(map.handle(), move |record: &[u8]| {
                on_record(record);
                0
            })
            .map_err(to_io)?;
        Ok(RingBufReader { inner: builder.build().map_err(to_io)? })
    }

    /// Hands every record already in the buffer to the callback, without waiting.
    pub fn drain(&self) -> io::Result<()> {
        self.inner.consume().map_err(to_io)
    }

    /// An epoll fd that becomes readable when records arrive, to wait on together with other fds.
    pub fn wait_fd(&self) -> RawFd {
        self.inner.epoll_fd()
    }
}

fn to_io(e: libbpf_rs::Error) -> io::Error {
    io::Error::other(e.to_string())
}
