/* main_ckpt.c - the crater-ckpt command: libcrater-ckpt from the shell.
 *
 *   crater-ckpt save [-c CHUNK] [-k KEEP] DIR STEP FILE...
 *   crater-ckpt load DIR OUTDIR       restore the latest into OUTDIR
 *   crater-ckpt ls DIR                committed steps, newest first
 *   crater-ckpt dump DIR [STEP]       the latest (or STEP), verified
 *   crater-ckpt gc DIR KEEP
 *
 * dump prints "step N", "parent P|-", "digest D" and one line per entry,
 * "<sha256> <size> <encoded name>", exactly as `python3 -m crater_ckpt
 * dump` does: the interoperability test compares the two outputs.
 * Exit status: 0, 1 on a failure, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/manifest.h"
#include "crater/ckpt.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: crater-ckpt save [-c CHUNK] [-k KEEP] DIR STEP FILE...\n"
            "       crater-ckpt load DIR OUTDIR | ls DIR | dump DIR [STEP]\n"
            "       crater-ckpt gc DIR KEEP\n");
    return 2;
}

static int fail(const crater_error_t *err)
{
    fprintf(stderr, "crater-ckpt: %s\n", err->text);
    return 1;
}

static int number(const char *s, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(s, &end, 10);
    return s[0] >= '0' && s[0] <= '9' && !*end && !errno ? 0 : -1;
}

static int cmd_save(int argc, char **argv)
{
    crater_ckpt_opts_t o = {.version = 1};
    crater_error_t err;
    crater_ckpt_stats_t st;
    unsigned long long step, v;
    crater_ckpt_t *ck;
    int c, rc;

    while ((c = getopt(argc, argv, "c:k:")) != -1) {
        if ((c != 'c' && c != 'k') || number(optarg, &v) < 0)
            return usage();
        if (c == 'c')
            o.chunk_size = (uint32_t)v;
        else
            o.keep_last = (unsigned)v;
    }
    if (argc - optind < 2 || number(argv[optind + 1], &step) < 0)
        return usage();
    if (!(ck = crater_ckpt_open(argv[optind], &o, &err)))
        return fail(&err);
    rc = crater_ckpt_save_files(ck,
                                step,
                                (const char *const *)argv + optind + 2,
                                (size_t)(argc - optind - 2),
                                &st,
                                &err);
    crater_ckpt_close(ck);
    if (rc < 0)
        return fail(&err);
    printf("step %llu: %llu of %llu bytes written in %.3f s\n",
           step,
           (unsigned long long)st.bytes_written,
           (unsigned long long)st.bytes_total,
           st.seconds);
    return 0;
}

static void dump(const crater_ckpt_state_t *st)
{
    char hex[CRATER_CKPT_HASH_HEX], name[3 * CRATER_CKPT_NAME_MAX + 1];

    printf("step %llu\n", (unsigned long long)crater_ckpt_state_step(st));
    if (crater_ckpt_state_parent(st) < 0)
        printf("parent -\n");
    else
        printf("parent %lld\n", (long long)crater_ckpt_state_parent(st));
    printf("digest %s\n", crater_ckpt_state_digest(st));
    for (size_t i = 0; i < crater_ckpt_state_count(st); i++) {
        const crater_ckpt_entry_t *e = crater_ckpt_state_entry(st, i);
        crater_ckpt_sha256_hex(e->data, e->size, hex);
        crater__ckpt_name_encode(e->name, name, sizeof(name));
        printf("%s %zu %s\n", hex, e->size, name);
    }
}

static int cmd_read(int argc, char **argv)
{
    crater_error_t err;
    crater_ckpt_state_t *st;
    unsigned long long step = 0;
    crater_ckpt_t *ck;
    int load = !strcmp(argv[0], "load"), rc = 0;

    if (argc < 2 || argc > 3 || (load && argc != 3)
        || (!load && argc == 3 && number(argv[2], &step) < 0))
        return usage();
    if (!(ck = crater_ckpt_open(argv[1], NULL, &err)))
        return fail(&err);
    st = !load && argc == 3 ? crater_ckpt_load(ck, step, &err)
                            : crater_ckpt_load_latest(ck, &err);
    crater_ckpt_close(ck);
    if (!st)
        return fail(&err);
    if (load && crater_ckpt_state_write_files(st, argv[2], &err) < 0)
        rc = fail(&err);
    else if (load)
        printf("%llu\n", (unsigned long long)crater_ckpt_state_step(st));
    else
        dump(st);
    crater_ckpt_state_destroy(st);
    return rc;
}

static int cmd_ls_gc(int argc, char **argv)
{
    crater_error_t err;
    unsigned long long keep = 0;
    uint64_t steps[4096];
    crater_ckpt_t *ck;
    int gc = !strcmp(argv[0], "gc"), n;

    if (argc != 2 + gc || (gc && number(argv[2], &keep) < 0))
        return usage();
    if (!(ck = crater_ckpt_open(argv[1], NULL, &err)))
        return fail(&err);
    n = gc ? crater_ckpt_gc(ck, (unsigned)keep, &err)
           : crater_ckpt_list(ck, steps, 4096, &err);
    crater_ckpt_close(ck);
    if (n < 0)
        return fail(&err);
    for (int i = 0; !gc && i < n && i < 4096; i++)
        printf("%llu\n", (unsigned long long)steps[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "save"))
        return cmd_save(argc - 1, argv + 1);
    if (!strcmp(argv[1], "load") || !strcmp(argv[1], "dump"))
        return cmd_read(argc - 1, argv + 1);
    if (!strcmp(argv[1], "ls") || !strcmp(argv[1], "gc"))
        return cmd_ls_gc(argc - 1, argv + 1);
    return usage();
}
