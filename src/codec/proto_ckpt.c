/* proto_ckpt.c - the checkpoint parts of the agent protocol (issue 14):
 * the notice names a stop order carries and the checkpoint a task
 * reported, as it travels in a "checkpoint" event (crater/proto.h).
 *
 * Kept apart from proto.c, which holds the message tables, because the
 * same small object is also what the agent socket accepts from a task
 * (src/agent/notice.c) and what craterd stores per job: one decoder for
 * the three. A report is written by the task, so the decoder is as strict
 * as every other: sizes bounded, steps and bytes non-negative integers,
 * seconds a finite non-negative number, no unknown key.
 */
#include <stdlib.h>
#include <string.h>

#include "crater/proto.h"

static const char *const notice_names[] = {
    [CRATER_NOTICE_NONE] = "none",
    [CRATER_NOTICE_PRIORITY] = "priority",
    [CRATER_NOTICE_DRAIN] = "drain",
    [CRATER_NOTICE_IDLE] = "idle",
    [CRATER_NOTICE_MEMORY] = "memory",
    [CRATER_NOTICE_TIME_LIMIT] = "time-limit",
    [CRATER_NOTICE_COST_CAP] = "cost-cap",
};

const char *crater_proto_notice_name(crater_proto_notice_t n)
{
    return (unsigned)n < CRATER_NOTICE_COUNT ? notice_names[n] : "?";
}

int crater_proto_notice_decode(crater_dec_t *d,
                               json_t *v,
                               crater_proto_notice_t *out)
{
    int n = 0;

    if (crater_dec_enum(d, v, notice_names, CRATER_NOTICE_COUNT, &n) < 0)
        return -1;
    *out = (crater_proto_notice_t)n;
    return 0;
}

#define CK(obj) ((crater_proto_ckpt_t *)(obj))
#define U63 ((uint64_t)INT64_MAX)

static int f_step(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_uint(d, v, 0, U63, &CK(obj)->step);
}

static int f_path(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d, v, CRATER_PROTO_MAX_STR, &CK(obj)->path);
}

/* A digest is hex (the SDKs write SHA-256): nothing a log line or a
 * terminal would take for something else. */
static int f_digest(crater_dec_t *d, json_t *v, void *obj)
{
    const char *s = json_string_value(v);

    if (s && strspn(s, "0123456789abcdefABCDEF") != strlen(s))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "a digest is hexadecimal digits");
    return crater_dec_str(d, v, CRATER_PROTO_MAX_DIGEST, &CK(obj)->digest);
}

static int f_bytes(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_uint(d, v, 0, U63, &CK(obj)->bytes);
}

static int f_seconds(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_double(d, v, 0, 1e9, &CK(obj)->seconds);
}

static const crater_dec_field_t ckpt_fields[] = {
    {"step", f_step, CRATER_FIELD_REQUIRED},
    {"path", f_path, 0},
    {"digest", f_digest, 0},
    {"bytes", f_bytes, 0},
    {"seconds", f_seconds, 0},
    {NULL, NULL, 0},
};

int crater_proto_ckpt_decode(crater_dec_t *d,
                             json_t *v,
                             crater_proto_ckpt_t *out)
{
    memset(out, 0, sizeof(*out));
    if (crater_dec_object(d, v, ckpt_fields, out) == 0)
        return 0;
    crater_proto_ckpt_clear(out);
    return -1;
}

void crater_proto_ckpt_clear(crater_proto_ckpt_t *c)
{
    if (!c)
        return;
    free(c->path);
    free(c->digest);
    memset(c, 0, sizeof(*c));
}

json_t *crater_proto_ckpt_encode(const crater_proto_ckpt_t *c)
{
    return json_pack("{s:I, s:s*, s:s*, s:I, s:f}",
                     "step",
                     (json_int_t)c->step,
                     "path",
                     c->path,
                     "digest",
                     c->digest,
                     "bytes",
                     (json_int_t)c->bytes,
                     "seconds",
                     c->seconds);
}
