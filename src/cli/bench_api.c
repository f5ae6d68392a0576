/* bench_api.c - `crater bench submit`: durable-submission load on a
 * running craterd, and the client half of the kill -9 crash test
 * (tests/integration/test_crash.sh).
 *
 * C threads each own one libcurl easy handle (one keep-alive connection)
 * and take job indices 0..N-1 from a shared counter; job i is submitted
 * once, named <prefix><i>. A 201 means the job is durable (doc/api.md), so
 * for every 201 the line "<i> <id>\n" is appended to the --acked file with
 * one write(2) under a mutex on an O_APPEND descriptor: whatever happens
 * to this process, the file holds only complete lines, each one a promise
 * the server made. The crash test checks those promises after kill -9.
 *
 * Raw libcurl rather than crater_client_t because the outcome of a failed
 * request matters here. A refused connection on a handle with no open
 * connection sent nothing, so the same index is retried. Any other
 * transport error (reset, timeout, empty reply) may or may not have stored
 * the job, so the index is spent and never resubmitted: retrying it could
 * create a second job of the same name. That includes a refusal right
 * after a reused keep-alive connection died, because libcurl itself
 * resends the request on a fresh connection then, and the first copy may
 * have reached the server. Every request has a timeout; once no request
 * has had an answer for UNREACHABLE_NS the run stops (the server is gone),
 * so a killed daemon ends the run in about two seconds instead of hanging.
 *
 * Latencies are those of acknowledged submissions (CLOCK_MONOTONIC,
 * request start to 201), kept per index and sorted once at the end.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define UNREACHABLE_NS 2000000000LL /* no answer for this long: stop */
#define REQUEST_TIMEOUT_MS 10000L
#define CONNECT_TIMEOUT_MS 1000L
#define RETRY_SLEEP_NS 20000000L /* after a refused connection */
#define MAX_THREADS 1024
#define NSTATUS 600

struct bopts {
    const char *server, *token, *acked, *prefix;
    uint32_t jobs, conc;
};

/* Shared by all threads; mu guards everything below it. */
struct shared {
    struct bopts o;
    char url[1024], auth[1100];
    int acked_fd; /* -1: no --acked */
    int64_t t0_ns;
    int64_t *lat_ns; /* per index; -1 when not acknowledged */
    pthread_mutex_t mu;
    uint32_t next;          /* next index to hand out */
    int64_t quiet_since_ns; /* first transport error since an answer; 0 */
    int64_t last_answer_ns; /* when the last HTTP answer came */
    bool stop;
    uint64_t acked, http_err, transport, refused, unsent, bad_reply;
    uint64_t by_status[NSTATUS];
};

struct buf {
    char *p;
    size_t n;
};

static const char usage_text[] =
    "usage: crater bench submit --server URL --token TOKEN [--jobs N]\n"
    "                           [--concurrency C] [--acked FILE]\n"
    "                           [--name-prefix P]\n\n"
    "Submits N jobs (default 10000) named P<i> (default P: bench-) from C\n"
    "threads (default 64), one keep-alive connection each, and prints the\n"
    "acknowledged count, errors, elapsed time, submits/s and latency\n"
    "p50/p99. --acked FILE (truncated first) receives \"<i> <id>\" for every\n"
    "201. Transport errors are counted, not fatal; the run stops once the\n"
    "server has not answered for 2 s.\n";

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- options ------------------------------------------------------------- */

static int parse_u32(const char *opt,
                     const char *s,
                     uint32_t max,
                     uint32_t *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (!*s || *s == '-' || *end || errno || v == 0 || v > max) {
        fprintf(stderr,
                "crater: bench submit: %s: '%s' is not an integer"
                " between 1 and %" PRIu32 "\n",
                opt,
                s,
                max);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int opt_one(int c, const char *arg, struct bopts *o)
{
    switch (c) {
    case 's':
        o->server = arg;
        return 0;
    case 't':
        o->token = arg;
        return 0;
    case 'a':
        o->acked = arg;
        return 0;
    case 'p':
        o->prefix = arg;
        return 0;
    case 'n':
        return parse_u32("--jobs", arg, 100000000, &o->jobs);
    case 'c':
        return parse_u32("--concurrency", arg, MAX_THREADS, &o->conc);
    default:
        return -1;
    }
}

/* 0: run; 1: --help printed; -1: usage error (printed). */
static int parse_opts(int argc, char **argv, struct bopts *o)
{
    static const struct option lo[] = {
        {"server", required_argument, NULL, 's'},
        {"token", required_argument, NULL, 't'},
        {"jobs", required_argument, NULL, 'n'},
        {"concurrency", required_argument, NULL, 'c'},
        {"acked", required_argument, NULL, 'a'},
        {"name-prefix", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct bopts){.jobs = 10000, .conc = 64, .prefix = "bench-"};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage_text, stdout);
            return 1;
        }
        if (c == '?' || opt_one(c, optarg, o) < 0)
            goto usage;
    }
    if (optind != argc || !o->server || !o->token) {
        fprintf(stderr,
                "crater: bench submit: %s\n",
                optind != argc ? "unexpected argument"
                               : "--server and --token are required");
        goto usage;
    }
    return 0;
usage:
    fputs(usage_text, stderr);
    return -1;
}

/* ---- one request --------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct buf *b = arg;
    char *p = realloc(b->p, b->n + size * n + 1);

    if (!p)
        return 0; /* makes curl fail with CURLE_WRITE_ERROR */
    memcpy(p + b->n, data, size * n);
    b->p = p;
    b->n += size * n;
    b->p[b->n] = '\0';
    return size * n;
}

static CURL *easy_create(struct shared *s,
                         struct curl_slist **hdrs,
                         struct buf *b)
{
    CURL *h = curl_easy_init();

    *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (*hdrs)
        *hdrs = curl_slist_append(*hdrs, s->auth);
    if (!h || !*hdrs) {
        curl_easy_cleanup(h);
        return NULL;
    }
    curl_easy_setopt(h, CURLOPT_URL, s->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    return h;
}

/* The body for job i, malloc'd; NULL when out of memory. */
static char *job_body(const char *prefix, uint32_t i)
{
    char name[300];
    json_t *o;
    char *text;

    snprintf(name, sizeof(name), "%s%" PRIu32, prefix, i);
    o = json_pack("{s:s, s:s, s:s, s:[s], s:{s:s, s:s}}",
                  "apiVersion",
                  "crater/v1",
                  "kind",
                  "Job",
                  "name",
                  name,
                  "command",
                  "true",
                  "resources",
                  "cpu",
                  "100m",
                  "memory",
                  "64Mi");
    text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* The job id of a 201 body ("id": "17"); 0 when absent. */
static uint64_t reply_id(const char *body)
{
    json_t *o = json_loads(body ? body : "", 0, NULL);
    const char *s = json_string_value(json_object_get(o, "id"));
    uint64_t id = s ? strtoull(s, NULL, 10) : 0;

    json_decref(o);
    return id;
}

/* ---- shared state -------------------------------------------------------- */

/* Next index to submit, or -1 when done or stopped. */
static int64_t take_index(struct shared *s)
{
    int64_t i = -1;

    pthread_mutex_lock(&s->mu);
    if (!s->stop && s->next < s->o.jobs)
        i = s->next++;
    pthread_mutex_unlock(&s->mu);
    return i;
}

/* A transport error: stop once nothing has answered for UNREACHABLE_NS.
 * refused: nothing was sent (the index is retried, or never sent when the
 * run stops now). Returns true when the run is stopping. */
static bool note_unreachable(struct shared *s, bool refused, bool sent)
{
    int64_t t = now_ns();
    bool stop;

    pthread_mutex_lock(&s->mu);
    if (!s->quiet_since_ns)
        s->quiet_since_ns = t;
    if (t - s->quiet_since_ns >= UNREACHABLE_NS)
        s->stop = true;
    stop = s->stop;
    if (refused)
        s->refused++;
    else
        s->transport++;
    if (!sent || (refused && stop))
        s->unsent++;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void record_ack(struct shared *s, uint32_t i, uint64_t id)
{
    char line[64];
    int n = snprintf(line, sizeof(line), "%" PRIu32 " %" PRIu64 "\n", i, id);

    pthread_mutex_lock(&s->mu);
    s->acked++;
    if (s->acked_fd >= 0 && write(s->acked_fd, line, (size_t)n) != n)
        fprintf(stderr, "crater: bench submit: --acked: %s\n", strerror(errno));
    pthread_mutex_unlock(&s->mu);
}

/* An HTTP answer: status 201 with a job id is an acknowledgement. */
static void note_answer(
    struct shared *s, uint32_t i, long status, const char *body, int64_t lat)
{
    uint64_t id = status == 201 ? reply_id(body) : 0;

    pthread_mutex_lock(&s->mu);
    s->quiet_since_ns = 0;
    s->last_answer_ns = now_ns();
    if (status == 201 && !id)
        s->bad_reply++;
    else if (status != 201) {
        s->http_err++;
        s->by_status[status > 0 && status < NSTATUS ? status : 0]++;
    }
    pthread_mutex_unlock(&s->mu);
    if (id) {
        s->lat_ns[i] = lat;
        record_ack(s, i, id);
    }
}

/* ---- worker -------------------------------------------------------------- */

/* Submit index i until it has an outcome. A refused connection is retried
 * only when the handle had no connection open (*fresh): libcurl silently
 * resends a request whose reused connection died without an answer, so a
 * refusal after a reused connection may follow a request the server got
 * (and stored); that index is spent like any other transport error. */
static void submit_one(
    struct shared *s, CURL *h, struct buf *b, uint32_t i, bool *fresh)
{
    char *body = job_body(s->o.prefix, i);
    long status = 0;
    bool retry;
    CURLcode rc;
    int64_t t;

    if (!body) {
        note_unreachable(s, false, false); /* out of memory: count it */
        return;
    }
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    for (;;) {
        b->n = 0;
        t = now_ns();
        rc = curl_easy_perform(h);
        if (rc == CURLE_OK) {
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
            note_answer(s, i, status, b->p, now_ns() - t);
            *fresh = false;
            break;
        }
        retry = rc == CURLE_COULDNT_CONNECT && *fresh;
        *fresh = true; /* curl closed the connection */
        if (note_unreachable(s, retry, true) || !retry)
            break;
        nanosleep(&(struct timespec){0, RETRY_SLEEP_NS}, NULL);
    }
    free(body);
}

static void *worker(void *arg)
{
    struct shared *s = arg;
    struct curl_slist *hdrs = NULL;
    struct buf b = {0};
    CURL *h = easy_create(s, &hdrs, &b);
    bool fresh = true; /* no connection open yet */
    int64_t i;

    if (!h) {
        fprintf(stderr, "crater: bench submit: cannot create a curl handle\n");
        curl_slist_free_all(hdrs);
        return NULL;
    }
    while ((i = take_index(s)) >= 0)
        submit_one(s, h, &b, (uint32_t)i, &fresh);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    free(b.p);
    return NULL;
}

/* ---- report -------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Percentile q (0..1) of the n sorted latencies v, in ms; 0 when none. */
static double percentile_ms(int64_t *v, size_t n, double q)
{
    size_t k;

    if (!n)
        return 0;
    k = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[k] / 1e6;
}

/* Counts, then times: the rate is over the time up to the last answer,
 * so the 2 s spent noticing a dead server do not dilute it. */
static void report(struct shared *s, double secs)
{
    double busy =
        s->last_answer_ns ? (double)(s->last_answer_ns - s->t0_ns) / 1e9 : secs;
    size_t n = 0;

    for (uint32_t i = 0; i < s->o.jobs; i++)
        if (s->lat_ns[i] >= 0)
            s->lat_ns[n++] = s->lat_ns[i];
    qsort(s->lat_ns, n, sizeof(*s->lat_ns), cmp_i64);
    printf("server: %s\n", s->o.server);
    printf("jobs: %" PRIu32 " (%" PRIu64 " sent), concurrency %" PRIu32 "\n",
           s->o.jobs,
           (uint64_t)s->next - s->unsent,
           s->o.conc);
    printf("acknowledged: %" PRIu64 "\n", s->acked);
    printf("http errors: %" PRIu64, s->http_err);
    for (int st = 0; st < NSTATUS; st++)
        if (s->by_status[st])
            printf(" [%d: %" PRIu64 "]", st, s->by_status[st]);
    printf("\ntransport errors: %" PRIu64 " (outcome unknown; refused"
           " connections retried: %" PRIu64 ")\n",
           s->transport,
           s->refused);
    if (s->bad_reply)
        printf("201 without a job id: %" PRIu64 "\n", s->bad_reply);
    printf("stopped: %s\n", s->stop ? "server unreachable for 2 s" : "no");
    printf("elapsed: %.3f s (last answer at %.3f s)\n", secs, busy);
    printf("rate: %.1f submits/s\n", busy > 0 ? (double)s->acked / busy : 0);
    printf("latency: p50 %.3f ms, p99 %.3f ms\n",
           percentile_ms(s->lat_ns, n, 0.50),
           percentile_ms(s->lat_ns, n, 0.99));
}

/* ---- entry --------------------------------------------------------------- */

static int setup(struct shared *s)
{
    size_t blen = strlen(s->o.server);

    while (blen && s->o.server[blen - 1] == '/')
        blen--;
    if ((size_t)snprintf(s->url,
                         sizeof(s->url),
                         "%.*s/api/v1/jobs",
                         (int)blen,
                         s->o.server)
            >= sizeof(s->url)
        || (size_t)snprintf(s->auth,
                            sizeof(s->auth),
                            "Authorization: Bearer %s",
                            s->o.token)
               >= sizeof(s->auth)) {
        fputs("crater: bench submit: --server or --token too long\n", stderr);
        return -1;
    }
    s->acked_fd = -1;
    if (s->o.acked
        && (s->acked_fd =
                open(s->o.acked,
                     O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                     0644))
               < 0) {
        fprintf(stderr,
                "crater: bench submit: %s: %s\n",
                s->o.acked,
                strerror(errno));
        return -1;
    }
    if (!(s->lat_ns = malloc(s->o.jobs * sizeof(*s->lat_ns)))) {
        fputs("crater: bench submit: out of memory\n", stderr);
        return -1;
    }
    memset(s->lat_ns, 0xff, s->o.jobs * sizeof(*s->lat_ns)); /* all -1 */
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int run(struct shared *s)
{
    pthread_t th[MAX_THREADS];
    uint32_t started = 0;

    s->t0_ns = now_ns();
    for (; started < s->o.conc; started++)
        if (pthread_create(&th[started], NULL, worker, s) != 0)
            break;
    if (!started) {
        fputs("crater: bench submit: cannot start threads\n", stderr);
        return -1;
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    report(s, (double)(now_ns() - s->t0_ns) / 1e9);
    return 0;
}

int cli_bench_submit(int argc, char **argv)
{
    struct shared *s = calloc(1, sizeof(*s));
    int rc;

    if (!s) {
        fputs("crater: bench submit: out of memory\n", stderr);
        return CLI_EXIT_REJECTED;
    }
    if ((rc = parse_opts(argc, argv, &s->o)) != 0) {
        free(s);
        return rc > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    pthread_mutex_init(&s->mu, NULL);
    rc = setup(s) < 0 || run(s) < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
    if (s->acked_fd >= 0)
        close(s->acked_fd);
    pthread_mutex_destroy(&s->mu);
    free(s->lat_ns);
    free(s);
    return rc;
}
