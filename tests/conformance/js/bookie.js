#!/usr/bin/env node
// A small bookie in JavaScript that speaks the adapter protocol (spec/adapter.md, version 2
// ready line of the conformance kit), written from that page alone: the proof that the
// conformance kit judges any bookie, not only bkref's own.
//
// Usage: node bookie.js [DATA_DIR] [--bare] [--bug NAME ...]   (DATA_DIR defaults to
// $BKREF_DATA_DIR; --bare claims no optional op and state none)
//
// Why it is shaped so:
// - One append-only log file, DATA_DIR/bookie.log, of records `u32 body length, u32 crc32
//   of the body, body` (little endian). A body is `u8 type, u64 ledger` then, for an add,
//   `u64 entry, u16 key length, key, data`; for a fence, `u16 key length, key`; a delete has
//   nothing more. The log is the only state; memory holds an index of it (ledger -> key,
//   fence, entry -> offset of its data in the log).
// - Group commit: every add, fence and delete admitted in one event-loop turn is queued; a
//   setImmediate callback writes the queue with ONE write, makes it durable with ONE
//   fdatasync, and only then answers the requests. Deletes, checkpoints and inspects block
//   reading until their batch is durable (they are synchronous in the protocol).
// - Crash safety: the file and the data directory are fsynced when created; at start the log
//   is read record by record and cut at the first record whose length or checksum does not
//   hold (a torn or lost tail: nothing after it was ever acknowledged, because each batch is
//   one write followed by its fdatasync before any answer), and the cut is made durable,
//   and so is everything recovery kept: a kill leaves unsynced records in the page cache,
//   which recovery then shows, and what it shows must survive a later power loss (the kit
//   caught this bookie without that fsync, once its workload read back entries in flight at
//   a kill and then lost power).
//   Recovery refuses nothing a crash can leave; it fails (exit 1) only when the directory or
//   the file cannot be used at all.
// - Answers profile: `bkref`. A deleted ledger stays deleted: an add or a fence of it is
//   refused with no_ledger, and an add in flight when its ledger's delete is carried out is
//   answered no_ledger (never ok), as spec/adapter.md "delete" says.
// - inspect gives state `protocol`: the live ledgers (last entry, fence) and the deleted
//   ledgers; the other fields have their version 1 shape, empty or zero. An inspect first
//   makes everything admitted before it durable (and answers it), so the state it shows is
//   what a client learnt.
//
// Deliberate bugs, for the conformance kit's own tests (`--bug NAME`, repeatable):
// - ack-before-fsync: add batches are answered after their write, before any fdatasync (the
//   data reaches the page cache, so it survives SIGKILL; only a power loss loses it).
// - forget-fences: fence records are ignored at recovery, so a fence is undone by a restart.
// - stale-cache: reads are cached and the cache is never invalidated, so a read that found
//   no entry keeps finding none after the add is acknowledged (and one that found no ledger
//   makes every entry of that ledger no_ledger), and a deleted entry stays readable, until a
//   restart empties the cache.
// - unsynced-recovery: recovery fsyncs the log only when it cut a torn tail, so records a
//   kill left in the page cache, never fsynced, are served after the restart and lost at a
//   later power loss (this bookie's own bug, found by the kit: docs/conformance.md).

"use strict";

const fs = require("fs");
const path = require("path");
const zlib = require("zlib");

const BUGS = new Set(["ack-before-fsync", "forget-fences", "stale-cache", "unsynced-recovery"]);
const MAX_DATA_BYTES = 5242364;
const MAX_KEY_BYTES = 1024;
const MAX_LINE_BYTES = 6 * (4 * Math.ceil(MAX_DATA_BYTES / 3) + 2 * MAX_KEY_BYTES) + 4096;
const MAX_IN_FLIGHT = 10000;
const U63 = (1n << 63n) - 1n;
const I63_MIN = -(1n << 63n);
const LOG_NAME = "bookie.log";
const REC_ADD = 1;
const REC_FENCE = 2;
const REC_DELETE = 3;

// --- arguments --------------------------------------------------------------------------

function die(code, message) {
  process.stderr.write(`bookie.js: ${message}\n`);
  process.exit(code);
}

const bugs = new Set();
let dataDir = null;
let bare = false;
{
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--bug") {
      const name = args[++i];
      if (!BUGS.has(name)) {
        die(2, `--bug needs one of ${[...BUGS].join(", ")}, got ${JSON.stringify(name)}`);
      }
      bugs.add(name);
    } else if (args[i] === "--bare") {
      bare = true;
    } else if (dataDir === null && !args[i].startsWith("--")) {
      dataDir = args[i];
    } else {
      die(2, `unknown argument ${JSON.stringify(args[i])}; usage: bookie.js [DATA_DIR] [--bare] [--bug NAME ...]`);
    }
  }
  if (dataDir === null) dataDir = process.env.BKREF_DATA_DIR || null;
  if (!dataDir) die(2, "no data directory: give it as the first argument or in BKREF_DATA_DIR");
  dataDir = path.resolve(dataDir);
}

// --- crc32 (zlib.crc32 where Node has it) -----------------------------------------------

const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();
const crc32 =
  typeof zlib.crc32 === "function"
    ? (buf) => zlib.crc32(buf) >>> 0
    : (buf) => {
        let c = -1;
        for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
        return (c ^ -1) >>> 0;
      };

// --- the log ------------------------------------------------------------------------------

/** ledger id (decimal string) -> {key: lower-case hex, fenced, entries: Map(entry string ->
 * {off, len}), last: BigInt | null} */
const ledgers = new Map();
/** ledger ids (decimal strings) that were deleted */
const deleted = new Set();
let logFd = -1;
let logEnd = 0;

function fsyncDir(dir) {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

function encodeRecord(type, ledger, entry, keyHex, data) {
  const key = keyHex === null ? null : Buffer.from(keyHex, "hex");
  let size = 9;
  if (type === REC_ADD) size += 8 + 2 + key.length + data.length;
  else if (type === REC_FENCE) size += 2 + key.length;
  const rec = Buffer.allocUnsafe(8 + size);
  rec.writeUInt32LE(size, 0);
  let p = 8;
  rec.writeUInt8(type, p);
  rec.writeBigUInt64LE(ledger, p + 1);
  p += 9;
  if (type === REC_ADD) {
    rec.writeBigUInt64LE(entry, p);
    p += 8;
  }
  if (key !== null) {
    rec.writeUInt16LE(key.length, p);
    key.copy(rec, p + 2);
    p += 2 + key.length;
  }
  if (type === REC_ADD) data.copy(rec, p);
  rec.writeUInt32LE(crc32(rec.subarray(8)), 4);
  return rec;
}

function ledgerOf(id, keyHex) {
  let l = ledgers.get(id);
  if (l === undefined) {
    l = { key: keyHex, fenced: false, entries: new Map(), last: null };
    ledgers.set(id, l);
  }
  return l;
}

function indexEntry(l, entry, off, len) {
  l.entries.set(entry.toString(), { off, len });
  if (l.last === null || entry > l.last) l.last = entry;
}

/** Replays one record body at file offset `at` (of its header); false if it does not parse. */
function replay(body, at) {
  if (body.length < 9) return false;
  const type = body.readUInt8(0);
  const id = body.readBigUInt64LE(1).toString();
  if (type === REC_DELETE) {
    if (body.length !== 9) return false;
    ledgers.delete(id);
    deleted.add(id);
    return true;
  }
  let p = 9;
  let entry = null;
  if (type === REC_ADD) {
    if (body.length < p + 10) return false;
    entry = body.readBigUInt64LE(p);
    p += 8;
  } else if (type !== REC_FENCE || body.length < p + 2) {
    return false;
  }
  const klen = body.readUInt16LE(p);
  p += 2;
  if (body.length < p + klen || (type === REC_FENCE && body.length !== p + klen)) return false;
  const key = body.subarray(p, p + klen).toString("hex");
  p += klen;
  if (deleted.has(id)) return true; // written before its delete was carried out
  if (type === REC_FENCE && bugs.has("forget-fences")) return true;
  const l = ledgerOf(id, key);
  if (type === REC_FENCE) l.fenced = true;
  else indexEntry(l, entry, at + 8 + p, body.length - p);
  return true;
}

function recover() {
  try {
    if (!fs.existsSync(dataDir)) {
      fs.mkdirSync(dataDir, { recursive: true });
      fsyncDir(path.dirname(dataDir));
    }
    const file = path.join(dataDir, LOG_NAME);
    const created = !fs.existsSync(file);
    logFd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
    if (created) {
      fs.fsyncSync(logFd);
      fsyncDir(dataDir);
    }
    const size = fs.fstatSync(logFd).size;
    const head = Buffer.alloc(8);
    let off = 0;
    while (off + 8 <= size) {
      if (fs.readSync(logFd, head, 0, 8, off) !== 8) break;
      const len = head.readUInt32LE(0);
      if (len < 9 || off + 8 + len > size) break;
      const body = Buffer.allocUnsafe(len);
      if (fs.readSync(logFd, body, 0, len, off + 8) !== len) break;
      if (crc32(body) !== head.readUInt32LE(4) || !replay(body, off)) break;
      off += 8 + len;
    }
    if (off < size) {
      process.stderr.write(
        `bookie.js: ${file}: cut a torn tail of ${size - off} bytes at offset ${off} (never acknowledged)\n`,
      );
      fs.ftruncateSync(logFd, off);
    }
    // What recovery shows must survive a later power loss: records a kill left in the page
    // cache, never fsynced, are served from now on (spec/adapter.md R-RECOVERY-SHOWN).
    if (!bugs.has("unsynced-recovery") || off < size) fs.fsyncSync(logFd);
    logEnd = off;
  } catch (err) {
    die(1, `cannot recover the log in ${dataDir}: ${err.message}; check the directory exists and is writable`);
  }
}

// --- strict JSON ----------------------------------------------------------------------------

class JNum {
  constructor(raw, int) {
    this.raw = raw; // the text
    this.int = int; // a BigInt for an integer (a huge one clamped beyond every range), else null
  }
}

class NotJson extends Error {}

const STRING_SPECIAL = /["\\\u0000-\u001f]/g;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;
const ESCAPES = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** Parses one JSON text strictly (RFC 8259): objects become Maps (a key twice is refused),
 * numbers JNums; no recursion, so any depth parses. Throws NotJson. */
function parseJson(s) {
  let i = 0;
  const n = s.length;
  const fail = (what) => {
    throw new NotJson(`${what} at char ${i}`);
  };
  const ws = () => {
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else break;
    }
  };
  const str = () => {
    i++; // the opening quote
    let out = "";
    for (;;) {
      STRING_SPECIAL.lastIndex = i;
      const m = STRING_SPECIAL.exec(s);
      if (m === null) fail("unterminated string");
      out += s.slice(i, m.index);
      i = m.index;
      const c = s[i];
      if (c === '"') {
        i++;
        return out;
      }
      if (c !== "\\") fail("a control character in a string");
      const e = s[i + 1];
      if (e === "u") {
        const hex = s.slice(i + 2, i + 6);
        if (!HEX4.test(hex)) fail("a bad \\u escape");
        out += String.fromCharCode(parseInt(hex, 16));
        i += 6;
      } else if (e !== undefined && Object.prototype.hasOwnProperty.call(ESCAPES, e)) {
        out += ESCAPES[e];
        i += 2;
      } else {
        fail("a bad escape");
      }
    }
  };
  const key = (m) => {
    if (s[i] !== '"') fail("expected a key");
    const k = str();
    if (m.has(k)) fail(`the key ${JSON.stringify(k)} appears twice`);
    ws();
    if (s[i] !== ":") fail("expected ':'");
    i++;
    return k;
  };
  const stack = [];
  for (;;) {
    ws();
    let value;
    const c = s[i];
    if (c === "{") {
      i++;
      ws();
      if (s[i] === "}") {
        i++;
        value = new Map();
      } else {
        const m = new Map();
        stack.push({ m, k: key(m) });
        continue;
      }
    } else if (c === "[") {
      i++;
      ws();
      if (s[i] === "]") {
        i++;
        value = [];
      } else {
        stack.push({ a: [] });
        continue;
      }
    } else if (c === '"') {
      value = str();
    } else if (c === "-" || (c >= "0" && c <= "9")) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(s);
      if (m === null) fail("a bad number");
      const raw = m[0];
      i += raw.length;
      let int = null;
      if (m[1] === undefined && m[2] === undefined) {
        // Thousands of digits are out of every range: no need to build the BigInt.
        const digits = raw.length - (raw[0] === "-" ? 1 : 0);
        int = digits > 40 ? (raw[0] === "-" ? -(1n << 200n) : 1n << 200n) : BigInt(raw);
      }
      value = new JNum(raw, int);
    } else if (s.startsWith("true", i)) {
      i += 4;
      value = true;
    } else if (s.startsWith("false", i)) {
      i += 5;
      value = false;
    } else if (s.startsWith("null", i)) {
      i += 4;
      value = null;
    } else {
      fail("expected a value");
    }
    for (;;) {
      if (stack.length === 0) {
        ws();
        if (i !== n) fail("extra data after the value");
        return value;
      }
      const top = stack[stack.length - 1];
      if (top.a) top.a.push(value);
      else top.m.set(top.k, value);
      ws();
      if (s[i] === ",") {
        i++;
        if (top.m) {
          ws();
          top.k = key(top.m);
        }
        break; // the next value
      }
      if (s[i] === (top.a ? "]" : "}")) {
        i++;
        stack.pop();
        value = top.a || top.m;
        continue;
      }
      fail(top.a ? "expected ',' or ']'" : "expected ',' or '}'");
    }
  }
}

// --- responses ----------------------------------------------------------------------------

/** JSON text in ASCII: every non-ASCII character as a \u escape. */
function ascii(value) {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"),
  );
}

const inFlight = new Set(); // ids (decimal strings)
let out = [];

function emit(id, body) {
  if (id !== null) inFlight.delete(id);
  out.push(`{"id":${id === null ? "null" : id},"ok":${body}}\n`);
}
const okLine = (id, extra = "") => emit(id, "true" + extra);
const errLine = (id, code, message) =>
  emit(id, `false,"error":"${code}","message":${ascii(message)}`);

let stdoutBroken = false;
process.stdout.on("error", () => {
  stdoutBroken = true; // the client stopped reading; keep serving to the end of input
});
function flushOut(done) {
  if (out.length === 0 || stdoutBroken) {
    out = [];
    if (done) done();
    return;
  }
  const text = out.join("");
  out = [];
  process.stdout.write(text, done ? () => done() : undefined);
}

// --- requests -----------------------------------------------------------------------------

const FIELDS = {
  add: ["ledger", "entry", "key", "data"],
  read: ["ledger", "entry"],
  fence: ["ledger", "key"],
  write_close: ["ledger", "key"],
  delete: ["ledger"],
  checkpoint: [],
  gc: ["force"],
  inspect: [],
  shutdown: [],
};
// `--bare` claims the least the spec allows: no optional op, state none (the outsider's
// configuration of issue 25): checkpoint and inspect are then answered unsupported.
const SUPPORTED_OPTIONAL = new Set(bare ? [] : ["checkpoint", "inspect"]);
const UNSUPPORTED = new Set(["write_close", "gc", "checkpoint", "inspect"]);
const RANGE = "an integer from 0 to 9223372036854775807";
const NEEDS = {
  ledger: RANGE,
  entry: RANGE,
  key: "a string of hex digits",
  data: "a string in standard base64",
  force: "true or false",
};
const HEX = /^[0-9a-fA-F]*$/;
const B64 = /^[A-Za-z0-9+/]*$/;
const B64_VALUE = (c) => "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".indexOf(c);

class Bad extends Error {}

function describe(v) {
  if (v instanceof JNum) return v.raw.length > 40 ? `${v.raw.slice(0, 40)}... (${v.raw.length} chars)` : v.raw;
  if (v instanceof Map) return "an object";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return v.length > 40 ? "a string of " + v.length + " chars" : JSON.stringify(v);
  return String(v);
}

function field(name, v) {
  if (name === "ledger" || name === "entry") {
    if (!(v instanceof JNum) || v.int === null) throw new Bad(`'${name}' must be ${RANGE}, got ${describe(v)}`);
    if (v.int < 0n || v.int > U63) throw new Bad(`'${name}' must be from 0 to 9223372036854775807, got ${describe(v)}`);
    return v.int;
  }
  if (name === "key") {
    if (typeof v !== "string") throw new Bad(`'key' must be a string of hex digits, got ${describe(v)}`);
    if (!HEX.test(v)) throw new Bad("'key' must be hex digits only");
    if (v.length % 2 !== 0) throw new Bad(`'key' must have an even number of hex digits, got ${v.length}`);
    if (v.length / 2 > MAX_KEY_BYTES) throw new Bad(`'key' is ${v.length / 2} bytes, above max_key_bytes ${MAX_KEY_BYTES}`);
    return v.toLowerCase();
  }
  if (name === "data") {
    if (typeof v !== "string") throw new Bad(`'data' must be a base64 string, got ${describe(v)}`);
    if (v.length % 4 !== 0) throw new Bad("'data' is not strict base64: its length is not a multiple of 4");
    const pad = v.endsWith("==") ? 2 : v.endsWith("=") ? 1 : 0;
    const body = v.slice(0, v.length - pad);
    if (!B64.test(body)) throw new Bad("'data' is not strict base64 (standard alphabet, padding only at the end)");
    if (pad === 2 && (B64_VALUE(body[body.length - 1]) & 0x0f) !== 0) throw new Bad("'data' is not strict base64: nonzero pad bits");
    if (pad === 1 && (B64_VALUE(body[body.length - 1]) & 0x03) !== 0) throw new Bad("'data' is not strict base64: nonzero pad bits");
    const size = (v.length / 4) * 3 - pad;
    if (size > MAX_DATA_BYTES) throw new Bad(`'data' is ${size} bytes once decoded, above max_data_bytes ${MAX_DATA_BYTES}`);
    return Buffer.from(v, "base64");
  }
  if (typeof v !== "boolean") throw new Bad(`'force' must be true or false, got ${describe(v)}`);
  return v;
}

/** {id, bad} for a malformed request (id null or the request's), else {id, op, f}. */
function parseRequest(text) {
  let doc;
  try {
    doc = parseJson(text);
  } catch (err) {
    if (err instanceof NotJson) return { id: null, bad: `the request is not JSON: ${err.message}` };
    throw err;
  }
  if (!(doc instanceof Map)) return { id: null, bad: "the request is not a JSON object" };
  const idv = doc.get("id");
  if (!(idv instanceof JNum) || idv.int === null || idv.int < I63_MIN || idv.int > U63) {
    return { id: null, bad: `'id' must be an integer from -2^63 to 2^63-1, got ${doc.has("id") ? describe(idv) : "none"}` };
  }
  const id = idv.int.toString();
  if (inFlight.has(id)) return { id: null, bad: `the id ${id} is in flight; reuse an id only after its response` };
  const op = doc.get("op");
  if (op === undefined) return { id, bad: "the request has no 'op'" };
  if (typeof op !== "string") return { id, bad: `'op' must be a string, got ${describe(op)}` };
  const names = FIELDS[op];
  if (!Object.prototype.hasOwnProperty.call(FIELDS, op)) return { id, bad: `unknown op ${JSON.stringify(op)}` };
  for (const k of doc.keys()) {
    if (k !== "id" && k !== "op" && !names.includes(k)) return { id, bad: `'${op}' does not take ${JSON.stringify(k)}` };
  }
  const f = {};
  try {
    for (const name of names) {
      if (!doc.has(name)) throw new Bad(`'${op}' needs '${name}' (${NEEDS[name]})`);
      f[name] = field(name, doc.get(name));
    }
  } catch (err) {
    if (err instanceof Bad) return { id, bad: err.message };
    throw err;
  }
  return { id, op, f };
}

// --- the bookie -----------------------------------------------------------------------------

let batch = []; // {kind, id, rec, ledger, entry, key, doomed}
let flushScheduled = false;
let blocked = false; // a synchronous request waits for its batch
let stopping = false; // shutdown or end of input: read nothing more
let unsynced = false; // ack-before-fsync: written, not yet fdatasynced
// Counted for the clean shutdown's line on stderr (tests read it to see group commit).
const stats = { records: 0, writes: 0, fdatasyncs: 0, earlyAcks: 0 };
// stale-cache: "ledger:entry" (or "ledger:*" for a missing ledger) -> the answer given
const cache = new Map();

function schedule() {
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flush);
  }
}

function flush() {
  flushScheduled = false;
  const items = batch;
  batch = [];
  const recs = items.filter((it) => it.rec !== null).map((it) => it.rec);
  if (recs.length > 0) {
    const buf = recs.length === 1 ? recs[0] : Buffer.concat(recs);
    let at = logEnd;
    for (const it of items) {
      if (it.rec !== null) {
        it.at = at;
        at += it.rec.length;
      }
    }
    try {
      let done = 0;
      while (done < buf.length) done += fs.writeSync(logFd, buf, done, buf.length - done, logEnd + done);
      logEnd += buf.length;
      stats.records += recs.length;
      stats.writes += 1;
      const addsOnly = items.every((it) => it.kind === "add");
      if (bugs.has("ack-before-fsync") && addsOnly) {
        unsynced = true; // answered now; synced by a later batch, or never
        stats.earlyAcks += items.length;
      } else {
        fs.fdatasyncSync(logFd);
        stats.fdatasyncs += 1;
        unsynced = false;
      }
    } catch (err) {
      // The disk failed: nothing of this batch is acknowledged; stop, as a crash would.
      for (const it of items) if (it.id !== null) errLine(it.id, "io_error", `the log write failed (${err.message}); not acknowledged`);
      flushOut(() => process.exit(1));
      return;
    }
  } else if (unsynced && items.some((it) => it.kind !== "add")) {
    fs.fdatasyncSync(logFd);
    stats.fdatasyncs += 1;
    unsynced = false;
  }
  let finish = null;
  for (const it of items) {
    switch (it.kind) {
      case "add": {
        if (it.doomed) {
          errLine(it.id, "no_ledger", `ledger ${it.ledger} was deleted while this add was in flight; not acknowledged`);
          break;
        }
        const l = ledgers.get(it.ledger);
        const keyLen = it.key.length / 2;
        indexEntry(l, it.entry, it.at + 8 + 9 + 8 + 2 + keyLen, it.rec.length - (8 + 9 + 8 + 2 + keyLen));
        okLine(it.id);
        break;
      }
      case "fence":
      case "delete":
      case "checkpoint":
        okLine(it.id);
        break;
      case "inspect":
        okLine(it.id, `,"state":${stateJson()}`);
        break;
      case "stop":
        finish = it;
        break;
      default:
        throw new Error(`unknown batch item ${it.kind}`);
    }
  }
  if (finish !== null) {
    if (finish.id !== null) okLine(finish.id);
    try {
      fs.fsyncSync(logFd);
      fs.closeSync(logFd);
      process.stderr.write(
        `bookie.js: clean shutdown: ${stats.records} records in ${stats.writes} writes, ` +
          `${stats.fdatasyncs} fdatasyncs, ${stats.earlyAcks} acks before their fdatasync\n`,
      );
    } catch (err) {
      process.stderr.write(`bookie.js: clean shutdown failed: ${err.message}\n`);
      flushOut(() => process.exit(1));
      return;
    }
    flushOut(() => process.exit(0));
    return;
  }
  flushOut();
  blocked = false;
  pump();
}

function stateJson() {
  const ids = (set) => [...set].map(BigInt).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const live = ids(ledgers.keys())
    .map((id) => {
      const l = ledgers.get(id.toString());
      return `{"ledger_id":${id},"last_entry":${l.last === null ? "null" : l.last},"fenced":${l.fenced}}`;
    })
    .join(",");
  const fenced = ids([...ledgers.keys()].filter((id) => ledgers.get(id).fenced)).join(",");
  const zero = '{"journal_id":0,"offset":0}';
  return (
    `{"entry_logs":[],"least_unflushed_log_id":0,"last_mark":${zero},"journal_mark":${zero},` +
    `"current_log_id":null,"ledgers":[${live}],"fenced_ledgers":[${fenced}],` +
    `"deleted_ledgers":[${ids(deleted).join(",")}],"compaction_files":[]}`
  );
}

/** Queues a request answered after its batch is durable. */
function enqueue(item) {
  if (item.id !== null) inFlight.add(item.id);
  batch.push({ rec: null, doomed: false, ...item });
  schedule();
}

function admit(id, ledger, keyHex) {
  const lid = ledger.toString();
  if (deleted.has(lid)) {
    errLine(id, "no_ledger", `ledger ${lid} was deleted; a deleted ledger is never written again`);
    return null;
  }
  const l = ledgers.get(lid);
  if (l !== undefined && l.key !== keyHex) {
    errLine(id, "unauthorized", `the master key differs from the one ledger ${lid} was first written with`);
    return null;
  }
  return lid;
}

function handle(req) {
  const { id, op, f } = req;
  switch (op) {
    case "add": {
      const lid = admit(id, f.ledger, f.key);
      if (lid === null) return;
      const l = ledgers.get(lid);
      if (l !== undefined && l.fenced) {
        errLine(id, "fenced", `ledger ${lid} is fenced: no add to it is acknowledged any more`);
        return;
      }
      ledgerOf(lid, f.key);
      const rec = encodeRecord(REC_ADD, f.ledger, f.entry, f.key, f.data);
      enqueue({ kind: "add", id, rec, ledger: lid, entry: f.entry, key: f.key });
      return;
    }
    case "fence": {
      const lid = admit(id, f.ledger, f.key);
      if (lid === null) return;
      ledgerOf(lid, f.key).fenced = true;
      enqueue({ kind: "fence", id, rec: encodeRecord(REC_FENCE, f.ledger, null, f.key, null) });
      return;
    }
    case "delete": {
      const lid = f.ledger.toString();
      for (const it of batch) if (it.kind === "add" && it.ledger === lid) it.doomed = true;
      ledgers.delete(lid);
      deleted.add(lid);
      enqueue({ kind: "delete", id, rec: encodeRecord(REC_DELETE, f.ledger, null, null, null) });
      blocked = true;
      return;
    }
    case "read": {
      const ck = `${f.ledger}:${f.entry}`;
      if (bugs.has("stale-cache")) {
        const hit = cache.get(ck) ?? cache.get(`${f.ledger}:*`);
        if (hit !== undefined) {
          emit(id, hit);
          return;
        }
      }
      const l = ledgers.get(f.ledger.toString());
      let body;
      if (l === undefined) {
        body = `false,"error":"no_ledger","message":${ascii(`ledger ${f.ledger} does not exist (never written, or deleted)`)}`;
      } else {
        const e = l.entries.get(f.entry.toString());
        if (e === undefined) {
          body = `false,"error":"no_entry","message":${ascii(`ledger ${f.ledger} holds no entry ${f.entry}`)}`;
        } else {
          const buf = Buffer.allocUnsafe(e.len);
          let got = 0;
          try {
            while (got < e.len) {
              const n = fs.readSync(logFd, buf, got, e.len - got, e.off + got);
              if (n === 0) throw new Error("unexpected end of file");
              got += n;
            }
            body = `true,"data":"${buf.toString("base64")}"`;
          } catch (err) {
            body = `false,"error":"io_error","message":${ascii(`reading ${LOG_NAME} at offset ${e.off} failed: ${err.message}`)}`;
          }
        }
      }
      if (bugs.has("stale-cache")) cache.set(l === undefined ? `${f.ledger}:*` : ck, body);
      emit(id, body);
      return;
    }
    case SUPPORTED_OPTIONAL.has("checkpoint") ? "checkpoint" : "-":
    case SUPPORTED_OPTIONAL.has("inspect") ? "inspect" : "-":
      if (batch.length === 0 && !unsynced) {
        if (op === "checkpoint") okLine(id);
        else okLine(id, `,"state":${stateJson()}`);
        return;
      }
      enqueue({ kind: op, id });
      blocked = true;
      return;
    case "shutdown":
      enqueue({ kind: "stop", id });
      stop();
      return;
    default:
      if (UNSUPPORTED.has(op) && !SUPPORTED_OPTIONAL.has(op)) {
        errLine(id, "unsupported", `this bookie does not support '${op}'; nothing was done`);
        return;
      }
      throw new Error(`no handler for ${op}`);
  }
}

// --- reading requests ---------------------------------------------------------------------

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const queue = []; // Buffers (whole lines without their \n) or {long: prefix}
let pieces = [];
let piecesLen = 0;
let skipping = null; // the first bytes of an overlong line being skipped
let inputEnded = false;

function overlong(prefix) {
  const m = /^[ \t\r]*\{[ \t\r]*"id"[ \t\r]*:[ \t\r]*(-?(?:0|[1-9][0-9]{0,19}))[ \t\r]*[,}]/.exec(prefix.toString("latin1"));
  let id = null;
  if (m !== null) {
    const v = BigInt(m[1]);
    if (v >= I63_MIN && v <= U63 && !inFlight.has(v.toString())) id = v.toString();
  }
  errLine(id, "bad_request", `the request is longer than max_line_bytes (${MAX_LINE_BYTES}); skipped`);
}

function onLine(buf) {
  let end = buf.length;
  if (end > 0 && buf[end - 1] === 13) end--;
  let blank = true;
  for (let i = 0; i < end; i++) {
    const c = buf[i];
    if (c !== 32 && c !== 9 && c !== 13) {
      blank = false;
      break;
    }
  }
  if (blank) return;
  let text;
  try {
    text = decoder.decode(buf.subarray(0, end));
  } catch {
    errLine(null, "bad_request", "the request is not UTF-8");
    return;
  }
  const req = parseRequest(text);
  if (req.bad !== undefined) {
    errLine(req.id, "bad_request", req.bad);
    return;
  }
  handle(req);
}

function pump() {
  while (!blocked && !stopping && queue.length > 0 && inFlight.size < MAX_IN_FLIGHT) {
    const item = queue.shift();
    if (Buffer.isBuffer(item)) onLine(item);
    else overlong(item.long);
  }
  flushOut();
  if (stopping) return;
  if (queue.length > 0 || blocked) process.stdin.pause();
  else if (inputEnded) endOfInput();
  else process.stdin.resume();
}

function onData(chunk) {
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(10, start);
    const stop = nl < 0 ? chunk.length : nl;
    if (skipping !== null) {
      if (nl >= 0) {
        queue.push({ long: skipping });
        skipping = null;
      }
    } else if (piecesLen + (stop - start) > MAX_LINE_BYTES + (nl >= 0 && chunk[stop - 1] === 13 ? 1 : 0)) {
      const all = Buffer.concat([...pieces, chunk.subarray(start, Math.min(stop, start + 256))]);
      skipping = all.subarray(0, 256);
      pieces = [];
      piecesLen = 0;
      if (nl >= 0) {
        queue.push({ long: skipping });
        skipping = null;
      }
    } else if (nl >= 0) {
      pieces.push(chunk.subarray(start, stop));
      queue.push(pieces.length === 1 ? pieces[0] : Buffer.concat(pieces));
      pieces = [];
      piecesLen = 0;
    } else if (stop > start) {
      pieces.push(chunk.subarray(start, stop));
      piecesLen += stop - start;
    }
    if (nl < 0) break;
    start = nl + 1;
  }
  pump();
}

function endOfInput() {
  if (stopping) return;
  enqueue({ kind: "stop", id: null });
  stop();
}

function stop() {
  stopping = true;
  queue.length = 0;
  process.stdin.pause();
  process.stdin.removeAllListeners("data");
}

// --- start --------------------------------------------------------------------------------

recover();
const ready = {
  id: null,
  ok: true,
  event: "ready",
  version: 2,
  max_data_bytes: MAX_DATA_BYTES,
  max_key_bytes: MAX_KEY_BYTES,
  max_line_bytes: MAX_LINE_BYTES,
  bookie: `bkref-js-bookie 0.1 (tests/conformance/js/bookie.js${bugs.size ? "; bugs: " + [...bugs].join(", ") : ""})`,
  ops: [...SUPPORTED_OPTIONAL].sort(),
  state: bare ? "none" : "protocol",
  answers: "bkref",
};
out.push(ascii(ready) + "\n");
flushOut();
process.stdin.on("data", onData);
process.stdin.on("end", () => {
  if (skipping !== null) queue.push({ long: skipping });
  else if (pieces.length > 0) queue.push(Buffer.concat(pieces));
  skipping = null;
  pieces = [];
  inputEnded = true;
  pump();
});
process.stdin.on("error", () => {
  inputEnded = true;
  pump();
});
