/* ckpt_fixture.h - helpers shared by the checkpoint tests: temporary
 * directories and deterministic checkpoint contents that can be checked
 * from the checkpoint alone.
 *
 * A state for (step, variant) has three entries: "hdr" (the step and the
 * variant), "a" (64 KiB: a fixed base with a 1% window that moves with the
 * step, entirely new every 7th step, so saves alternate between
 * incremental and full) and "c" (9000 bytes, new every step). ckfx_check()
 * regenerates the state from "hdr" and compares every byte.
 */
#ifndef CRATER_TEST_CKPT_FIXTURE_H
#define CRATER_TEST_CKPT_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/ckpt.h"

#define CKFX_A (64u << 10)
#define CKFX_C 9000u

typedef struct ckfx_state {
    uint64_t hdr[2];
    unsigned char a[CKFX_A], c[CKFX_C];
    crater_ckpt_entry_t e[3];
} ckfx_state_t;

static void ckfx_fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

static void ckfx_make(ckfx_state_t *s, uint64_t step, uint64_t variant)
{
    size_t win = CKFX_A / 100, at = (size_t)(step * 997) % (CKFX_A - win);

    s->hdr[0] = step, s->hdr[1] = variant;
    ckfx_fill(s->a, CKFX_A, step % 7 == 0 ? step * 31 + variant : 1);
    if (step % 7)
        ckfx_fill(s->a + at, win, step * 131 + variant);
    ckfx_fill(s->c, CKFX_C, step * 7 + variant * 1000003);
    s->e[0] = (crater_ckpt_entry_t){"hdr", s->hdr, sizeof(s->hdr)};
    s->e[1] = (crater_ckpt_entry_t){"a", s->a, CKFX_A};
    s->e[2] = (crater_ckpt_entry_t){"c", s->c, CKFX_C};
}

/* 0 when st is exactly a state ckfx_make() produced for its step. */
static int ckfx_check(const crater_ckpt_state_t *st)
{
    static ckfx_state_t want;
    const crater_ckpt_entry_t *h = crater_ckpt_state_find(st, "hdr");
    uint64_t hdr[2];

    if (!h || h->size != sizeof(hdr) || crater_ckpt_state_count(st) != 3)
        return -1;
    memcpy(hdr, h->data, sizeof(hdr));
    if (hdr[0] != crater_ckpt_state_step(st))
        return -1;
    ckfx_make(&want, hdr[0], hdr[1]);
    for (int i = 1; i < 3; i++) {
        const crater_ckpt_entry_t *e = crater_ckpt_state_entry(st, (size_t)i);
        if (strcmp(e->name, want.e[i].name) || e->size != want.e[i].size
            || memcmp(e->data, want.e[i].data, e->size))
            return -1;
    }
    return 0;
}

static char *ckfx_tmpdir(void)
{
    char tmpl[] = "/tmp/crater-ckpt-XXXXXX";
    char *d = mkdtemp(tmpl);

    return d ? strdup(d) : NULL;
}

static void ckfx_rmrf(const char *dir)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif /* CRATER_TEST_CKPT_FIXTURE_H */
