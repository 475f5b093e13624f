//! What the benchmark does around the engines: Ctrl-C, the firing threads' scheduling, busy threads.

use super::scheduling::Scheduling;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Set by SIGINT or SIGTERM: every loop of the benchmark ends soon after, and the CPU is put back.
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    pub fn install() -> io::Result<Interrupt> {
        let flag = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag))?;
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&flag))?;
        Ok(Interrupt(flag))
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// `--rt PRIO` when this process may use SCHED_FIFO, else 0 (SCHED_OTHER), said on stderr.
pub fn check_realtime(priority: u8) -> u8 {
    if priority == 0 {
        return 0;
    }
    // Tried on a thread of its own, which ends at once: the main thread keeps its scheduling.
    let tried = std::thread::spawn(move || crate::sys::set_fifo_priority(priority)).join();
    match tried {
        Ok(Ok(())) => priority,
        Ok(Err(e)) => {
            crate::stderr!(
                "steadytrace: --rt {priority}: SCHED_FIFO is not permitted here ({e}); the engines' threads run as ordinary threads (the report says so)"
            );
            0
        }
        Err(_) => 0,
    }
}

/// Prepares the calling thread to sleep until deadlines exactly as the tracer prepares its timer thread
/// (timer slack, SCHED_FIFO at `rt` unless 0), and reads back what it got.
pub fn prepare_pacing_thread(rt: u8) -> Scheduling {
    crate::runtime::timer::prepare_timer_thread(rt);
    Scheduling::of_this_thread()
}

/// `--load N`: N threads spinning until dropped.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(threads: u32) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .filter_map(|i| {
                let stop = Arc::clone(&stop);
                std::thread::Builder::new()
                    .name(format!("load{i}"))
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .ok()
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
