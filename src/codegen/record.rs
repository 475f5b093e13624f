//! Output records: what a program sends through the ring buffer, and how userspace reads it back.
//! Each record starts with a 64-bit id; printf formats stay in userspace, found by that id.

use crate::sema::format::Piece;

/// The id of the record that `exit()` sends; printf records are numbered from 1.
pub const EXIT_RECORD: u64 = 0;

/// Where a printf argument comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgSource {
    /// Known at compile time (a string literal, the `probe` builtin).
    ConstStr(String),
    ConstInt {
        value: u64,
        signed: bool,
    },
    /// Read from the record at `offset`.
    Int {
        offset: usize,
        signed: bool,
    },
    Str {
        offset: usize,
        size: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `[id][code: i64]`
    Exit,
    Printf {
        pieces: Vec<Piece>,
        args: Vec<ArgSource>,
    },
}

/// Every record kind of a compiled script, indexed by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Records(Vec<Record>);

impl Default for Records {
    fn default() -> Records {
        Records(vec![Record::Exit])
    }
}

impl Records {
    pub fn add(&mut self, record: Record) -> u64 {
        self.0.push(record);
        (self.0.len() - 1) as u64
    }

    pub fn get(&self, id: u64) -> Option<&Record> {
        self.0.get(usize::try_from(id).ok()?)
    }
}
