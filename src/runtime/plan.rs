//! The probe schedule of a script, read once from its providers: which programs steadytrace fires itself (at
//! BEGIN or END, on SIGUSR1, every period on its timer thread, on request with `--test` or `--bench`) and
//! which the kernel fires. The rest of the runtime asks this table, never a provider's `schedule()`.

use crate::codegen::Compiled;
use crate::probes::Schedule;
use std::time::Duration;

pub struct Plan {
    /// Each program's schedule, in the script's order (that of `Compiled::programs`).
    schedules: Vec<Schedule>,
}

impl Plan {
    pub fn new(compiled: &Compiled) -> Plan {
        Plan { schedules: compiled.programs.iter().map(|p| p.point.provider.schedule()).collect() }
    }

    /// Each program's schedule, in the script's order.
    pub fn schedules(&self) -> impl Iterator<Item = Schedule> + '_ {
        self.schedules.iter().copied()
    }

    /// The programs fired on `schedule` (by their index), in the script's order.
    pub fn programs(&self, schedule: Schedule) -> impl Iterator<Item = usize> + '_ {
        self.schedules().enumerate().filter(move |&(_, s)| s == schedule).map(|(index, _)| index)
    }

    /// Whether any program is fired on `schedule`.
    pub fn has(&self, schedule: Schedule) -> bool {
        self.schedules.contains(&schedule)
    }

    /// Whether steadytrace fires program `index` itself (else the kernel does).
    pub fn fired_by_us(&self, index: usize) -> bool {
        self.schedules[index] != Schedule::Kernel
    }

    /// Whether program `index` runs only in its own mode (`--test`, `--bench`), never while tracing.
    pub fn on_demand(&self, index: usize) -> bool {
        self.schedules[index].on_demand()
    }

    /// Whether a trace has a program steadytrace fires itself.
    pub fn fires_while_tracing(&self) -> bool {
        (0..self.schedules.len()).any(|i| self.fired_by_us(i) && !self.on_demand(i))
    }

    /// The interval programs (by index) and their periods, in the script's order.
    pub fn intervals(&self) -> impl Iterator<Item = (usize, Duration)> + '_ {
        self.schedules().enumerate().filter_map(|(index, schedule)| match schedule {
            Schedule::Every(period) => Some((index, period)),
            _ => None,
        })
    }

    /// How many probes a trace attaches: all but those run on demand.
    pub fn traced(&self) -> usize {
        self.schedules.iter().filter(|s| !s.on_demand()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(schedules: &[Schedule]) -> Plan {
        Plan { schedules: schedules.to_vec() }
    }

    #[test]
    fn a_trace_counts_every_probe_but_those_run_on_demand() {
        let ms = Duration::from_millis;
        let plan = plan(&[Schedule::Begin, Schedule::Test, Schedule::Every(ms(10)), Schedule::Kernel]);
        assert_eq!(plan.traced(), 3);
        assert_eq!(plan.intervals().collect::<Vec<_>>(), [(2, ms(10))]);
        assert_eq!(plan.programs(Schedule::Begin).collect::<Vec<_>>(), [0]);
        assert!(plan.fires_while_tracing() && !plan.fired_by_us(3) && plan.on_demand(1));
    }

    #[test]
    fn only_test_probes_and_the_kernel_fire_nothing_of_ours_while_tracing() {
        let plan = plan(&[Schedule::Test, Schedule::Kernel, Schedule::Bench]);
        assert!(!plan.fires_while_tracing());
        assert!(plan.has(Schedule::Bench) && !plan.has(Schedule::End));
        assert_eq!(plan.intervals().count(), 0);
    }
}
