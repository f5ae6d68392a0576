/* ports.c - the node's listening TCP ports (see ports.h).
 *
 * A line of /proc/net/tcp (tcp6 has 32 hex digits of address):
 *
 *    0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 ...
 *       local:port    remote:port   state (0A = LISTEN)
 *
 * The ports are collected in a 65,536-bit set (8 KiB, on the stack), so
 * that IPv4 and IPv6 sockets on one port count once and the result comes
 * out sorted without a sort. A host with many connections has a long
 * file; it is read a line at a time.
 */
#include "agent/ports.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TCP_LISTEN 0x0A

int crater_ports_parse_line(const char *line, uint16_t *port)
{
    unsigned slot, p, st;

    if (sscanf(line,
               " %u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x",
               &slot,
               &p,
               &st)
        != 3)
        return 0;
    if (st != TCP_LISTEN || p == 0 || p > 65535)
        return 0;
    *port = (uint16_t)p;
    return 1;
}

/* Marks the listening ports of one file; false when it cannot be read. */
static bool read_file(const char *path, uint8_t *set)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;
    uint16_t p;

    if (!f)
        return false;
    while (getline(&line, &cap, f) > 0)
        if (crater_ports_parse_line(line, &p))
            set[p >> 3] |= (uint8_t)(1u << (p & 7));
    free(line);
    fclose(f);
    return true;
}

int crater_ports_listening(const char *proc_root,
                           size_t max,
                           uint16_t **out,
                           size_t *n)
{
    uint8_t set[65536 / 8];
    char path[512];
    bool any = false;
    size_t k = 0;

    *out = NULL;
    *n = 0;
    memset(set, 0, sizeof(set));
    if (!proc_root)
        proc_root = "/proc";
    snprintf(path, sizeof(path), "%s/net/tcp", proc_root);
    any |= read_file(path, set);
    snprintf(path, sizeof(path), "%s/net/tcp6", proc_root);
    any |= read_file(path, set);
    if (!any)
        return -1;
    for (uint32_t p = 1; p < 65536; p++)
        k += (set[p >> 3] >> (p & 7)) & 1u;
    if (k > max)
        k = max;
    if (k == 0)
        return 0;
    if (!(*out = malloc(k * sizeof(**out))))
        return -1;
    for (uint32_t p = 1; p < 65536 && *n < k; p++)
        if ((set[p >> 3] >> (p & 7)) & 1u)
            (*out)[(*n)++] = (uint16_t)p;
    return 0;
}
