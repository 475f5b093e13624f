//! tracefs: where the kernel's tracepoints are listed and described. It finds (and as root mounts)
//! the tracefs directory, reads the list of tracepoints, and parses a tracepoint's `format` file into
//! the fields a program reads from its context. Also the shell-style wildcards of attach points.
//!
//! A `format` file looks like this (the tabs shown as spaces here; the blank line ends the fields every
//! event shares, `common_type` to `common_pid`):
//!
//! ```text
//! name: sched_process_exec
//! ID: 365
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!
//!     field:__data_loc char[] filename;    offset:8;    size:4;    signed:0;
//!     field:pid_t pid;    offset:12;    size:4;    signed:1;
//!
//! print fmt: "filename=%s pid=%d", __get_str(filename), REC->pid
//! ```
//!
//! Trust `size` and `signed` over the C type: syscall tracepoints declare `int dfd` with `size:8;
//! signed:0;` because the kernel records every syscall argument as an `unsigned long`.

use nix::mount::MsFlags;
use std::ffi::CStr;
use std::io;
use std::path::{Path, PathBuf};

/// Where tracefs is usually mounted, newest place first.
const ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

const MOUNT_HELP: &str = "mount it with `mount -t tracefs nodev /sys/kernel/tracing` (as root)";

/// The tracefs directory: the first of /sys/kernel/tracing and /sys/kernel/debug/tracing that has
/// `events/`. When neither has, and we are root, tracefs is mounted at /sys/kernel/tracing (a
/// minimal system or a fresh container may not mount it at boot).
pub fn root() -> Result<PathBuf, String> {
    let mut denied = None;
    for dir in ROOTS {
        match std::fs::metadata(Path::new(dir).join("events")) {
            Ok(meta) if meta.is_dir() => return Ok(PathBuf::from(dir)),
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => denied = denied.or(Some(dir)),
            _ => {}
        }
    }
    // Root of a user namespace other than the host's (a rootless container) is not the tracefs owner.
    if let (Some(dir), false) = (denied, crate::privilege::initial_user_namespace()) {
        return Err(format!(
            "tracefs at {dir} is the host's and readable only by the host's root, not by root of this user \
             namespace (a rootless container): tracepoint records cannot be read here; rawtracepoint:NAME \
             probes the same events with their arguments from the kernel's BTF, and tracepoint:syscalls:* \
             works without tracefs"
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(match denied {
            Some(dir) => format!("tracefs at {dir} is readable only by root: run steadytrace as root"),
            None => format!("tracefs is not mounted: {MOUNT_HELP}"),
        });
    }
    mount_tracefs(c"/sys/kernel/tracing")?;
    let dir = Path::new(ROOTS[0]);
    if dir.join("events").is_dir() {
        Ok(dir.to_path_buf())
    } else {
        Err(format!(
            "tracefs was mounted at {} but has no `events` directory: is tracing built into this \
             kernel (CONFIG_FTRACE)?",
            dir.display()
        ))
    }
}

fn mount_tracefs(target: &CStr) -> Result<(), String> {
    let mounted = nix::mount::mount(Some("nodev"), target, Some("tracefs"), MsFlags::empty(), None::<&str>);
    let Err(errno) = mounted else { return Ok(()) };
    let err = io::Error::from(errno);
    Err(format!(
        "tracefs is not mounted, and mounting it at {} failed: {err}; {MOUNT_HELP}",
        target.to_string_lossy()
    ))
}

/// One field of a tracepoint's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Bytes from the start of the record (the context a tracepoint program gets).
    pub offset: u32,
    /// Bytes the field takes in the record: for `__data_loc` fields, the 4-byte locator.
    pub size: u32,
    pub signed: bool,
    pub kind: FieldKind,
    /// The declaration as the format file writes it (`char prev_comm[16]`): what `-lv` prints.
    pub decl: String,
}

/// How a program reads a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of `size` bytes (also enums, `bool`, and typedefs such as `pid_t`).
    Int,
    /// `char name[len]`: a string stored in the record, NUL-terminated unless it fills `len`.
    CharArray { len: u32 },
    /// `__u8 name[len]` (`u8`, `unsigned char`, `uint8_t`): bytes, such as an address (`daddr_v6`).
    ByteArray { len: u32 },
    /// `__data_loc char[] name`: a u32 in the record whose low 16 bits are the offset of the string
    /// from the start of the record and whose high 16 bits are its length (with the NUL).
    DataLocString,
    /// `__data_loc cpumask_t name`: a locator as for strings, pointing at a CPU bitmap.
    DataLocCpumask,
    /// A pointer (`void *`, `const char *`, `struct file *`): its 8 bytes are an address.
    Pointer,
    /// A pointer to a struct or union the kernel's BTF describes (raw tracepoint arguments): `args.prev->pid`.
    RecordPointer { to: u32 },
    /// Anything else, with its C type: arrays other than `char[N]` (`u8[16]`), other `__data_loc`
    /// and `__rel_loc` fields, flexible arrays (`char[]`, size 0), structs.
    Other(String),
}

/// A tracepoint's `format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// The directory the format file was in (`sched`); the file itself does not say it, so
    /// [`parse_format`] leaves it empty and [`read_format`] fills it in.
    pub category: String,
    pub name: String,
    /// The event id, as `perf_event_open` takes it for a tracepoint.
    pub id: u32,
    /// The tracepoint's own fields, in record order.
    pub fields: Vec<Field>,
    /// The fields every event starts with (`common_type`, `common_flags`, `common_preempt_count`,
    /// `common_pid`), before the blank line.
    pub common: Vec<Field>,
}

impl Format {
    /// The tracepoint's own field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|field| field.name == name)
    }
}

/// Reads and parses `ROOT/events/CATEGORY/NAME/format`.
pub fn read_format(root: &Path, category: &str, name: &str) -> Result<Format, String> {
    let path = root.join("events").join(category).join(name).join("format");
    let text = std::fs::read_to_string(&path).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => {
            format!("there is no tracepoint `{category}:{name}` ({} does not exist)", path.display())
        }
        _ => format!("could not read {}: {err}", path.display()),
    })?;
    let mut format = parse_format(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    format.category = category.to_string();
    Ok(format)
}

/// Parses the text of a `format` file. The fields before the first blank line after `format:` are
/// the common ones; the rest, up to `print fmt:`, belong to the tracepoint.
pub fn parse_format(text: &str) -> Result<Format, String> {
    let (mut name, mut id) = (None, None);
    let (mut common, mut fields) = (Vec::new(), Vec::new());
    let mut in_common = true;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(value) = line.strip_prefix("name:") {
            name = Some(value.trim().to_string());
        } else if let Some(value) = line.strip_prefix("ID:") {
            let value = value.trim();
            id = Some(value.parse().map_err(|_| format!("the event id `{value}` is not a number"))?);
        } else if trimmed.starts_with("field:") {
            let field = parse_field(trimmed)?;
            if in_common {
                common.push(field)
            } else {
                fields.push(field)
            }
        } else if trimmed.is_empty() {
            // The blank line after the common fields ends them.
            in_common = common.is_empty();
        } else if line.starts_with("print fmt:") {
            break;
        }
    }
    let name = name.ok_or("the format has no `name:` line")?;
    let id = id.ok_or("the format has no `ID:` line")?;
    Ok(Format { category: String::new(), name, id, fields, common })
}

/// Parses `field:DECL;\toffset:N;\tsize:N;\tsigned:N;` (`signed` is missing on old kernels).
fn parse_field(line: &str) -> Result<Field, String> {
    let mut parts = line.split(';').map(str::trim).filter(|part| !part.is_empty());
    let decl = parts.next().and_then(|part| part.strip_prefix("field:")).unwrap_or_default().trim();
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in parts {
        let (key, value) = part.split_once(':').unwrap_or((part, ""));
        let number =
            || value.trim().parse::<u32>().map_err(|_| format!("`{part}` in `{line}` is not a number"));
        match key {
            "offset" => offset = Some(number()?),
            "size" => size = Some(number()?),
            "signed" => signed = number()? != 0,
            _ => {}
        }
    }
    let (offset, size) = match (offset, size) {
        (Some(offset), Some(size)) => (offset, size),
        _ => return Err(format!("the field line `{line}` has no offset or no size")),
    };
    let (type_, name, array) =
        split_decl(decl).ok_or_else(|| format!("cannot read the field declaration `{decl}`"))?;
    let kind = classify(type_, array, size);
    Ok(Field { name: name.to_string(), offset, size, signed, kind, decl: decl.to_string() })
}

/// The C type, the field name and, for `name[N]` and `name[]`, the array length: `char
/// prev_comm[16]` is ("char", "prev_comm", Some(Some(16))). In `__data_loc char[] filename` the
/// brackets belong to the type.
fn split_decl(decl: &str) -> Option<(&str, &str, Option<Option<u32>>)> {
    let (base, array) = match decl.strip_suffix(']') {
        Some(head) => {
            let open = head.rfind('[')?;
            let len = head[open + 1..].trim();
            (head[..open].trim_end(), Some(if len.is_empty() { None } else { Some(len.parse().ok()?) }))
        }
        None => (decl, None),
    };
    let split = base.rfind(|c: char| c.is_whitespace() || c == '*')?;
    let (type_, name) = (base[..=split].trim(), &base[split + 1..]);
    let identifier = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (identifier && !name.is_empty() && !type_.is_empty()).then_some((type_, name, array))
}

fn classify(type_: &str, array: Option<Option<u32>>, size: u32) -> FieldKind {
    if let Some(inner) = type_.strip_prefix("__data_loc ") {
        return match inner.trim() {
            "char[]" | "const char[]" => FieldKind::DataLocString,
            "cpumask_t" => FieldKind::DataLocCpumask,
            _ => FieldKind::Other(type_.to_string()),
        };
    }
    match array {
        Some(Some(len)) if len > 0 && matches!(type_, "char" | "const char") => FieldKind::CharArray { len },
        Some(Some(len))
            if len > 0 && len == size && matches!(type_, "__u8" | "u8" | "unsigned char" | "uint8_t") =>
        {
            FieldKind::ByteArray { len }
        }
        Some(len) => FieldKind::Other(format!("{type_}[{}]", len.map(|n| n.to_string()).unwrap_or_default())),
        None if type_.contains('*') => FieldKind::Pointer,
        None if type_.starts_with("__rel_loc ")
            || type_.starts_with("struct ")
            || type_.starts_with("union ") =>
        {
            FieldKind::Other(type_.to_string())
        }
        None if matches!(size, 1 | 2 | 4 | 8) => FieldKind::Int,
        None => FieldKind::Other(type_.to_string()),
    }
}

/// Every tracepoint as (category, name), sorted. They come from `available_events`, which lists
/// only events a probe can attach to: `events/` also has directories for ftrace's own record types
/// (`ftrace:function`, `ftrace:print`), which are not tracepoints. Without `available_events`, the
/// `events/` directories that have a `format` file are listed, less `ftrace`.
pub fn tracepoints(root: &Path) -> Vec<(String, String)> {
    let mut list: Vec<(String, String)> = match std::fs::read_to_string(root.join("available_events")) {
        Ok(text) => text
            .lines()
            .filter_map(|line| line.trim().split_once(':'))
            .map(|(category, name)| (category.to_string(), name.to_string()))
            .collect(),
        Err(_) => scan_events(&root.join("events")),
    };
    list.sort();
    list.dedup();
    list
}

fn scan_events(events: &Path) -> Vec<(String, String)> {
    let names = |dir: &Path| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        entries.flatten().filter_map(|entry| entry.file_name().into_string().ok()).collect()
    };
    let mut list = Vec::new();
    for category in names(events) {
        if category == "ftrace" {
            continue;
        }
        for name in names(&events.join(&category)) {
            if events.join(&category).join(&name).join("format").is_file() {
                list.push((category.clone(), name));
            }
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events/ipi/ipi_send_cpumask/format` on Linux 6.18.
    const IPI_SEND_CPUMASK: &str = concat!(
        "name: ipi_send_cpumask\n",
        "ID: 353\n",
        "format:\n",
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n",
        "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n",
        "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n",
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n",
        "\n",
        "\tfield:__data_loc cpumask_t cpumask;\toffset:8;\tsize:4;\tsigned:0;\n",
        "\tfield:void * callsite;\toffset:16;\tsize:8;\tsigned:0;\n",
        "\tfield:void * callback;\toffset:24;\tsize:8;\tsigned:0;\n",
        "\n",
        "print fmt: \"cpumask=%s callsite=%pS callback=%pS\", __get_cpumask(cpumask), ",
        "REC->callsite, REC->callback\n",
    );

    /// `events/syscalls/sys_enter_openat/format` on Linux 6.18.
    const SYS_ENTER_OPENAT: &str = concat!(
        "name: sys_enter_openat\n",
        "ID: 782\n",
        "format:\n",
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n",
        "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n",
        "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n",
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n",
        "\n",
        "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n",
        "\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n",
        "\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n",
        "\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n",
        "\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;\n",
        "\n",
        "print fmt: \"dfd: 0x%08lx, filename: 0x%08lx, flags: 0x%08lx, mode: 0x%08lx\", ((unsigned ",
        "long)(REC->dfd)), ((unsigned long)(REC->filename)), ((unsigned long)(REC->flags)), ",
        "((unsigned long)(REC->mode))\n",
    );

    /// `events/sched/sched_process_exec/format` on Linux 6.18.
    const SCHED_PROCESS_EXEC: &str = concat!(
        "name: sched_process_exec\n",
        "ID: 365\n",
        "format:\n",
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n",
        "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n",
        "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n",
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n",
        "\n",
        "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n",
        "\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n",
        "\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n",
        "\n",
        "print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid\n",
    );

    /// `events/sched/sched_switch/format` on Linux 6.18.
    const SCHED_SWITCH: &str = concat!(
        "name: sched_switch\n",
        "ID: 372\n",
        "format:\n",
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n",
        "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n",
        "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n",
        "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n",
        "\n",
        "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n",
        "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n",
        "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n",
        "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n",
        "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n",
        "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n",
        "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n",
        "\n",
        "print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s ",
        "next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, ",
        "(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | ",
        "0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ",
        "((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | ",
        "0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", { 0x00000001, \"S\" }, { 0x00000002, ",
        "\"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { ",
        "0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", ",
        "REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | ",
        "0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, ",
        "REC->next_pid, REC->next_prio\n",
    );

    fn int(name: &str, offset: u32, size: u32, signed: bool, decl: &str) -> Field {
        Field { name: name.into(), offset, size, signed, kind: FieldKind::Int, decl: decl.into() }
    }

    #[test]
    fn reads_a_cpumask_and_pointers() {
        let format = parse_format(IPI_SEND_CPUMASK).unwrap();
        assert_eq!(
            (format.name.as_str(), format.id, format.category.as_str()),
            ("ipi_send_cpumask", 353, "")
        );
        assert_eq!(
            format.common,
            [
                int("common_type", 0, 2, false, "unsigned short common_type"),
                int("common_flags", 2, 1, false, "unsigned char common_flags"),
                int("common_preempt_count", 3, 1, false, "unsigned char common_preempt_count"),
                int("common_pid", 4, 4, true, "int common_pid"),
            ]
        );
        let kinds: Vec<_> =
            format.fields.iter().map(|f| (f.name.as_str(), f.offset, f.size, &f.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("cpumask", 8, 4, &FieldKind::DataLocCpumask),
                ("callsite", 16, 8, &FieldKind::Pointer),
                ("callback", 24, 8, &FieldKind::Pointer),
            ]
        );
        assert_eq!(format.fields[0].decl, "__data_loc cpumask_t cpumask");
        assert_eq!(format.fields[1].decl, "void * callsite");
    }

    #[test]
    fn syscall_arguments_are_eight_bytes_whatever_their_type() {
        let format = parse_format(SYS_ENTER_OPENAT).unwrap();
        assert_eq!(format.id, 782);
        assert_eq!(
            format.fields,
            [
                int("__syscall_nr", 8, 4, true, "int __syscall_nr"),
                int("dfd", 16, 8, false, "int dfd"),
                Field {
                    name: "filename".into(),
                    offset: 24,
                    size: 8,
                    signed: false,
                    kind: FieldKind::Pointer,
                    decl: "const char * filename".into()
                },
                int("flags", 32, 8, false, "int flags"),
                int("mode", 40, 8, false, "umode_t mode"),
            ]
        );
    }

    #[test]
    fn reads_a_data_loc_string() {
        let format = parse_format(SCHED_PROCESS_EXEC).unwrap();
        let filename = format.field("filename").unwrap();
        assert_eq!((filename.offset, filename.size, &filename.kind), (8, 4, &FieldKind::DataLocString));
        assert_eq!(filename.decl, "__data_loc char[] filename");
        assert_eq!(format.field("old_pid"), Some(&int("old_pid", 16, 4, true, "pid_t old_pid")));
        assert_eq!(format.field("common_pid"), None);
    }

    #[test]
    fn reads_char_arrays() {
        let format = parse_format(SCHED_SWITCH).unwrap();
        let names: Vec<_> = format.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"]
        );
        let comm = format.field("next_comm").unwrap();
        assert_eq!((comm.offset, comm.size, &comm.kind), (40, 16, &FieldKind::CharArray { len: 16 }));
        assert_eq!(comm.decl, "char next_comm[16]");
        assert_eq!(format.field("prev_state"), Some(&int("prev_state", 32, 8, true, "long prev_state")));
    }

    #[test]
    fn byte_arrays_are_bytes_and_other_arrays_are_not_read() {
        assert_eq!(classify("__u8", Some(Some(4)), 4), FieldKind::ByteArray { len: 4 });
        assert_eq!(classify("unsigned char", Some(Some(16)), 16), FieldKind::ByteArray { len: 16 });
        assert_eq!(classify("__u16", Some(Some(8)), 16), FieldKind::Other("__u16[8]".into()));
        assert_eq!(classify("__u8", Some(None), 0), FieldKind::Other("__u8[]".into()));
    }

    #[test]
    fn classifies_unusual_declarations() {
        let kind = |decl: &str, size| {
            parse_field(&format!("field:{decl};\toffset:8;\tsize:{size};\tsigned:0;"))
                .map(|f| (f.name, f.kind))
        };
        assert_eq!(kind("u8 saddr[16]", 16), Ok(("saddr".into(), FieldKind::ByteArray { len: 16 })));
        assert_eq!(kind("u32 ips[4]", 16), Ok(("ips".into(), FieldKind::Other("u32[4]".into()))));
        assert_eq!(kind("char buf[]", 0), Ok(("buf".into(), FieldKind::Other("char[]".into()))));
        assert_eq!(
            kind("__data_loc u64[] ips", 4),
            Ok(("ips".into(), FieldKind::Other("__data_loc u64[]".into())))
        );
        assert_eq!(kind("const char *const * argv", 8), Ok(("argv".into(), FieldKind::Pointer)));
        assert_eq!(kind("const void* p", 8), Ok(("p".into(), FieldKind::Pointer)));
        assert_eq!(kind("char *name", 8), Ok(("name".into(), FieldKind::Pointer)));
        assert_eq!(kind("enum zone_type zone", 4), Ok(("zone".into(), FieldKind::Int)));
        assert!(kind("nonsense", 4).is_err());
        assert!(parse_field("field:int x;\toffset:8;").unwrap_err().contains("no offset or no size"));
        assert!(parse_format("name: x\nformat:\n").unwrap_err().contains("`ID:`"));
    }

    #[test]
    fn reads_the_real_tracefs() {
        // Needs root (tracefs is readable only by root).
        if !nix::unistd::geteuid().is_root() {
            bpf::testing::skip("reads_the_real_tracefs", "needs root");
            return;
        }
        let root = root().unwrap();
        let all = tracepoints(&root);
        assert!(all.iter().any(|(c, n)| c == "sched" && n == "sched_switch"), "{} tracepoints", all.len());
        assert!(!all.iter().any(|(c, _)| c == "ftrace"));
        let format = read_format(&root, "sched", "sched_switch").unwrap();
        assert_eq!(format.category, "sched");
        assert_eq!(format.field("prev_comm").unwrap().kind, FieldKind::CharArray { len: 16 });
        assert!(read_format(&root, "sched", "nothing")
            .unwrap_err()
            .contains("no tracepoint `sched:nothing`"));
    }
}
