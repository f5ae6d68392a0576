/* test_ckpt.c - libcrater-ckpt: SHA-256 against the FIPS 180-2 and NIST
 * vectors, the manifest (round trip, every truncation and every flipped
 * byte refused), save and load (entries, files, empty entries, a step
 * saved twice), incremental saves writing only changed chunks, fallback
 * past a damaged manifest or chunk, keep_last collection (never a chunk a
 * kept checkpoint uses; dead saves swept), and an injected EIO before
 * every single file operation of a save leaving the previous checkpoint
 * loadable. Killing saves is tests/unit/test_ckpt_crash.c. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/fsio.h"
#include "ckpt/manifest.h"
#include "ckpt/sha256.h"
#include "ckpt_fixture.h"

static char *dir;
static ckfx_state_t S;

static void setup(void)
{
    dir = ckfx_tmpdir();
    ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
    crater__ckpt_fault = NULL;
    ckfx_rmrf(dir);
    free(dir);
}

static crater_ckpt_t *open_ck(uint32_t chunk, unsigned keep)
{
    crater_ckpt_opts_t o = {.version = 1,
                            .chunk_size = chunk,
                            .keep_last = keep};
    crater_error_t err;
    crater_ckpt_t *ck = crater_ckpt_open(dir, &o, &err);

    ck_assert_msg(ck != NULL, "%s", err.text);
    return ck;
}

static void save_step(crater_ckpt_t *ck, uint64_t step, crater_ckpt_stats_t *st)
{
    crater_error_t err;

    ckfx_make(&S, step, 0);
    ck_assert_msg(crater_ckpt_save(ck, step, S.e, 3, st, &err) == 0,
                  "%s",
                  err.text);
}

static uint64_t latest_step(crater_ckpt_t *ck)
{
    crater_error_t err;
    crater_ckpt_state_t *st = crater_ckpt_load_latest(ck, &err);
    uint64_t step;

    ck_assert_msg(st != NULL, "%s", err.text);
    ck_assert_int_eq(ckfx_check(st), 0);
    step = crater_ckpt_state_step(st);
    crater_ckpt_state_destroy(st);
    return step;
}

static void hex_of(const char *msg, size_t len, char *hex)
{
    crater_ckpt_sha256_hex(msg, len, hex);
}

START_TEST(sha256_vectors)
{
    static const struct {
        const char *msg, *hex;
    } v[] = {
        {"",
         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc",
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
         "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    crater__sha256_t s;
    uint8_t d[32];
    static char mil[1000];

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        hex_of(v[i].msg, strlen(v[i].msg), hex);
        ck_assert_str_eq(hex, v[i].hex);
    }
    /* one million 'a', fed in uneven pieces */
    memset(mil, 'a', sizeof(mil));
    crater__sha256_init(&s);
    for (size_t done = 0, k = 1; done < 1000000; k = k * 7 % 999 + 1) {
        size_t n = 1000000 - done < k ? 1000000 - done : k;
        crater__sha256_update(&s, mil, n);
        done += n;
    }
    crater__sha256_final(&s, d);
    crater__sha256_hex(d, hex);
    ck_assert_str_eq(hex,
                     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc"
                     "7112cd0");
}
END_TEST

static crater__ckpt_manifest_t sample(void)
{
    static crater__ckpt_mentry_t e[3];
    static crater__ckpt_chunk_t ch[3];
    crater__ckpt_manifest_t m = {.step = 42, .parent = 41, .chunk_size = 100};

    e[0] = (crater__ckpt_mentry_t){"model.weight", 150, 0, 2};
    e[1] = (crater__ckpt_mentry_t){"a b/%\xc3\xa9\x01", 7, 2, 1};
    e[2] = (crater__ckpt_mentry_t){"empty", 0, 3, 0};
    for (int i = 0; i < 3; i++)
        crater_ckpt_sha256_hex(&i, sizeof(i), ch[i].hex);
    ch[0].len = 100, ch[1].len = 50, ch[2].len = 7;
    m.nentries = 3, m.entries = e, m.nchunks = 3, m.chunks = ch;
    return m;
}

START_TEST(manifest_round_trip)
{
    crater__ckpt_manifest_t m = sample(), p;
    crater_error_t err;
    size_t len;
    char *text = crater__ckpt_manifest_encode(&m, &len);

    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "entry a%20b%2F%25%C3%A9%01 7 1\n"));
    ck_assert_msg(crater__ckpt_manifest_parse(text, len, &p, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(p.step, 42);
    ck_assert_int_eq(p.parent, 41);
    ck_assert_uint_eq(p.nentries, 3);
    ck_assert_str_eq(p.entries[1].name, "a b/%\xc3\xa9\x01");
    ck_assert_uint_eq(p.entries[0].nchunks, 2);
    ck_assert_uint_eq(p.chunks[1].len, 50);
    ck_assert_str_eq(p.chunks[2].hex, m.chunks[2].hex);
    ck_assert_str_eq(p.digest, m.digest);
    crater__ckpt_manifest_free(&p);
    free(text);
}
END_TEST

START_TEST(manifest_damage_refused)
{
    crater__ckpt_manifest_t m = sample(), p;
    size_t len;
    char *text = crater__ckpt_manifest_encode(&m, &len);

    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(crater__ckpt_manifest_parse(text, cut, &p, NULL), -1);
    for (size_t i = 0; i < len; i++) {
        char keep = text[i];
        text[i] ^= 0x20;
        ck_assert_msg(crater__ckpt_manifest_parse(text, len, &p, NULL) == -1,
                      "flip at %zu accepted",
                      i);
        text[i] = keep;
    }
    free(text);
}
END_TEST

START_TEST(manifest_lies_refused)
{
    static const char *bad[] = {
        "crater-ckpt 1\nstep 01\n",
        "crater-ckpt 2\nstep 1\n",
        "crater-ckpt 1\nstep 1\nparent -\nchunk-size 0\nentries 0\n",
        "crater-ckpt 1\nstep 1\nparent -\nchunk-size 4\nentries 999999\n",
        ("crater-ckpt 1\nstep 1\nparent -\nchunk-size 4\nentries 1\n"
         "entry x 5 1\n"),
    };
    crater__ckpt_manifest_t p;
    crater_error_t err;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(crater__ckpt_manifest_parse(bad[i],
                                                     strlen(bad[i]),
                                                     &p,
                                                     &err),
                         -1);
        ck_assert_int_eq(err.errnum, CRATER_EPARSE);
    }
}
END_TEST

START_TEST(save_load_round_trip)
{
    crater_ckpt_t *ck = open_ck(1000, 0);
    crater_ckpt_stats_t st;
    crater_ckpt_state_t *ls;
    crater_error_t err;
    crater_ckpt_entry_t e[] = {{"x", "hello", 5}, {"empty", NULL, 0}};

    ck_assert_ptr_null(crater_ckpt_load_latest(ck, &err));
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    save_step(ck, 3, &st);
    ck_assert_int_eq(st.parent, -1);
    ck_assert_uint_eq(st.bytes_total, 16 + CKFX_A + CKFX_C);
    ck_assert_uint_eq(st.bytes_written, st.bytes_total);
    ck_assert_uint_eq(latest_step(ck), 3);
    ck_assert_int_eq(crater_ckpt_save(ck, 9, e, 2, &st, &err), 0);
    ck_assert_int_eq(st.parent, 3);
    ls = crater_ckpt_load_latest(ck, &err);
    ck_assert_uint_eq(crater_ckpt_state_step(ls), 9);
    ck_assert_int_eq(crater_ckpt_state_parent(ls), 3);
    ck_assert_str_eq(crater_ckpt_state_digest(ls), st.digest);
    ck_assert_mem_eq(crater_ckpt_state_find(ls, "x")->data, "hello", 5);
    ck_assert_uint_eq(crater_ckpt_state_find(ls, "empty")->size, 0);
    crater_ckpt_state_destroy(ls);
    ls = crater_ckpt_load(ck, 3, &err);
    ck_assert_int_eq(ckfx_check(ls), 0);
    crater_ckpt_state_destroy(ls);
    ck_assert_ptr_null(crater_ckpt_load(ck, 4, &err));
    /* duplicate names are refused before anything is written */
    e[1].name = "x";
    ck_assert_int_eq(crater_ckpt_save(ck, 10, e, 2, NULL, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    crater_ckpt_close(ck);
}
END_TEST

START_TEST(files_round_trip)
{
    crater_ckpt_t *ck = open_ck(0, 0);
    crater_ckpt_state_t *ls;
    crater_error_t err;
    char a[600], b[600], out[600], buf[16];
    const char *paths[2] = {a, b};
    int fd;

    snprintf(a, sizeof(a), "%s/one.txt", dir);
    snprintf(b, sizeof(b), "%s/two.bin", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    fd = open(a, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_eq(write(fd, "one\n", 4), 4);
    close(fd);
    close(open(b, O_WRONLY | O_CREAT, 0644)); /* empty */
    ck_assert_int_eq(crater_ckpt_save_files(ck, 1, paths, 2, NULL, &err), 0);
    ck_assert_int_eq(mkdir(out, 0755), 0);
    ls = crater_ckpt_load_latest(ck, &err);
    ck_assert_int_eq(crater_ckpt_state_write_files(ls, out, &err), 0);
    strcat(out, "/one.txt");
    fd = open(out, O_RDONLY);
    ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
    close(fd);
    ck_assert_mem_eq(buf, "one\n", 4);
    crater_ckpt_state_destroy(ls);
    crater_ckpt_close(ck);
}
END_TEST

START_TEST(incremental_writes_changed_chunks)
{
    crater_ckpt_t *ck = open_ck(4096, 0);
    crater_ckpt_stats_t st;

    save_step(ck, 1, &st);
    ck_assert_uint_eq(st.bytes_written, st.bytes_total);
    save_step(ck, 2, &st); /* the 1% window moved: <= 4 chunks of "a" */
    ck_assert_uint_le(st.bytes_written, 16 + CKFX_C + 4 * 4096);
    ck_assert_uint_eq(st.chunks_total, 1 + 16 + 3);
    save_step(ck, 2, &st); /* the same state again: nothing new */
    ck_assert_uint_eq(st.bytes_written, 0);
    ck_assert_uint_eq(latest_step(ck), 2);
    crater_ckpt_close(ck);
}
END_TEST

static void corrupt(const char *rel, off_t at)
{
    char path[700];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "#", 1, at), 1);
    close(fd);
}

static void last_chunk_of(const char *step, char *rel, size_t size)
{
    crater__ckpt_manifest_t m;
    char path[700], text[4096];
    int fd;
    ssize_t len;

    snprintf(path, sizeof(path), "%s/%s/MANIFEST", dir, step);
    fd = open(path, O_RDONLY);
    len = read(fd, text, sizeof(text));
    close(fd);
    ck_assert_int_gt(len, 0);
    ck_assert_int_eq(crater__ckpt_manifest_parse(text, (size_t)len, &m, NULL),
                     0);
    snprintf(rel, size, "chunks/%s", m.chunks[m.nchunks - 1].hex);
    crater__ckpt_manifest_free(&m);
}

START_TEST(damaged_falls_back)
{
    crater_ckpt_t *ck = open_ck(4096, 0);
    crater_ckpt_state_t *ls;
    crater_error_t err;
    char rel[200];

    for (uint64_t s = 1; s <= 3; s++)
        save_step(ck, s, NULL);
    corrupt("step-3/MANIFEST", 30); /* the newest manifest */
    ck_assert_uint_eq(latest_step(ck), 2);
    /* a chunk only step 2 has: the last one of "c", new every step */
    ls = crater_ckpt_load(ck, 2, &err);
    ck_assert_ptr_nonnull(ls);
    crater_ckpt_state_destroy(ls);
    last_chunk_of("step-2", rel, sizeof(rel));
    corrupt(rel, 0);
    ck_assert_uint_eq(latest_step(ck), 1);
    corrupt("step-1/MANIFEST", 0);
    ck_assert_ptr_null(crater_ckpt_load_latest(ck, &err));
    ck_assert_int_eq(err.errnum, CRATER_EIO);
    ck_assert_ptr_nonnull(strstr(err.text, "3 damaged"));
    /* collection removes the damaged ones; the next save starts afresh */
    ck_assert_int_eq(crater_ckpt_gc(ck, 0, &err), 0);
    save_step(ck, 4, NULL);
    ck_assert_uint_eq(latest_step(ck), 4);
    crater_ckpt_close(ck);
}
END_TEST

START_TEST(same_step_twice)
{
    crater_ckpt_t *ck = open_ck(4096, 0);
    crater_ckpt_state_t *ls;
    crater_error_t err;
    char from[600], to[600];
    uint64_t steps[4];

    save_step(ck, 5, NULL);
    ckfx_make(&S, 5, 1); /* another variant of step 5 replaces it */
    ck_assert_int_eq(crater_ckpt_save(ck, 5, S.e, 3, NULL, &err), 0);
    ls = crater_ckpt_load_latest(ck, &err);
    ck_assert_int_eq(ckfx_check(ls), 0);
    ck_assert_uint_eq(((const uint64_t *)crater_ckpt_state_find(ls, "hdr")
                           ->data)[1],
                      1);
    crater_ckpt_state_destroy(ls);
    /* a crash between the two renames leaves step-5.old-<pid>: it loads */
    snprintf(from, sizeof(from), "%s/step-5", dir);
    snprintf(to, sizeof(to), "%s/step-5.old-77", dir);
    ck_assert_int_eq(rename(from, to), 0);
    ck_assert_uint_eq(latest_step(ck), 5);
    ck_assert_int_eq(crater_ckpt_list(ck, steps, 4, &err), 1);
    crater_ckpt_close(ck);
}
END_TEST

static int count_entries(const char *sub)
{
    char cmd[700], line[64];
    FILE *p;

    snprintf(cmd, sizeof(cmd), "ls -A '%s/%s' | wc -l", dir, sub);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), p));
    pclose(p);
    return atoi(line);
}

START_TEST(gc_keeps_what_is_referenced)
{
    crater_ckpt_t *ck = open_ck(4096, 2);
    crater_error_t err;
    uint64_t steps[8];
    char path[600];
    crater_ckpt_state_t *a;
    int before;

    /* a dead save's leftovers: a tmp directory and a tmp chunk */
    snprintf(path, sizeof(path), "%s/step-99.tmp-12345", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/chunks/abc.tmp-12345", dir);
    close(open(path, O_WRONLY | O_CREAT, 0644));
    for (uint64_t s = 1; s <= 9; s++)
        save_step(ck, s, NULL);
    ck_assert_int_eq(crater_ckpt_list(ck, steps, 8, &err), 2);
    ck_assert_uint_eq(steps[0], 9);
    ck_assert_uint_eq(steps[1], 8);
    ck_assert_uint_eq(latest_step(ck), 9);
    ck_assert_int_eq(count_entries(""), 5); /* .lock LATEST chunks step-8 9 */
    a = crater_ckpt_load(ck, 8, &err);
    ck_assert_int_eq(ckfx_check(a), 0);
    crater_ckpt_state_destroy(a);
    /* at most the chunks of steps 8 and 9 (20 each, the base shared) */
    before = count_entries("chunks");
    ck_assert_int_le(before, 2 * 20);
    ck_assert_int_eq(crater_ckpt_gc(ck, 1, &err), 0);
    ck_assert_int_lt(count_entries("chunks"), before);
    ck_assert_uint_eq(latest_step(ck), 9);
    ck_assert_ptr_null(crater_ckpt_load(ck, 8, &err));
    crater_ckpt_close(ck);
}
END_TEST

typedef struct fault_ctx {
    int count, fail_at;
} fault_ctx_t;

static int fail_kth(const char *op, const char *path, void *arg)
{
    fault_ctx_t *f = arg;

    (void)op, (void)path;
    if (++f->count == f->fail_at)
        return errno = EIO, -1;
    return 0;
}

/* Save step 2 (and collect) with EIO injected before operation k. */
START_TEST(eio_before_every_operation)
{
    fault_ctx_t f = {0, 0};
    int total, k;

    crater__ckpt_fault = fail_kth;
    crater__ckpt_fault_arg = &f;
    {
        crater_ckpt_t *ck = open_ck(4096, 1);
        save_step(ck, 1, NULL);
        f.count = 0;
        save_step(ck, 2, NULL);
        total = f.count;
        crater_ckpt_close(ck);
    }
    ck_assert_int_gt(total, 20);
    for (k = 1; k <= total; k++) {
        crater_ckpt_t *ck;
        crater_error_t err;
        int rc;
        uint64_t got;

        ckfx_rmrf(dir);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        f.fail_at = 0;
        ck = open_ck(4096, 1);
        save_step(ck, 1, NULL);
        f.count = 0, f.fail_at = k;
        ckfx_make(&S, 2, 0);
        rc = crater_ckpt_save(ck, 2, S.e, 3, NULL, &err);
        f.fail_at = 0;
        got = latest_step(ck); /* verifies the content too */
        ck_assert_msg(rc == 0 ? got == 2 : got >= 1,
                      "k=%d rc=%d got=%llu",
                      k,
                      rc,
                      (unsigned long long)got);
        save_step(ck, 3, NULL); /* and the next save works */
        ck_assert_uint_eq(latest_step(ck), 3);
        crater_ckpt_close(ck);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("ckpt");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, manifest_round_trip);
    tcase_add_test(tc, manifest_damage_refused);
    tcase_add_test(tc, manifest_lies_refused);
    tcase_add_test(tc, save_load_round_trip);
    tcase_add_test(tc, files_round_trip);
    tcase_add_test(tc, incremental_writes_changed_chunks);
    tcase_add_test(tc, damaged_falls_back);
    tcase_add_test(tc, same_step_twice);
    tcase_add_test(tc, gc_keeps_what_is_referenced);
    tcase_add_test(tc, eio_before_every_operation);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
