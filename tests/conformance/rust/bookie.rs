//! rsbookie: a bookie for bkref's conformance kit, written from spec/adapter.md alone, in Rust
//! with the standard library only. One file, compiled with
//! `rustc --edition 2021 -O -o rsbookie bookie.rs` (rustc 1.63 or later).
//!
//!     rsbookie DATA_DIR [--bug NAME]...        (or BKREF_DATA_DIR=DATA_DIR rsbookie ...)
//!
//! It speaks the adapter protocol, version 2, on standard input and output: one JSON request
//! per line in, one JSON response per request out, logs on standard error only.
//!
//! Design: a write-ahead log plus a snapshot of an in-memory table
//! ==================================================================
//!
//! - Memory holds the whole table: ledger -> (master key, fence, entries by id), and the set
//!   of deleted ledgers. Every answer is computed from it.
//! - DATA/wal-<g> holds checksummed records (add, fence, delete) appended by group commit:
//!   a reader thread turns standard input into requests; the main thread takes one request,
//!   then every request already waiting, carries them out in memory in order, writes the
//!   batch's records with one write and one fdatasync, and only then writes the answers. A
//!   read, delete or checkpoint is synchronous: it first commits the batch admitted before
//!   it (so it sees and respects every add and fence admitted earlier), then is carried out
//!   and answered before the next request is taken.
//! - DATA/snapshot-<g> holds the whole table (the same records, in one file with a header, a
//!   trailer and a checksum over all of it). One is taken at `checkpoint` and when the WAL
//!   grows past 256 KiB and past the last snapshot's size, in four steps: (1) write
//!   snapshot-<g+1>.tmp and fsync it; (2) rename it to snapshot-<g+1> and fsync the
//!   directory (from here a restart uses g+1); (3) create wal-<g+1>, fsync it and the
//!   directory, and append to it from now on; (4) remove snapshot-<g> and wal-<g> and fsync
//!   the directory. A crash before (2) is durable leaves generation g whole (its snapshot and
//!   WAL are only removed in (4)); after (2) the new snapshot holds everything wal-<g> held
//!   (nothing is appended during the switch), and wal-<g+1> is empty or holds only later
//!   records, each made durable after the file's name was.
//! - Recovery: the newest snapshot (it was fsynced before its rename, so a crash cannot leave
//!   it damaged: a damaged one stops the start rather than fall back past records its WAL may
//!   have held), then its generation's WAL replayed up to the first record whose length or
//!   checksum does not hold; that torn tail is cut and the WAL fsynced (so whatever recovery
//!   serves stays), leftovers of other generations and `.tmp` files removed, the directory
//!   fsynced, then the ready line.
//!
//! (Kept for rustc 1.63: no `div_ceil`, `is_multiple_of`, let-else or later std APIs.)
//!
//! Answers follow bkref (`answers: bkref`): refusals in the order no_ledger (deleted),
//! unauthorized (another key), fenced; a fence refuses every add admitted after it, also
//! while the fence is still in flight; an add or fence of a deleted ledger gets no_ledger,
//! and an add still in flight when its ledger's delete is carried out is answered no_ledger.
//! Optional ops: `checkpoint` only; `inspect`, `gc` and `write_close` answer `unsupported`.
//!
//! Deliberate bugs (each off unless `--bug NAME` is given; each changes nothing else)
//! ===================================================================================
//!
//! - `ack-before-fsync`: the group commit writes the batch's adds' answers right after the
//!   WAL write and before its fdatasync ("the page cache has it"); fences and deletes still
//!   wait for the fdatasync. A SIGKILL keeps the page cache, so only a power loss shows it.
//! - `delete-before-fsync`: a delete commits the batch before it properly, then writes its
//!   own WAL record and answers ok without an fdatasync, leaving that to the next group
//!   commit ("deletes are rare and idempotent"). A power loss before the next commit or
//!   snapshot brings the deleted ledger back.
//! - `stale-cache`: reads are served first from a cache of encoded answers (base64 of the
//!   entry, by ledger and entry id). An add invalidates its entry; with the bug a delete
//!   does not invalidate its ledger's entries, so a deleted ledger's cached entries stay
//!   readable until a restart.
//! - `serve-torn-tail`: WAL replay checks the checksum of every record except the file's
//!   last one, and takes a last record that runs past the end of the file as cut short by
//!   the crash and keeps what is there (its data cut at the end of the file). A torn or
//!   partial last record is served after a restart (and is not cut off).
//! - `forget-fences`: recovery's apply step has no arm for fence records (they fall into
//!   the "skip" arm, as if recovery predated fences), for the snapshot's records and the
//!   WAL's alike: every ledger comes back unfenced (a fence-only ledger not at all).
//! - `ignore-key`: the add path checks deletion and the fence but not the master key (the
//!   key check is only done for fences): an add with a wrong key to an existing ledger is
//!   accepted and acknowledged.
//! - `admit-while-fencing`: the add path refuses an add only when the ledger's fence is
//!   durable (committed), not when it was admitted: an add that arrives while its ledger's
//!   fence is still in flight is accepted and acknowledged (after the same fdatasync).
//! - `lose-last-acked`: WAL replay takes a record as complete only when it ends before the
//!   end of the file (`<` where `<=` belongs), so the last complete record is taken for a
//!   torn tail and cut: the last acknowledged add (or fence, or delete) is lost after a
//!   kill.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::mem::ManuallyDrop;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::thread;

const NAME: &str = "rsbookie 0.1";
/// spec/adapter.md, "Limits": nettyMaxFrameSizeBytes - 500 - 16 by default.
const MAX_DATA: usize = 5_242_364;
const MAX_KEY: usize = 1024;
/// 6 x (base64 length of MAX_DATA + 2 x MAX_KEY) + 4096 = 41955304.
const MAX_LINE: usize = 6 * (4 * ((MAX_DATA + 2) / 3) + 2 * MAX_KEY) + 4096;
/// Containers nested deeper than this are refused as not a request (bkref's parser refuses
/// them too, with id null; spec/adapter.md names no bound).
const MAX_DEPTH: usize = 994;
/// Requests taken into one batch at most (spec/adapter.md: 10000 requests in flight).
const MAX_IN_FLIGHT: usize = 10_000;
/// A batch's WAL bytes at most before it is committed.
const BATCH_MAX_BYTES: usize = 64 << 20;
/// The WAL size past which a snapshot is taken (and past the last snapshot's size).
const WAL_SNAPSHOT_MIN: u64 = 256 << 10;
/// The read cache's bound; it is emptied when it would pass it.
const CACHE_MAX_BYTES: usize = 64 << 20;
/// Lines the reader thread may hold ahead of the main thread.
const CHANNEL_LINES: usize = 1024;

// --- the bugs ---------------------------------------------------------------------------------

const BUG_NAMES: [&str; 8] = [
    "ack-before-fsync",
    "delete-before-fsync",
    "stale-cache",
    "serve-torn-tail",
    "forget-fences",
    "ignore-key",
    "admit-while-fencing",
    "lose-last-acked",
];

#[derive(Default, Clone, Copy)]
struct Bugs {
    ack_before_fsync: bool,
    delete_before_fsync: bool,
    stale_cache: bool,
    serve_torn_tail: bool,
    forget_fences: bool,
    ignore_key: bool,
    admit_while_fencing: bool,
    lose_last_acked: bool,
}

impl Bugs {
    fn set(&mut self, name: &str) -> bool {
        match name {
            "ack-before-fsync" => self.ack_before_fsync = true,
            "delete-before-fsync" => self.delete_before_fsync = true,
            "stale-cache" => self.stale_cache = true,
            "serve-torn-tail" => self.serve_torn_tail = true,
            "forget-fences" => self.forget_fences = true,
            "ignore-key" => self.ignore_key = true,
            "admit-while-fencing" => self.admit_while_fencing = true,
            "lose-last-acked" => self.lose_last_acked = true,
            _ => return false,
        }
        true
    }
}

fn die(status: i32, message: &str) -> ! {
    eprintln!("rsbookie: {}", message);
    std::process::exit(status);
}

fn parse_args() -> (PathBuf, Bugs, Vec<String>) {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut dir: Option<PathBuf> = None;
    let mut bugs = Bugs::default();
    let mut names = Vec::new();
    let mut i = 0;
    let usage = format!("--bug needs one of {}", BUG_NAMES.join(", "));
    while i < args.len() {
        let text = args[i].to_string_lossy().to_string();
        let bug = if text == "--bug" {
            i += 1;
            match args.get(i) {
                Some(name) => Some(name.to_string_lossy().to_string()),
                None => die(2, &usage),
            }
        } else {
            text.strip_prefix("--bug=").map(|name| name.to_string())
        };
        if let Some(name) = bug {
            if !bugs.set(&name) {
                die(2, &format!("unknown bug {:?}: {}", name, usage));
            }
            names.push(name);
        } else if text.starts_with('-') && text != "-" {
            die(2, &format!("unknown option {:?}; usage: rsbookie DATA_DIR [--bug NAME]...", text));
        } else if dir.is_none() {
            dir = Some(PathBuf::from(&args[i]));
        } else {
            die(2, &format!("one data directory only, got a second one: {:?}", text));
        }
        i += 1;
    }
    let dir = match dir {
        Some(dir) => dir,
        None => match std::env::var_os("BKREF_DATA_DIR") {
            Some(value) if !value.is_empty() => PathBuf::from(value),
            _ => die(2, "no data directory: give it as the first argument or in BKREF_DATA_DIR"),
        },
    };
    (dir, bugs, names)
}

// --- CRC-32 (IEEE), base64, hex ---------------------------------------------------------------

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

#[derive(Clone, Copy)]
struct Crc(u32);

impl Crc {
    fn new() -> Crc {
        Crc(0xFFFF_FFFF)
    }
    fn update(&mut self, bytes: &[u8]) {
        let mut c = self.0;
        for &b in bytes {
            c = CRC_TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
        }
        self.0 = c;
    }
    fn finish(self) -> u32 {
        !self.0
    }
}

fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = Crc::new();
    for part in parts {
        crc.update(part);
    }
    crc.finish()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(data: &[u8]) -> String {
    let mut out = Vec::with_capacity((data.len() + 2) / 3 * 4);
    for chunk in data.chunks(3) {
        let b0 = chunk[0] as u32;
        let b1 = if chunk.len() > 1 { chunk[1] as u32 } else { 0 };
        let b2 = if chunk.len() > 2 { chunk[2] as u32 } else { 0 };
        let n = (b0 << 16) | (b1 << 8) | b2;
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] } else { b'=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] } else { b'=' });
    }
    String::from_utf8(out).expect("base64 is ASCII")
}

fn b64_value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some((c - b'A') as u32),
        b'a'..=b'z' => Some((c - b'a') as u32 + 26),
        b'0'..=b'9' => Some((c - b'0') as u32 + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Strict base64 (RFC 4648 section 4, spec/adapter.md): whole groups of four, padding only at
/// the end, the unused bits of a padded group zero, no whitespace, no URL-safe alphabet.
fn b64_decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 4 != 0 {
        return None;
    }
    let groups = text.len() / 4;
    let mut out = Vec::with_capacity(groups * 3);
    for (index, g) in text.chunks(4).enumerate() {
        let last = index + 1 == groups;
        let pad = if last && g[3] == b'=' {
            if g[2] == b'=' {
                2
            } else {
                1
            }
        } else {
            0
        };
        let mut n = 0u32;
        for &c in &g[..4 - pad] {
            n = (n << 6) | b64_value(c)?;
        }
        match pad {
            0 => {
                out.push((n >> 16) as u8);
                out.push((n >> 8) as u8);
                out.push(n as u8);
            }
            1 => {
                if n & 0x3 != 0 {
                    return None;
                }
                n >>= 2;
                out.push((n >> 8) as u8);
                out.push(n as u8);
            }
            _ => {
                if n & 0xF != 0 {
                    return None;
                }
                out.push((n >> 4) as u8);
            }
        }
    }
    Some(out)
}

fn hex_decode(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(text.len() / 2);
    for pair in text.chunks(2) {
        out.push(digit(pair[0])? << 4 | digit(pair[1])?);
    }
    Some(out)
}

// --- JSON: a strict parser for the requests, and ASCII output ---------------------------------

/// A JSON value as far as a request needs it: nested containers are checked, not kept.
enum J {
    Null,
    Bool(bool),
    /// An integer of at most 25 characters (every i64 fits in 20).
    Int(i128),
    /// An integer too long for any field, or a number that does not fit a float.
    Huge,
    Float,
    /// Decoded to WTF-8 (a lone surrogate escape kept as its 3-byte form).
    Str(Vec<u8>),
    Arr,
    Obj,
}

impl J {
    fn describe(&self) -> String {
        match self {
            J::Null => "null".to_string(),
            J::Bool(b) => format!("{} (a boolean)", b),
            J::Int(n) => format!("{} (an integer)", n),
            J::Huge => "a number too large for any field".to_string(),
            J::Float => "a number that is not an integer".to_string(),
            J::Str(s) => {
                let text = String::from_utf8_lossy(s);
                let short: String = text.chars().take(40).collect();
                format!("\"{}\" (a string)", short)
            }
            J::Arr => "an array".to_string(),
            J::Obj => "an object".to_string(),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

type Fields = Vec<(Vec<u8>, J)>;

fn push_wtf8(out: &mut Vec<u8>, c: u32) {
    if c < 0x80 {
        out.push(c as u8);
    } else if c < 0x800 {
        out.push(0xC0 | (c >> 6) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    } else if c < 0x10000 {
        out.push(0xE0 | (c >> 12) as u8);
        out.push(0x80 | ((c >> 6) & 0x3F) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    } else {
        out.push(0xF0 | (c >> 18) as u8);
        out.push(0x80 | ((c >> 12) & 0x3F) as u8);
        out.push(0x80 | ((c >> 6) & 0x3F) as u8);
        out.push(0x80 | (c & 0x3F) as u8);
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("the request is not JSON: {} (at byte {})", what, self.i))
    }

    fn value(&mut self, depth: usize) -> Result<J, String> {
        match self.peek() {
            Some(b'{') => {
                self.object(depth, None)?;
                Ok(J::Obj)
            }
            Some(b'[') => {
                self.array(depth)?;
                Ok(J::Arr)
            }
            Some(b'"') => Ok(J::Str(self.string()?)),
            Some(b't') => self.literal(b"true", J::Bool(true)),
            Some(b'f') => self.literal(b"false", J::Bool(false)),
            Some(b'n') => self.literal(b"null", J::Null),
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => self.fail("expected a value (NaN and Infinity are not JSON)"),
            None => self.fail("expected a value"),
        }
    }

    fn literal(&mut self, word: &[u8], value: J) -> Result<J, String> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(value)
        } else {
            self.fail("expected a value")
        }
    }

    fn too_deep<T>(&self) -> Result<T, String> {
        Err("the request is nested too deeply to be a request".to_string())
    }

    fn object(&mut self, depth: usize, mut fields: Option<&mut Fields>) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return self.too_deep();
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return self.fail("expected a field name in double quotes");
            }
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.fail("expected ':'");
            }
            self.i += 1;
            self.ws();
            let value = self.value(depth + 1)?;
            if seen.contains(&key) {
                return Err(format!(
                    "the field \"{}\" appears more than once in one object; keep one",
                    String::from_utf8_lossy(&key)
                ));
            }
            if let Some(list) = fields.as_deref_mut() {
                list.push((key.clone(), value));
            }
            seen.insert(key);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.fail("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return self.too_deep();
        }
        self.i += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            self.value(depth + 1)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.fail("expected ',' or ']'"),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        if self.i + 4 > self.s.len() {
            return self.fail("a \\u escape needs four hex digits");
        }
        let mut n = 0u32;
        for k in 0..4 {
            let c = self.s[self.i + k];
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return self.fail("a \\u escape needs four hex digits"),
            };
            n = n << 4 | d as u32;
        }
        self.i += 4;
        Ok(n)
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let start = self.i;
            while let Some(c) = self.peek() {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.extend_from_slice(&self.s[start..self.i]);
            match self.peek() {
                None => return self.fail("a string without its closing quote"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let escape = self.s.get(self.i + 1).copied();
                    self.i += 2;
                    match escape {
                        Some(b'"') => out.push(b'"'),
                        Some(b'\\') => out.push(b'\\'),
                        Some(b'/') => out.push(b'/'),
                        Some(b'b') => out.push(8),
                        Some(b'f') => out.push(12),
                        Some(b'n') => out.push(b'\n'),
                        Some(b'r') => out.push(b'\r'),
                        Some(b't') => out.push(b'\t'),
                        Some(b'u') => {
                            let mut c = self.hex4()?;
                            if (0xD800..0xDC00).contains(&c)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                let back = self.i;
                                self.i += 2;
                                let low = self.hex4()?;
                                if (0xDC00..0xE000).contains(&low) {
                                    c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
                                } else {
                                    self.i = back;
                                }
                            }
                            push_wtf8(&mut out, c);
                        }
                        _ => {
                            self.i -= 2;
                            return self.fail("an invalid escape in a string");
                        }
                    }
                }
                Some(_) => return self.fail("a control character in a string"),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<J, String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.fail("a number needs digits (Infinity is not JSON)"),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return self.fail("a number needs digits after '.'");
            }
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.fail("a number needs digits in its exponent");
            }
            integer = false;
        }
        if !integer {
            return Ok(J::Float);
        }
        let text = &self.s[start..self.i];
        if text.len() > 25 {
            return Ok(J::Huge);
        }
        let text = std::str::from_utf8(text).expect("digits are ASCII");
        match text.parse::<i128>() {
            Ok(n) => Ok(J::Int(n)),
            Err(_) => Ok(J::Huge),
        }
    }
}

/// The line as JSON: Ok(Some(fields)) for an object, Ok(None) for any other JSON value.
fn parse_json(line: &[u8]) -> Result<Option<Fields>, String> {
    let mut p = Parser { s: line, i: 0 };
    p.ws();
    let fields = if p.peek() == Some(b'{') {
        let mut fields = Vec::new();
        p.object(1, Some(&mut fields))?;
        Some(fields)
    } else {
        p.value(1)?;
        None
    };
    p.ws();
    if p.i != line.len() {
        return p.fail("more after the value");
    }
    Ok(fields)
}

/// A JSON string literal of `text`, in ASCII (spec/adapter.md: responses are ASCII).
fn jstr(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7E => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// --- requests ---------------------------------------------------------------------------------

enum Req {
    Add { ledger: u64, entry: u64, key: Vec<u8>, data: Vec<u8> },
    Read { ledger: u64, entry: u64 },
    Fence { ledger: u64, key: Vec<u8> },
    WriteClose,
    Delete { ledger: u64 },
    Checkpoint,
    Gc,
    Inspect,
    Shutdown,
}

const U63: i128 = i64::MAX as i128;

fn field<'f>(fields: &'f Fields, name: &str) -> Option<&'f J> {
    fields.iter().find(|(k, _)| k == name.as_bytes()).map(|(_, v)| v)
}

/// The request's id when it is an integer from -2^63 to 2^63-1.
fn request_id(fields: &Fields) -> Option<i64> {
    match field(fields, "id") {
        Some(J::Int(n)) if *n >= i64::MIN as i128 && *n <= U63 => Some(*n as i64),
        _ => None,
    }
}

fn build(fields: &Fields) -> Result<Req, String> {
    let op = match field(fields, "op") {
        None => return Err("the request has no 'op'".to_string()),
        Some(J::Str(s)) => s.clone(),
        Some(other) => return Err(format!("'op' must be a string, got {}", other.describe())),
    };
    let takes: &[&str] = match &op[..] {
        b"add" => &["ledger", "entry", "key", "data"],
        b"read" => &["ledger", "entry"],
        b"fence" | b"write_close" => &["ledger", "key"],
        b"delete" => &["ledger"],
        b"gc" => &["force"],
        b"checkpoint" | b"inspect" | b"shutdown" => &[],
        _ => {
            return Err(format!(
                "unknown op {}; the ops are add, read, fence, write_close, delete, checkpoint, \
                 gc, inspect, shutdown",
                J::Str(op).describe()
            ))
        }
    };
    let name = String::from_utf8_lossy(&op).to_string();
    for (key, _) in fields.iter() {
        let key = &key[..];
        if key != b"id" && key != b"op" && !takes.iter().any(|t| t.as_bytes() == key) {
            return Err(format!(
                "'{}' does not take \"{}\"; it takes {}",
                name,
                String::from_utf8_lossy(key),
                if takes.is_empty() { "no field".to_string() } else { takes.join(", ") }
            ));
        }
    }
    for want in takes {
        if field(fields, want).is_none() {
            return Err(format!("'{}' needs '{}'", name, want));
        }
    }
    let number = |fields: &Fields, what: &str| -> Result<u64, String> {
        match field(fields, what) {
            Some(J::Int(n)) if *n >= 0 && *n <= U63 => Ok(*n as u64),
            Some(v @ (J::Int(_) | J::Huge)) => Err(format!(
                "'{}' must be from 0 to 9223372036854775807, got {}",
                what,
                v.describe()
            )),
            Some(v) => Err(format!(
                "'{}' must be an integer from 0 to 9223372036854775807, got {}",
                what,
                v.describe()
            )),
            None => Err(format!("'{}' needs '{}'", name, what)),
        }
    };
    let key = |fields: &Fields| -> Result<Vec<u8>, String> {
        match field(fields, "key") {
            Some(J::Str(s)) => match hex_decode(s) {
                Some(k) if k.len() <= MAX_KEY => Ok(k),
                Some(_) => Err(format!("'key' is longer than {} bytes", MAX_KEY)),
                None => Err("'key' must be hex digits, an even number of them".to_string()),
            },
            Some(v) => Err(format!("'key' must be a string of hex digits, got {}", v.describe())),
            None => Err(format!("'{}' needs 'key'", name)),
        }
    };
    Ok(match &op[..] {
        b"add" => {
            let ledger = number(fields, "ledger")?;
            let entry = number(fields, "entry")?;
            let key = key(fields)?;
            let data = match field(fields, "data") {
                Some(J::Str(s)) => match b64_decode(s) {
                    Some(d) if d.len() <= MAX_DATA => d,
                    Some(d) => {
                        return Err(format!(
                            "'data' is {} bytes once decoded; at most {}",
                            d.len(),
                            MAX_DATA
                        ))
                    }
                    None => return Err("'data' must be strict base64 with padding".to_string()),
                },
                Some(v) => return Err(format!("'data' must be a base64 string, got {}", v.describe())),
                None => return Err("'add' needs 'data'".to_string()),
            };
            Req::Add { ledger, entry, key, data }
        }
        b"read" => Req::Read { ledger: number(fields, "ledger")?, entry: number(fields, "entry")? },
        b"fence" => Req::Fence { ledger: number(fields, "ledger")?, key: key(fields)? },
        b"write_close" => {
            number(fields, "ledger")?;
            key(fields)?;
            Req::WriteClose
        }
        b"delete" => Req::Delete { ledger: number(fields, "ledger")? },
        b"gc" => match field(fields, "force") {
            Some(J::Bool(_)) => Req::Gc,
            Some(v) => return Err(format!("'force' must be true or false, got {}", v.describe())),
            None => return Err("'gc' needs 'force'".to_string()),
        },
        b"checkpoint" => Req::Checkpoint,
        b"inspect" => Req::Inspect,
        _ => Req::Shutdown,
    })
}

/// The id a line starts with (`{"id": 7, ...`), for a line too long to parse.
fn leading_id(head: &[u8]) -> Option<i64> {
    let mut p = Parser { s: head, i: 0 };
    p.ws();
    if p.peek() != Some(b'{') {
        return None;
    }
    p.i += 1;
    p.ws();
    if !p.s[p.i..].starts_with(b"\"id\"") {
        return None;
    }
    p.i += 4;
    p.ws();
    if p.peek() != Some(b':') {
        return None;
    }
    p.i += 1;
    p.ws();
    let value = p.number().ok()?;
    p.ws();
    match (value, p.peek()) {
        (J::Int(n), Some(b',' | b'}')) if n >= i64::MIN as i128 && n <= U63 => Some(n as i64),
        _ => None,
    }
}

// --- records: the WAL's and the snapshot's ----------------------------------------------------

const REC_ADD: u8 = 1;
const REC_FENCE: u8 = 2;
const REC_DELETE: u8 = 3;
/// A record: u32 body length, u32 CRC-32 of (length bytes, body), then the body.
const REC_HEADER: usize = 8;
const REC_MIN_BODY: usize = 1 + 8;
const REC_MAX_BODY: usize = 1 + 8 + 8 + 2 + MAX_KEY + MAX_DATA;

enum Rec<'a> {
    Add { ledger: u64, entry: u64, key: &'a [u8], data: &'a [u8] },
    Fence { ledger: u64, key: &'a [u8] },
    Delete { ledger: u64 },
}

fn put_record(out: &mut Vec<u8>, rec: &Rec) {
    let at = out.len();
    out.extend_from_slice(&[0u8; REC_HEADER]);
    match rec {
        Rec::Add { ledger, entry, key, data } => {
            out.push(REC_ADD);
            out.extend_from_slice(&ledger.to_le_bytes());
            out.extend_from_slice(&entry.to_le_bytes());
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(data);
        }
        Rec::Fence { ledger, key } => {
            out.push(REC_FENCE);
            out.extend_from_slice(&ledger.to_le_bytes());
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
        }
        Rec::Delete { ledger } => {
            out.push(REC_DELETE);
            out.extend_from_slice(&ledger.to_le_bytes());
        }
    }
    let len = ((out.len() - at - REC_HEADER) as u32).to_le_bytes();
    let crc = crc32(&[&len, &out[at + REC_HEADER..]]);
    out[at..at + 4].copy_from_slice(&len);
    out[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn decode_body(body: &[u8]) -> Option<Rec<'_>> {
    match *body.first()? {
        REC_ADD if body.len() >= 19 => {
            let klen = u16::from_le_bytes([body[17], body[18]]) as usize;
            if klen > MAX_KEY || body.len() < 19 + klen {
                return None;
            }
            Some(Rec::Add {
                ledger: le64(&body[1..]),
                entry: le64(&body[9..]),
                key: &body[19..19 + klen],
                data: &body[19 + klen..],
            })
        }
        REC_FENCE if body.len() >= 11 => {
            let klen = u16::from_le_bytes([body[9], body[10]]) as usize;
            if klen > MAX_KEY || body.len() != 11 + klen {
                return None;
            }
            Some(Rec::Fence { ledger: le64(&body[1..]), key: &body[11..] })
        }
        REC_DELETE if body.len() == 9 => Some(Rec::Delete { ledger: le64(&body[1..]) }),
        _ => None,
    }
}

/// Replays a WAL's bytes: calls `apply` for each record, in order, up to the first one whose
/// length or checksum does not hold (a torn tail: what a crash left of an unfinished write).
/// Returns how many bytes hold whole records.
fn scan_wal(buf: &[u8], bugs: &Bugs, apply: &mut dyn FnMut(Rec)) -> usize {
    let mut off = 0;
    while buf.len() - off >= REC_HEADER {
        let len = le32(&buf[off..]) as usize;
        let crc = le32(&buf[off + 4..]);
        if !(REC_MIN_BODY..=REC_MAX_BODY).contains(&len) {
            break;
        }
        let end = off + REC_HEADER + len;
        // BUG lose-last-acked: `<` where `<=` belongs: a record ending at the end of the file
        // is taken for a torn one.
        let complete = if bugs.lose_last_acked { end < buf.len() } else { end <= buf.len() };
        if !complete {
            if bugs.serve_torn_tail {
                // BUG serve-torn-tail: a last record cut short by the crash "keeps what is
                // there".
                if let Some(rec) = decode_body(&buf[off + REC_HEADER..]) {
                    apply(rec);
                    off = buf.len();
                }
            }
            break;
        }
        let body = &buf[off + REC_HEADER..end];
        // BUG serve-torn-tail: the last record's checksum is not checked.
        let checked = !(bugs.serve_torn_tail && end == buf.len());
        if checked && crc32(&[&buf[off..off + 4], body]) != crc {
            break;
        }
        match decode_body(body) {
            Some(rec) => apply(rec),
            None => break,
        }
        off = end;
    }
    off
}

const SNAP_MAGIC: &[u8; 8] = b"RSBSNAP1";
const SNAP_TAIL: &[u8; 8] = b"RSBTAIL1";
/// Header: magic, generation. Trailer: magic, body length, CRC-32 of everything before it.
const SNAP_HEADER: usize = 16;
const SNAP_TRAILER: usize = 20;

/// The records of a snapshot file, if the whole file holds (its checksum, its length, each
/// record's own checksum).
fn snapshot_records(buf: &[u8], generation: u64) -> Option<Vec<Rec<'_>>> {
    if buf.len() < SNAP_HEADER + SNAP_TRAILER || &buf[..8] != SNAP_MAGIC {
        return None;
    }
    let tail = &buf[buf.len() - SNAP_TRAILER..];
    let body = &buf[SNAP_HEADER..buf.len() - SNAP_TRAILER];
    if &tail[..8] != SNAP_TAIL
        || le64(&tail[8..]) != body.len() as u64
        || le64(&buf[8..]) != generation
        || le32(&tail[16..]) != crc32(&[&buf[..buf.len() - 4]])
    {
        return None;
    }
    let mut records = Vec::new();
    let mut off = 0;
    while off < body.len() {
        if body.len() - off < REC_HEADER {
            return None;
        }
        let len = le32(&body[off..]) as usize;
        let end = off + REC_HEADER + len;
        if end > body.len() || crc32(&[&body[off..off + 4], &body[off + 8..end]]) != le32(&body[off + 4..]) {
            return None;
        }
        records.push(decode_body(&body[off + REC_HEADER..end])?);
        off = end;
    }
    Some(records)
}

// --- the table --------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fence {
    No,
    /// Admitted: refuses later adds; its record is not yet durable.
    Pending,
    Durable,
}

struct Ledger {
    key: Vec<u8>,
    fence: Fence,
    entries: BTreeMap<u64, Vec<u8>>,
}

#[derive(Default)]
struct Table {
    ledgers: BTreeMap<u64, Ledger>,
    deleted: BTreeSet<u64>,
}

impl Table {
    /// Recovery's apply step, for the snapshot's records and the WAL's.
    fn apply_recovered(&mut self, rec: Rec, bugs: &Bugs) {
        match rec {
            Rec::Add { ledger, entry, key, data } => {
                if self.deleted.contains(&ledger) {
                    return;
                }
                let led = self.ledgers.entry(ledger).or_insert_with(|| Ledger {
                    key: key.to_vec(),
                    fence: Fence::No,
                    entries: BTreeMap::new(),
                });
                led.entries.insert(entry, data.to_vec());
            }
            // BUG forget-fences: no arm for fence records; they are skipped.
            Rec::Fence { .. } if bugs.forget_fences => {}
            Rec::Fence { ledger, key } => {
                if self.deleted.contains(&ledger) {
                    return;
                }
                let led = self.ledgers.entry(ledger).or_insert_with(|| Ledger {
                    key: key.to_vec(),
                    fence: Fence::No,
                    entries: BTreeMap::new(),
                });
                led.fence = Fence::Durable;
            }
            Rec::Delete { ledger } => {
                self.ledgers.remove(&ledger);
                self.deleted.insert(ledger);
            }
        }
    }
}

// --- files ------------------------------------------------------------------------------------

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn snapshot_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("snapshot-{}", generation))
}

fn wal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("wal-{}", generation))
}

extern "C" {
    fn flock(fd: i32, operation: i32) -> i32;
}

const LOCK_EX: i32 = 2;
const LOCK_NB: i32 = 4;

enum Leftover {
    Snapshot(u64),
    SnapshotTmp(u64),
    Wal(u64),
}

fn classify(name: &str) -> Option<Leftover> {
    if let Some(rest) = name.strip_prefix("snapshot-") {
        if let Some(g) = rest.strip_suffix(".tmp") {
            return g.parse().ok().map(Leftover::SnapshotTmp);
        }
        return rest.parse().ok().map(Leftover::Snapshot);
    }
    if let Some(g) = name.strip_prefix("wal-") {
        return g.parse().ok().map(Leftover::Wal);
    }
    None
}

struct Recovered {
    table: Table,
    generation: u64,
    wal: File,
    wal_size: u64,
    snapshot_size: u64,
    lock: File,
}

/// Recovery: see the header comment. Err is a one-line reason (exit 1).
fn recover(dir: &Path, bugs: &Bugs) -> Result<Recovered, String> {
    let say = |what: &str, e: io::Error| format!("cannot recover {}: {} ({})", dir.display(), what, e);
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| say("cannot create the directory", e))?;
        if let Some(parent) = dir.parent() {
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            fsync_dir(parent).map_err(|e| say("cannot fsync its parent", e))?;
        }
    }
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("lock"))
        .map_err(|e| say("cannot open its lock file", e))?;
    if unsafe { flock(lock.as_raw_fd(), LOCK_EX | LOCK_NB) } != 0 {
        return Err(format!(
            "cannot recover {}: another process holds its lock ({}); stop it first",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    let mut snapshots = Vec::new();
    let mut tmps = Vec::new();
    let mut wals = Vec::new();
    for item in fs::read_dir(dir).map_err(|e| say("cannot list it", e))? {
        let item = item.map_err(|e| say("cannot list it", e))?;
        match classify(&item.file_name().to_string_lossy()) {
            Some(Leftover::Snapshot(g)) => snapshots.push(g),
            Some(Leftover::SnapshotTmp(g)) => tmps.push(g),
            Some(Leftover::Wal(g)) => wals.push(g),
            None => {}
        }
    }
    let mut table = Table::default();
    let (generation, snapshot_size) = match snapshots.iter().max() {
        None => (0, 0),
        Some(&g) => {
            let path = snapshot_path(dir, g);
            let buf = fs::read(&path).map_err(|e| say("cannot read its snapshot", e))?;
            let records = match snapshot_records(&buf, g) {
                Some(records) => records,
                None => {
                    return Err(format!(
                        "cannot recover {}: {} is damaged (its length or checksum fails); a \
                         crash cannot leave that (it is fsynced before its rename), and an \
                         older snapshot would miss what its WAL held: restore it from a copy",
                        dir.display(),
                        path.display()
                    ))
                }
            };
            for rec in records {
                table.apply_recovered(rec, bugs);
            }
            (g, buf.len() as u64)
        }
    };
    for &g in &wals {
        if g > generation {
            let size = fs::metadata(wal_path(dir, g)).map(|m| m.len()).unwrap_or(0);
            if size > 0 {
                return Err(format!(
                    "cannot recover {}: wal-{} holds {} bytes but the newest snapshot is \
                     snapshot-{}; a crash cannot leave that: restore the missing snapshot",
                    dir.display(),
                    g,
                    size,
                    generation
                ));
            }
        }
    }
    let path = wal_path(dir, generation);
    let existed = path.exists();
    let buf = if existed { fs::read(&path).map_err(|e| say("cannot read its WAL", e))? } else { Vec::new() };
    let wal = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| say("cannot open its WAL", e))?;
    let mut replayed = 0usize;
    let valid = scan_wal(&buf, bugs, &mut |rec| {
        replayed += 1;
        table.apply_recovered(rec, bugs);
    });
    if valid < buf.len() {
        wal.set_len(valid as u64).map_err(|e| say("cannot cut the WAL's torn tail", e))?;
        eprintln!(
            "rsbookie: cut a torn tail of {} bytes off wal-{} at offset {}",
            buf.len() - valid,
            generation,
            valid
        );
    }
    // Whatever recovery serves must stay: make the WAL's bytes (and its cut) durable.
    wal.sync_all().map_err(|e| say("cannot fsync its WAL", e))?;
    for g in tmps {
        let _ = fs::remove_file(dir.join(format!("snapshot-{}.tmp", g)));
    }
    for g in snapshots {
        if g != generation {
            let _ = fs::remove_file(snapshot_path(dir, g));
        }
    }
    for g in wals {
        if g != generation {
            let _ = fs::remove_file(wal_path(dir, g));
        }
    }
    fsync_dir(dir).map_err(|e| say("cannot fsync the directory", e))?;
    eprintln!(
        "rsbookie: recovered generation {}: {} ledgers, {} deleted; replayed {} WAL records{}",
        generation,
        table.ledgers.len(),
        table.deleted.len(),
        replayed,
        if existed { "" } else { " (a new WAL)" }
    );
    Ok(Recovered { table, generation, wal, wal_size: valid as u64, snapshot_size, lock })
}

/// Writes a snapshot file, keeping its checksum and size as it goes.
struct SnapshotWriter {
    w: BufWriter<File>,
    crc: Crc,
    size: u64,
}

impl SnapshotWriter {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.size += bytes.len() as u64;
        self.w.write_all(bytes)
    }
}

// --- the bookie -------------------------------------------------------------------------------

enum Msg {
    Line(Vec<u8>),
    /// A line longer than MAX_LINE, with the id it starts with.
    TooLong(Option<i64>),
    Eof,
}

enum PendKind {
    Add { ledger: u64 },
    Fence { ledger: u64 },
    Delete,
}

struct Pend {
    id: i64,
    kind: PendKind,
    /// An add whose ledger was deleted while it was in flight: answered no_ledger.
    cancelled: bool,
}

#[derive(Default)]
struct Stats {
    records: u64,
    writes: u64,
    syncs: u64,
    early_acks: u64,
    early_deletes: u64,
    snapshots: u64,
}

struct Bookie {
    dir: PathBuf,
    bugs: Bugs,
    table: Table,
    generation: u64,
    wal: File,
    wal_size: u64,
    snapshot_size: u64,
    /// The batch's records, not yet written.
    batch: Vec<u8>,
    /// The batch's adds, fences and deletes, in the order they were admitted.
    pending: Vec<Pend>,
    /// Responses not yet written, and the ids they answer (still in flight until written).
    out: Vec<u8>,
    answered: HashSet<i64>,
    /// The ids of `pending` (in flight).
    pending_ids: HashSet<i64>,
    cache: HashMap<(u64, u64), String>,
    cache_bytes: usize,
    /// Set when the disk failed so that nothing written since can be trusted.
    failed: Option<String>,
    stats: Stats,
    stdout: ManuallyDrop<File>,
    _lock: File,
}

fn error_line(id: Option<i64>, code: &str, message: &str) -> String {
    let id = match id {
        Some(id) => id.to_string(),
        None => "null".to_string(),
    };
    format!("{{\"id\":{},\"ok\":false,\"error\":\"{}\",\"message\":{}}}\n", id, code, jstr(message))
}

impl Bookie {
    fn answer_ok(&mut self, id: i64, extra: &str) {
        self.out.extend_from_slice(format!("{{\"id\":{},\"ok\":true{}}}\n", id, extra).as_bytes());
        self.pending_ids.remove(&id);
        self.answered.insert(id);
    }

    fn answer_err(&mut self, id: Option<i64>, code: &str, message: &str) {
        self.out.extend_from_slice(error_line(id, code, message).as_bytes());
        if let Some(id) = id {
            self.pending_ids.remove(&id);
            self.answered.insert(id);
        }
    }

    fn flush(&mut self) {
        if self.out.is_empty() {
            return;
        }
        if let Err(e) = self.stdout.write_all(&self.out) {
            die(1, &format!("cannot write responses to standard output: {}", e));
        }
        self.out.clear();
        self.answered.clear();
    }

    fn fail(&mut self, why: String) {
        eprintln!("rsbookie: the disk failed: {}; refusing writes until a restart", why);
        self.failed = Some(why);
    }

    /// Answers every pending request with the error (their records are not durable).
    fn refuse_pending(&mut self, code: &str, why: &str) {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            self.answer_err(Some(p.id), code, &format!("not acknowledged: {}", why));
        }
        self.batch.clear();
    }

    /// The group commit: the batch's records in one write, one fdatasync, then the answers.
    fn commit(&mut self) {
        if self.pending.is_empty() && self.batch.is_empty() {
            return;
        }
        if let Some(why) = self.failed.clone() {
            self.refuse_pending("io_error", &why);
            return;
        }
        let before = self.wal_size;
        if let Err(e) = self.wal.write_all(&self.batch) {
            // io_error, not no_space: the batch is already in memory, so it may be read.
            let why = format!("the WAL write failed: {}", e);
            if let Err(e2) = self.wal.set_len(before) {
                self.fail(format!("{}, and cutting it back failed: {}", why, e2));
            }
            self.refuse_pending("io_error", &why);
            return;
        }
        self.wal_size += self.batch.len() as u64;
        self.stats.writes += 1;
        self.stats.records += self.pending.len() as u64;
        self.batch.clear();
        let mut pending = std::mem::take(&mut self.pending);
        if self.bugs.ack_before_fsync {
            // BUG ack-before-fsync: the adds are answered once written, before the fdatasync.
            let (adds, rest): (Vec<Pend>, Vec<Pend>) =
                pending.into_iter().partition(|p| matches!(p.kind, PendKind::Add { .. }));
            for p in adds {
                if p.cancelled {
                    self.answer_err(Some(p.id), "no_ledger", "its ledger was deleted");
                } else {
                    self.answer_ok(p.id, "");
                    self.stats.early_acks += 1;
                }
            }
            pending = rest;
            self.flush();
        }
        if let Err(e) = self.wal.sync_data() {
            let why = format!("the WAL fdatasync failed: {}", e);
            self.fail(why.clone());
            self.pending = pending;
            self.refuse_pending("io_error", &why);
            return;
        }
        self.stats.syncs += 1;
        for p in pending {
            match p.kind {
                PendKind::Add { .. } if p.cancelled => self.answer_err(
                    Some(p.id),
                    "no_ledger",
                    "the ledger was deleted while this add was in flight",
                ),
                PendKind::Fence { ledger } => {
                    if let Some(led) = self.table.ledgers.get_mut(&ledger) {
                        if led.fence == Fence::Pending {
                            led.fence = Fence::Durable;
                        }
                    }
                    self.answer_ok(p.id, "");
                }
                _ => self.answer_ok(p.id, ""),
            }
        }
    }

    fn in_flight(&self, id: i64) -> bool {
        self.answered.contains(&id) || self.pending_ids.contains(&id)
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Eof => self.stop(None),
            Msg::TooLong(id) => {
                let id = id.filter(|&id| !self.in_flight(id));
                self.answer_err(id, "bad_request", &format!("the line is longer than {} bytes", MAX_LINE));
            }
            Msg::Line(line) => self.handle_line(line),
        }
    }

    fn handle_line(&mut self, line: Vec<u8>) {
        if line.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\r')) {
            return;
        }
        if std::str::from_utf8(&line).is_err() {
            return self.answer_err(None, "bad_request", "the request is not UTF-8");
        }
        let fields = match parse_json(&line) {
            Ok(Some(fields)) => fields,
            Ok(None) => return self.answer_err(None, "bad_request", "a request is a JSON object"),
            Err(message) => return self.answer_err(None, "bad_request", &message),
        };
        drop(line);
        let id = match request_id(&fields) {
            Some(id) => id,
            None => {
                let got = field(&fields, "id").map(|v| v.describe()).unwrap_or_else(|| "none".to_string());
                return self.answer_err(
                    None,
                    "bad_request",
                    &format!("'id' must be an integer from -2^63 to 2^63-1, got {}", got),
                );
            }
        };
        if self.in_flight(id) {
            return self.answer_err(None, "bad_request", &format!("the id {} is already in flight", id));
        }
        let req = match build(&fields) {
            Ok(req) => req,
            Err(message) => return self.answer_err(Some(id), "bad_request", &message),
        };
        drop(fields);
        match req {
            Req::Add { ledger, entry, key, data } => self.add(id, ledger, entry, key, data),
            Req::Fence { ledger, key } => self.fence(id, ledger, key),
            Req::Read { ledger, entry } => self.read(id, ledger, entry),
            Req::Delete { ledger } => self.delete(id, ledger),
            Req::Checkpoint => self.checkpoint(id),
            Req::Shutdown => self.stop(Some(id)),
            Req::Inspect | Req::Gc | Req::WriteClose => {
                self.answer_err(Some(id), "unsupported", "rsbookie does not serve this op");
                self.flush();
            }
        }
    }

    fn add(&mut self, id: i64, ledger: u64, entry: u64, key: Vec<u8>, data: Vec<u8>) {
        if let Some(why) = self.failed.clone() {
            return self.answer_err(Some(id), "io_error", &why);
        }
        if self.table.deleted.contains(&ledger) {
            return self.answer_err(Some(id), "no_ledger", "the ledger was deleted");
        }
        if let Some(led) = self.table.ledgers.get(&ledger) {
            // BUG ignore-key: the key is not compared on the add path.
            if !self.bugs.ignore_key && led.key != key {
                return self.answer_err(Some(id), "unauthorized", "the master key differs from the ledger's");
            }
            // BUG admit-while-fencing: only a durable fence refuses the add.
            let fenced = if self.bugs.admit_while_fencing {
                led.fence == Fence::Durable
            } else {
                led.fence != Fence::No
            };
            if fenced {
                return self.answer_err(Some(id), "fenced", "the ledger is fenced");
            }
        }
        put_record(&mut self.batch, &Rec::Add { ledger, entry, key: &key, data: &data });
        if let Some(old) = self.cache.remove(&(ledger, entry)) {
            self.cache_bytes -= old.len();
        }
        let led = self.table.ledgers.entry(ledger).or_insert_with(|| Ledger {
            key,
            fence: Fence::No,
            entries: BTreeMap::new(),
        });
        led.entries.insert(entry, data);
        self.pending.push(Pend { id, kind: PendKind::Add { ledger }, cancelled: false });
        self.pending_ids.insert(id);
    }

    fn fence(&mut self, id: i64, ledger: u64, key: Vec<u8>) {
        if let Some(why) = self.failed.clone() {
            return self.answer_err(Some(id), "io_error", &why);
        }
        if self.table.deleted.contains(&ledger) {
            return self.answer_err(Some(id), "no_ledger", "the ledger was deleted");
        }
        if let Some(led) = self.table.ledgers.get(&ledger) {
            if led.key != key {
                return self.answer_err(Some(id), "unauthorized", "the master key differs from the ledger's");
            }
        }
        put_record(&mut self.batch, &Rec::Fence { ledger, key: &key });
        let led = self.table.ledgers.entry(ledger).or_insert_with(|| Ledger {
            key,
            fence: Fence::No,
            entries: BTreeMap::new(),
        });
        if led.fence == Fence::No {
            led.fence = Fence::Pending;
        }
        self.pending.push(Pend { id, kind: PendKind::Fence { ledger }, cancelled: false });
        self.pending_ids.insert(id);
    }

    fn read(&mut self, id: i64, ledger: u64, entry: u64) {
        // Sees every add admitted before it: those become durable (and answered) first.
        self.commit();
        let cached = self.cache.get(&(ledger, entry)).cloned();
        if let Some(text) = cached {
            self.answer_ok(id, &format!(",\"data\":\"{}\"", text));
        } else if self.table.deleted.contains(&ledger) {
            self.answer_err(Some(id), "no_ledger", "the ledger was deleted");
        } else {
            match self.table.ledgers.get(&ledger) {
                None => self.answer_err(Some(id), "no_ledger", "no such ledger"),
                Some(led) => match led.entries.get(&entry) {
                    None => self.answer_err(Some(id), "no_entry", "the ledger has no such entry"),
                    Some(data) => {
                        let text = b64_encode(data);
                        self.answer_ok(id, &format!(",\"data\":\"{}\"", text));
                        if self.cache_bytes + text.len() > CACHE_MAX_BYTES {
                            self.cache.clear();
                            self.cache_bytes = 0;
                        }
                        if text.len() <= CACHE_MAX_BYTES {
                            self.cache_bytes += text.len();
                            self.cache.insert((ledger, entry), text);
                        }
                    }
                },
            }
        }
        self.flush();
    }

    fn delete(&mut self, id: i64, ledger: u64) {
        if let Some(why) = self.failed.clone() {
            self.commit();
            self.answer_err(Some(id), "io_error", &why);
            return self.flush();
        }
        // Adds of the ledger still in flight are answered no_ledger; their records stay in the
        // batch, before the delete's, so a replay deletes them too.
        for p in self.pending.iter_mut() {
            if let PendKind::Add { ledger: l } = p.kind {
                if l == ledger {
                    p.cancelled = true;
                }
            }
        }
        self.table.ledgers.remove(&ledger);
        self.table.deleted.insert(ledger);
        // BUG stale-cache: the delete leaves the ledger's cached answers in place.
        if !self.bugs.stale_cache {
            let mut freed = 0;
            self.cache.retain(|&(l, _), text| {
                if l == ledger {
                    freed += text.len();
                }
                l != ledger
            });
            self.cache_bytes -= freed;
        }
        if self.bugs.delete_before_fsync {
            // BUG delete-before-fsync: the batch before it is committed properly, then the
            // delete's record is written and answered with no fdatasync of its own.
            self.commit();
            let mut record = Vec::new();
            put_record(&mut record, &Rec::Delete { ledger });
            match self.wal.write_all(&record) {
                Ok(()) => {
                    self.wal_size += record.len() as u64;
                    self.stats.writes += 1;
                    self.stats.records += 1;
                    self.stats.early_deletes += 1;
                    self.answer_ok(id, "");
                }
                Err(e) => {
                    let why = format!("the WAL write failed: {}", e);
                    self.fail(why.clone());
                    self.answer_err(Some(id), "io_error", &why);
                }
            }
        } else {
            put_record(&mut self.batch, &Rec::Delete { ledger });
            self.pending.push(Pend { id, kind: PendKind::Delete, cancelled: false });
            self.pending_ids.insert(id);
            self.commit();
        }
        self.flush();
    }

    fn checkpoint(&mut self, id: i64) {
        self.commit();
        if let Some(why) = self.failed.clone() {
            self.answer_err(Some(id), "io_error", &why);
            return self.flush();
        }
        match self.snapshot() {
            Ok(()) => self.answer_ok(id, ""),
            Err(why) => self.answer_err(Some(id), "io_error", &why),
        }
        self.flush();
    }

    /// After a batch: a snapshot when the WAL has grown past its bound.
    fn maybe_snapshot(&mut self) {
        if self.failed.is_none()
            && self.pending.is_empty()
            && self.wal_size > WAL_SNAPSHOT_MIN
            && self.wal_size > self.snapshot_size
        {
            if let Err(why) = self.snapshot() {
                eprintln!("rsbookie: a snapshot failed: {}", why);
            }
        }
    }

    fn write_snapshot(&self, path: &Path) -> io::Result<u64> {
        let mut w = SnapshotWriter {
            w: BufWriter::with_capacity(1 << 20, File::create(path)?),
            crc: Crc::new(),
            size: 0,
        };
        w.put(SNAP_MAGIC)?;
        w.put(&(self.generation + 1).to_le_bytes())?;
        let mut record = Vec::new();
        for (&ledger, led) in &self.table.ledgers {
            for (&entry, data) in &led.entries {
                record.clear();
                put_record(&mut record, &Rec::Add { ledger, entry, key: &led.key, data });
                w.put(&record)?;
            }
            if led.fence != Fence::No {
                record.clear();
                put_record(&mut record, &Rec::Fence { ledger, key: &led.key });
                w.put(&record)?;
            }
        }
        for &ledger in &self.table.deleted {
            record.clear();
            put_record(&mut record, &Rec::Delete { ledger });
            w.put(&record)?;
        }
        let body = w.size - SNAP_HEADER as u64;
        w.put(SNAP_TAIL)?;
        w.put(&body.to_le_bytes())?;
        let sum = w.crc.finish();
        w.w.write_all(&sum.to_le_bytes())?;
        let size = w.size + 4;
        let file = w.w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(size)
    }

    /// The snapshot switch of the header comment. Err leaves the bookie on its generation
    /// when nothing was renamed yet, else failed (a restart would use the new generation).
    fn snapshot(&mut self) -> Result<(), String> {
        assert!(self.pending.is_empty() && self.batch.is_empty());
        let next = self.generation + 1;
        let tmp = self.dir.join(format!("snapshot-{}.tmp", next));
        let size = match self.write_snapshot(&tmp) {
            Ok(size) => size,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(format!("cannot write {}: {}", tmp.display(), e));
            }
        };
        if let Err(e) = fs::rename(&tmp, snapshot_path(&self.dir, next)) {
            let _ = fs::remove_file(&tmp);
            return Err(format!("cannot rename {}: {}", tmp.display(), e));
        }
        let switched = fsync_dir(&self.dir).and_then(|()| {
            let wal = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .truncate(false)
                .open(wal_path(&self.dir, next))?;
            wal.set_len(0)?;
            wal.sync_all()?;
            fsync_dir(&self.dir)?;
            Ok(wal)
        });
        let wal = match switched {
            Ok(wal) => wal,
            Err(e) => {
                let why = format!("the snapshot switch to generation {} failed: {}", next, e);
                self.fail(why.clone());
                return Err(why);
            }
        };
        let old = self.generation;
        self.wal = wal;
        self.wal_size = 0;
        self.generation = next;
        self.snapshot_size = size;
        self.stats.snapshots += 1;
        let _ = fs::remove_file(snapshot_path(&self.dir, old));
        let _ = fs::remove_file(wal_path(&self.dir, old));
        let _ = fsync_dir(&self.dir);
        Ok(())
    }

    /// A clean stop: `shutdown` (its id) or the end of input (None).
    fn stop(&mut self, id: Option<i64>) -> ! {
        self.commit();
        let status = match (&self.failed, id) {
            (Some(why), Some(id)) => {
                let why = why.clone();
                self.answer_err(Some(id), "io_error", &why);
                1
            }
            (Some(_), None) => 1,
            (None, Some(id)) => {
                self.answer_ok(id, "");
                0
            }
            (None, None) => 0,
        };
        self.flush();
        let s = &self.stats;
        eprintln!(
            "rsbookie: stopped: {} records in {} writes, {} fdatasyncs; {} acks before their \
             fdatasync; {} deletes answered before their fdatasync; {} snapshots",
            s.records, s.writes, s.syncs, s.early_acks, s.early_deletes, s.snapshots
        );
        std::process::exit(status);
    }
}

// --- standard input ---------------------------------------------------------------------------

/// Reads standard input into lines (a `\r` before the `\n` dropped), skipping the rest of a
/// line longer than MAX_LINE, and hands them to the main thread in order.
fn read_lines(tx: SyncSender<Msg>) {
    let mut stdin = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let mut buf = vec![0u8; 1 << 20];
    let mut line: Vec<u8> = Vec::new();
    let mut skipping: Option<Option<i64>> = None;
    let mut partial = false;
    let end_line = |line: &mut Vec<u8>, skipping: &mut Option<Option<i64>>| -> bool {
        let msg = match skipping.take() {
            Some(id) => Msg::TooLong(id),
            None => {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > MAX_LINE {
                    Msg::TooLong(leading_id(&line[..64]))
                } else {
                    Msg::Line(std::mem::take(line))
                }
            }
        };
        line.clear();
        tx.send(msg).is_ok()
    };
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("rsbookie: reading standard input failed: {}", e);
                break;
            }
        };
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let (piece, ends) = match chunk.iter().position(|&b| b == b'\n') {
                Some(p) => (&chunk[..p], Some(p + 1)),
                None => (chunk, None),
            };
            if skipping.is_none() {
                if line.len() + piece.len() > MAX_LINE + 1 {
                    let mut head = line[..line.len().min(64)].to_vec();
                    head.extend_from_slice(&piece[..piece.len().min(64)]);
                    skipping = Some(leading_id(&head));
                    line = Vec::new();
                } else {
                    line.extend_from_slice(piece);
                }
            }
            partial = true;
            match ends {
                Some(p) => {
                    partial = false;
                    if !end_line(&mut line, &mut skipping) {
                        return;
                    }
                    chunk = &chunk[p..];
                }
                None => chunk = &[],
            }
        }
    }
    if partial && !end_line(&mut line, &mut skipping) {
        return;
    }
    let _ = tx.send(Msg::Eof);
}

fn main() {
    let (dir, bugs, names) = parse_args();
    if !names.is_empty() {
        eprintln!("rsbookie: deliberate bugs on: {}", names.join(", "));
    }
    let recovered = match recover(&dir, &bugs) {
        Ok(r) => r,
        Err(message) => die(1, &message),
    };
    let mut bookie = Bookie {
        dir,
        bugs,
        table: recovered.table,
        generation: recovered.generation,
        wal: recovered.wal,
        wal_size: recovered.wal_size,
        snapshot_size: recovered.snapshot_size,
        batch: Vec::new(),
        pending: Vec::new(),
        out: Vec::new(),
        answered: HashSet::new(),
        pending_ids: HashSet::new(),
        cache: HashMap::new(),
        cache_bytes: 0,
        failed: None,
        stats: Stats::default(),
        stdout: ManuallyDrop::new(unsafe { File::from_raw_fd(1) }),
        _lock: recovered.lock,
    };
    let (tx, rx): (SyncSender<Msg>, Receiver<Msg>) = sync_channel(CHANNEL_LINES);
    thread::spawn(move || read_lines(tx));
    bookie.out.extend_from_slice(
        format!(
            "{{\"id\":null,\"ok\":true,\"event\":\"ready\",\"version\":2,\"max_data_bytes\":{},\
             \"max_key_bytes\":{},\"max_line_bytes\":{},\"bookie\":{},\"ops\":[\"checkpoint\"],\
             \"state\":\"none\",\"answers\":\"bkref\"}}\n",
            MAX_DATA,
            MAX_KEY,
            MAX_LINE,
            jstr(NAME)
        )
        .as_bytes(),
    );
    bookie.flush();
    loop {
        let first = rx.recv().unwrap_or(Msg::Eof);
        bookie.handle(first);
        while bookie.pending.len() < MAX_IN_FLIGHT && bookie.batch.len() < BATCH_MAX_BYTES {
            match rx.try_recv() {
                Ok(msg) => bookie.handle(msg),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => bookie.handle(Msg::Eof),
            }
        }
        bookie.commit();
        bookie.flush();
        bookie.maybe_snapshot();
    }
}
