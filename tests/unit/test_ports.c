/* test_ports.c - the node's listening TCP ports (src/agent/ports.c,
 * agent protocol 7): lines of /proc/net/tcp and tcp6 (LISTEN counted,
 * other states, the header and garbage not); a proc tree with both files
 * (IPv4 and IPv6 on one port count once, ascending, capped at max); no
 * files at all is "not reported"; and this machine's own /proc: a socket
 * this test listens on is there, one it only bound is not. */
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/ports.h"

#define HDR                                                               \
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when " \
    "retrnsmt   uid  timeout inode\n"

START_TEST(lines)
{
    uint16_t p = 0;

    ck_assert_int_eq(crater_ports_parse_line(HDR, &p), 0);
    ck_assert_int_eq(crater_ports_parse_line("   0: 00000000:1F90 "
                                             "00000000:0000 0A "
                                             "00000000:00000000 00:00000000 "
                                             "00000000  "
                                             "1000        0 12345 1\n",
                                             &p),
                     1);
    ck_assert_uint_eq(p, 8080);
    /* ESTABLISHED (01) and TIME_WAIT (06) hold no port for a listener */
    ck_assert_int_eq(crater_ports_parse_line("   1: 0100007F:9C40 "
                                             "0100007F:1F90 "
                                             "01 00000000:00000000\n",
                                             &p),
                     0);
    ck_assert_int_eq(crater_ports_parse_line("   2: 0100007F:9C41 "
                                             "0100007F:1F90 "
                                             "06 00000000:00000000\n",
                                             &p),
                     0);
    ck_assert_int_eq(crater_ports_parse_line("   0: "
                                             "00000000000000000000000000000000:"
                                             "7334 "
                                             "00000000000000000000000000000000:"
                                             "0000 0A "
                                             "00000000:00000000\n",
                                             &p),
                     1);
    ck_assert_uint_eq(p, 0x7334);
    ck_assert_int_eq(crater_ports_parse_line("", &p), 0);
    ck_assert_int_eq(crater_ports_parse_line("garbage: x:y z:w 0A\n", &p), 0);
    ck_assert_int_eq(crater_ports_parse_line("   0: 00000000:0000 "
                                             "00000000:0000 0A\n",
                                             &p),
                     0); /* port 0 holds nothing */
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(text, f);
    fclose(f);
}

START_TEST(proc_tree)
{
    char root[] = "/tmp/crater-ports-XXXXXX", net[600];
    uint16_t *ports = NULL;
    size_t n = 0;

    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(net, sizeof(net), "%s/net", root);
    ck_assert_int_eq(crater_ports_listening(root, 100, &ports, &n), -1);
    ck_assert_int_eq(mkdir(net, 0700), 0);
    ck_assert_int_eq(crater_ports_listening(root, 100, &ports, &n), -1);
    write_file(net,
               "tcp",
               HDR "   0: 00000000:7333 00000000:0000 0A 0\n"
                   "   1: 0100007F:0016 00000000:0000 0A 0\n"
                   "   2: 0100007F:9C40 0100007F:7333 01 0\n");
    write_file(net,
               "tcp6",
               HDR "   0: 00000000000000000000000000000000:7333 "
                   "00000000000000000000000000000000:0000 0A 0\n"
                   "   1: 00000000000000000000000000000000:7334 "
                   "00000000000000000000000000000000:0000 0A 0\n");
    ck_assert_int_eq(crater_ports_listening(root, 100, &ports, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(ports[0], 22);
    ck_assert_uint_eq(ports[1], 0x7333);
    ck_assert_uint_eq(ports[2], 0x7334);
    free(ports);
    ck_assert_int_eq(crater_ports_listening(root, 2, &ports, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(ports[1], 0x7333);
    free(ports);
    write_file(net, "tcp", HDR);
    write_file(net, "tcp6", HDR);
    ck_assert_int_eq(crater_ports_listening(root, 100, &ports, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(ports);
    snprintf(net, sizeof(net), "rm -rf '%s'", root);
    ck_assert_int_eq(system(net), 0);
}
END_TEST

static int bound_socket(int listening, uint16_t *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    if (listening)
        ck_assert_int_eq(listen(fd, 1), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static int has(const uint16_t *ports, size_t n, uint16_t p)
{
    for (size_t i = 0; i < n; i++)
        if (ports[i] == p)
            return 1;
    return 0;
}

START_TEST(this_machine)
{
    uint16_t lp, bp, *ports = NULL;
    int lfd = bound_socket(1, &lp), bfd = bound_socket(0, &bp);
    size_t n = 0;

    ck_assert_int_eq(crater_ports_listening(NULL, 65535, &ports, &n), 0);
    ck_assert_msg(has(ports, n, lp), "port %u listens", (unsigned)lp);
    ck_assert_msg(!has(ports, n, bp), "port %u is only bound", (unsigned)bp);
    for (size_t i = 1; i < n; i++)
        ck_assert_uint_lt(ports[i - 1], ports[i]);
    free(ports);
    close(lfd);
    close(bfd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ports");
    TCase *tc = tcase_create("ports");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, lines);
    tcase_add_test(tc, proc_tree);
    tcase_add_test(tc, this_machine);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
