//! The top-level members of an event that both scanners read, matched in one place:
//! scan.rs's `Event` and spans.rs's `Fields` each hold them under these names.

/// The slot of `$fields` for a top-level key (`&mut Option<Val>`), None for a key neither
/// scanner reads. A macro, not a function: the two structs share the members' names, not a
/// type, and the match stays inline in scan.rs's per-member loop.
macro_rules! top_slot {
    ($fields:expr, $key:expr) => {
        match $key {
            b"ph" => Some(&mut $fields.ph),
            b"cat" => Some(&mut $fields.cat),
            b"name" => Some(&mut $fields.name),
            b"pid" => Some(&mut $fields.pid),
            b"tid" => Some(&mut $fields.tid),
            b"ts" => Some(&mut $fields.ts),
            b"dur" => Some(&mut $fields.dur),
            b"args" => Some(&mut $fields.args),
            b"id" => Some(&mut $fields.id),
            _ => None,
        }
    };
}

pub(crate) use top_slot;
