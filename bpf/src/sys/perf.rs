//! `perf_event_open` and the perf events BPF programs hang on, opened as `code/perf.rs` describes them.

use crate::code::perf::{PerfEventSpec, Sample, TYPE_TRACEPOINT};
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x40042408;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// An open perf event; closing it detaches any program attached to it.
pub struct PerfEvent {
    fd: OwnedFd,
}

impl AsFd for PerfEvent {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl PerfEvent {
    /// Opens a disabled event for `pid` (-1: any) on `cpu` (-1: any).
    pub fn open(spec: &PerfEventSpec, pid: i32, cpu: i32) -> io::Result<PerfEvent> {
        let mut attr = libbpf_sys::perf_event_attr {
            type_: spec.type_,
            size: std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32,
            config: spec.config,
            ..Default::default()
        };
        attr.__bindgen_anon_3.config1 = spec.config1;
        attr.__bindgen_anon_4.config2 = spec.config2;
        match spec.sample {
            Sample::Period(period) => attr.__bindgen_anon_1.sample_period = period,
            Sample::Frequency(hz) => {
                attr.__bindgen_anon_1.sample_freq = hz;
                attr.set_freq(1);
            }
        }
        attr.bp_type = spec.bp_type;
        attr.set_inherit(u64::from(spec.inherit));
        attr.set_disabled(1);
        // Times kept by the kernel tell whether an event is running (see `times`).
        attr.read_format =
            (libbpf_sys::PERF_FORMAT_TOTAL_TIME_ENABLED | libbpf_sys::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
        // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it declares.
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, &attr as *const _, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a non-negative return is a new file descriptor that we own.
        Ok(PerfEvent { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) } })
    }

    /// Attaches a program; it runs once the event is enabled.
    pub fn attach(self, prog: BorrowedFd<'_>) -> io::Result<PerfEvent> {
        self.ioctl(PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd() as libc::c_ulong)?;
        Ok(self)
    }

    pub fn enable(&self) -> io::Result<()> {
        self.ioctl(PERF_EVENT_IOC_ENABLE, 0)
    }

    /// Nanoseconds the event has been enabled: it stops advancing when the event is dead (as after its
    /// CPU went offline and came back).
    pub fn enabled_time(&self) -> io::Result<u64> {
        let mut values = [0u64; 3]; // value, time enabled, time running
                                    // SAFETY: read into a buffer of the size given.
        let n = unsafe {
            libc::read(self.fd.as_raw_fd(), values.as_mut_ptr().cast(), std::mem::size_of_val(&values))
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(values[1])
    }

    fn ioctl(&self, request: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
        // SAFETY: plain ioctl on a perf event fd we own; the argument is an integer.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), request as _, arg) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Attaches `prog` to a tracepoint (its tracefs `id`), or to a kernel function through the `kprobe`
/// event source, with one perf event opened on `cpu`: the kernel runs the programs of a trace event on
/// every CPU it fires on, whatever CPU the perf event belongs to.
pub fn attach_trace_event(prog: BorrowedFd<'_>, event: TraceEvent<'_>, cpu: u32) -> io::Result<PerfEvent> {
    let function;
    let spec = match event {
        TraceEvent::Tracepoint { id } => PerfEventSpec {
            type_: TYPE_TRACEPOINT,
            config: id,
            config1: 0,
            config2: 0,
            sample: Sample::Period(1),
            bp_type: 0,
            inherit: false,
        },
        TraceEvent::Kprobe { function: name, offset, retprobe } => {
            function =
                std::ffi::CString::new(name).map_err(|_| io::Error::other("function name has a NUL byte"))?;
            PerfEventSpec {
                type_: pmu_type("kprobe")?,
                // Bit 0 of config is the retprobe flag (/sys/bus/event_source/devices/kprobe/format/retprobe).
                config: retprobe as u64,
                config1: function.as_ptr() as u64,
                config2: offset,
                sample: Sample::Period(1),
                bp_type: 0,
                inherit: false,
            }
        }
        // Without a function name (config1 0), config2 is the address.
        TraceEvent::KprobeAddress { address, retprobe } => PerfEventSpec {
            type_: pmu_type("kprobe")?,
            config: retprobe as u64,
            config1: 0,
            config2: address,
            sample: Sample::Period(1),
            bp_type: 0,
            inherit: false,
        },
    };
    let event = PerfEvent::open(&spec, -1, cpu as i32)?.attach(prog)?;
    event.enable()?;
    Ok(event)
}

/// A kernel event a program can be attached to through a perf event.
pub enum TraceEvent<'a> {
    Tracepoint {
        id: u64,
    },
    Kprobe {
        function: &'a str,
        offset: u64,
        retprobe: bool,
    },
    /// A kprobe at a bare kernel address.
    KprobeAddress {
        address: u64,
        retprobe: bool,
    },
}

/// Attaches a raw tracepoint program to the tracepoint `name`; closing the returned fd detaches it.
pub fn attach_raw_tracepoint(prog: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let name =
        std::ffi::CString::new(name).map_err(|_| io::Error::other("tracepoint name has a NUL byte"))?;
    // SAFETY: name outlives the call.
    let fd = unsafe { libbpf_sys::bpf_raw_tracepoint_open(name.as_ptr(), prog.as_raw_fd()) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a non-negative return is a new fd that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The dynamic PMU type of a perf event source such as `uprobe` or `kprobe`.
pub fn pmu_type(source: &str) -> io::Result<u32> {
    let path = format!("/sys/bus/event_source/devices/{source}/type");
    fs::read_to_string(&path)?.trim().parse().map_err(|_| io::Error::other(format!("{path} holds no number")))
}

/// The page size: perf buffers and BPF ring buffers are sized in whole pages.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use crate::code::mappings::{MISC_COMM_EXEC, MISC_MMAP_BUILD_ID};
    use crate::code::perf::*;

    /// The numbers `code/` writes out are the kernel's, as libbpf-sys's bindings have them.
    #[test]
    fn the_numbers_written_out_are_the_kernels() {
        assert_eq!(TYPE_HARDWARE, libbpf_sys::PERF_TYPE_HARDWARE);
        assert_eq!(TYPE_SOFTWARE, libbpf_sys::PERF_TYPE_SOFTWARE);
        assert_eq!(TYPE_TRACEPOINT, libbpf_sys::PERF_TYPE_TRACEPOINT);
        assert_eq!(TYPE_BREAKPOINT, libbpf_sys::PERF_TYPE_BREAKPOINT);
        assert_eq!(SW_CPU_CLOCK, libbpf_sys::PERF_COUNT_SW_CPU_CLOCK as u64);
        assert_eq!(RECORD_LOST, libbpf_sys::PERF_RECORD_LOST);
        assert_eq!(RECORD_COMM, libbpf_sys::PERF_RECORD_COMM);
        assert_eq!(RECORD_EXIT, libbpf_sys::PERF_RECORD_EXIT);
        assert_eq!(RECORD_FORK, libbpf_sys::PERF_RECORD_FORK);
        assert_eq!(RECORD_SAMPLE, libbpf_sys::PERF_RECORD_SAMPLE);
        assert_eq!(RECORD_MMAP2, libbpf_sys::PERF_RECORD_MMAP2);
        assert_eq!(MISC_COMM_EXEC, libbpf_sys::PERF_RECORD_MISC_COMM_EXEC as u16);
        assert_eq!(MISC_MMAP_BUILD_ID, libbpf_sys::PERF_RECORD_MISC_MMAP_BUILD_ID as u16);
    }
}
