//! Output: turning ring buffer records into text as bpftrace prints it.

pub mod json;
pub mod printf;
pub mod text;
pub mod value;

use crate::codegen::record::{ArgSource, Record, Records};
use printf::Value;

/// What one record asks userspace to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    Print(Vec<u8>),
    Exit(i64),
}

/// Decodes a record; `None` for one too short or of an unknown id (it cannot come from our programs).
pub fn decode(records: &Records, data: &[u8]) -> Option<Event> {
    let word = |offset: usize| -> Option<u64> {
        Some(u64::from_le_bytes(data.get(offset..offset + 8)?.try_into().ok()?))
    };
    match records.get(word(0)?)? {
        Record::Exit => Some(Event::Exit(word(8)? as i64)),
        Record::Printf { pieces, args } => {
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(match arg {
                    ArgSource::ConstInt { value, signed } => Value::Int { value: *value, signed: *signed },
                    ArgSource::Int { offset, signed } => {
                        Value::Int { value: word(*offset)?, signed: *signed }
                    }
                    ArgSource::Str { offset, size } => Value::Str(data.get(*offset..offset + size)?),
                    ArgSource::ConstStr(s) => Value::Str(s.as_bytes()),
                });
            }
            Some(Event::Print(printf::format(pieces, &values)))
        }
    }
}
