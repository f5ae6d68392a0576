/* units.c - exact quantity parsing for every dimension (see units.h).
 *
 * One table lists every unit with its dimension and multiplier in base
 * units. Parsing is: number -> (mantissa, decimal exponent) held exactly,
 * then unit lookup in the wanted dimension, then one exact multiply/divide
 * in 128-bit arithmetic with round-up. Looking the unit up in the other
 * dimensions too is what lets a message say "'GB/s' is a bandwidth unit".
 */
#include "crater/units.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

__extension__ typedef unsigned __int128 u128;

struct unit {
    const char *suffix;
    crater_dim_t dim;
    uint64_t mult;
};

#define KI 1024ull
#define NS_S 1000000000ull

static const struct unit units[] = {
    /* bytes */
    {"", CRATER_DIM_BYTES, 1},
    {"B", CRATER_DIM_BYTES, 1},
    {"Ki", CRATER_DIM_BYTES, KI},
    {"KiB", CRATER_DIM_BYTES, KI},
    {"Mi", CRATER_DIM_BYTES, KI *KI},
    {"MiB", CRATER_DIM_BYTES, KI *KI},
    {"Gi", CRATER_DIM_BYTES, KI *KI *KI},
    {"GiB", CRATER_DIM_BYTES, KI *KI *KI},
    {"Ti", CRATER_DIM_BYTES, KI *KI *KI *KI},
    {"TiB", CRATER_DIM_BYTES, KI *KI *KI *KI},
    {"Pi", CRATER_DIM_BYTES, KI *KI *KI *KI *KI},
    {"PiB", CRATER_DIM_BYTES, KI *KI *KI *KI *KI},
    {"k", CRATER_DIM_BYTES, 1000ull},
    {"K", CRATER_DIM_BYTES, 1000ull},
    {"kB", CRATER_DIM_BYTES, 1000ull},
    {"KB", CRATER_DIM_BYTES, 1000ull},
    {"M", CRATER_DIM_BYTES, 1000000ull},
    {"MB", CRATER_DIM_BYTES, 1000000ull},
    {"G", CRATER_DIM_BYTES, 1000000000ull},
    {"GB", CRATER_DIM_BYTES, 1000000000ull},
    {"T", CRATER_DIM_BYTES, 1000000000000ull},
    {"TB", CRATER_DIM_BYTES, 1000000000000ull},
    {"P", CRATER_DIM_BYTES, 1000000000000000ull},
    {"PB", CRATER_DIM_BYTES, 1000000000000000ull},
    /* cpu, base millicores */
    {"", CRATER_DIM_CPU, 1000},
    {"m", CRATER_DIM_CPU, 1},
    /* duration, base nanoseconds; bare number is seconds */
    {"", CRATER_DIM_DURATION, NS_S},
    {"ns", CRATER_DIM_DURATION, 1},
    {"us", CRATER_DIM_DURATION, 1000ull},
    {"\xc2\xb5s", CRATER_DIM_DURATION, 1000ull},
    {"ms", CRATER_DIM_DURATION, 1000000ull},
    {"s", CRATER_DIM_DURATION, NS_S},
    {"m", CRATER_DIM_DURATION, 60 * NS_S},
    {"h", CRATER_DIM_DURATION, 3600 * NS_S},
    {"d", CRATER_DIM_DURATION, 86400 * NS_S},
    /* bandwidth, base bytes per second; no bare numbers */
    {"B/s", CRATER_DIM_BANDWIDTH, 1},
    {"KB/s", CRATER_DIM_BANDWIDTH, 1000ull},
    {"kB/s", CRATER_DIM_BANDWIDTH, 1000ull},
    {"MB/s", CRATER_DIM_BANDWIDTH, 1000000ull},
    {"GB/s", CRATER_DIM_BANDWIDTH, 1000000000ull},
    {"TB/s", CRATER_DIM_BANDWIDTH, 1000000000000ull},
    {"KiB/s", CRATER_DIM_BANDWIDTH, KI},
    {"MiB/s", CRATER_DIM_BANDWIDTH, KI *KI},
    {"GiB/s", CRATER_DIM_BANDWIDTH, KI *KI *KI},
    {"TiB/s", CRATER_DIM_BANDWIDTH, KI *KI *KI *KI},
    {"Kbps", CRATER_DIM_BANDWIDTH, 125ull},
    {"Mbps", CRATER_DIM_BANDWIDTH, 125000ull},
    {"Gbps", CRATER_DIM_BANDWIDTH, 125000000ull},
    {"Tbps", CRATER_DIM_BANDWIDTH, 125000000000ull},
    /* iops */
    {"", CRATER_DIM_IOPS, 1},
    {"k", CRATER_DIM_IOPS, 1000ull},
    {"K", CRATER_DIM_IOPS, 1000ull},
    {"M", CRATER_DIM_IOPS, 1000000ull},
};

#define NUNITS (sizeof(units) / sizeof(units[0]))

static const char *dim_names[CRATER_DIM_MAX] = {
    [CRATER_DIM_BYTES] = "memory size",
    [CRATER_DIM_CPU] = "CPU quantity",
    [CRATER_DIM_DURATION] = "duration",
    [CRATER_DIM_BANDWIDTH] = "bandwidth",
    [CRATER_DIM_IOPS] = "IOPS value",
};

static const char *dim_hint[CRATER_DIM_MAX] = {
    [CRATER_DIM_BYTES] = "e.g. 20Gi or 20GB",
    [CRATER_DIM_CPU] = "e.g. 8, 0.5 or 500m",
    [CRATER_DIM_DURATION] = "e.g. 30s, 10ms or 1h30m",
    [CRATER_DIM_BANDWIDTH] = "e.g. 2039GB/s or 100Gbps",
    [CRATER_DIM_IOPS] = "e.g. 780k",
};

const char *crater_dim_name(crater_dim_t dim)
{
    return dim < CRATER_DIM_MAX ? dim_names[dim] : "quantity";
}

/* A number held exactly as mantissa * 10^exp10. */
struct num {
    u128 mant;
    int exp10;
};

#define MANT_LIMIT ((u128)1000000000000000000ull * 1000000ull) /* 1e24 */

static int parse_digits(const char **pp, struct num *n, int frac, int *nd)
{
    const char *p = *pp;

    for (; isdigit((unsigned char)*p); p++, (*nd)++) {
        if (n->mant >= MANT_LIMIT) { /* keep magnitude, drop precision */
            if (!frac)
                n->exp10++;
            continue;
        }
        n->mant = n->mant * 10 + (u128)(*p - '0');
        if (frac)
            n->exp10--;
    }
    *pp = p;
    return 0;
}

static int parse_exponent(const char **pp, struct num *n)
{
    const char *p = *pp + 1;
    int sign = 1, e = 0;

    if (*p == '-' || *p == '+')
        sign = *p++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*p))
        return 0; /* not an exponent: 'e' belongs to the unit */
    for (; isdigit((unsigned char)*p); p++)
        if (e < 10000)
            e = e * 10 + (*p - '0');
    n->exp10 += sign * e;
    *pp = p;
    return 0;
}

/* Parse the numeric prefix of *pp; advance past it. */
static int parse_number(const char **pp,
                        struct num *n,
                        const char *s,
                        crater_dim_t dim,
                        crater_error_t *err)
{
    const char *p = *pp;
    int nd = 0;

    n->mant = 0;
    n->exp10 = 0;
    if (*p == '-')
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s': a %s cannot be negative",
                             s,
                             dim_names[dim]);
    if (*p == '+')
        p++;
    parse_digits(&p, n, 0, &nd);
    if (*p == '.') {
        p++;
        parse_digits(&p, n, 1, &nd);
    }
    if (nd == 0)
        return crater_errorf(err, CRATER_EUNIT, "'%s' is not a number", s);
    if ((*p == 'e' || *p == 'E'))
        parse_exponent(&p, n);
    *pp = p;
    return 0;
}

static const struct unit *find_unit(const char *suffix,
                                    size_t len,
                                    crater_dim_t dim,
                                    int any)
{
    for (size_t i = 0; i < NUNITS; i++) {
        if ((any || units[i].dim == dim) && strlen(units[i].suffix) == len
            && strncmp(units[i].suffix, suffix, len) == 0)
            return &units[i];
    }
    return NULL;
}

static int unit_error(const char *s,
                      const char *suffix,
                      size_t len,
                      crater_dim_t dim,
                      crater_error_t *err)
{
    const struct unit *other = len ? find_unit(suffix, len, dim, 1) : NULL;

    if (len == 0)
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s': a %s needs a unit (%s)",
                             s,
                             dim_names[dim],
                             dim_hint[dim]);
    if (other)
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s': '%.*s' is a %s unit, expected a %s (%s)",
                             s,
                             (int)len,
                             suffix,
                             dim_names[other->dim],
                             dim_names[dim],
                             dim_hint[dim]);
    return crater_errorf(err,
                         CRATER_EUNIT,
                         "'%s': unknown unit '%.*s' for a %s (%s)",
                         s,
                         (int)len,
                         suffix,
                         dim_names[dim],
                         dim_hint[dim]);
}

static u128 pow10_u128(int e)
{
    u128 r = 1;

    while (e-- > 0)
        r *= 10;
    return r;
}

/* mant * mult * 10^exp10, rounded up; -1 when above UINT64_MAX. */
static int scale(const struct num *n, uint64_t mult, uint64_t *out)
{
    u128 v = n->mant * mult; /* mant < 1e25 < 2^84, mult < 2^57 */
    int e = n->exp10;

    if (v == 0) {
        *out = 0;
        return 0;
    }
    for (; e > 0; e--) {
        if (v > (u128)UINT64_MAX)
            return -1;
        v *= 10;
    }
    if (e < 0) {
        if (e < -38) {
            *out = 1; /* positive but far below one base unit */
            return 0;
        }
        u128 d = pow10_u128(-e);
        v = v / d + (v % d != 0);
    }
    if (v > (u128)UINT64_MAX)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int is_special(const char *s)
{
    const char *p = s + (*s == '-' || *s == '+' || *s == '.');

    return strncasecmp(p, "nan", 3) == 0 || strncasecmp(p, "inf", 3) == 0;
}

/* Parse one "number unit" term starting at *pp. For durations the unit
 * ends at the next digit so "1h30m" is two terms. */
static int parse_term(const char **pp,
                      const char *s,
                      crater_dim_t dim,
                      uint64_t *out,
                      int *bare,
                      crater_error_t *err)
{
    struct num n;
    const char *p = *pp;
    size_t len;
    const struct unit *u;

    if (parse_number(&p, &n, s, dim, err) < 0)
        return -1;
    len = dim == CRATER_DIM_DURATION ? strcspn(p, "0123456789.") : strlen(p);
    u = find_unit(p, len, dim, 0);
    if (!u)
        return unit_error(s, p, len, dim, err);
    if (scale(&n, u->mult, out) < 0)
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s': %s is too large",
                             s,
                             dim_names[dim]);
    *bare = *u->suffix == '\0';
    *pp = p + len;
    return 0;
}

/* crater_parse_quantity; *was_bare says whether s was a number without
 * a unit. */
static int parse_quantity(const char *s,
                          crater_dim_t dim,
                          uint64_t *out,
                          int *was_bare,
                          crater_error_t *err)
{
    const char *p = s;
    uint64_t total = 0, term = 0;
    int bare = 0, terms = 0;

    if (dim >= CRATER_DIM_MAX)
        return crater_errorf(err, CRATER_EINVAL, "bad dimension");
    if (!s || !*s)
        return crater_errorf(err, CRATER_EUNIT, "empty %s", dim_names[dim]);
    if (is_special(s))
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s' is not a finite number",
                             s);
    do {
        if (parse_term(&p, s, dim, &term, &bare, err) < 0)
            return -1;
        if (bare && (terms > 0 || *p))
            return crater_errorf(err,
                                 CRATER_EUNIT,
                                 "'%s': every part of a compound duration "
                                 "needs a unit (e.g. 1h30m)",
                                 s);
        if (total + term < total)
            return crater_errorf(err,
                                 CRATER_EUNIT,
                                 "'%s': %s is too large",
                                 s,
                                 dim_names[dim]);
        total += term;
        terms++;
    } while (*p);
    *out = total;
    *was_bare = bare;
    return 0;
}

int crater_parse_quantity(const char *s,
                          crater_dim_t dim,
                          uint64_t *out,
                          crater_error_t *err)
{
    int bare;

    return parse_quantity(s, dim, out, &bare, err);
}

int crater_parse_bytes(const char *s, uint64_t *out, crater_error_t *err)
{
    return crater_parse_quantity(s, CRATER_DIM_BYTES, out, err);
}

/* Zero is zero in any unit, so only a non-zero bare number is refused. */
int crater_parse_size(const char *s, uint64_t *out, crater_error_t *err)
{
    uint64_t v;
    int bare;

    if (parse_quantity(s, CRATER_DIM_BYTES, &v, &bare, err) < 0)
        return -1;
    if (bare && v != 0)
        return crater_errorf(err,
                             CRATER_EUNIT,
                             "'%s' has no unit: write %sMi or %sM",
                             s,
                             s,
                             s);
    *out = v;
    return 0;
}

int crater_parse_millicpu(const char *s, uint64_t *out, crater_error_t *err)
{
    return crater_parse_quantity(s, CRATER_DIM_CPU, out, err);
}

int crater_parse_duration_ns(const char *s, uint64_t *out, crater_error_t *err)
{
    return crater_parse_quantity(s, CRATER_DIM_DURATION, out, err);
}

int crater_parse_bandwidth(const char *s, uint64_t *out, crater_error_t *err)
{
    return crater_parse_quantity(s, CRATER_DIM_BANDWIDTH, out, err);
}

int crater_parse_iops(const char *s, uint64_t *out, crater_error_t *err)
{
    return crater_parse_quantity(s, CRATER_DIM_IOPS, out, err);
}

char *crater_format_quantity(uint64_t v,
                             crater_dim_t dim,
                             char *buf,
                             size_t size)
{
    const struct unit *best = NULL;

    for (size_t i = 0; i < NUNITS; i++) {
        const struct unit *u = &units[i];
        if (u->dim != dim || (v % u->mult) != 0 || (v == 0 && *u->suffix))
            continue;
        /* the largest multiplier; on ties a named unit over a bare one */
        if (!best || u->mult > best->mult
            || (u->mult == best->mult && !*best->suffix))
            best = u;
    }
    if (!best)
        snprintf(buf, size, "%llu", (unsigned long long)v);
    else if (dim == CRATER_DIM_CPU && best->mult == 1000)
        snprintf(buf, size, "%llu", (unsigned long long)(v / 1000));
    else
        snprintf(buf,
                 size,
                 "%llu%s",
                 (unsigned long long)(v / best->mult),
                 best->suffix);
    return buf;
}
