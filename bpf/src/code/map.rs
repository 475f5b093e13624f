//! BPF maps as a plain description: their kinds and sizes, what code generation asks for and `sys/map.rs`
//! creates.

/// The kinds of map steadytrace uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    Hash,
    /// One value per CPU for each key: updates from different CPUs never race.
    PercpuHash,
    /// A hash whose new keys evict the least recently used ones once it is full.
    LruHash,
    /// A per-CPU hash with LRU eviction.
    LruPercpuHash,
    Array,
    PercpuArray,
    /// A ring buffer shared by all CPUs; unlike per-CPU perf buffers it survives CPU hotplug.
    RingBuf,
    /// Program file descriptors, the targets of tail calls.
    ProgArray,
    /// Stacks of instruction pointers, stored by `bpf_get_stackid` under an id.
    StackTrace,
    /// A perf event per CPU, the rings `bpf_skb_output` writes into.
    PerfEventArray,
}

impl MapKind {
    /// The kernel's `BPF_MAP_TYPE_*` number, which an ELF object's map definitions give.
    pub(crate) fn number(self) -> u32 {
        match self {
            MapKind::Hash => 1,
            MapKind::Array => 2,
            MapKind::ProgArray => 3,
            MapKind::PerfEventArray => 4,
            MapKind::PercpuHash => 5,
            MapKind::PercpuArray => 6,
            MapKind::StackTrace => 7,
            MapKind::LruHash => 9,
            MapKind::LruPercpuHash => 10,
            MapKind::RingBuf => 27,
        }
    }

    /// Its name in a BPF filesystem's `delegate_maps` option (the kernel's `BPF_MAP_TYPE_*`, in lower case).
    pub fn delegation_name(self) -> &'static str {
        match self {
            MapKind::Hash => "hash",
            MapKind::PercpuHash => "percpu_hash",
            MapKind::LruHash => "lru_hash",
            MapKind::LruPercpuHash => "lru_percpu_hash",
            MapKind::Array => "array",
            MapKind::PercpuArray => "percpu_array",
            MapKind::RingBuf => "ringbuf",
            MapKind::ProgArray => "prog_array",
            MapKind::StackTrace => "stack_trace",
            MapKind::PerfEventArray => "perf_event_array",
        }
    }
}

/// What to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}
