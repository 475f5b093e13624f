//! What `--metrics` reads at each scrape: its own handles on the script's maps (and the stack maps their
//! keys refer to), snapshotted and encoded apart from the event reader.

use super::maps::{self, StackTable};
use crate::codegen::Compiled;
use crate::metrics::exposition;
use crate::sema::maps::MapDecl;
use bpf::Map;
use std::io;

pub struct MapSource {
    maps: Vec<(Map, MapDecl)>,
    stack_maps: Vec<Map>,
    stack_keys: Vec<(bool, u8)>,
}

impl MapSource {
    pub fn new(compiled: &Compiled, all_maps: &[Map]) -> io::Result<MapSource> {
        let maps = all_maps[compiled.layout.script_maps()]
            .iter()
            .zip(&compiled.script_maps)
            .map(|(map, decl)| Ok((map.try_clone()?, decl.clone())))
            .collect::<io::Result<Vec<_>>>()?;
        let stack_maps = all_maps[compiled.layout.stack_maps()]
            .iter()
            .map(Map::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        Ok(MapSource { maps, stack_maps, stack_keys: compiled.stack_maps.clone() })
    }

    /// The maps now, as OpenMetrics text; a map that cannot be read is left out of this scrape.
    pub fn scrape(&self) -> String {
        let mut stacks = StackTable::new(&self.stack_maps, &self.stack_keys);
        let snapshots =
            self.maps.iter().filter_map(|(map, decl)| maps::snapshot(map, decl, &mut stacks).ok()).collect();
        exposition::encode(snapshots).unwrap_or_else(|_| "# EOF\n".into())
    }
}
