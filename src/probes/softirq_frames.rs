//! Where the BPF timer's softirq ends in the kernel stacks of `profile` on BPF timers (`bpf::cpu_timer`):
//! above the interrupted code sit the program, `bpf_trace_run2` (and the tracepoint's iterator while
//! something else hangs on it too), the hrtimer and softirq functions and the timer interrupt's exit, up
//! to the return address into the interrupt's entry code (`asm_sysvec_apic_timer_interrupt+22` on x86
//! 6.18, 8 frames in all). That address is found once per run, and only for a script that takes kernel
//! stacks there: a thread spins in user mode on one CPU while a BPF timer samples that CPU every 100 us;
//! the sample with the fewest frames holds the softirq's alone (the spinning code adds none), and its
//! last frame is the address. Kernel stacks then begin after it, at the interrupted instruction, as perf's
//! do; a sample of user code has no kernel stack left. Where the softirq did not run as the timer
//! interrupt returned (deferred to ksoftirqd, or to the end of a section with softirqs disabled), the
//! address is not in the stack, which is kept whole: its first frames are then the softirq's.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The sampling period while looking.
const PERIOD_NS: u64 = 100_000;
/// How long the thread spins: about 50 samples.
const SPIN: Duration = Duration::from_millis(5);

/// The return address after which the interrupted code's frames begin; `None`, said once, where it could
/// not be found.
pub fn end(softexpires: i16) -> Option<u64> {
    static END: OnceLock<Option<u64>> = OnceLock::new();
    *END.get_or_init(|| match std::thread::scope(|s| s.spawn(|| measure(softexpires)).join()) {
        Ok(Ok(address)) => Some(address),
        Ok(Err(why)) => {
            crate::stderr!(
                "steadytrace: kernel stacks of profile probes on BPF timers begin with the timer's softirq frames: where they end could not be found ({why})"
            );
            None
        }
        Err(_) => None,
    })
}

fn measure(softexpires: i16) -> Result<u64, String> {
    let online = crate::online_cpus::online().map_err(|e| format!("cannot read the online CPUs: {e}"))?;
    let allowed =
        crate::online_cpus::allowed().map_err(|e| format!("cannot read this thread's CPUs: {e}"))?;
    let cpu = *online.intersection(&allowed).next().ok_or("no online CPU to run on")?;
    let counter = bpf::cpu_timer::FrameCount::new()?;
    let timers = bpf::cpu_timer::CpuTimers::start(counter.program(), PERIOD_NS, softexpires)?;
    let spun = crate::online_cpus::on_cpu(cpu, || {
        let armed = timers.arm_here(cpu, crate::clocks::monotonic_ns() + PERIOD_NS);
        if armed.is_ok() {
            spin(SPIN);
        }
        let _ = timers.disarm(cpu);
        armed
    });
    spun.and_then(|armed| armed).map_err(|e| format!("cannot arm a BPF timer on cpu{cpu}: {e}"))?;
    drop(timers);
    match counter.fewest().map_err(|e| format!("cannot read the samples: {e}"))? {
        Some(fewest) => Ok(fewest.last),
        None => Err(format!("no sample was taken on cpu{cpu}")),
    }
}

/// Spins in user mode for `time`, looking at the clock (the vDSO's: no system call) only now and then.
fn spin(time: Duration) {
    let end = Instant::now() + time;
    let mut n = 0u64;
    while Instant::now() < end {
        for _ in 0..10_000 {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}
