/* agent.c - the task's side of the Crater agent socket, in C (ckpt.h,
 * doc/checkpoint.md "Runtime"); the twin of python/crater_ckpt/agent.py.
 *
 * The protocol is newline-delimited JSON, one request and one answer a
 * line, each at most 4096 bytes (the agent drops longer lines). Each call
 * opens its own connection, sends one line, reads one line and closes, so
 * one thread may long-poll for the notice while another reports, and a
 * restarted agent (which binds the same name again) is found by the next
 * call without any state here.
 *
 * The answers are flat JSON objects whose values are booleans, integers
 * and strings ({"preempt": true, "reason": "priority", "deadline_ms": 9},
 * {"ok": false, "error": "...", "field": "step"}); the small reader below
 * takes exactly that and nothing nested, which keeps the library free of
 * a JSON dependency. Unknown keys are skipped so the agent may add some.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckerr.h"
#include "crater/ckpt.h"

#define LINE_MAX_BYTES 4096
#define CALL_MS 10000 /* an answer other than a long poll's */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *sock_name(const char *sock)
{
    const char *s = sock ? sock : getenv("CRATER_AGENT_SOCKET");

    return s && *s ? s : NULL;
}

int crater_ckpt_agent_available(const char *sock)
{
    const char *s = sock_name(sock);

    return s && (s[0] == '@' || access(s, F_OK) == 0);
}

/* Connect to s: "@name" abstract, else a path. */
static int connect_to(const char *s, crater_error_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(s);
    int fd;

    if (len >= sizeof(sa.sun_path))
        return crater__ckpt_errorf(err, CRATER_EINVAL, "%s: too long", s);
    memcpy(sa.sun_path, s, len); /* "@name": sun_path[0] becomes NUL */
    if (s[0] == '@')
        sa.sun_path[0] = '\0';
    else
        len++; /* a path: with its NUL */
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "socket: %s",
                                   strerror(errno));
    if (connect(fd,
                (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len))
        < 0) {
        int e = errno;
        close(fd);
        return crater__ckpt_errorf(err,
                                   CRATER_EUNAVAIL,
                                   "agent socket %s: %s",
                                   s,
                                   strerror(e));
    }
    return fd;
}

/* Wait for fd to be ready for events until deadline; -1 on timeout. */
static int ready(int fd, short events, int64_t deadline, crater_error_t *err)
{
    struct pollfd p = {.fd = fd, .events = events};
    int64_t left;
    int n;

    do {
        left = deadline - now_ms();
        if (left <= 0)
            return crater__ckpt_errorf(err,
                                       CRATER_EUNAVAIL,
                                       "the agent did not answer in time");
        n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    } while (n == 0 || (n < 0 && errno == EINTR));
    if (n < 0)
        return crater__ckpt_errorf(err,
                                   CRATER_EIO,
                                   "poll: %s",
                                   strerror(errno));
    return 0;
}

static int send_all(
    int fd, const char *buf, size_t n, int64_t deadline, crater_error_t *err)
{
    while (n > 0) {
        ssize_t w;
        if (ready(fd, POLLOUT, deadline, err) < 0)
            return -1;
        w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w < 0)
            return crater__ckpt_errorf(err,
                                       CRATER_EUNAVAIL,
                                       "agent socket: %s",
                                       strerror(errno));
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read one line (without its '\n') into line. */
static int recv_line(
    int fd, char *line, size_t max, int64_t deadline, crater_error_t *err)
{
    size_t len = 0;

    for (;;) {
        ssize_t r;
        char *nl;
        if (ready(fd, POLLIN, deadline, err) < 0)
            return -1;
        r = recv(fd, line + len, max - 1 - len, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            return crater__ckpt_errorf(err,
                                       CRATER_EUNAVAIL,
                                       "the agent closed the connection%s%s",
                                       r < 0 ? ": " : "",
                                       r < 0 ? strerror(errno) : "");
        len += (size_t)r;
        line[len] = '\0';
        if ((nl = memchr(line, '\n', len))) {
            *nl = '\0';
            return 0;
        }
        if (len == max - 1)
            return crater__ckpt_errorf(err,
                                       CRATER_EPARSE,
                                       "the agent's answer is too long");
    }
}

/* ---- the answer: a flat JSON object -------------------------------------- */

typedef struct answer {
    int ok, preempt; /* -1: absent, else 0/1 */
    int64_t deadline_ms;
    char reason[32];
    char error[512];
    char field[CRATER_ERROR_FIELD];
} answer_t;

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A JSON string at p into out (truncated to n - 1 bytes; \u escapes other
 * than ASCII become '?'); the byte after it, or NULL. */
static const char *json_str(const char *p, char *out, size_t n)
{
    size_t k = 0;

    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *e = *++p ? strchr(from, *p) : NULL;
            if (*p == 'u') {
                unsigned v = 0;
                for (int i = 1; i <= 4; i++) {
                    int d = hexval(p[i]);
                    if (d < 0)
                        return NULL;
                    v = v * 16 + (unsigned)d;
                }
                c = v > 0 && v < 0x80 ? (char)v : '?';
                p += 4;
            } else if (e)
                c = to[e - from];
            else
                return NULL;
        }
        if (k + 1 < n)
            out[k++] = c;
    }
    if (n)
        out[k] = '\0';
    return *p == '"' ? p + 1 : NULL;
}

/* One value at p for key into a; the byte after it, or NULL. */
static const char *value(const char *p, const char *key, answer_t *a)
{
    char tmp[16], *end;
    int b;

    if (*p == '"') {
        char *dst = !strcmp(key, "reason")  ? a->reason
                    : !strcmp(key, "error") ? a->error
                    : !strcmp(key, "field") ? a->field
                                            : tmp;
        size_t n = dst == a->reason  ? sizeof(a->reason)
                   : dst == a->error ? sizeof(a->error)
                   : dst == a->field ? sizeof(a->field)
                                     : sizeof(tmp);
        return json_str(p, dst, n);
    }
    if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
        b = *p == 't';
        if (!strcmp(key, "ok"))
            a->ok = b;
        else if (!strcmp(key, "preempt"))
            a->preempt = b;
        return p + (b ? 4 : 5);
    }
    if (!strncmp(p, "null", 4))
        return p + 4;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno)
        return NULL; /* floats, objects, arrays: not in this protocol */
    if (!strcmp(key, "deadline_ms"))
        a->deadline_ms = v;
    return end;
}

static int parse_answer(const char *line, answer_t *a, crater_error_t *err)
{
    const char *p = skip_ws(line);
    char key[32];

    *a = (answer_t){.ok = -1, .preempt = -1, .deadline_ms = -1};
    if (*p++ != '{')
        goto bad;
    p = skip_ws(p);
    if (*p == '}')
        return 0;
    for (;;) {
        if (!(p = json_str(skip_ws(p), key, sizeof(key))))
            goto bad;
        p = skip_ws(p);
        if (*p++ != ':' || !(p = value(skip_ws(p), key, a)))
            goto bad;
        p = skip_ws(p);
        if (*p == '}')
            return *skip_ws(p + 1) ? crater__ckpt_errorf(err,
                                                         CRATER_EPARSE,
                                                         "the agent answered "
                                                         "more than an object")
                                   : 0;
        if (*p++ != ',')
            goto bad;
    }
bad:
    return crater__ckpt_errorf(err,
                               CRATER_EPARSE,
                               "the agent's answer is not understood: %.200s",
                               line);
}

/* ---- requests ------------------------------------------------------------ */

/* s as a JSON string (quotes included) at out; bytes used, or -1 when it
 * does not fit in n. */
static int json_quote(char *out, size_t n, const char *s)
{
    size_t k = 0;

    if (n < 3)
        return -1;
    out[k++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        int m = c == '"' || c == '\\' ? snprintf(esc, sizeof(esc), "\\%c", c)
                : c < 0x20            ? snprintf(esc, sizeof(esc), "\\u%04x", c)
                                      : snprintf(esc, sizeof(esc), "%c", c);
        if (k + (size_t)m + 2 > n)
            return -1;
        memcpy(out + k, esc, (size_t)m);
        k += (size_t)m;
    }
    out[k++] = '"';
    out[k] = '\0';
    return (int)k;
}

/* Send req (one line, without '\n') to the agent and read its answer; an
 * {"ok": false} answer is an error with the agent's field. */
static int call(const char *sock,
                const char *req,
                int64_t limit_ms,
                answer_t *a,
                crater_error_t *err)
{
    char line[LINE_MAX_BYTES + 1];
    const char *s = sock_name(sock);
    int64_t deadline = now_ms() + limit_ms;
    size_t n = strlen(req);
    int fd, rc;

    if (!s)
        return crater__ckpt_errorf(err,
                                   CRATER_ENOENT,
                                   "no agent socket ($CRATER_AGENT_SOCKET "
                                   "unset)");
    if (n + 1 > LINE_MAX_BYTES)
        return crater__ckpt_errorf(err, CRATER_ELIMIT, "request too long");
    if ((fd = connect_to(s, err)) < 0)
        return -1;
    memcpy(line, req, n);
    line[n] = '\n';
    rc = send_all(fd, line, n + 1, deadline, err) < 0
                 || recv_line(fd, line, sizeof(line), deadline, err) < 0
                 || parse_answer(line, a, err) < 0
             ? -1
             : 0;
    close(fd);
    if (rc == 0 && a->ok == 0) {
        rc = crater__ckpt_errorf(err, CRATER_EINVAL, "agent: %s", a->error);
        if (err)
            snprintf(err->field, sizeof(err->field), "%s", a->field);
    }
    return rc;
}

int crater_ckpt_agent_wait_notice(const char *sock,
                                  int timeout_ms,
                                  crater_ckpt_notice_t *notice,
                                  crater_error_t *err)
{
    char req[64];
    answer_t a;

    if (timeout_ms < 0 || timeout_ms > CRATER_CKPT_AGENT_WAIT_MAX_MS)
        return crater__ckpt_errorf(err,
                                   CRATER_ERANGE,
                                   "timeout_ms %d: 0 to 3600000",
                                   timeout_ms);
    snprintf(req,
             sizeof(req),
             "{\"op\":\"wait\",\"timeout_ms\":%d}",
             timeout_ms);
    if (call(sock,
             req,
             (int64_t)timeout_ms + CRATER_CKPT_AGENT_SLACK_MS,
             &a,
             err)
        < 0)
        return -1;
    if (a.preempt < 0)
        return crater__ckpt_errorf(err,
                                   CRATER_EPARSE,
                                   "the agent's answer has no \"preempt\"");
    *notice = (crater_ckpt_notice_t){.preempt = a.preempt,
                                     .deadline_ms = a.deadline_ms};
    snprintf(notice->reason, sizeof(notice->reason), "%s", a.reason);
    return 0;
}

/* An {"ok": true} call. */
static int call_ok(const char *sock, const char *req, crater_error_t *err)
{
    answer_t a;

    if (call(sock, req, CALL_MS, &a, err) < 0)
        return -1;
    if (a.ok != 1)
        return crater__ckpt_errorf(err,
                                   CRATER_EPARSE,
                                   "the agent's answer has no \"ok\": true");
    return 0;
}

int crater_ckpt_agent_ack(const char *sock, crater_error_t *err)
{
    return call_ok(sock, "{\"op\":\"ack\"}", err);
}

int crater_ckpt_agent_progress(const char *sock,
                               uint64_t step,
                               crater_error_t *err)
{
    char req[64];

    snprintf(req,
             sizeof(req),
             "{\"op\":\"progress\",\"step\":%llu}",
             (unsigned long long)step);
    return call_ok(sock, req, err);
}

int crater_ckpt_agent_report(const char *sock,
                             const crater_ckpt_stats_t *st,
                             const char *path,
                             crater_error_t *err)
{
    char req[LINE_MAX_BYTES], q[LINE_MAX_BYTES];
    double secs = isfinite(st->seconds) && st->seconds > 0 ? st->seconds : 0;
    int n;

    n = snprintf(req,
                 sizeof(req),
                 "{\"op\":\"checkpoint\",\"step\":%llu,\"bytes\":%llu,"
                 "\"seconds\":%.6f",
                 (unsigned long long)st->step,
                 (unsigned long long)st->bytes_written,
                 secs);
    if (st->digest[0] && json_quote(q, sizeof(q), st->digest) > 0)
        n += snprintf(req + n, sizeof(req) - (size_t)n, ",\"digest\":%s", q);
    if (path && n > 0 && (size_t)n < sizeof(req)) {
        if (json_quote(q, sizeof(q), path) < 0)
            return crater__ckpt_errorf(err, CRATER_ELIMIT, "path too long");
        n += snprintf(req + n, sizeof(req) - (size_t)n, ",\"path\":%s", q);
    }
    if (n < 0 || (size_t)n + 2 > sizeof(req))
        return crater__ckpt_errorf(err, CRATER_ELIMIT, "request too long");
    memcpy(req + n, "}", 2);
    return call_ok(sock, req, err);
}
