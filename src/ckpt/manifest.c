/* manifest.c - encode and parse checkpoint manifests (manifest.h).
 *
 *   crater-ckpt 1
 *   step 42
 *   parent 41                      ("parent -" for the first checkpoint)
 *   chunk-size 4194304
 *   entries 2
 *   entry model.pt 5000000 2       (encoded name, size, chunk count)
 *   chunk <64 hex> 4194304
 *   chunk <64 hex> 805696
 *   entry ...
 *   checksum <64 hex>              (SHA-256 of all the lines above)
 *
 * The parser walks the text once with a cursor; every number is checked
 * for canonical form and overflow and every count against what follows, so
 * that a damaged file is an error and never a wrong checkpoint.
 */
#include "ckpt/manifest.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckerr.h"
#include "ckpt/sha256.h"

typedef struct cursor {
    const char *p, *end;
    int line;
    crater_error_t *err;
} cursor_t;

static int bad(cursor_t *c, const char *what)
{
    return crater__ckpt_errorf(c->err,
                               CRATER_EPARSE,
                               "manifest line %d: %s",
                               c->line,
                               what);
}

/* The next line without its '\n' in *s, *n; -1 when there is none. */
static int next_line(cursor_t *c, const char **s, size_t *n)
{
    const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));

    c->line++;
    if (!nl)
        return bad(c, "truncated");
    *s = c->p, *n = (size_t)(nl - c->p);
    c->p = nl + 1;
    return 0;
}

/* Canonical unsigned decimal: digits, no leading zero, no overflow. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* "key value": the value after key and one space. */
static int keyed(cursor_t *c, const char *key, const char **v, size_t *n)
{
    const char *s = NULL;
    size_t len = 0, k = strlen(key);

    if (next_line(c, &s, &len) < 0)
        return -1;
    if (len <= k || memcmp(s, key, k) || s[k] != ' ')
        return bad(c, key);
    *v = s + k + 1, *n = len - k - 1;
    return 0;
}

static int keyed_u64(cursor_t *c, const char *key, uint64_t max, uint64_t *out)
{
    const char *v;
    size_t n;

    if (keyed(c, key, &v, &n) < 0)
        return -1;
    if (parse_u64(v, n, out) < 0 || *out > max)
        return bad(c, key);
    return 0;
}

static int is_hex64(const char *s, size_t n)
{
    if (n != 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static int safe_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
           || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    return ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Decode a canonical percent-encoded name into a malloc()ed string. */
static char *name_decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; out && i < n; i++) {
        int hi, lo;

        if (safe_char((unsigned char)s[i])) {
            out[o++] = s[i];
            continue;
        }
        if (s[i] != '%' || i + 2 >= n || (hi = hexval(s[i + 1])) < 0
            || (lo = hexval(s[i + 2])) < 0 || (hi << 4 | lo) == 0
            || safe_char((unsigned char)(hi << 4 | lo))) {
            free(out);
            return NULL;
        }
        out[o++] = (char)(hi << 4 | lo);
        i += 2;
    }
    if (out)
        out[o] = '\0';
    if (out && (o == 0 || o > CRATER_CKPT_NAME_MAX)) {
        free(out);
        return NULL;
    }
    return out;
}

int crater__ckpt_name_encode(const char *name, char *out, size_t size)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (o + 4 > size)
            return -1;
        if (safe_char(*p)) {
            out[o++] = (char)*p;
            continue;
        }
        out[o++] = '%';
        out[o++] = digits[*p >> 4];
        out[o++] = digits[*p & 15];
    }
    if (o + 1 > size)
        return -1;
    out[o] = '\0';
    return 0;
}

static int parse_chunk(cursor_t *c, uint32_t csize, crater__ckpt_chunk_t *ch)
{
    const char *v;
    size_t n;
    uint64_t len;

    if (keyed(c, "chunk", &v, &n) < 0)
        return -1;
    if (n < 66 || v[64] != ' ' || !is_hex64(v, 64)
        || parse_u64(v + 65, n - 65, &len) < 0 || len == 0 || len > csize)
        return bad(c, "chunk");
    memcpy(ch->hex, v, 64);
    ch->hex[64] = '\0';
    ch->len = (uint32_t)len;
    return 0;
}

/* "entry NAME SIZE NCHUNKS": fills e (name allocated). */
static int parse_entry_line(cursor_t *c,
                            uint32_t csize,
                            crater__ckpt_mentry_t *e)
{
    const char *v, *sp1, *sp2;
    size_t n;
    uint64_t nch;

    if (keyed(c, "entry", &v, &n) < 0)
        return -1;
    sp2 = memrchr(v, ' ', n);
    sp1 = sp2 ? memrchr(v, ' ', (size_t)(sp2 - v)) : NULL;
    if (!sp1 || parse_u64(sp1 + 1, (size_t)(sp2 - sp1 - 1), &e->size) < 0
        || parse_u64(sp2 + 1, (size_t)(v + n - sp2 - 1), &nch) < 0
        || nch != (e->size + csize - 1) / csize)
        return bad(c, "entry");
    if (!(e->name = name_decode(v, (size_t)(sp1 - v))))
        return bad(c, "entry name");
    e->nchunks = (size_t)nch;
    return 0;
}

static int grow_chunks(crater__ckpt_manifest_t *m, size_t more, cursor_t *c)
{
    crater__ckpt_chunk_t *ch;
    size_t left = (size_t)(c->end - c->p);

    /* each chunk line is 72+ bytes: a count beyond that is a lie */
    if (more > left / 72)
        return bad(c, "more chunks than lines");
    ch = realloc(m->chunks, (m->nchunks + more + 1) * sizeof(*ch));
    if (!ch)
        return crater__ckpt_errorf(c->err, CRATER_ENOMEM, "out of memory");
    m->chunks = ch;
    return 0;
}

static int parse_entry(cursor_t *c, crater__ckpt_manifest_t *m, size_t i)
{
    crater__ckpt_mentry_t *e = &m->entries[i];
    uint64_t sum = 0;

    if (parse_entry_line(c, m->chunk_size, e) < 0)
        return -1;
    for (size_t j = 0; j < i; j++)
        if (!strcmp(m->entries[j].name, e->name))
            return bad(c, "duplicate entry name");
    if (grow_chunks(m, e->nchunks, c) < 0)
        return -1;
    e->first = m->nchunks;
    for (size_t k = 0; k < e->nchunks; k++) {
        crater__ckpt_chunk_t *ch = &m->chunks[m->nchunks];
        if (parse_chunk(c, m->chunk_size, ch) < 0)
            return -1;
        if (k + 1 < e->nchunks && ch->len != m->chunk_size)
            return bad(c, "short chunk before the last");
        sum += ch->len;
        m->nchunks++;
    }
    return sum == e->size ? 0 : bad(c, "chunk lengths do not add up");
}

static int parse_header(cursor_t *c, crater__ckpt_manifest_t *m, uint64_t *ne)
{
    const char *v;
    size_t n;
    uint64_t u;

    if (keyed(c, CRATER__CKPT_MAGIC, &v, &n) < 0)
        return -1;
    if (n != 1 || v[0] != '0' + CRATER_CKPT_FORMAT)
        return bad(c, "unknown format version");
    if (keyed_u64(c, "step", INT64_MAX, &m->step) < 0
        || keyed(c, "parent", &v, &n) < 0)
        return -1;
    if (n == 1 && v[0] == '-')
        m->parent = -1;
    else if (parse_u64(v, n, &u) < 0 || u > INT64_MAX)
        return bad(c, "parent");
    else
        m->parent = (int64_t)u;
    if (keyed_u64(c, "chunk-size", 1u << 30, &u) < 0 || u == 0)
        return u == 0 ? bad(c, "chunk-size") : -1;
    m->chunk_size = (uint32_t)u;
    return keyed_u64(c, "entries", CRATER__CKPT_ENTRIES_MAX, ne);
}

static int check_sum(cursor_t *c, const char *start, crater__ckpt_manifest_t *m)
{
    const char *v;
    size_t n;
    char hex[CRATER_CKPT_HASH_HEX];

    crater_ckpt_sha256_hex(start, (size_t)(c->p - start), hex);
    if (keyed(c, "checksum", &v, &n) < 0)
        return -1;
    if (!is_hex64(v, n) || memcmp(v, hex, 64))
        return bad(c, "checksum mismatch");
    if (c->p != c->end)
        return bad(c, "data after the checksum");
    memcpy(m->digest, hex, sizeof(hex));
    return 0;
}

static int parse_all(cursor_t *c, crater__ckpt_manifest_t *m)
{
    const char *start = c->p;
    uint64_t ne;

    if (parse_header(c, m, &ne) < 0)
        return -1;
    if (ne > (size_t)(c->end - c->p) / 8)
        return bad(c, "more entries than lines");
    if (ne && !(m->entries = calloc((size_t)ne, sizeof(*m->entries))))
        return crater__ckpt_errorf(c->err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < ne; i++, m->nentries++)
        if (parse_entry(c, m, i) < 0) {
            m->nentries++; /* free its name too */
            return -1;
        }
    return check_sum(c, start, m);
}

int crater__ckpt_manifest_parse(const char *text,
                                size_t len,
                                crater__ckpt_manifest_t *m,
                                crater_error_t *err)
{
    cursor_t c = {text, text + len, 0, err};

    memset(m, 0, sizeof(*m));
    if (len > CRATER__CKPT_MANIFEST_MAX || memchr(text, '\0', len))
        return crater__ckpt_errorf(err, CRATER_EPARSE, "manifest: not text");
    if (parse_all(&c, m) < 0) {
        crater__ckpt_manifest_free(m);
        return -1;
    }
    return 0;
}

typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf_t;

static void put(buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len)
            break;
        char *np = n < 0 ? NULL : realloc(b->p, b->cap * 2 + (size_t)n);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np, b->cap = b->cap * 2 + (size_t)n;
    }
    b->len += (size_t)n;
}

static void put_entry(buf_t *b, const crater__ckpt_manifest_t *m, size_t i)
{
    const crater__ckpt_mentry_t *e = &m->entries[i];
    char name[3 * CRATER_CKPT_NAME_MAX + 1];

    if (crater__ckpt_name_encode(e->name, name, sizeof(name)) < 0) {
        b->failed = 1;
        return;
    }
    put(b,
        "entry %s %llu %zu\n",
        name,
        (unsigned long long)e->size,
        e->nchunks);
    for (size_t k = 0; k < e->nchunks; k++) {
        const crater__ckpt_chunk_t *ch = &m->chunks[e->first + k];
        put(b, "chunk %s %u\n", ch->hex, (unsigned)ch->len);
    }
}

char *crater__ckpt_manifest_encode(crater__ckpt_manifest_t *m, size_t *len)
{
    buf_t b = {malloc(4096), 0, 4096, 0};

    if (!b.p)
        return NULL;
    put(&b,
        "%s %d\nstep %llu\n",
        CRATER__CKPT_MAGIC,
        CRATER_CKPT_FORMAT,
        (unsigned long long)m->step);
    if (m->parent < 0)
        put(&b, "parent -\n");
    else
        put(&b, "parent %lld\n", (long long)m->parent);
    put(&b,
        "chunk-size %u\nentries %zu\n",
        (unsigned)m->chunk_size,
        m->nentries);
    for (size_t i = 0; i < m->nentries; i++)
        put_entry(&b, m, i);
    if (!b.failed)
        crater_ckpt_sha256_hex(b.p, b.len, m->digest);
    put(&b, "checksum %s\n", m->digest);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

void crater__ckpt_manifest_free(crater__ckpt_manifest_t *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nentries; i++)
        free(m->entries[i].name);
    free(m->entries);
    free(m->chunks);
    memset(m, 0, sizeof(*m));
}
