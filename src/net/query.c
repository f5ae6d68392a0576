/* query.c - the one parser for numbers in request paths and query strings
 * (job ids, offset, limit, attempt, after, wait_ms).
 *
 * Why not strtoull: it skips leading spaces, takes a sign ("-1" becomes
 * 2^64-1), saturates silently on overflow, and a caller that then casts
 * to 32 bits turns "4294967297" into 1. Here a value is 1 to 20 ASCII
 * digits and nothing else, checked against the caller's maximum without
 * ever overflowing.
 */
#include <stdint.h>

#include "crater/http.h"

int crater_http_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (s == NULL || s[0] == '\0')
        return -1;
    for (i = 0; s[i] != '\0'; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9 || i >= 20 || d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}
