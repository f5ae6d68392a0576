/* test_units.c - the one quantity parser: exact values, rounding, and an
 * error that names the problem for every malformed input. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "crater/units.h"

static uint64_t ok(const char *s, crater_dim_t dim)
{
    uint64_t v = 0;
    crater_error_t err;

    ck_assert_msg(crater_parse_quantity(s, dim, &v, &err) == 0,
                  "'%s' should parse: %s",
                  s,
                  err.text);
    return v;
}

static const char *bad(const char *s, crater_dim_t dim)
{
    static crater_error_t err;
    uint64_t v = 12345;

    ck_assert_msg(crater_parse_quantity(s, dim, &v, &err) == -1,
                  "'%s' should fail",
                  s);
    ck_assert_int_eq(err.errnum, CRATER_EUNIT);
    ck_assert_uint_eq(v, 12345); /* untouched on error */
    return err.text;
}

START_TEST(bytes_binary_and_decimal)
{
    ck_assert_uint_eq(ok("20Gi", CRATER_DIM_BYTES), 20ull << 30);
    ck_assert_uint_eq(ok("20GiB", CRATER_DIM_BYTES), 20ull << 30);
    ck_assert_uint_eq(ok("512Ki", CRATER_DIM_BYTES), 512ull << 10);
    ck_assert_uint_eq(ok("1Ti", CRATER_DIM_BYTES), 1ull << 40);
    ck_assert_uint_eq(ok("1.5Gi", CRATER_DIM_BYTES), 3ull << 29);
    ck_assert_uint_eq(ok("4096", CRATER_DIM_BYTES), 4096);
    ck_assert_uint_eq(ok("4096B", CRATER_DIM_BYTES), 4096);
    ck_assert_uint_eq(ok("1G", CRATER_DIM_BYTES), 1000000000ull);
    ck_assert_uint_eq(ok("1GB", CRATER_DIM_BYTES), 1000000000ull);
    ck_assert_uint_eq(ok("2TB", CRATER_DIM_BYTES), 2000000000000ull);
    ck_assert_uint_eq(ok("1.92TB", CRATER_DIM_BYTES), 1920000000000ull);
    ck_assert_uint_eq(ok("0", CRATER_DIM_BYTES), 0);
}
END_TEST

/* The seeds record a scheduler that read 20000MB as 20000 MiB. */
START_TEST(bytes_20000MB_is_decimal)
{
    uint64_t v = ok("20000MB", CRATER_DIM_BYTES);

    ck_assert_uint_eq(v, 20000000000ull);
    ck_assert_uint_ne(v, 20000ull * CRATER_MIB);
    ck_assert_uint_eq(crater_bytes_to_mib_ceil(v), 19074); /* 19073.49 */
    ck_assert_uint_eq(crater_bytes_to_mib_floor(v), 19073);
    ck_assert_uint_eq(ok("20000Mi", CRATER_DIM_BYTES), 20000ull * CRATER_MIB);
}
END_TEST

START_TEST(bytes_fraction_rounds_up)
{
    /* 0.3 * 2^30 = 322122547.2 -> 322122548 */
    ck_assert_uint_eq(ok("0.3Gi", CRATER_DIM_BYTES), 322122548ull);
    ck_assert_uint_eq(ok("1e3", CRATER_DIM_BYTES), 1000);
    ck_assert_uint_eq(ok("1.5e3Ki", CRATER_DIM_BYTES), 1536000ull);
    ck_assert_uint_eq(ok("0.5", CRATER_DIM_BYTES), 1);
}
END_TEST

START_TEST(cpu_cores_and_millicores)
{
    ck_assert_uint_eq(ok("8", CRATER_DIM_CPU), 8000);
    ck_assert_uint_eq(ok("0.5", CRATER_DIM_CPU), 500);
    ck_assert_uint_eq(ok("500m", CRATER_DIM_CPU), 500);
    ck_assert_uint_eq(ok("2.25", CRATER_DIM_CPU), 2250);
    ck_assert_uint_eq(ok("0.0001", CRATER_DIM_CPU), 1); /* rounds up */
    ck_assert_uint_eq(ok("0.1", CRATER_DIM_CPU), 100);
}
END_TEST

START_TEST(durations)
{
    ck_assert_uint_eq(ok("10ms", CRATER_DIM_DURATION), 10000000ull);
    ck_assert_uint_eq(ok("30s", CRATER_DIM_DURATION), 30000000000ull);
    ck_assert_uint_eq(ok("300", CRATER_DIM_DURATION), 300000000000ull);
    ck_assert_uint_eq(ok("5m", CRATER_DIM_DURATION), 300000000000ull);
    ck_assert_uint_eq(ok("2h", CRATER_DIM_DURATION), 7200000000000ull);
    ck_assert_uint_eq(ok("1h30m", CRATER_DIM_DURATION), 5400000000000ull);
    ck_assert_uint_eq(ok("1.5h", CRATER_DIM_DURATION), 5400000000000ull);
    ck_assert_uint_eq(ok("45us", CRATER_DIM_DURATION), 45000ull);
    ck_assert_uint_eq(ok("90ns", CRATER_DIM_DURATION), 90ull);
    ck_assert_uint_eq(ok("30d", CRATER_DIM_DURATION), 2592000000000000ull);
}
END_TEST

START_TEST(bandwidth)
{
    ck_assert_uint_eq(ok("2039GB/s", CRATER_DIM_BANDWIDTH), 2039000000000ull);
    ck_assert_uint_eq(ok("500MB/s", CRATER_DIM_BANDWIDTH), 500000000ull);
    ck_assert_uint_eq(ok("100Gbps", CRATER_DIM_BANDWIDTH), 12500000000ull);
    ck_assert_uint_eq(ok("1GiB/s", CRATER_DIM_BANDWIDTH), 1ull << 30);
    ck_assert_uint_eq(ok("204.8GB/s", CRATER_DIM_BANDWIDTH), 204800000000ull);
    ck_assert_str_eq(bad("2039", CRATER_DIM_BANDWIDTH),
                     "'2039': a bandwidth needs a unit (e.g. 2039GB/s or "
                     "100Gbps)");
}
END_TEST

START_TEST(iops)
{
    ck_assert_uint_eq(ok("780k", CRATER_DIM_IOPS), 780000);
    ck_assert_uint_eq(ok("1.5M", CRATER_DIM_IOPS), 1500000);
    ck_assert_uint_eq(ok("2000", CRATER_DIM_IOPS), 2000);
}
END_TEST

START_TEST(errors_name_the_problem)
{
    ck_assert_str_eq(bad("", CRATER_DIM_BYTES), "empty memory size");
    ck_assert_str_eq(bad("-1Gi", CRATER_DIM_BYTES),
                     "'-1Gi': a memory size cannot be negative");
    ck_assert_str_eq(bad("NaN", CRATER_DIM_BYTES),
                     "'NaN' is not a finite number");
    ck_assert_str_eq(bad("inf", CRATER_DIM_CPU),
                     "'inf' is not a finite number");
    ck_assert_str_eq(bad("Gi", CRATER_DIM_BYTES), "'Gi' is not a number");
    ck_assert_str_eq(bad("20GB/s", CRATER_DIM_BYTES),
                     "'20GB/s': 'GB/s' is a bandwidth unit, expected a memory "
                     "size (e.g. 20Gi or 20GB)");
    ck_assert_str_eq(bad("4Gi", CRATER_DIM_BANDWIDTH),
                     "'4Gi': 'Gi' is a memory size unit, expected a bandwidth "
                     "(e.g. 2039GB/s or 100Gbps)");
    ck_assert_str_eq(bad("20gb", CRATER_DIM_BYTES),
                     "'20gb': unknown unit 'gb' for a memory size (e.g. 20Gi "
                     "or 20GB)");
    ck_assert_str_eq(bad("1h30", CRATER_DIM_DURATION),
                     "'1h30': every part of a compound duration needs a unit "
                     "(e.g. 1h30m)");
    ck_assert_str_eq(bad("18446744073709551616", CRATER_DIM_BYTES),
                     "'18446744073709551616': memory size is too large");
    ck_assert_str_eq(bad("20000000Ti", CRATER_DIM_BYTES),
                     "'20000000Ti': memory size is too large");
    ck_assert_str_eq(bad("1e400", CRATER_DIM_BYTES),
                     "'1e400': memory size is too large");
    ck_assert_str_eq(bad("1 Gi", CRATER_DIM_BYTES),
                     "'1 Gi': unknown unit ' Gi' for a memory size (e.g. 20Gi "
                     "or 20GB)");
}
END_TEST

/* Issue 11: `--mem 512` meant 512 bytes and the job was OOM-killed; a size
 * a person writes needs a unit (Slurm users mean megabytes). */
START_TEST(size_needs_a_unit)
{
    crater_error_t err;
    uint64_t v = 7;

    ck_assert_int_eq(crater_parse_size("512", &v, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EUNIT);
    ck_assert_str_eq(err.text, "'512' has no unit: write 512Mi or 512M");
    ck_assert_uint_eq(v, 7); /* untouched on error */
    ck_assert_int_eq(crater_parse_size("1.5", &v, &err), -1);
    ck_assert_str_eq(err.text, "'1.5' has no unit: write 1.5Mi or 1.5M");
    ck_assert_int_eq(crater_parse_size("1e3", &v, &err), -1);
    ck_assert_int_eq(crater_parse_size("20GB/s", &v, &err), -1);
    ck_assert_str_eq(err.text,
                     "'20GB/s': 'GB/s' is a bandwidth unit, expected a memory "
                     "size (e.g. 20Gi or 20GB)");
    ck_assert_int_eq(crater_parse_size("512Mi", &v, &err), 0);
    ck_assert_uint_eq(v, 512ull << 20);
    ck_assert_int_eq(crater_parse_size("512M", &v, &err), 0);
    ck_assert_uint_eq(v, 512000000ull);
    ck_assert_int_eq(crater_parse_size("4096B", &v, &err), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(crater_parse_size("0", &v, &err), 0); /* zero is zero */
    ck_assert_uint_eq(v, 0);
    /* the plain parser (hardware files, config) still takes bytes */
    ck_assert_uint_eq(ok("512", CRATER_DIM_BYTES), 512);
}
END_TEST

START_TEST(max_values_exact)
{
    ck_assert_uint_eq(ok("18446744073709551615", CRATER_DIM_BYTES), UINT64_MAX);
    ck_assert_uint_eq(ok("16383Pi", CRATER_DIM_BYTES), 16383ull << 50);
}
END_TEST

START_TEST(format_round_trips)
{
    static const struct {
        const char *in;
        crater_dim_t dim;
        const char *out;
    } cases[] = {
        {"20Gi", CRATER_DIM_BYTES, "20Gi"},
        {"20000MB", CRATER_DIM_BYTES, "20G"},
        {"1500m", CRATER_DIM_CPU, "1500m"},
        {"8", CRATER_DIM_CPU, "8"},
        {"90s", CRATER_DIM_DURATION, "90s"},
        {"1h30m", CRATER_DIM_DURATION, "90m"},
        {"2039GB/s", CRATER_DIM_BANDWIDTH, "2039GB/s"},
        {"780k", CRATER_DIM_IOPS, "780k"},
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = ok(cases[i].in, cases[i].dim);
        crater_format_quantity(v, cases[i].dim, buf, sizeof(buf));
        ck_assert_str_eq(buf, cases[i].out);
        ck_assert_uint_eq(ok(buf, cases[i].dim), v);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("parse");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, bytes_binary_and_decimal);
    tcase_add_test(tc, bytes_20000MB_is_decimal);
    tcase_add_test(tc, bytes_fraction_rounds_up);
    tcase_add_test(tc, cpu_cores_and_millicores);
    tcase_add_test(tc, durations);
    tcase_add_test(tc, bandwidth);
    tcase_add_test(tc, iops);
    tcase_add_test(tc, errors_name_the_problem);
    tcase_add_test(tc, size_needs_a_unit);
    tcase_add_test(tc, max_values_exact);
    tcase_add_test(tc, format_round_trips);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
