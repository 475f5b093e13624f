//! A perf event with a ring on every online CPU, kept through CPU hotplug. An event whose CPU goes offline
//! records nothing more, also once the CPU is back; so an event whose enabled time stopped growing while its
//! CPU is online is opened anew, and a CPU that comes online without one gets one (as the hotplug thread
//! does for the probes' events).

use bpf::perf_ring::PerfRing;
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

/// How often the events are checked for a CPU that came back or appeared.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// An event [`CpuRings`] keeps: one with a [`PerfRing`].
pub trait CpuEvent: Sized {
    fn ring(&self) -> &PerfRing;
}

impl CpuEvent for bpf::mappings::MappingEvents {
    fn ring(&self) -> &PerfRing {
        self.ring()
    }
}

impl CpuEvent for bpf::perf_output::PerfOutput {
    fn ring(&self) -> &PerfRing {
        self.ring()
    }
}

pub struct CpuRings<E> {
    events: Vec<E>,
    open: Box<dyn Fn(u32) -> io::Result<E> + Send>,
    /// Each event's enabled time at the last check.
    enabled: HashMap<u32, u64>,
    next_check: Instant,
}

impl<E: CpuEvent> CpuRings<E> {
    /// The events of `cpus`, each opened by `open`.
    pub fn open(
        cpus: &[u32],
        open: impl Fn(u32) -> io::Result<E> + Send + 'static,
    ) -> io::Result<CpuRings<E>> {
        let events = cpus.iter().map(|&cpu| open(cpu)).collect::<io::Result<_>>()?;
        Ok(CpuRings {
            events,
            open: Box::new(open),
            enabled: HashMap::new(),
            next_check: Instant::now() + CHECK_EVERY,
        })
    }

    pub fn events(&self) -> &[E] {
        &self.events
    }

    pub fn events_mut(&mut self) -> &mut [E] {
        &mut self.events
    }

    /// Every [`CHECK_EVERY`]: opens anew the events of CPUs that went offline and came back, and one on each
    /// CPU that came online without one; `opened` gets each new event and the one it replaces, if any (to
    /// read what that still holds).
    pub fn keep_alive(&mut self, now: Instant, mut opened: impl FnMut(&E, Option<E>)) {
        if now < self.next_check {
            return;
        }
        self.next_check = now + CHECK_EVERY;
        let Ok(online) = crate::online_cpus::online() else { return };
        for cpu in online {
            let at = self.events.iter().position(|e| e.ring().cpu() == cpu);
            // An event that cannot be read any more (error state) is opened anew too.
            let stopped = at.is_none_or(|i| match self.events[i].ring().enabled_time() {
                Ok(time) => self.enabled.insert(cpu, time).is_some_and(|before| time <= before),
                Err(_) => true,
            });
            if !stopped {
                continue;
            }
            // A CPU still coming up refuses the event: tried again at the next check.
            let Ok(fresh) = (self.open)(cpu) else { continue };
            self.enabled.remove(&cpu);
            match at {
                Some(i) => {
                    let old = std::mem::replace(&mut self.events[i], fresh);
                    opened(&self.events[i], Some(old));
                }
                None => {
                    self.events.push(fresh);
                    opened(self.events.last().expect("just pushed"), None);
                }
            }
        }
    }
}
