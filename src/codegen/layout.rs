//! The map layout shared by the generated code and the runtime: which map number is which map.
//!
//! The code refers to maps by number (the index into the maps the runtime creates, in order); the
//! runtime finds the same maps through this type, never through bare numbers.

/// The maps every compiled script has, whatever it does. They come first, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedMap {
    /// The ring buffer carrying every output record.
    Events,
    /// The per-CPU counter of records the full ring buffer refused.
    Lost,
    /// The program array the dispatcher tail-calls into; slot `i` holds program `i`.
    Programs,
    /// The one-element array whose value is set once `exit()` ran: from then on BEGIN and interval
    /// probes do nothing. They read it directly (no helper call): three instructions per firing.
    Exited,
    /// One array element of a counter per script map: updates that failed (the map was full). The programs
    /// add to it directly (no helper call), only when an update failed.
    Dropped,
}

impl FixedMap {
    /// Every fixed map, in map number order.
    pub const ALL: [FixedMap; 5] =
        [FixedMap::Events, FixedMap::Lost, FixedMap::Programs, FixedMap::Exited, FixedMap::Dropped];

    /// The map's number.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One of the script's maps (`@name`): its position in the script's map table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptMapId(pub usize);

/// Where each map of a compiled script is: the fixed maps, then the script's maps in declaration
/// order, then the stack-trace maps, then (for a script capturing packets) the packets' perf event array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapLayout {
    script_maps: usize,
    stack_maps: usize,
}

impl MapLayout {
    pub fn new(script_maps: usize, stack_maps: usize) -> MapLayout {
        MapLayout { script_maps, stack_maps }
    }

    /// The script map whose map number is `map`, if it is one.
    pub fn script_id(&self, map: usize) -> Option<ScriptMapId> {
        self.script_maps().contains(&map).then(|| ScriptMapId(map - FixedMap::ALL.len()))
    }

    /// The map number of a script map.
    pub fn script(&self, id: ScriptMapId) -> usize {
        debug_assert!(id.0 < self.script_maps);
        FixedMap::ALL.len() + id.0
    }

    /// The map numbers of the script's maps.
    pub fn script_maps(&self) -> std::ops::Range<usize> {
        FixedMap::ALL.len()..FixedMap::ALL.len() + self.script_maps
    }

    /// The map number of the `i`th stack-trace map.
    pub fn stack(&self, i: usize) -> usize {
        self.script_maps().end + i
    }

    /// The map numbers from the first stack-trace map on.
    pub fn stack_maps(&self) -> std::ops::RangeFrom<usize> {
        self.script_maps().end..
    }

    /// The map number of the perf event array `skboutput()` writes into, where the script has one.
    pub fn packets(&self) -> usize {
        self.script_maps().end + self.stack_maps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_maps_follow_the_fixed_ones_and_stacks_follow_them() {
        let layout = MapLayout::new(2, 1);
        assert_eq!(FixedMap::ALL.map(FixedMap::index), [0, 1, 2, 3, 4]);
        assert_eq!(layout.script(ScriptMapId(0)), 5);
        assert_eq!(layout.script_maps(), 5..7);
        assert_eq!(layout.stack(0), 7);
        assert_eq!(layout.script_id(6), Some(ScriptMapId(1)));
        assert_eq!(layout.script_id(7), None);
        assert_eq!(layout.packets(), 8);
    }
}
