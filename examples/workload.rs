//! A test workload with known behaviour, for steadytrace's integration tests (built by `cargo test`,
//! at target/*/examples/workload). Each subcommand does one thing a known number of times.

use std::hint::black_box;
use std::io::BufRead;

/// A global for `uaddr()` to find and read.
#[no_mangle]
pub static WORKLOAD_GLOBAL: u32 = 0x5555_5555;

/// A function for uprobes: returns `a + b`.
#[inline(never)]
#[no_mangle]
pub extern "C" fn workload_add(a: u64, b: u64) -> u64 {
    black_box(a) + black_box(b)
}

/// Three functions for uprobe wildcards (`workload_multi_*`): `multi N` calls the first N times, the
/// second 2N times and the third 3N times.
#[inline(never)]
#[no_mangle]
pub extern "C" fn workload_multi_one(a: u64) -> u64 {
    black_box(a) + 1
}

#[inline(never)]
#[no_mangle]
pub extern "C" fn workload_multi_two(a: u64) -> u64 {
    black_box(a) + 2
}

#[inline(never)]
#[no_mangle]
pub extern "C" fn workload_multi_three(a: u64) -> u64 {
    black_box(a) + 3
}

/// The function `spin` spends its time in, for profile probes to find at the top of user stacks: counts
/// `n` down in user mode, calling nothing, also unoptimised.
#[inline(never)]
#[no_mangle]
pub extern "C" fn workload_spin(n: u64) -> u64 {
    let mut left = n;
    while left > 0 {
        // SAFETY: an empty asm block, which only hides `left` from the optimiser (the loop stays a loop).
        unsafe { std::arch::asm!("/* {0} */", inout(reg) left) };
        left -= 1;
    }
    left
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t with one CPU set, applied to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn number(args: &[String], i: usize) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| usage())
}

fn usage() -> ! {
    eprintln!(
        "usage: workload calls N | multi N | wait-then-calls N | open PATH N | getppid N THREADS | sleep N | sleep-getppid N M | getppid-then-sleep N SECONDS | tlb CPUS... SECONDS | spin CPU MS"
    );
    std::process::exit(2)
}

/// Threads pinned to `cpus` keep writing a shared mapping while the main thread, pinned to the first
/// CPU, drops its pages with madvise(MADV_DONTNEED): every drop makes the kernel shoot down the TLB
/// entries of the other CPUs with an IPI (`ipi:ipi_send_cpu`, or `ipi:ipi_send_cpumask` for several).
fn tlb(cpus: &[usize], seconds: u64) {
    const SIZE: usize = 1 << 16;
    // SAFETY: an anonymous private mapping, used only through the pointer below while it exists.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    } as usize;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = cpus[1..]
        .iter()
        .map(|&cpu| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin_to(cpu);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // SAFETY: inside the mapping, which outlives the threads.
                    unsafe { std::ptr::write_volatile((base + 64 * cpu) as *mut u8, 1) };
                }
            })
        })
        .collect();
    pin_to(cpus[0]);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < end {
        // SAFETY: the mapping is ours; the writers fault the page back in.
        unsafe { libc::madvise(base as *mut libc::c_void, SIZE, libc::MADV_DONTNEED) };
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writers.into_iter().for_each(|w| w.join().unwrap());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("calls") => (0..number(&args, 2)).for_each(|i| {
            // Read, so that the linker keeps the global for `uaddr()`.
            workload_add(i, u64::from(black_box(WORKLOAD_GLOBAL)) & 1);
        }),
        Some("multi") => (0..number(&args, 2)).for_each(|i| {
            workload_multi_one(i);
            (0..2).for_each(|_| {
                workload_multi_two(i);
            });
            (0..3).for_each(|_| {
                workload_multi_three(i);
            });
        }),
        Some("wait-then-calls") => {
            // Waits for a line on stdin (so a tracer can attach first), then calls.
            let _ = std::io::stdin().lock().lines().next();
            (0..number(&args, 2)).for_each(|i| {
                workload_add(i, 1);
            });
        }
        Some("open") => {
            let path = args.get(2).unwrap_or_else(|| usage());
            for _ in 0..number(&args, 3) {
                drop(std::fs::File::open(path));
            }
        }
        Some("getppid") => {
            let (calls, threads) = (number(&args, 2), number(&args, 3).max(1));
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let share = calls / threads + u64::from(t < calls % threads);
                    std::thread::spawn(move || {
                        pin_to(t as usize % std::thread::available_parallelism().map_or(1, |n| n.get()));
                        for _ in 0..share {
                            // SAFETY: getppid has no preconditions.
                            black_box(unsafe { libc::getppid() });
                        }
                    })
                })
                .collect();
            workers.into_iter().for_each(|w| w.join().unwrap());
        }
        Some("sleep") => {
            for _ in 0..number(&args, 2) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        Some("sleep-getppid") => {
            // Both kinds of system call from one process: N sleeps, then M getppid calls.
            for _ in 0..number(&args, 2) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            for _ in 0..number(&args, 3) {
                // SAFETY: getppid has no preconditions.
                black_box(unsafe { libc::getppid() });
            }
        }
        Some("getppid-then-sleep") => {
            // N getppid calls, then alive for SECONDS: a tracer run with `-c` keeps serving --metrics meanwhile.
            for _ in 0..number(&args, 2) {
                // SAFETY: getppid has no preconditions.
                black_box(unsafe { libc::getppid() });
            }
            std::thread::sleep(std::time::Duration::from_secs(number(&args, 3)));
        }
        Some("spin") => {
            // Pinned to CPU, busy in workload_spin for MS milliseconds (the clock read between rounds of
            // about a millisecond). Says first where workload_spin is, for stacks that print as addresses.
            println!("workload_spin at {:#x}", workload_spin as extern "C" fn(u64) -> u64 as usize);
            pin_to(number(&args, 2) as usize);
            let end = std::time::Instant::now() + std::time::Duration::from_millis(number(&args, 3));
            while std::time::Instant::now() < end {
                workload_spin(1_000_000);
            }
        }
        Some("tlb") if args.len() >= 4 => {
            let cpus: Vec<usize> =
                args[2..args.len() - 1].iter().map(|a| a.parse().unwrap_or_else(|_| usage())).collect();
            tlb(&cpus, number(&args, args.len() - 1));
        }
        _ => usage(),
    }
}
