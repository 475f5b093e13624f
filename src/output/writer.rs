//! The two output formats, behind one interface: bpftrace's text, and its `-f json` lines.

use super::value::{MapSnapshot, Value};
use super::{json, text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    pub fn printf(self, message: &[u8]) -> Vec<u8> {
        match self {
            Format::Text => message.to_vec(),
            Format::Json => json::message(json::MessageKind::Printf, message),
        }
    }

    pub fn time(self, message: &[u8]) -> Vec<u8> {
        match self {
            Format::Text => message.to_vec(),
            Format::Json => json::message(json::MessageKind::Time, message),
        }
    }

    pub fn map(self, map: &MapSnapshot, top: Option<usize>, div: Option<u64>) -> Vec<u8> {
        match self {
            Format::Text => text::print_map(map, top, div),
            Format::Json => json::print_map(map, top, div),
        }
    }

    pub fn maps_at_exit(self, maps: &[MapSnapshot]) -> Vec<u8> {
        match self {
            Format::Text => text::print_maps_at_exit(maps),
            Format::Json => json::print_maps_at_exit(maps),
        }
    }

    pub fn value(self, value: &Value) -> Vec<u8> {
        match self {
            Format::Text => text::print_value(value),
            Format::Json => json::print_value(value),
        }
    }
}
