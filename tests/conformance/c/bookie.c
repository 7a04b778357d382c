/*
 * cbookie: an independent bookie for bkref's conformance kit, in C11 with POSIX only.
 *
 * Written from spec/adapter.md (the protocol, version 2), docs/conformance.md (how the kit
 * runs a bookie, and the lazy disk's system calls) and spec/properties.md (the promises), to
 * test the kit from outside: its storage is deliberately unlike bkref's (one entry log and a
 * journal) and unlike the JavaScript bookie's (one append-only log).
 *
 * Usage: bookie DATA_DIR [--bug NAME]...   (or the data directory in BKREF_DATA_DIR)
 *
 * Storage: a directory of one file per ledger, plus one metadata file per ledger.
 *   DATA/ledgers/<id>.dat   the ledger's adds, appended, each record
 *                           [u32 magic "CBR1"][u32 length][u64 entry][u32 crc32][data]
 *                           (little endian; the crc covers magic, length, entry and data),
 *                           so a torn or partial tail is detected at recovery;
 *   DATA/ledgers/<id>.meta  [u32 magic "CBM1"][u32 flags (1: fenced)][u32 key length][key]
 *                           [u32 crc32], replaced atomically: written to <id>.meta.tmp,
 *                           fsynced, renamed over, and the directory fsynced;
 *   DATA/deleted            an append-only list of 24-byte checksummed records
 *                           [u32 magic "CBD1"][u32 kind][u64 ledger][u32 crc32][u32 0]:
 *                           kind 1 "deleted" (fdatasynced before a delete's files are
 *                           unlinked; the unlinks are made durable by a directory fsync
 *                           before the delete is answered), kind 2 "created again" (the
 *                           answer profile is BookKeeper's: an add or fence of a deleted
 *                           ledger creates it again; the record is fdatasynced before the
 *                           add or fence that recreated the ledger is answered);
 *   DATA/lock               an fcntl lock, so two bookies never share a directory.
 *
 * Recovery: the deleted list is read up to its first bad record and cut there durably; the
 * ledger directory is listed; leftovers of interrupted meta replacements (*.tmp) are
 * removed; a ledger whose last list record is "deleted" has its files removed; a ledger
 * without a valid meta file, or unfenced with no record, never had an add acknowledged (the
 * first add is answered only once its meta and records are durable) and is removed; each
 * .dat is read record by record and cut (ftruncate + fdatasync) at the first record that is
 * not whole with a matching crc. Then every ledger file kept and the deleted list are
 * fdatasynced and both directories fsynced, before the ready line: a SIGKILL keeps unsynced
 * writes in the page cache, recovery shows them, and what it shows must stay.
 *
 * Serving: one thread, poll() on stdin and stdout. Every complete line available is read and
 * carried out in order in memory (adds are written to their ledger file at once); when no
 * more input is available right now (or the batch is large), the batch is made durable in
 * one round (meta files replaced, every touched ledger file fdatasynced, the deleted list
 * fdatasynced, the ledger directory fsynced when names changed), and then its answers are
 * written. read and inspect are answered at once (a read sees adds still in flight, from the
 * ledger file), delete first makes the batch durable (adds and fences of the deleted ledger
 * still in flight are answered no_ledger: they went with the ledger). stdout is written
 * without blocking while input can still be read; reading stops while 10000 requests are in
 * flight or 64 MiB of answers wait.
 *
 * Deliberate bugs, each off by default, switched on with --bug NAME:
 *   ack-before-fsync     a batch's add answers are written once its meta files are replaced
 *                        (renamed), before the ledger files' fdatasyncs and the directory
 *                        fsync (which still follow). A SIGKILL keeps the page cache, so only
 *                        a power loss loses acknowledged adds.
 *   delete-before-fsync  a delete appends its "deleted" record and unlinks the ledger's files
 *                        but answers ok without fdatasyncing the list or fsyncing the
 *                        directory: a power loss can bring the deleted ledger back.
 *   stale-cache          reads go through a cache of recently added and read entries (a
 *                        write-through cache, as BookKeeper's write cache), which a delete
 *                        does not purge: a deleted ledger's cached entries stay readable
 *                        (also through a ledger created again) until a restart.
 *   serve-torn-tail      recovery trusts the last record of a ledger file: when its header
 *                        is there, its length and crc are not checked, and whatever bytes
 *                        of it made it to disk are served as the entry.
 *   forget-fences        recovery reads the key from the meta file but not its fenced flag:
 *                        fences are forgotten at every restart.
 *   ignore-key           the key is checked by fence but not by add: an add with a wrong key
 *                        to an existing ledger is accepted.
 *   admit-while-fencing  an add checks only whether its ledger's fence is durable, not
 *                        whether one was accepted: an add written while the fence is still
 *                        in flight is accepted and acknowledged.
 *   lose-last-acked      recovery cuts each ledger file at the start of its last good record
 *                        instead of its end (a fencepost error): the last acknowledged add of
 *                        every ledger is lost at a restart.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define BOOKIE_NAME "cbookie 0.1"
#define MAX_DATA_BYTES 5242364u
#define MAX_KEY_BYTES 1024u
#define B64_LEN(n) ((((n) + 2u) / 3u) * 4u)
#define MAX_LINE_BYTES ((size_t)6u * (B64_LEN(MAX_DATA_BYTES) + 2u * MAX_KEY_BYTES) + 4096u)
#define MAX_IN_FLIGHT 10000u
#define MAX_OUT_BYTES ((size_t)64 << 20)
#define BATCH_MAX_OPS 4096u
#define BATCH_MAX_BYTES ((uint64_t)64 << 20)
#define MAX_DEPTH 1000
#define READ_CHUNK ((size_t)1 << 20)
#define CACHE_MAX_BYTES ((size_t)32 << 20)
#define CACHE_BUCKETS 4096u

#define REC_MAGIC 0x31524243u  /* "CBR1" */
#define META_MAGIC 0x314d4243u /* "CBM1" */
#define LIST_MAGIC 0x31444243u /* "CBD1" */
#define REC_HDR 20u
#define LIST_REC 24u
#define LIST_DELETED 1u
#define LIST_CREATED 2u

enum {
    BUG_ACK_BEFORE_FSYNC = 1 << 0,
    BUG_DELETE_BEFORE_FSYNC = 1 << 1,
    BUG_STALE_CACHE = 1 << 2,
    BUG_SERVE_TORN_TAIL = 1 << 3,
    BUG_FORGET_FENCES = 1 << 4,
    BUG_IGNORE_KEY = 1 << 5,
    BUG_ADMIT_WHILE_FENCING = 1 << 6,
    BUG_LOSE_LAST_ACKED = 1 << 7,
};

static const struct {
    const char *name;
    unsigned flag;
} BUG_NAMES[] = {
    {"ack-before-fsync", BUG_ACK_BEFORE_FSYNC},
    {"delete-before-fsync", BUG_DELETE_BEFORE_FSYNC},
    {"stale-cache", BUG_STALE_CACHE},
    {"serve-torn-tail", BUG_SERVE_TORN_TAIL},
    {"forget-fences", BUG_FORGET_FENCES},
    {"ignore-key", BUG_IGNORE_KEY},
    {"admit-while-fencing", BUG_ADMIT_WHILE_FENCING},
    {"lose-last-acked", BUG_LOSE_LAST_ACKED},
};

static unsigned g_bugs;

/* ---------------------------------------------------------------- utilities */

static void logmsg(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    fputs("cbookie: ", stderr);
    fwrite(line, 1, (size_t)n, stderr);
    fflush(stderr);
}

static void die(int status, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cbookie: %s\n", line);
    fflush(stderr);
    exit(status);
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) die(70, "out of memory (%zu bytes)", n);
    return q;
}

static void *xmalloc(size_t n) { return xrealloc(NULL, n); }

static void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die(70, "out of memory");
    return p;
}

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void buf_add(buf_t *b, const void *data, size_t n) {
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void buf_addc(buf_t *b, char c) {
    buf_reserve(b, 1);
    b->p[b->len++] = c;
}

static void buf_adds(buf_t *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_printf(buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        buf_add(b, small, (size_t)n);
        return;
    }
    buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void buf_free(buf_t *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

/* crc32 (zlib's), continued from crc (0 to start). */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ------------------------------------------------- a u64 -> (u64, u64) hash map */

typedef struct {
    uint64_t key, a, b;
} slot_t;

typedef struct {
    slot_t *slots;
    unsigned char *used;
    size_t cap, n;
} map_t;

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static slot_t *map_find(const map_t *m, uint64_t key) {
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1, i = (size_t)mix64(key) & mask;
    while (m->used[i]) {
        if (m->slots[i].key == key) return &m->slots[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

static slot_t *map_put(map_t *m, uint64_t key, int *fresh);

static void map_grow(map_t *m) {
    map_t bigger = {0};
    bigger.cap = m->cap ? m->cap * 2 : 16;
    bigger.slots = xcalloc(bigger.cap, sizeof(slot_t));
    bigger.used = xcalloc(bigger.cap, 1);
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i]) continue;
        int fresh;
        slot_t *s = map_put(&bigger, m->slots[i].key, &fresh);
        *s = m->slots[i];
    }
    free(m->slots);
    free(m->used);
    *m = bigger;
}

static slot_t *map_put(map_t *m, uint64_t key, int *fresh) {
    if ((m->n + 1) * 2 > m->cap) map_grow(m);
    size_t mask = m->cap - 1, i = (size_t)mix64(key) & mask;
    while (m->used[i]) {
        if (m->slots[i].key == key) {
            *fresh = 0;
            return &m->slots[i];
        }
        i = (i + 1) & mask;
    }
    m->used[i] = 1;
    m->slots[i].key = key;
    m->slots[i].a = m->slots[i].b = 0;
    m->n++;
    *fresh = 1;
    return &m->slots[i];
}

static int map_del(map_t *m, uint64_t key) {
    slot_t *s = map_find(m, key);
    if (!s) return 0;
    size_t mask = m->cap - 1, i = (size_t)(s - m->slots), j = i;
    m->used[i] = 0;
    m->n--;
    for (;;) { /* backward shift: keep every probe chain unbroken */
        j = (j + 1) & mask;
        if (!m->used[j]) break;
        size_t home = (size_t)mix64(m->slots[j].key) & mask;
        int between = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (between) continue;
        m->slots[i] = m->slots[j];
        m->used[i] = 1;
        m->used[j] = 0;
        i = j;
    }
    return 1;
}

static void map_free(map_t *m) {
    free(m->slots);
    free(m->used);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------- hex and base64 */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static void b64_encode(buf_t *out, const unsigned char *d, size_t n) {
    buf_reserve(out, B64_LEN(n));
    char *o = out->p + out->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)d[i] << 16;
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8;
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = '=';
    }
    out->len = (size_t)(o - out->p);
}

/* Strict RFC 4648 base64 (spec/adapter.md): whole groups, padding only at the end, unused
 * bits zero. Returns NULL and sets *why on refusal; the result is malloc'd. */
static unsigned char *b64_decode(const char *s, size_t n, size_t *outlen, const char **why) {
    if (n % 4) {
        *why = "is not base64: its length is not a multiple of 4";
        return NULL;
    }
    size_t pad = 0;
    if (n >= 1 && s[n - 1] == '=') pad = 1;
    if (n >= 2 && s[n - 2] == '=') pad = 2;
    for (size_t i = 0; i < n - pad; i++) {
        if (b64val((unsigned char)s[i]) < 0) {
            *why = "is not strict base64 (RFC 4648, section 4)";
            return NULL;
        }
    }
    size_t len = n / 4 * 3 - pad;
    if (len > MAX_DATA_BYTES) {
        *why = "is longer than max_data_bytes once decoded";
        return NULL;
    }
    if (pad == 1 && (b64val((unsigned char)s[n - 2]) & 3)) {
        *why = "has nonzero bits after its last byte (RFC 4648, section 3.5)";
        return NULL;
    }
    if (pad == 2 && (b64val((unsigned char)s[n - 3]) & 15)) {
        *why = "has nonzero bits after its last byte (RFC 4648, section 3.5)";
        return NULL;
    }
    unsigned char *out = xmalloc(len);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int chars = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + (size_t)k] == '=') break;
            v |= (uint32_t)b64val((unsigned char)s[i + (size_t)k]) << (18 - 6 * k);
            chars++;
        }
        if (chars >= 2) out[o++] = (unsigned char)(v >> 16);
        if (chars >= 3) out[o++] = (unsigned char)(v >> 8);
        if (chars >= 4) out[o++] = (unsigned char)v;
    }
    *outlen = o;
    return out;
}

/* Appends s (WTF-8: UTF-8 that may hold lone surrogates from \u escapes) as the inside of a
 * JSON string in ASCII: non-ASCII as \u escapes, control characters escaped. */
static void json_escape(buf_t *out, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            if (c == '"' || c == '\\') {
                buf_addc(out, '\\');
                buf_addc(out, (char)c);
            } else if (c < 0x20 || c == 0x7f) {
                buf_printf(out, "\\u%04x", c);
            } else {
                buf_addc(out, (char)c);
            }
            continue;
        }
        uint32_t cp = 0xfffd;
        size_t len = 1;
        if (c >= 0xc2 && c <= 0xdf && i + 1 < n) {
            cp = (c & 0x1f) << 6 | (p[i + 1] & 0x3f);
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef && i + 2 < n) {
            cp = (c & 0x0f) << 12 | (uint32_t)(p[i + 1] & 0x3f) << 6 | (p[i + 2] & 0x3f);
            len = 3;
        } else if (c >= 0xf0 && c <= 0xf4 && i + 3 < n) {
            cp = (c & 0x07) << 18 | (uint32_t)(p[i + 1] & 0x3f) << 12 |
                 (uint32_t)(p[i + 2] & 0x3f) << 6 | (p[i + 3] & 0x3f);
            len = 4;
        }
        i += len;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            buf_printf(out, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
        } else {
            buf_printf(out, "\\u%04x", cp);
        }
    }
}

/* ------------------------------------------------------------------- JSON */

enum { J_STR = 1, J_INT, J_NUM, J_TRUE, J_FALSE, J_NULL, J_OBJ, J_ARR };

typedef struct {
    buf_t name;
    int type;
    buf_t str;                /* J_STR: the decoded string */
    const unsigned char *num; /* J_INT: the number's text */
    size_t numlen;
} member_t;

typedef struct {
    const unsigned char *s;
    size_t n, i;
    char err[200];
    member_t *members; /* the top-level object's members */
    size_t nmembers, capmembers;
} jp_t;

static int jfail(jp_t *p, const char *what) {
    if (!p->err[0]) snprintf(p->err, sizeof p->err, "%s (char %zu)", what, p->i);
    return 0;
}

static void jws(jp_t *p) {
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static void put_utf8(buf_t *out, uint32_t cp) {
    if (cp < 0x80) {
        buf_addc(out, (char)cp);
    } else if (cp < 0x800) {
        buf_addc(out, (char)(0xc0 | cp >> 6));
        buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) { /* lone surrogates too (WTF-8) */
        buf_addc(out, (char)(0xe0 | cp >> 12));
        buf_addc(out, (char)(0x80 | ((cp >> 6) & 0x3f)));
        buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    } else {
        buf_addc(out, (char)(0xf0 | cp >> 18));
        buf_addc(out, (char)(0x80 | ((cp >> 12) & 0x3f)));
        buf_addc(out, (char)(0x80 | ((cp >> 6) & 0x3f)));
        buf_addc(out, (char)(0x80 | (cp & 0x3f)));
    }
}

static int hex4(jp_t *p, uint32_t *v) {
    if (p->i + 4 > p->n) return 0;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[p->i + (size_t)k]);
        if (h < 0) return 0;
        *v = *v << 4 | (uint32_t)h;
    }
    p->i += 4;
    return 1;
}

/* A string at p->i (its opening quote); decoded into out when out is not NULL. */
static int jstring(jp_t *p, buf_t *out) {
    p->i++;
    for (;;) {
        if (p->i >= p->n) return jfail(p, "a string is not closed");
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            return 1;
        }
        if (c < 0x20) return jfail(p, "a control character in a string");
        if (c != '\\') {
            size_t j = p->i;
            while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' && p->s[j] >= 0x20) j++;
            if (out) buf_add(out, p->s + p->i, j - p->i);
            p->i = j;
            continue;
        }
        p->i++;
        if (p->i >= p->n) return jfail(p, "a string is not closed");
        c = p->s[p->i++];
        char e = 0;
        switch (c) {
        case '"': e = '"'; break;
        case '\\': e = '\\'; break;
        case '/': e = '/'; break;
        case 'b': e = '\b'; break;
        case 'f': e = '\f'; break;
        case 'n': e = '\n'; break;
        case 'r': e = '\r'; break;
        case 't': e = '\t'; break;
        case 'u': {
            uint32_t u;
            if (!hex4(p, &u)) return jfail(p, "a \\u escape without four hex digits");
            if (u >= 0xd800 && u <= 0xdbff && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                uint32_t lo;
                p->i += 2;
                if (hex4(p, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                    u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                } else {
                    p->i = save;
                }
            }
            if (out) put_utf8(out, u);
            continue;
        }
        default: return jfail(p, "an invalid escape in a string");
        }
        if (out) buf_addc(out, e);
    }
}

static int jnumber(jp_t *p, int *isint) {
    const unsigned char *s = p->s;
    if (p->i < p->n && s[p->i] == '-') p->i++;
    if (p->i >= p->n) return jfail(p, "a number without digits");
    if (s[p->i] == '0') {
        p->i++;
    } else if (s[p->i] >= '1' && s[p->i] <= '9') {
        while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
    } else {
        return jfail(p, "a number without digits");
    }
    *isint = 1;
    if (p->i < p->n && s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9') return jfail(p, "a bad fraction");
        while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
        *isint = 0;
    }
    if (p->i < p->n && (s[p->i] == 'e' || s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (s[p->i] == '+' || s[p->i] == '-')) p->i++;
        if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9') return jfail(p, "a bad exponent");
        while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
        *isint = 0;
    }
    return 1;
}

static int jvalue(jp_t *p, int depth, member_t *m);

static int cmp_bufs(const void *a, const void *b) {
    const buf_t *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->len ? memcmp(x->p, y->p, x->len) : 0;
}

/* An object at p->i; top: its members are kept in p->members. */
static int jobject(jp_t *p, int depth, int top) {
    if (depth > MAX_DEPTH) return jfail(p, "nested too deeply");
    p->i++;
    jws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        return 1;
    }
    buf_t *keys = NULL;
    size_t nkeys = 0, capkeys = 0;
    int ok = 1;
    for (;;) {
        jws(p);
        if (p->i >= p->n || p->s[p->i] != '"') {
            ok = jfail(p, "expecting a key in double quotes");
            break;
        }
        if (nkeys == capkeys) {
            capkeys = capkeys ? capkeys * 2 : 8;
            keys = xrealloc(keys, capkeys * sizeof *keys);
        }
        buf_t *key = &keys[nkeys++];
        memset(key, 0, sizeof *key);
        if (!jstring(p, key)) {
            ok = 0;
            break;
        }
        jws(p);
        if (p->i >= p->n || p->s[p->i] != ':') {
            ok = jfail(p, "expecting ':'");
            break;
        }
        p->i++;
        if (top) {
            if (p->nmembers == p->capmembers) {
                p->capmembers = p->capmembers ? p->capmembers * 2 : 8;
                p->members = xrealloc(p->members, p->capmembers * sizeof *p->members);
            }
            member_t *m = &p->members[p->nmembers++];
            memset(m, 0, sizeof *m);
            buf_add(&m->name, key->p, key->len);
            if (!jvalue(p, depth, m)) {
                ok = 0;
                break;
            }
        } else if (!jvalue(p, depth, NULL)) {
            ok = 0;
            break;
        }
        jws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        ok = jfail(p, "expecting ',' or '}'");
        break;
    }
    if (ok && nkeys > 1) {
        qsort(keys, nkeys, sizeof *keys, cmp_bufs);
        for (size_t k = 1; k < nkeys; k++) {
            if (!cmp_bufs(&keys[k - 1], &keys[k])) {
                ok = jfail(p, "a key appears twice in one object");
                break;
            }
        }
    }
    for (size_t k = 0; k < nkeys; k++) buf_free(&keys[k]);
    free(keys);
    return ok;
}

static int jarray(jp_t *p, int depth) {
    if (depth > MAX_DEPTH) return jfail(p, "nested too deeply");
    p->i++;
    jws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        return 1;
    }
    for (;;) {
        if (!jvalue(p, depth, NULL)) return 0;
        jws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return 1;
        }
        return jfail(p, "expecting ',' or ']'");
    }
}

static int jliteral(jp_t *p, const char *word) {
    size_t len = strlen(word);
    if (p->i + len > p->n || memcmp(p->s + p->i, word, len)) return jfail(p, "expecting a value");
    p->i += len;
    return 1;
}

static int jvalue(jp_t *p, int depth, member_t *m) {
    jws(p);
    if (p->i >= p->n) return jfail(p, "expecting a value");
    unsigned char c = p->s[p->i];
    int type, ok;
    size_t start = p->i;
    if (c == '{') {
        type = J_OBJ;
        ok = jobject(p, depth + 1, 0);
    } else if (c == '[') {
        type = J_ARR;
        ok = jarray(p, depth + 1);
    } else if (c == '"') {
        type = J_STR;
        ok = jstring(p, m ? &m->str : NULL);
    } else if (c == 't') {
        type = J_TRUE;
        ok = jliteral(p, "true");
    } else if (c == 'f') {
        type = J_FALSE;
        ok = jliteral(p, "false");
    } else if (c == 'n') {
        type = J_NULL;
        ok = jliteral(p, "null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        int isint = 0;
        ok = jnumber(p, &isint);
        type = isint ? J_INT : J_NUM;
    } else {
        return jfail(p, "expecting a value");
    }
    if (ok && m) {
        m->type = type;
        m->num = p->s + start;
        m->numlen = p->i - start;
    }
    return ok;
}

static void jp_free(jp_t *p) {
    for (size_t k = 0; k < p->nmembers; k++) {
        buf_free(&p->members[k].name);
        buf_free(&p->members[k].str);
    }
    free(p->members);
    p->members = NULL;
    p->nmembers = p->capmembers = 0;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t min, cp;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2, min = 0x80, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, min = 0x800, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, min = 0x10000, cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* A JSON integer's text as sign and magnitude; 0 when the magnitude exceeds 2^64-1. */
static int int_value(const unsigned char *t, size_t n, int *neg, uint64_t *mag) {
    *neg = n && t[0] == '-';
    size_t i = *neg ? 1 : 0;
    uint64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(t[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *mag = v;
    return 1;
}

/* ---------------------------------------------------------------- requests */

enum {
    OP_ADD,
    OP_READ,
    OP_FENCE,
    OP_WRITE_CLOSE,
    OP_DELETE,
    OP_CHECKPOINT,
    OP_GC,
    OP_INSPECT,
    OP_SHUTDOWN,
};

enum { F_LEDGER = 1, F_ENTRY = 2, F_KEY = 4, F_DATA = 8, F_FORCE = 16 };

static const struct {
    const char *name;
    int op;
    unsigned fields;
} OPS[] = {
    {"add", OP_ADD, F_LEDGER | F_ENTRY | F_KEY | F_DATA},
    {"read", OP_READ, F_LEDGER | F_ENTRY},
    {"fence", OP_FENCE, F_LEDGER | F_KEY},
    {"write_close", OP_WRITE_CLOSE, F_LEDGER | F_KEY},
    {"delete", OP_DELETE, F_LEDGER},
    {"checkpoint", OP_CHECKPOINT, 0},
    {"gc", OP_GC, F_FORCE},
    {"inspect", OP_INSPECT, 0},
    {"shutdown", OP_SHUTDOWN, 0},
};

static const struct {
    const char *name;
    unsigned flag;
    const char *what;
} FIELDS[] = {
    {"ledger", F_LEDGER, "an integer from 0 to 9223372036854775807"},
    {"entry", F_ENTRY, "an integer from 0 to 9223372036854775807"},
    {"key", F_KEY, "a string of hex digits, an even number of them"},
    {"data", F_DATA, "a string in standard base64 with padding"},
    {"force", F_FORCE, "true or false"},
};

typedef struct {
    int op;
    int64_t id;
    uint64_t ledger, entry;
    unsigned char *key;
    size_t keylen;
    unsigned char *data;
    size_t datalen;
    int force;
} req_t;

static void req_free(req_t *r) {
    free(r->key);
    free(r->data);
    r->key = r->data = NULL;
}

/* Phase 1: UTF-8, JSON, an object, an integer id. Returns 1 with *id set; else 0 with msg. */
static int parse_head(jp_t *p, const unsigned char *line, size_t n, int64_t *id, buf_t *msg) {
    memset(p, 0, sizeof *p);
    p->s = line;
    p->n = n;
    if (!utf8_valid(line, n)) {
        buf_adds(msg, "the request is not UTF-8");
        return 0;
    }
    jws(p);
    int top = p->i < p->n && p->s[p->i] == '{';
    int ok = top ? jobject(p, 1, 1) : jvalue(p, 0, NULL);
    if (ok) {
        jws(p);
        if (p->i != p->n) ok = jfail(p, "extra data after the value");
    }
    if (!ok) {
        buf_adds(msg, "the request is not JSON: ");
        buf_adds(msg, p->err);
        return 0;
    }
    if (!top) {
        buf_adds(msg, "the request is not a JSON object");
        return 0;
    }
    for (size_t k = 0; k < p->nmembers; k++) {
        member_t *m = &p->members[k];
        if (m->name.len != 2 || memcmp(m->name.p, "id", 2)) continue;
        int neg;
        uint64_t mag;
        if (m->type != J_INT || !int_value(m->num, m->numlen, &neg, &mag) ||
            (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)) {
            buf_adds(msg, "'id' must be an integer from -2^63 to 2^63-1");
            return 0;
        }
        *id = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
        return 1;
    }
    buf_adds(msg, "the request has no 'id'");
    return 0;
}

static void quote_text(buf_t *msg, const void *t, size_t n) {
    if (n > 60) {
        buf_add(msg, t, 60);
        buf_adds(msg, "...");
    } else {
        buf_add(msg, t, n);
    }
}

/* Phase 2: the op and its fields. Returns 1 with r filled; else 0 with msg. */
static int parse_body(jp_t *p, req_t *r, buf_t *msg) {
    member_t *opm = NULL;
    for (size_t k = 0; k < p->nmembers; k++) {
        if (p->members[k].name.len == 2 && !memcmp(p->members[k].name.p, "op", 2))
            opm = &p->members[k];
    }
    if (!opm) {
        buf_adds(msg, "the request has no 'op'");
        return 0;
    }
    if (opm->type != J_STR) {
        buf_adds(msg, "'op' must be a string");
        return 0;
    }
    int opi = -1;
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++) {
        if (strlen(OPS[k].name) == opm->str.len && !memcmp(OPS[k].name, opm->str.p, opm->str.len))
            opi = (int)k;
    }
    if (opi < 0) {
        buf_adds(msg, "unknown op '");
        quote_text(msg, opm->str.p, opm->str.len);
        buf_adds(msg, "'");
        return 0;
    }
    r->op = OPS[opi].op;
    unsigned want = OPS[opi].fields, seen = 0;
    for (size_t k = 0; k < p->nmembers; k++) {
        member_t *m = &p->members[k];
        if (m == opm || (m->name.len == 2 && !memcmp(m->name.p, "id", 2))) continue;
        int fi = -1;
        for (size_t f = 0; f < sizeof FIELDS / sizeof FIELDS[0]; f++) {
            if (strlen(FIELDS[f].name) == m->name.len &&
                !memcmp(FIELDS[f].name, m->name.p, m->name.len) && (want & FIELDS[f].flag))
                fi = (int)f;
        }
        if (fi < 0) {
            buf_printf(msg, "'%s' does not take the field '", OPS[opi].name);
            quote_text(msg, m->name.p, m->name.len);
            buf_adds(msg, "'");
            return 0;
        }
        unsigned flag = FIELDS[fi].flag;
        seen |= flag;
        const char *name = FIELDS[fi].name;
        if (flag == F_LEDGER || flag == F_ENTRY) {
            int neg = 0;
            uint64_t mag = 0;
            if (m->type != J_INT) {
                buf_printf(msg, "'%s' must be %s", name, FIELDS[fi].what);
                return 0;
            }
            if (!int_value(m->num, m->numlen, &neg, &mag) || (neg && mag) ||
                mag > (uint64_t)INT64_MAX) {
                buf_printf(msg, "'%s' must be from 0 to 9223372036854775807, got ", name);
                quote_text(msg, m->num, m->numlen);
                return 0;
            }
            if (flag == F_LEDGER) r->ledger = mag;
            else r->entry = mag;
        } else if (flag == F_KEY) {
            if (m->type != J_STR) {
                buf_printf(msg, "'key' must be %s", FIELDS[fi].what);
                return 0;
            }
            if (m->str.len % 2 || m->str.len / 2 > MAX_KEY_BYTES) {
                buf_printf(msg, "'key' must be an even number of hex digits, at most %u bytes",
                           MAX_KEY_BYTES);
                return 0;
            }
            r->keylen = m->str.len / 2;
            r->key = xmalloc(r->keylen);
            for (size_t i = 0; i < r->keylen; i++) {
                int hi = hexval((unsigned char)m->str.p[2 * i]);
                int lo = hexval((unsigned char)m->str.p[2 * i + 1]);
                if (hi < 0 || lo < 0) {
                    buf_adds(msg, "'key' must be hex digits");
                    return 0;
                }
                r->key[i] = (unsigned char)(hi << 4 | lo);
            }
        } else if (flag == F_DATA) {
            const char *why = NULL;
            if (m->type != J_STR) {
                buf_printf(msg, "'data' must be %s", FIELDS[fi].what);
                return 0;
            }
            if (m->str.len > B64_LEN(MAX_DATA_BYTES)) {
                buf_printf(msg, "'data' is longer than max_data_bytes (%u) once decoded",
                           MAX_DATA_BYTES);
                return 0;
            }
            r->data = b64_decode(m->str.p, m->str.len, &r->datalen, &why);
            if (!r->data) {
                buf_printf(msg, "'data' %s", why);
                return 0;
            }
        } else if (flag == F_FORCE) {
            if (m->type != J_TRUE && m->type != J_FALSE) {
                buf_printf(msg, "'force' must be %s", FIELDS[fi].what);
                return 0;
            }
            r->force = m->type == J_TRUE;
        }
    }
    if (seen != want) {
        for (size_t f = 0; f < sizeof FIELDS / sizeof FIELDS[0]; f++) {
            if ((want & FIELDS[f].flag) && !(seen & FIELDS[f].flag)) {
                buf_printf(msg, "'%s' needs '%s' (%s)", OPS[opi].name, FIELDS[f].name,
                           FIELDS[f].what);
                return 0;
            }
        }
    }
    return 1;
}

/* ----------------------------------------------------------------- output */

typedef struct {
    size_t end; /* offset in out.buf after the response's newline */
    int64_t id;
    int has_id;
} mark_t;

static struct {
    buf_t buf;
    size_t head; /* bytes of buf written */
    mark_t *marks;
    size_t nmarks, mhead, mcap;
    int broken; /* the client closed its end: answers are dropped */
    int nonblocking;
} out;

static map_t g_inflight; /* ids in flight: read and not yet answered (written) */

static void out_release(size_t upto) {
    while (out.mhead < out.nmarks && out.marks[out.mhead].end <= upto) {
        mark_t *mk = &out.marks[out.mhead++];
        if (mk->has_id) map_del(&g_inflight, (uint64_t)mk->id);
    }
}

static void out_compact(void) {
    if (out.head == out.buf.len) {
        out.buf.len = out.head = 0;
        out.nmarks = out.mhead = 0;
        return;
    }
    if (out.head < ((size_t)1 << 20) || out.head < out.buf.len / 2) return;
    memmove(out.buf.p, out.buf.p + out.head, out.buf.len - out.head);
    out.buf.len -= out.head;
    memmove(out.marks, out.marks + out.mhead, (out.nmarks - out.mhead) * sizeof *out.marks);
    out.nmarks -= out.mhead;
    for (size_t k = 0; k < out.nmarks; k++) out.marks[k].end -= out.head;
    out.mhead = 0;
    out.head = 0;
}

/* Writes what stdout takes now; with block, everything. */
static void out_flush(int block) {
    while (out.head < out.buf.len) {
        if (out.broken) {
            out.head = out.buf.len;
            break;
        }
        size_t chunk = out.buf.len - out.head;
        if (chunk > ((size_t)1 << 24)) chunk = (size_t)1 << 24;
        ssize_t w = write(1, out.buf.p + out.head, chunk);
        if (w > 0) {
            out.head += (size_t)w;
            out_release(out.head);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!block) break;
            struct pollfd pf = {.fd = 1, .events = POLLOUT};
            poll(&pf, 1, -1);
            continue;
        }
        logmsg("stdout failed (%s): answers are dropped", strerror(errno));
        out.broken = 1;
    }
    out_release(out.head);
    out_compact();
}

static size_t out_pending(void) { return out.buf.len - out.head; }

/* Queues one response line (the text without its newline). */
static void respond(int has_id, int64_t id, const char *text, size_t n) {
    buf_add(&out.buf, text, n);
    buf_addc(&out.buf, '\n');
    if (out.nmarks == out.mcap) {
        out.mcap = out.mcap ? out.mcap * 2 : 64;
        out.marks = xrealloc(out.marks, out.mcap * sizeof *out.marks);
    }
    out.marks[out.nmarks++] = (mark_t){.end = out.buf.len, .id = id, .has_id = has_id};
}

static void respond_ok(int64_t id, const char *fields) {
    char line[256];
    int n = snprintf(line, sizeof line, "{\"id\":%lld,\"ok\":true%s}", (long long)id, fields);
    respond(1, id, line, (size_t)n);
}

static void respond_error(int has_id, int64_t id, const char *code, const char *msg, size_t n) {
    buf_t line = {0};
    if (has_id) buf_printf(&line, "{\"id\":%lld", (long long)id);
    else buf_adds(&line, "{\"id\":null");
    buf_printf(&line, ",\"ok\":false,\"error\":\"%s\",\"message\":\"", code);
    json_escape(&line, msg, n);
    buf_adds(&line, "\"}");
    respond(has_id, id, line.p, line.len);
    buf_free(&line);
}

static void respond_errorf(int64_t id, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
    respond_error(1, id, code, msg, (size_t)n);
}

/* ---------------------------------------------------------------- storage */

typedef struct ledger {
    uint64_t id;
    unsigned char *key;
    size_t keylen;
    int fenced;         /* a fence was accepted (durable or in flight) */
    int fenced_durable; /* the meta file on disk says fenced */
    int dat_fd;         /* -1 while the ledger has no .dat file */
    uint64_t dat_size;  /* the end of its records */
    map_t entries;      /* entry id -> a: record offset, b: data length */
    int64_t last_entry; /* -1: none */
    int meta_dirty, dat_dirty, dat_new, touched;
} ledger_t;

static const char *g_root;
static int g_root_fd = -1, g_ldir_fd = -1, g_list_fd = -1;
static uint64_t g_list_size;
static map_t g_ledgers;  /* id -> a: ledger_t * */
static map_t g_deleted;  /* ids of deleted ledgers */
static int g_failed;     /* a disk error left the state unknown: writes are refused */
static buf_t g_scratch;  /* a record being written */

static struct {
    unsigned long adds, fences, deletes, batches, syncs, dir_syncs;
} g_stats;

typedef struct {
    int64_t id;
    uint64_t ledger;
    int kind; /* OP_ADD or OP_FENCE */
    const char *code; /* NULL: ok */
} pending_t;

static struct {
    pending_t *ops;
    size_t n, cap;
    ledger_t **touched;
    size_t ntouched, captouched;
    uint64_t bytes;
    int dir_dirty, list_dirty;
} batch;

static ledger_t *ledger_get(uint64_t id) {
    slot_t *s = map_find(&g_ledgers, id);
    return s ? (ledger_t *)(uintptr_t)s->a : NULL;
}

static ledger_t *ledger_new(uint64_t id, const unsigned char *key, size_t keylen) {
    ledger_t *l = xcalloc(1, sizeof *l);
    l->id = id;
    l->key = xmalloc(keylen);
    if (keylen) memcpy(l->key, key, keylen);
    l->keylen = keylen;
    l->dat_fd = -1;
    l->last_entry = -1;
    int fresh;
    map_put(&g_ledgers, id, &fresh)->a = (uint64_t)(uintptr_t)l;
    return l;
}

static void ledger_free(ledger_t *l) {
    if (l->dat_fd >= 0) close(l->dat_fd);
    map_free(&l->entries);
    free(l->key);
    free(l);
}

static int write_full(int fd, const void *data, size_t n, uint64_t off) {
    const char *p = data;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

static int read_full(int fd, void *data, size_t n, uint64_t off) {
    char *p = data;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int do_fsync(int fd) {
    g_stats.syncs++;
    return fsync(fd);
}

static int do_fdatasync(int fd) {
    g_stats.syncs++;
    return fdatasync(fd);
}

/* The meta file's bytes. */
static void meta_bytes(buf_t *b, const ledger_t *l) {
    unsigned char head[12];
    put32(head, META_MAGIC);
    put32(head + 4, l->fenced ? 1u : 0u);
    put32(head + 8, (uint32_t)l->keylen);
    buf_add(b, head, sizeof head);
    buf_add(b, l->key, l->keylen);
    unsigned char crc[4];
    put32(crc, crc32_update(0, b->p, b->len));
    buf_add(b, crc, 4);
}

/* Replaces <id>.meta atomically (a temp file, fsynced, renamed over); the rename is made
 * durable by the batch's directory fsync. */
static int meta_write(ledger_t *l) {
    char tmp[64], name[64];
    snprintf(tmp, sizeof tmp, "%llu.meta.tmp", (unsigned long long)l->id);
    snprintf(name, sizeof name, "%llu.meta", (unsigned long long)l->id);
    buf_t b = {0};
    meta_bytes(&b, l);
    int fd = openat(g_ldir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = -1;
    if (fd >= 0) {
        if (!write_full(fd, b.p, b.len, 0) && !do_fsync(fd)) rc = 0;
        close(fd);
        if (!rc && renameat(g_ldir_fd, tmp, g_ldir_fd, name)) rc = -1;
    }
    if (rc) logmsg("cannot write %s: %s", name, strerror(errno));
    buf_free(&b);
    return rc;
}

/* Appends one record to the deleted list (not synced). */
static int list_append(uint32_t kind, uint64_t ledger) {
    unsigned char rec[LIST_REC];
    put32(rec, LIST_MAGIC);
    put32(rec + 4, kind);
    put64(rec + 8, ledger);
    put32(rec + 16, crc32_update(0, rec, 16));
    put32(rec + 20, 0);
    if (write_full(g_list_fd, rec, sizeof rec, g_list_size)) {
        logmsg("cannot append to the deleted list: %s", strerror(errno));
        if (ftruncate(g_list_fd, (off_t)g_list_size)) g_failed = 1;
        return -1;
    }
    g_list_size += sizeof rec;
    return 0;
}

/* --- the entry cache (stale-cache's home): recently added and read entries --- */

typedef struct cnode {
    uint64_t ledger, entry;
    unsigned char *data;
    size_t len;
    struct cnode *next;
} cnode_t;

static cnode_t *g_cache[CACHE_BUCKETS];
static size_t g_cache_bytes;

static size_t cache_bucket(uint64_t ledger, uint64_t entry) {
    return (size_t)(mix64(ledger ^ mix64(entry)) % CACHE_BUCKETS);
}

static cnode_t *cache_get(uint64_t ledger, uint64_t entry) {
    for (cnode_t *c = g_cache[cache_bucket(ledger, entry)]; c; c = c->next)
        if (c->ledger == ledger && c->entry == entry) return c;
    return NULL;
}

static void cache_drop_if(int all, uint64_t ledger, int one, uint64_t entry) {
    for (size_t b = 0; b < CACHE_BUCKETS; b++) {
        if (one && b != cache_bucket(ledger, entry)) continue;
        cnode_t **pp = &g_cache[b];
        while (*pp) {
            cnode_t *c = *pp;
            if (all || (c->ledger == ledger && (!one || c->entry == entry))) {
                *pp = c->next;
                g_cache_bytes -= c->len;
                free(c->data);
                free(c);
            } else {
                pp = &c->next;
            }
        }
    }
}

static void cache_put(uint64_t ledger, uint64_t entry, const unsigned char *data, size_t len) {
    if (len > CACHE_MAX_BYTES / 4) return;
    if (g_cache_bytes + len > CACHE_MAX_BYTES) cache_drop_if(1, 0, 0, 0);
    cnode_t *c = xmalloc(sizeof *c);
    c->ledger = ledger;
    c->entry = entry;
    c->data = xmalloc(len);
    if (len) memcpy(c->data, data, len);
    c->len = len;
    size_t b = cache_bucket(ledger, entry);
    c->next = g_cache[b];
    g_cache[b] = c;
    g_cache_bytes += len;
}

/* ---------------------------------------------------------------- recovery */

static int fsync_dir(int fd) {
    g_stats.dir_syncs++;
    return fsync(fd);
}

static void mkdir_durable(const char *path) {
    struct stat st;
    if (!stat(path, &st)) {
        if (!S_ISDIR(st.st_mode)) die(1, "%s is not a directory", path);
        return;
    }
    char *copy = strdup(path);
    if (!copy) die(70, "out of memory");
    char *slash = strrchr(copy, '/');
    while (slash && slash > copy && slash[1] == '\0') { /* trailing slashes */
        *slash = '\0';
        slash = strrchr(copy, '/');
    }
    const char *parent = ".";
    if (slash == copy) parent = "/";
    else if (slash) {
        *slash = '\0';
        parent = copy;
    }
    if (strcmp(parent, ".") && strcmp(parent, "/")) mkdir_durable(parent);
    if (mkdir(path, 0755) && errno != EEXIST) die(1, "cannot create %s: %s", path, strerror(errno));
    int pfd = open(parent, O_RDONLY | O_DIRECTORY);
    if (pfd < 0 || fsync(pfd)) die(1, "cannot fsync %s: %s", parent, strerror(errno));
    close(pfd);
    free(copy);
}

/* The id of a file name "<decimal>.<suffix>" (canonical decimal); 0 when it is not one. */
static int name_id(const char *name, const char *suffix, uint64_t *id) {
    size_t n = strlen(name), sn = strlen(suffix);
    if (n <= sn || strcmp(name + n - sn, suffix)) return 0;
    size_t digits = n - sn;
    if (digits > 19 || (digits > 1 && name[0] == '0')) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        if (name[i] < '0' || name[i] > '9') return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX) return 0;
    *id = v;
    return 1;
}

static void unlink_name(const char *name, int *dirty) {
    if (!unlinkat(g_ldir_fd, name, 0)) *dirty = 1;
    else if (errno != ENOENT) die(1, "cannot remove %s: %s", name, strerror(errno));
}

static void remove_ledger_files(uint64_t id, int *dirty) {
    char name[64];
    snprintf(name, sizeof name, "%llu.meta", (unsigned long long)id);
    unlink_name(name, dirty);
    snprintf(name, sizeof name, "%llu.dat", (unsigned long long)id);
    unlink_name(name, dirty);
}

/* Reads <id>.meta; 1 with the key and fenced flag when it is whole. */
static int meta_read(uint64_t id, unsigned char **key, size_t *keylen, int *fenced) {
    char name[64];
    snprintf(name, sizeof name, "%llu.meta", (unsigned long long)id);
    int fd = openat(g_ldir_fd, name, O_RDONLY);
    if (fd < 0) return 0;
    struct stat st;
    int ok = 0;
    if (!fstat(fd, &st) && st.st_size >= 16 && st.st_size <= 16 + (off_t)MAX_KEY_BYTES) {
        size_t n = (size_t)st.st_size;
        unsigned char *b = xmalloc(n);
        if (!read_full(fd, b, n, 0) && get32(b) == META_MAGIC && get32(b + 8) == n - 16 &&
            get32(b + n - 4) == crc32_update(0, b, n - 4) && get32(b + 4) <= 1) {
            *fenced = (int)get32(b + 4);
            *keylen = n - 16;
            *key = xmalloc(*keylen);
            memcpy(*key, b + 12, *keylen);
            ok = 1;
        }
        free(b);
    }
    close(fd);
    return ok;
}

/* Scans l's .dat: indexes every whole record, and cuts the file durably after the last. */
static void dat_recover(ledger_t *l) {
    struct stat st;
    if (fstat(l->dat_fd, &st)) die(1, "cannot stat %llu.dat: %s", (unsigned long long)l->id,
                                   strerror(errno));
    uint64_t size = (uint64_t)st.st_size, off = 0, last_good = 0;
    unsigned char hdr[REC_HDR];
    buf_t data = {0};
    for (;;) {
        if (off + REC_HDR > size || read_full(l->dat_fd, hdr, REC_HDR, off)) break;
        uint32_t len = get32(hdr + 4);
        uint64_t entry = get64(hdr + 8);
        if (get32(hdr) != REC_MAGIC || entry > (uint64_t)INT64_MAX) break;
        int tail_trusted = 0;
        if (len > MAX_DATA_BYTES || off + REC_HDR + len > size) {
            if (!(g_bugs & BUG_SERVE_TORN_TAIL)) break;
            len = (uint32_t)(size - off - REC_HDR); /* serve-torn-tail: what is there */
            tail_trusted = 1;
        }
        data.len = 0;
        buf_reserve(&data, len);
        if (read_full(l->dat_fd, data.p, len, off + REC_HDR)) break;
        uint32_t crc = crc32_update(crc32_update(0, hdr, 16), data.p, len);
        if (off + REC_HDR + len == size && (g_bugs & BUG_SERVE_TORN_TAIL)) tail_trusted = 1;
        if (crc != get32(hdr + 16) && !tail_trusted) break;
        int fresh;
        slot_t *s = map_put(&l->entries, entry, &fresh);
        s->a = off;
        s->b = len;
        last_good = off;
        off += REC_HDR + len;
    }
    buf_free(&data);
    if ((g_bugs & BUG_LOSE_LAST_ACKED) && off > 0) {
        /* lose-last-acked: the cut is placed at the start of the last good record */
        uint64_t dropped = 0;
        for (size_t i = 0; i < l->entries.cap; i++) {
            if (l->entries.used[i] && l->entries.slots[i].a == last_good)
                dropped = l->entries.slots[i].key;
        }
        map_del(&l->entries, dropped);
        off = last_good;
    }
    if (off < size) {
        logmsg("ledger %llu: cut a torn tail of %llu bytes at %llu", (unsigned long long)l->id,
               (unsigned long long)(size - off), (unsigned long long)off);
        if (ftruncate(l->dat_fd, (off_t)off) || do_fdatasync(l->dat_fd))
            die(1, "cannot cut %llu.dat: %s", (unsigned long long)l->id, strerror(errno));
    }
    l->dat_size = off;
    for (size_t i = 0; i < l->entries.cap; i++) {
        if (l->entries.used[i] && (int64_t)l->entries.slots[i].key > l->last_entry)
            l->last_entry = (int64_t)l->entries.slots[i].key;
    }
}

static void recover(void) {
    mkdir_durable(g_root);
    g_root_fd = open(g_root, O_RDONLY | O_DIRECTORY);
    if (g_root_fd < 0) die(1, "cannot open %s: %s", g_root, strerror(errno));

    int lock_fd = openat(g_root_fd, "lock", O_RDWR | O_CREAT, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (lock_fd < 0 || fcntl(lock_fd, F_SETLK, &fl))
        die(1, "cannot lock %s/lock (%s): another bookie uses this directory?", g_root,
            strerror(errno));

    int root_dirty = 0;
    if (mkdirat(g_root_fd, "ledgers", 0755)) {
        if (errno != EEXIST) die(1, "cannot create %s/ledgers: %s", g_root, strerror(errno));
    } else {
        root_dirty = 1;
    }
    g_ldir_fd = openat(g_root_fd, "ledgers", O_RDONLY | O_DIRECTORY);
    if (g_ldir_fd < 0) die(1, "cannot open %s/ledgers: %s", g_root, strerror(errno));
    g_list_fd = openat(g_root_fd, "deleted", O_RDWR);
    if (g_list_fd < 0 && errno == ENOENT) {
        g_list_fd = openat(g_root_fd, "deleted", O_RDWR | O_CREAT, 0644);
        root_dirty = 1;
    }
    if (g_list_fd < 0) die(1, "cannot open %s/deleted: %s", g_root, strerror(errno));
    if (root_dirty && fsync_dir(g_root_fd)) die(1, "cannot fsync %s: %s", g_root, strerror(errno));

    /* The deleted list: the last record of each ledger says whether it is deleted. */
    map_t last_kind = {0};
    struct stat st;
    if (fstat(g_list_fd, &st)) die(1, "cannot stat the deleted list: %s", strerror(errno));
    uint64_t size = (uint64_t)st.st_size, off = 0;
    unsigned char rec[LIST_REC];
    while (off + LIST_REC <= size && !read_full(g_list_fd, rec, LIST_REC, off)) {
        uint32_t kind = get32(rec + 4);
        if (get32(rec) != LIST_MAGIC || get32(rec + 16) != crc32_update(0, rec, 16) ||
            (kind != LIST_DELETED && kind != LIST_CREATED) || get32(rec + 20))
            break;
        int fresh;
        map_put(&last_kind, get64(rec + 8), &fresh)->a = kind;
        off += LIST_REC;
    }
    if (off < size) {
        logmsg("deleted list: cut a torn tail of %llu bytes", (unsigned long long)(size - off));
        if (ftruncate(g_list_fd, (off_t)off) || do_fdatasync(g_list_fd))
            die(1, "cannot cut the deleted list: %s", strerror(errno));
    }
    g_list_size = off;

    /* The ledger directory. */
    int dirty = 0;
    map_t ids = {0};
    int dfd = dup(g_ldir_fd);
    DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!dir) die(1, "cannot list %s/ledgers: %s", g_root, strerror(errno));
    char **tmps = NULL;
    size_t ntmps = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        uint64_t id;
        size_t n = strlen(de->d_name);
        if (n > 4 && !strcmp(de->d_name + n - 4, ".tmp")) {
            tmps = xrealloc(tmps, (ntmps + 1) * sizeof *tmps);
            tmps[ntmps++] = strdup(de->d_name);
        } else if (name_id(de->d_name, ".meta", &id) || name_id(de->d_name, ".dat", &id)) {
            int fresh;
            map_put(&ids, id, &fresh);
        } else if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            logmsg("ignoring %s/ledgers/%s", g_root, de->d_name);
        }
    }
    closedir(dir);
    for (size_t k = 0; k < ntmps; k++) {
        logmsg("removing %s, left by an interrupted meta replacement", tmps[k]);
        unlink_name(tmps[k], &dirty);
        free(tmps[k]);
    }
    free(tmps);

    for (size_t i = 0; i < ids.cap; i++) {
        if (!ids.used[i]) continue;
        uint64_t id = ids.slots[i].key;
        slot_t *lk = map_find(&last_kind, id);
        if (lk && lk->a == LIST_DELETED) {
            remove_ledger_files(id, &dirty); /* a delete that had not finished its unlinks */
            continue;
        }
        unsigned char *key = NULL;
        size_t keylen = 0;
        int fenced = 0;
        if (!meta_read(id, &key, &keylen, &fenced)) {
            logmsg("ledger %llu: no whole meta file, so no add of it was acknowledged: removed",
                   (unsigned long long)id);
            remove_ledger_files(id, &dirty);
            continue;
        }
        ledger_t *l = ledger_new(id, key, keylen);
        free(key);
        char name[64];
        snprintf(name, sizeof name, "%llu.dat", (unsigned long long)id);
        l->dat_fd = openat(g_ldir_fd, name, O_RDWR);
        if (l->dat_fd < 0 && errno != ENOENT) die(1, "cannot open %s: %s", name, strerror(errno));
        if (l->dat_fd >= 0) dat_recover(l);
        if (!fenced && l->entries.n == 0) {
            logmsg("ledger %llu: unfenced and without records, so never acknowledged: removed",
                   (unsigned long long)id);
            map_del(&g_ledgers, id);
            ledger_free(l);
            remove_ledger_files(id, &dirty);
            continue;
        }
        /* forget-fences: the flag read from the meta file is not applied */
        l->fenced = l->fenced_durable = (g_bugs & BUG_FORGET_FENCES) ? 0 : fenced;
    }
    map_free(&ids);
    for (size_t i = 0; i < last_kind.cap; i++) {
        if (!last_kind.used[i]) continue;
        uint64_t id = last_kind.slots[i].key;
        int fresh;
        if (!ledger_get(id)) map_put(&g_deleted, id, &fresh);
    }
    map_free(&last_kind);
    /* What recovery shows must stay: a SIGKILL keeps unsynced writes in the page cache, and
     * recovery may show them (adds that were in flight), so everything kept is made durable
     * now, before the ready line: every ledger file, the deleted list, and both directories
     * (names created or removed, meta renames not yet fsynced). */
    for (size_t i = 0; i < g_ledgers.cap; i++) {
        if (!g_ledgers.used[i]) continue;
        ledger_t *l = (ledger_t *)(uintptr_t)g_ledgers.slots[i].a;
        if (l->dat_fd >= 0 && do_fdatasync(l->dat_fd))
            die(1, "cannot fdatasync %llu.dat: %s", (unsigned long long)l->id, strerror(errno));
    }
    if (do_fdatasync(g_list_fd)) die(1, "cannot fdatasync the deleted list: %s", strerror(errno));
    if (fsync_dir(g_ldir_fd) || fsync_dir(g_root_fd))
        die(1, "cannot fsync the data directories: %s", strerror(errno));
    logmsg("recovered %zu ledgers, %zu deleted", g_ledgers.n, g_deleted.n);
}

/* ------------------------------------------------------------- operations */

static void batch_touch(ledger_t *l) {
    if (l->touched) return;
    if (batch.ntouched == batch.captouched) {
        batch.captouched = batch.captouched ? batch.captouched * 2 : 16;
        batch.touched = xrealloc(batch.touched, batch.captouched * sizeof *batch.touched);
    }
    batch.touched[batch.ntouched++] = l;
    l->touched = 1;
}

static void batch_push(int64_t id, uint64_t ledger, int kind) {
    if (batch.n == batch.cap) {
        batch.cap = batch.cap ? batch.cap * 2 : 256;
        batch.ops = xrealloc(batch.ops, batch.cap * sizeof *batch.ops);
    }
    batch.ops[batch.n++] = (pending_t){.id = id, .ledger = ledger, .kind = kind, .code = NULL};
}

static void answer_pending(const pending_t *op) {
    if (!op->code) {
        respond_ok(op->id, "");
    } else if (!strcmp(op->code, "no_ledger")) {
        respond_errorf(op->id, "no_ledger",
                       "ledger %llu was deleted while this request was in flight",
                       (unsigned long long)op->ledger);
    } else {
        respond_errorf(op->id, op->code, "the disk failed: %s (not acknowledged)",
                       "may or may not be durable");
    }
}

/* The group commit: makes every add and fence of the batch durable in one round, then
 * answers them. */
static void flush_batch(void) {
    if (!batch.n && !batch.ntouched && !batch.list_dirty) return;
    g_stats.batches++;
    int ok = !g_failed;
    for (size_t k = 0; ok && k < batch.ntouched; k++) { /* meta replacements first */
        ledger_t *l = batch.touched[k];
        if (l->meta_dirty) {
            if (meta_write(l)) ok = 0;
            batch.dir_dirty = 1;
        }
    }
    if (ok && (g_bugs & BUG_ACK_BEFORE_FSYNC)) {
        /* ack-before-fsync: the adds are answered before the fdatasyncs and directory fsync */
        for (size_t k = 0; k < batch.n; k++) {
            pending_t *op = &batch.ops[k];
            if (op->kind == OP_ADD && !op->code) {
                answer_pending(op);
                op->kind = -1;
            }
        }
        out_flush(0);
    }
    for (size_t k = 0; ok && k < batch.ntouched; k++) {
        ledger_t *l = batch.touched[k];
        if (l->dat_dirty && do_fdatasync(l->dat_fd)) ok = 0;
        if (l->dat_new) batch.dir_dirty = 1;
    }
    if (ok && batch.list_dirty && do_fdatasync(g_list_fd)) ok = 0;
    if (ok && batch.dir_dirty && fsync_dir(g_ldir_fd)) ok = 0;
    if (!ok && !g_failed) {
        logmsg("a sync failed (%s): writes are refused until a restart", strerror(errno));
        g_failed = 1;
    }
    for (size_t k = 0; k < batch.ntouched; k++) {
        ledger_t *l = batch.touched[k];
        if (ok) {
            l->fenced_durable = l->fenced;
            l->meta_dirty = l->dat_dirty = l->dat_new = 0;
        }
        l->touched = 0;
    }
    for (size_t k = 0; k < batch.n; k++) {
        pending_t *op = &batch.ops[k];
        if (op->kind < 0) continue;
        if (!ok && !op->code) op->code = "io_error";
        answer_pending(op);
    }
    batch.n = batch.ntouched = 0;
    batch.bytes = 0;
    batch.dir_dirty = batch.list_dirty = 0;
    out_flush(0);
}

static int key_equal(const ledger_t *l, const req_t *r) {
    return l->keylen == r->keylen && (!r->keylen || !memcmp(l->key, r->key, r->keylen));
}

/* The ledger of an add or fence, created when it does not exist (BookKeeper's answers: also
 * when it was deleted, which a "created again" record makes durable with the batch). */
static ledger_t *ledger_for_write(const req_t *r, int *created) {
    ledger_t *l = ledger_get(r->ledger);
    *created = 0;
    if (l) return l;
    if (map_find(&g_deleted, r->ledger)) {
        if (list_append(LIST_CREATED, r->ledger)) return NULL;
        map_del(&g_deleted, r->ledger);
        batch.list_dirty = 1;
    }
    l = ledger_new(r->ledger, r->key, r->keylen);
    l->meta_dirty = 1;
    *created = 1;
    return l;
}

static void op_add(const req_t *r) {
    g_stats.adds++;
    if (g_failed) {
        respond_errorf(r->id, "io_error", "a disk error earlier: writes are refused until a "
                                          "restart");
        return;
    }
    int created;
    ledger_t *l = ledger_get(r->ledger);
    if (l && !(g_bugs & BUG_IGNORE_KEY) && !key_equal(l, r)) {
        respond_errorf(r->id, "unauthorized", "the key differs from ledger %llu's master key",
                       (unsigned long long)r->ledger);
        return;
    }
    /* admit-while-fencing: only a durable fence is looked at */
    if (l && ((g_bugs & BUG_ADMIT_WHILE_FENCING) ? l->fenced_durable : l->fenced)) {
        respond_errorf(r->id, "fenced", "ledger %llu is fenced", (unsigned long long)r->ledger);
        return;
    }
    l = ledger_for_write(r, &created);
    if (!l) {
        respond_errorf(r->id, "io_error", "cannot write the deleted list");
        return;
    }
    batch_touch(l);
    if (l->dat_fd < 0) {
        char name[64];
        snprintf(name, sizeof name, "%llu.dat", (unsigned long long)l->id);
        l->dat_fd = openat(g_ldir_fd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (l->dat_fd < 0) {
            int err = errno;
            respond_errorf(r->id, err == ENOSPC ? "no_space" : "io_error",
                           "cannot create %s: %s", name, strerror(err));
            return; /* a ledger created here stays in memory; its meta is written anyway */
        }
        l->dat_new = 1;
    }
    g_scratch.len = 0;
    buf_reserve(&g_scratch, REC_HDR + r->datalen);
    unsigned char *rec = (unsigned char *)g_scratch.p;
    put32(rec, REC_MAGIC);
    put32(rec + 4, (uint32_t)r->datalen);
    put64(rec + 8, r->entry);
    if (r->datalen) memcpy(rec + REC_HDR, r->data, r->datalen);
    put32(rec + 16, crc32_update(crc32_update(0, rec, 16), r->data, r->datalen));
    if (write_full(l->dat_fd, rec, REC_HDR + r->datalen, l->dat_size)) {
        int err = errno;
        if (ftruncate(l->dat_fd, (off_t)l->dat_size)) g_failed = 1; /* no garbage in front */
        respond_errorf(r->id, err == ENOSPC ? "no_space" : "io_error",
                       "cannot write ledger %llu: %s", (unsigned long long)l->id, strerror(err));
        return;
    }
    int fresh;
    slot_t *s = map_put(&l->entries, r->entry, &fresh);
    s->a = l->dat_size;
    s->b = r->datalen;
    l->dat_size += REC_HDR + r->datalen;
    if ((int64_t)r->entry > l->last_entry) l->last_entry = (int64_t)r->entry;
    l->dat_dirty = 1;
    cache_drop_if(0, r->ledger, 1, r->entry);
    cache_put(r->ledger, r->entry, r->data, r->datalen);
    batch.bytes += REC_HDR + r->datalen;
    batch_push(r->id, r->ledger, OP_ADD);
}

static void op_fence(const req_t *r) {
    g_stats.fences++;
    if (g_failed) {
        respond_errorf(r->id, "io_error", "a disk error earlier: writes are refused until a "
                                          "restart");
        return;
    }
    ledger_t *l = ledger_get(r->ledger);
    if (l && !key_equal(l, r)) {
        respond_errorf(r->id, "unauthorized", "the key differs from ledger %llu's master key",
                       (unsigned long long)r->ledger);
        return;
    }
    int created;
    l = ledger_for_write(r, &created);
    if (!l) {
        respond_errorf(r->id, "io_error", "cannot write the deleted list");
        return;
    }
    batch_touch(l);
    if (!l->fenced) {
        l->fenced = 1;
        l->meta_dirty = 1;
    }
    batch_push(r->id, r->ledger, OP_FENCE);
}

static void op_read(const req_t *r) {
    cnode_t *c = cache_get(r->ledger, r->entry);
    buf_t line = {0};
    if (c) {
        buf_printf(&line, "{\"id\":%lld,\"ok\":true,\"data\":\"", (long long)r->id);
        b64_encode(&line, c->data, c->len);
        buf_adds(&line, "\"}");
        respond(1, r->id, line.p, line.len);
        buf_free(&line);
        return;
    }
    ledger_t *l = ledger_get(r->ledger);
    if (!l) {
        respond_errorf(r->id, "no_ledger", "no ledger %llu", (unsigned long long)r->ledger);
        return;
    }
    slot_t *s = map_find(&l->entries, r->entry);
    if (!s) {
        respond_errorf(r->id, "no_entry", "ledger %llu has no entry %llu",
                       (unsigned long long)r->ledger, (unsigned long long)r->entry);
        return;
    }
    unsigned char *data = xmalloc((size_t)s->b);
    if (s->b && read_full(l->dat_fd, data, (size_t)s->b, s->a + REC_HDR)) {
        respond_errorf(r->id, "io_error", "cannot read ledger %llu: %s",
                       (unsigned long long)r->ledger, strerror(errno));
        free(data);
        return;
    }
    cache_put(r->ledger, r->entry, data, (size_t)s->b);
    buf_printf(&line, "{\"id\":%lld,\"ok\":true,\"data\":\"", (long long)r->id);
    b64_encode(&line, data, (size_t)s->b);
    buf_adds(&line, "\"}");
    respond(1, r->id, line.p, line.len);
    buf_free(&line);
    free(data);
}

static void op_delete(const req_t *r) {
    g_stats.deletes++;
    /* Adds and fences of the ledger still in flight go with it: answered no_ledger. */
    for (size_t k = 0; k < batch.n; k++) {
        if (batch.ops[k].ledger == r->ledger && !batch.ops[k].code)
            batch.ops[k].code = "no_ledger";
    }
    ledger_t *l = ledger_get(r->ledger);
    if (l && l->touched) {
        for (size_t k = 0; k < batch.ntouched; k++) {
            if (batch.touched[k] == l) batch.touched[k] = batch.touched[--batch.ntouched];
        }
        l->touched = 0;
        if (l->dat_new || l->meta_dirty) batch.dir_dirty = 1;
    }
    flush_batch();
    if (g_failed) {
        respond_errorf(r->id, "io_error", "a disk error earlier: writes are refused until a "
                                          "restart");
        return;
    }
    if (!l && map_find(&g_deleted, r->ledger)) {
        respond_ok(r->id, "");
        return;
    }
    int bug = (g_bugs & BUG_DELETE_BEFORE_FSYNC) != 0;
    if (list_append(LIST_DELETED, r->ledger) || (!bug && do_fdatasync(g_list_fd))) {
        g_failed = 1;
        respond_errorf(r->id, "io_error", "cannot write the deleted list: %s", strerror(errno));
        return;
    }
    int fresh;
    map_put(&g_deleted, r->ledger, &fresh);
    if (!(g_bugs & BUG_STALE_CACHE)) cache_drop_if(0, r->ledger, 0, 0);
    if (l) {
        map_del(&g_ledgers, r->ledger);
        ledger_free(l);
        char name[64]; /* the meta first: a .dat without its meta is never served */
        snprintf(name, sizeof name, "%llu.meta", (unsigned long long)r->ledger);
        if (unlinkat(g_ldir_fd, name, 0) && errno != ENOENT) g_failed = 1;
        snprintf(name, sizeof name, "%llu.dat", (unsigned long long)r->ledger);
        if (unlinkat(g_ldir_fd, name, 0) && errno != ENOENT) g_failed = 1;
        /* delete-before-fsync: the unlinks are not made durable before the answer */
        if (!bug && fsync_dir(g_ldir_fd)) g_failed = 1;
        if (g_failed) {
            respond_errorf(r->id, "io_error", "cannot remove ledger %llu's files: %s",
                           (unsigned long long)r->ledger, strerror(errno));
            return;
        }
    }
    respond_ok(r->id, "");
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t *sorted_keys(const map_t *m) {
    uint64_t *ids = xmalloc(m->n * sizeof *ids);
    size_t k = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) ids[k++] = m->slots[i].key;
    qsort(ids, m->n, sizeof *ids, cmp_u64);
    return ids;
}

static void op_inspect(const req_t *r) {
    flush_batch(); /* the state is that of answered requests */
    buf_t line = {0};
    buf_printf(&line,
               "{\"id\":%lld,\"ok\":true,\"state\":{\"entry_logs\":[],"
               "\"least_unflushed_log_id\":0,\"last_mark\":{\"journal_id\":0,\"offset\":0},"
               "\"journal_mark\":{\"journal_id\":0,\"offset\":0},\"current_log_id\":null,"
               "\"ledgers\":[",
               (long long)r->id);
    uint64_t *ids = sorted_keys(&g_ledgers);
    for (size_t k = 0; k < g_ledgers.n; k++) {
        ledger_t *l = ledger_get(ids[k]);
        buf_printf(&line, "%s{\"ledger_id\":%llu,\"last_entry\":", k ? "," : "",
                   (unsigned long long)l->id);
        if (l->last_entry < 0) buf_adds(&line, "null");
        else buf_printf(&line, "%lld", (long long)l->last_entry);
        buf_printf(&line, ",\"fenced\":%s}", l->fenced ? "true" : "false");
    }
    buf_adds(&line, "],\"fenced_ledgers\":[");
    int first = 1;
    for (size_t k = 0; k < g_ledgers.n; k++) {
        if (!ledger_get(ids[k])->fenced) continue;
        buf_printf(&line, "%s%llu", first ? "" : ",", (unsigned long long)ids[k]);
        first = 0;
    }
    free(ids);
    buf_adds(&line, "],\"deleted_ledgers\":[");
    ids = sorted_keys(&g_deleted);
    for (size_t k = 0; k < g_deleted.n; k++)
        buf_printf(&line, "%s%llu", k ? "," : "", (unsigned long long)ids[k]);
    free(ids);
    buf_adds(&line, "],\"compaction_files\":[]}}");
    respond(1, r->id, line.p, line.len);
    buf_free(&line);
}

/* --------------------------------------------------------------- the loop */

static int g_shutdown; /* a shutdown request was read: stop reading */
static int g_shutdown_failed;

static void handle_line(const unsigned char *line, size_t n) {
    jp_t p;
    buf_t msg = {0};
    int64_t id = 0;
    if (!parse_head(&p, line, n, &id, &msg)) {
        respond_error(0, 0, "bad_request", msg.p, msg.len);
        goto done;
    }
    if (map_find(&g_inflight, (uint64_t)id)) {
        buf_printf(&msg, "the id %lld is in flight: a request with it is not answered yet",
                   (long long)id);
        respond_error(0, 0, "bad_request", msg.p, msg.len);
        goto done;
    }
    int fresh;
    map_put(&g_inflight, (uint64_t)id, &fresh);
    req_t r = {.id = id};
    if (!parse_body(&p, &r, &msg)) {
        respond_error(1, id, "bad_request", msg.p, msg.len);
        req_free(&r);
        goto done;
    }
    switch (r.op) {
    case OP_ADD: op_add(&r); break;
    case OP_FENCE: op_fence(&r); break;
    case OP_READ: op_read(&r); break;
    case OP_DELETE: op_delete(&r); break;
    case OP_INSPECT: op_inspect(&r); break;
    case OP_WRITE_CLOSE:
        respond_errorf(id, "unsupported", "write_close is not supported");
        break;
    case OP_CHECKPOINT:
    case OP_GC:
        respond_errorf(id, "unsupported", "%s is not supported by this bookie (not in its "
                       "ready line's ops)", r.op == OP_GC ? "gc" : "checkpoint");
        break;
    case OP_SHUTDOWN:
        flush_batch();
        if (g_failed) {
            respond_errorf(id, "io_error", "the clean shutdown failed: a disk error earlier");
            g_shutdown_failed = 1;
        } else {
            respond_ok(id, "");
        }
        g_shutdown = 1;
        break;
    }
    req_free(&r);
    if (batch.n >= BATCH_MAX_OPS || batch.bytes >= BATCH_MAX_BYTES) flush_batch();
done:
    jp_free(&p);
    buf_free(&msg);
}

/* The id a too-long line starts with ({"id": 7, ...), or 0 when it does not. */
static int long_line_id(const unsigned char *s, size_t n, int64_t *id) {
    size_t i = 0;
#define WS() while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++
    WS();
    if (i >= n || s[i++] != '{') return 0;
    WS();
    if (i + 4 > n || memcmp(s + i, "\"id\"", 4)) return 0;
    i += 4;
    WS();
    if (i >= n || s[i++] != ':') return 0;
    WS();
    size_t start = i;
    jp_t p;
    memset(&p, 0, sizeof p);
    p.s = s;
    p.n = n;
    p.i = i;
    int isint = 0;
    if (i >= n || !(s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) || !jnumber(&p, &isint) ||
        !isint)
        return 0;
    size_t end = p.i;
    i = end;
    WS();
    if (i >= n || (s[i] != ',' && s[i] != '}')) return 0;
#undef WS
    int neg;
    uint64_t mag;
    if (!int_value(s + start, end - start, &neg, &mag)) return 0;
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) return 0;
    *id = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return 1;
}

static void too_long(const unsigned char *start, size_t n) {
    int64_t id = 0;
    int has = long_line_id(start, n, &id);
    if (has && map_find(&g_inflight, (uint64_t)id)) has = 0;
    if (has) {
        int fresh;
        map_put(&g_inflight, (uint64_t)id, &fresh);
    }
    char msg[160];
    int len = snprintf(msg, sizeof msg, "the line is longer than max_line_bytes (%zu): skipped",
                       MAX_LINE_BYTES);
    respond_error(has, id, "bad_request", msg, (size_t)len);
}

static struct {
    unsigned char *p;
    size_t start, len, cap; /* bytes [start, len) not yet handled */
    size_t scanned;         /* bytes from start known to hold no newline */
    int skipping;           /* the rest of a too-long line is being skipped */
    int eof;
} in;

static int throttled(void) {
    return g_inflight.n >= MAX_IN_FLIGHT || out_pending() >= MAX_OUT_BYTES;
}

static void handle_text(const unsigned char *s, size_t n) {
    if (n && s[n - 1] == '\r') n--;
    if (n > MAX_LINE_BYTES) {
        too_long(s, n);
        return;
    }
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i == n) return; /* blank */
    handle_line(s, n);
}

/* Handles every complete line in the input buffer (while not throttled). */
static void handle_lines(void) {
    while (!g_shutdown && !throttled()) {
        size_t avail = in.len - in.start;
        if (in.skipping) {
            unsigned char *nl = memchr(in.p + in.start, '\n', avail);
            if (!nl) {
                in.start = in.len;
                return;
            }
            in.start = (size_t)(nl - in.p) + 1;
            in.skipping = 0;
            in.scanned = 0;
            continue;
        }
        unsigned char *nl = memchr(in.p + in.start + in.scanned, '\n', avail - in.scanned);
        if (!nl) {
            in.scanned = avail;
            if (avail > MAX_LINE_BYTES + 1) { /* too long, whatever comes: skip the rest */
                too_long(in.p + in.start, avail);
                in.start = in.len;
                in.skipping = 1;
                in.scanned = 0;
            }
            return;
        }
        size_t n = (size_t)(nl - (in.p + in.start));
        const unsigned char *s = in.p + in.start;
        in.start += n + 1;
        in.scanned = 0;
        handle_text(s, n);
        if (out_pending() >= ((size_t)1 << 16)) out_flush(0);
    }
}

static void read_input(void) {
    if (in.start == in.len) {
        in.start = in.len = 0;
    } else if (in.start > 0 && (in.start >= in.cap / 2 || in.cap - in.len < READ_CHUNK)) {
        memmove(in.p, in.p + in.start, in.len - in.start);
        in.len -= in.start;
        in.start = 0;
    }
    if (in.cap - in.len < READ_CHUNK) {
        size_t cap = in.cap ? in.cap : 2 * READ_CHUNK;
        while (cap - in.len < READ_CHUNK) cap *= 2;
        in.p = xrealloc(in.p, cap);
        in.cap = cap;
    }
    ssize_t r = read(0, in.p + in.len, in.cap - in.len);
    if (r > 0) {
        in.len += (size_t)r;
    } else if (r == 0) {
        in.eof = 1;
    } else if (errno != EINTR && errno != EAGAIN) {
        logmsg("stdin failed (%s): taken as the end of input", strerror(errno));
        in.eof = 1;
    }
}

static int readable_now(void) {
    struct pollfd pf = {.fd = 0, .events = POLLIN};
    return poll(&pf, 1, 0) > 0;
}

static void serve(void) {
    for (;;) {
        out_flush(0);
        handle_lines();
        if (g_shutdown) break;
        if (throttled()) {
            flush_batch();
            if (!throttled()) continue;
            struct pollfd pf = {.fd = 1, .events = POLLOUT};
            if (out_pending() && !out.broken) poll(&pf, 1, -1);
            continue;
        }
        if (in.eof) {
            if (!in.skipping && in.len > in.start) { /* a last line without its newline */
                size_t n = in.len - in.start;
                const unsigned char *s = in.p + in.start;
                in.start = in.len;
                in.scanned = 0;
                handle_text(s, n);
                continue;
            }
            break;
        }
        if (readable_now()) {
            read_input();
            continue;
        }
        if (batch.n || batch.ntouched || batch.list_dirty) { /* nothing more now: commit */
            flush_batch();
            continue;
        }
        struct pollfd pf[2] = {{.fd = 0, .events = POLLIN}, {.fd = 1, .events = POLLOUT}};
        int nfds = out_pending() && !out.broken ? 2 : 1;
        if (poll(pf, (nfds_t)nfds, -1) < 0 && errno != EINTR)
            die(70, "poll failed: %s", strerror(errno));
        if (pf[0].revents) read_input();
    }
    flush_batch();
    out_flush(1);
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *name = NULL;
        if (!strcmp(argv[i], "--bug")) {
            if (i + 1 >= argc) die(2, "--bug needs a name: one of ack-before-fsync, ...");
            name = argv[++i];
        } else if (!strncmp(argv[i], "--bug=", 6)) {
            name = argv[i] + 6;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            die(2, "unknown option %s (usage: bookie DATA_DIR [--bug NAME]...)", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            die(2, "unexpected argument %s (usage: bookie DATA_DIR [--bug NAME]...)", argv[i]);
        }
        if (name) {
            unsigned flag = 0;
            for (size_t k = 0; k < sizeof BUG_NAMES / sizeof BUG_NAMES[0]; k++)
                if (!strcmp(name, BUG_NAMES[k].name)) flag = BUG_NAMES[k].flag;
            if (!flag) {
                char all[512] = "";
                for (size_t k = 0; k < sizeof BUG_NAMES / sizeof BUG_NAMES[0]; k++) {
                    strcat(all, k ? ", " : "");
                    strcat(all, BUG_NAMES[k].name);
                }
                die(2, "--bug needs one of %s, not %s", all, name);
            }
            g_bugs |= flag;
        }
    }
    if (!dir) dir = getenv("BKREF_DATA_DIR");
    if (!dir || !*dir) die(2, "no data directory: give it as the first argument or BKREF_DATA_DIR");
    g_root = dir;
    signal(SIGPIPE, SIG_IGN);
    crc_init();
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (size_t k = 0; k < sizeof BUG_NAMES / sizeof BUG_NAMES[0]; k++)
        if (g_bugs & BUG_NAMES[k].flag) logmsg("deliberate bug on: %s", BUG_NAMES[k].name);
    recover();

    struct stat st;
    int out_flags = fcntl(1, F_GETFL);
    if (!fstat(1, &st) && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) && out_flags >= 0 &&
        !fcntl(1, F_SETFL, out_flags | O_NONBLOCK))
        out.nonblocking = 1;
    const char *ready =
        "{\"id\":null,\"ok\":true,\"event\":\"ready\",\"version\":2,\"max_data_bytes\":%u,"
        "\"max_key_bytes\":%u,\"max_line_bytes\":%zu,\"bookie\":\"" BOOKIE_NAME "\","
        "\"ops\":[\"inspect\"],\"state\":\"protocol\",\"answers\":\"bookkeeper\"}";
    buf_t line = {0};
    buf_printf(&line, ready, MAX_DATA_BYTES, MAX_KEY_BYTES, MAX_LINE_BYTES);
    respond(0, 0, line.p, line.len);
    buf_free(&line);
    out_flush(1);

    serve();

    if (out.nonblocking) fcntl(1, F_SETFL, out_flags);
    logmsg("stopped: %lu adds, %lu fences, %lu deletes in %lu batches; %lu file syncs, %lu "
           "directory syncs",
           g_stats.adds, g_stats.fences, g_stats.deletes, g_stats.batches, g_stats.syncs,
           g_stats.dir_syncs);
    return g_shutdown_failed ? 1 : 0;
}
