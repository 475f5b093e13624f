//! Output: turning ring buffer records into text or JSON as bpftrace prints them.

pub mod cgroup;
pub mod container;
pub mod decode;
pub mod finehist;
mod gfp;
pub mod json;
pub mod merge;
pub mod pcap;
pub mod printf;
#[cfg(test)]
mod test_values;
pub mod text;
pub mod timestamp;
pub mod tseries;
pub mod value;
pub mod writer;

use crate::codegen::record::{ArgSource, Record, Records, TextAction};
use printf::Value as Arg;
use value::Value;

/// What one record asks userspace to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Printf(Vec<u8>),
    /// `errorf()`/`warnf()`: the message and where the call is.
    Log(&'a crate::codegen::record::Log, Vec<u8>),
    /// `join()`'s strings, joined (without a newline).
    Join(Vec<u8>),
    /// `cat()`: the name of the file to print.
    Cat(Vec<u8>),
    /// `system()`: the command to run.
    System(Vec<u8>),
    Exit(i64),
    PrintMap {
        map: usize,
        top: Option<usize>,
        div: Option<u64>,
    },
    ClearMap(usize),
    ZeroMap(usize),
    /// `unwatch()`: the address whose watchpoints go.
    Unwatch(u64),
    PrintValue(Value),
    Time(&'a str),
    /// A warning for stderr, rendered (a declared map's failed update).
    Warning(String),
    /// With `-k`, a probe read that failed, and the helper's return value.
    ReadFailed(&'a crate::codegen::record::ReadFailure, i64),
    /// `dw_ustack`'s copy of a user stack, handed to the stack resolver: nothing to print.
    StackCopied,
}

/// Decodes a record; `None` for one too short or of an unknown id (it cannot come from our programs).
pub fn decode<'a>(
    records: &'a Records,
    data: &[u8],
    stacks: &mut dyn decode::StackResolver,
) -> Option<Event<'a>> {
    let word = |offset: usize| -> Option<u64> {
        Some(u64::from_le_bytes(data.get(offset..offset + 8)?.try_into().ok()?))
    };
    let (mut names, mut shown) = (vec![], vec![]);
    Some(match records.get(word(0)?)? {
        Record::Exit => Event::Exit(word(8)? as i64),
        Record::Printf { pieces, args, action, log } => {
            for arg in args {
                match arg {
                    ArgSource::Username { offset } => {
                        names.push(user_name(word(*offset)? as u32).into_bytes())
                    }
                    ArgSource::Symbol { offset, user } => {
                        let (addr, pid) = (word(*offset)?, word(offset + 8).unwrap_or(0));
                        names.push(stacks.symbol(*user, addr, pid as u32).into_bytes())
                    }
                    ArgSource::Args { offset, fields } => {
                        let record = args_record(fields, data.get(*offset..)?, stacks)?;
                        let text = text::print_value(&record);
                        names.push(text[..text.len() - 1].to_vec())
                    }
                    ArgSource::Function { offset, names: table } => {
                        names.push(decode::function_name(table, word(*offset)?))
                    }
                    ArgSource::Enum { offset, def } => {
                        let value = word(*offset)?;
                        names.push(match def.variant(value as i64) {
                            Some(name) => name.as_bytes().to_vec(),
                            None => value.to_string().into_bytes(),
                        })
                    }
                    ArgSource::Inet { offset } => {
                        names.push(decode::inet(data.get(*offset..offset + 24)?).into_bytes())
                    }
                    ArgSource::MacAddr { offset } => {
                        names.push(decode::mac_address(data.get(*offset..offset + 6)?).into_bytes())
                    }
                    ArgSource::Timestamp { offset, format } => {
                        names.push(timestamp::format(format, word(*offset)?))
                    }
                    ArgSource::CgroupPath { offset, filter } => {
                        names.push(cgroup::paths(word(*offset)?, filter).into_bytes())
                    }
                    ArgSource::ContainerId { offset } => {
                        names.push(container::container_id(word(*offset)?).into_bytes())
                    }
                    ArgSource::Cpumask { offset, bytes } => {
                        names.push(decode::cpu_list(data.get(*offset..offset + bytes)?).into_bytes())
                    }
                    ArgSource::Stack { offset, stack } => {
                        let bytes = data.get(*offset..)?;
                        let id = i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
                        let pid = u64::from_le_bytes(
                            bytes.get(8..16).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]),
                        );
                        let frames = stacks.frames(stack, id, pid as u32);
                        names.push(value::Stack::new(stack.mode, frames).value_text());
                    }
                    ArgSource::Value { offset, ty } => {
                        shown.push(decode::value(ty, data.get(*offset..)?, stacks))
                    }
                    _ => {}
                }
            }
            let (mut names, mut shown) = (names.iter(), shown.into_iter());
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(match arg {
                    ArgSource::ConstInt { value, signed } => Arg::Int { value: *value, signed: *signed },
                    ArgSource::Int { offset, signed } => Arg::Int { value: word(*offset)?, signed: *signed },
                    ArgSource::Str { offset, size } => Arg::Str(data.get(*offset..offset + size)?),
                    ArgSource::ConstStr(s) => Arg::Str(s.as_bytes()),
                    ArgSource::Buf { offset } => {
                        let len = (word(*offset)? as usize).min(data.len().saturating_sub(offset + 8));
                        Arg::Buf(data.get(offset + 8..offset + 8 + len)?)
                    }
                    ArgSource::Username { .. }
                    | ArgSource::Stack { .. }
                    | ArgSource::Cpumask { .. }
                    | ArgSource::Args { .. }
                    | ArgSource::Inet { .. }
                    | ArgSource::MacAddr { .. }
                    | ArgSource::Enum { .. }
                    | ArgSource::Timestamp { .. }
                    | ArgSource::CgroupPath { .. }
                    | ArgSource::ContainerId { .. }
                    | ArgSource::Symbol { .. }
                    | ArgSource::Function { .. } => Arg::Str(names.next()?),
                    ArgSource::Value { .. } => Arg::Shown(shown.next()?),
                });
            }
            let text = printf::format(pieces, &values);
            match (log, action) {
                (Some(log), _) => Event::Log(log, text),
                (None, TextAction::PrintFile) => Event::Cat(text),
                (None, TextAction::RunCommand) => Event::System(text),
                (None, TextAction::Print) => Event::Printf(text),
            }
        }
        Record::PrintMap { map, top, div } => Event::PrintMap { map: *map, top: *top, div: *div },
        Record::ClearMap { map } => Event::ClearMap(*map),
        Record::ZeroMap { map } => Event::ZeroMap(*map),
        Record::Unwatch => Event::Unwatch(word(8)?),
        Record::PrintValue { ty } => Event::PrintValue(decode::value(ty, data.get(8..)?, stacks)),
        Record::PrintArgs { fields } => Event::PrintValue(args_record(fields, data.get(8..)?, stacks)?),
        Record::Time { format } => Event::Time(format),
        Record::UpdateFailed { warnings: [full, other], .. } => {
            let ret = word(8)? as i64;
            Event::Warning(if ret == -i64::from(libc::E2BIG) {
                full.clone()
            } else {
                let reason = std::io::Error::from_raw_os_error(-ret as i32);
                format!("{other}reason: {reason} (bpf_map_update_elem returned {ret})\n")
            })
        }
        Record::DivideByZero { warning, .. } | Record::LoopCut { warning, .. } => {
            Event::Warning(warning.clone())
        }
        Record::ReadFailed(read) => Event::ReadFailed(read, word(8)? as i64),
        Record::UserStackCopy { depth } => {
            use crate::codegen::user_stack_copy::{COPY_BYTES, HEADER_BYTES};
            let copied = (word(56)? as usize).min(COPY_BYTES);
            stacks.take_stack_copy(crate::symbols::unwind::StackCopy {
                handle: word(8)?,
                pid: word(16)? as u32,
                ip: word(24)?,
                sp: word(32)?,
                fp: word(40)?,
                lr: word(48)?,
                stack: data.get(HEADER_BYTES..HEADER_BYTES + copied)?.to_vec(),
                depth: *depth,
            });
            Event::StackCopied
        }
        Record::Join { delim } => {
            use crate::codegen::join::{JOIN_ARGS, JOIN_ARG_SIZE};
            let strings = data.get(8..8 + JOIN_ARGS * JOIN_ARG_SIZE)?;
            let parts: Vec<&[u8]> = strings
                .chunks(JOIN_ARG_SIZE)
                .map(|s| &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())])
                .take_while(|s| !s.is_empty())
                .collect();
            Event::Join(parts.join(delim.as_bytes()))
        }
    })
}

/// The fields of `args` laid out one after the other in `bytes`, as a record value.
fn args_record(
    fields: &[(String, crate::sema::types::Type, bool)],
    bytes: &[u8],
    stacks: &mut dyn decode::StackResolver,
) -> Option<Value> {
    let types: Vec<crate::sema::types::Type> = fields.iter().map(|(_, ty, _)| ty.clone()).collect();
    let mut values = vec![];
    for ((name, ty, pointer), at) in fields.iter().zip(crate::sema::types::Type::field_offsets(&types)) {
        let field = bytes.get(at..at + ty.slot_size())?;
        let value = match pointer {
            true => Value::Pointer(u64::from_le_bytes(field.get(..8)?.try_into().ok()?)),
            false => decode::value(ty, field, stacks),
        };
        values.push((name.clone(), value));
    }
    Some(Value::Record(values))
}

/// The user name of `uid` from the password database, or the number when it has none.
fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |user| user.name)
}
