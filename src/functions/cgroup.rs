//! `cgroup_path(id[, filter])`: a cgroup id whose paths are looked up when it is printed
//! (`output/cgroup.rs`), so a reused id may print another path, as in current bpftrace.
//! `cgroupid(path)`: the id of the cgroup at `path`, looked up when the script is compiled.
//! `container_id([id])` (steadytrace's, not bpftrace's): a cgroup id, the current task's by default, printed as
//! the 64-hex id of the container whose cgroup it is, or empty (`output/container.rs`), looked up when printed.

use super::{Call, Emit, Function};
use crate::codegen::frame::Val;
use crate::lang::ast::ExprKind;
use crate::lang::Diagnostic;
use crate::sema::types::Type;
use crate::sema::Env;
use bpf::Helper;

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "cgroup_path",
        check: |env: &Env, call: &Call| {
            call.arity(1, 2)?;
            let ty = env.type_of(&call.args[0])?;
            if !ty.is_int() {
                return Err(Diagnostic::error(
                    call.args[0].span,
                    format!("`cgroup_path()` takes a cgroup id, not {ty}"),
                )
                .with_help("for example `cgroup_path(cgroup)`"));
            }
            let filter = match call.args.get(1).map(|a| &a.kind) {
            None => "",
            Some(ExprKind::Str(filter)) => filter,
            Some(_) => {
                return Err(Diagnostic::error(
                    call.args[1].span,
                    "the hierarchy filter of `cgroup_path()` is a string literal, such as \"unified\" or \"cpu*\"",
                ))
            }
        };
            Ok(Type::CgroupPath { filter: filter.into() })
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, _| {
            let id = gen.int(&args[0])?;
            gen.store_val(id, offset);
            Ok(())
        }),
    },
    Function {
        name: "container_id",
        check: |env: &Env, call: &Call| {
            call.arity(0, 1)?;
            if let Some(arg) = call.args.first() {
                let ty = env.type_of(arg)?;
                if !ty.is_int() {
                    return Err(Diagnostic::error(
                        arg.span,
                        format!("`container_id()` takes a cgroup id, not {ty}"),
                    )
                    .with_help(
                        "for example `container_id(cgroup)`, or `container_id()` for the current task's",
                    ));
                }
            }
            Ok(Type::ContainerId)
        },
        check_statement: None,
        emit: Emit::Into(|gen, args, offset, _, span| {
            let id = match args.first() {
                Some(arg) => gen.int(arg)?,
                None => {
                    gen.asm.call(Helper::GetCurrentCgroupId.id());
                    gen.take_r0(span)?
                }
            };
            gen.store_val(id, offset);
            Ok(())
        }),
    },
    Function {
        name: "cgroupid",
        check: |_, call| cgroup_id(call).map(|_| Type::U64),
        check_statement: None,
        emit: Emit::Int(|_, args, span| cgroup_id(&Call { name: "cgroupid", args, span }).map(Val::Imm)),
    },
];

/// The id of the cgroup v2 directory `cgroupid("path")` names: its inode number, which is what the
/// kernel gives as the cgroup's id (`cgroup` in a probe, `bpf_get_current_cgroup_id`).
fn cgroup_id(call: &Call) -> Result<u64, Diagnostic> {
    use std::os::unix::fs::MetadataExt;
    call.arity(1, 1)?;
    let arg = &call.args[0];
    let ExprKind::Str(path) = &arg.kind else {
        return Err(Diagnostic::error(arg.span, "`cgroupid()` takes a cgroup's path as a string literal"));
    };
    let metadata = std::fs::metadata(path)
        .map_err(|e| Diagnostic::error(arg.span, format!("cannot read the cgroup `{path}`: {e}")))?;
    let on_cgroup2 = nix::sys::statfs::statfs(path.as_str())
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    if !metadata.is_dir() || !on_cgroup2 {
        return Err(Diagnostic::error(arg.span, format!("`{path}` is no cgroup v2 directory")).with_help(
            "cgroupid() takes a directory under the cgroup2 mount, e.g. \"/sys/fs/cgroup/system.slice\"",
        ));
    }
    Ok(metadata.ino())
}
