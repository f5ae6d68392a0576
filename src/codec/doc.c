/* doc.c - load YAML or JSON into jansson values with a path -> line map.
 *
 * YAML is read with libfyaml's event API (not its document API) so that
 * nesting depth, node count, aliases and duplicate keys are checked while
 * parsing, before memory is spent on a hostile input. Each value's path,
 * position and (for non-string scalars) literal text go into a per-document
 * array that is sorted once at the end and searched with bsearch(); lookups
 * happen only on error paths and for literal numbers, so a sorted array is
 * simpler than a hash and fast enough.
 */
#include "crater/doc.h"

#include <ctype.h>
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pathent {
    char *path;
    char *literal; /* non-string scalars only */
    int line, col;
};

struct docmap {
    struct pathent *ents;
    size_t n, cap;
};

struct crater_doc {
    char *name;
    json_t **roots;
    struct docmap *maps;
    size_t n;
};

/* ---- document container ------------------------------------------------ */

static crater_doc_t *doc_new(const char *name)
{
    crater_doc_t *doc = calloc(1, sizeof(*doc));

    if (!doc || !(doc->name = strdup(name ? name : "<input>"))) {
        free(doc);
        return NULL;
    }
    return doc;
}

static int doc_append(crater_doc_t *doc, json_t *root, struct docmap *map)
{
    json_t **r = realloc(doc->roots, (doc->n + 1) * sizeof(*r));
    struct docmap *m;

    if (!r)
        return -1;
    doc->roots = r;
    m = realloc(doc->maps, (doc->n + 1) * sizeof(*m));
    if (!m)
        return -1;
    doc->maps = m;
    doc->roots[doc->n] = root;
    doc->maps[doc->n] = map ? *map : (struct docmap){0};
    doc->n++;
    return 0;
}

static void map_free(struct docmap *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->ents[i].path);
        free(m->ents[i].literal);
    }
    free(m->ents);
    *m = (struct docmap){0};
}

void crater_doc_destroy(crater_doc_t *doc)
{
    if (!doc)
        return;
    for (size_t i = 0; i < doc->n; i++) {
        json_decref(doc->roots[i]);
        map_free(&doc->maps[i]);
    }
    free(doc->roots);
    free(doc->maps);
    free(doc->name);
    free(doc);
}

crater_doc_t *crater_doc_from_json(json_t *root, const char *name)
{
    crater_doc_t *doc = doc_new(name);

    if (!doc)
        return NULL;
    if (doc_append(doc, json_incref(root), NULL) < 0) {
        json_decref(root);
        crater_doc_destroy(doc);
        return NULL;
    }
    return doc;
}

size_t crater_doc_count(const crater_doc_t *doc)
{
    return doc ? doc->n : 0;
}

json_t *crater_doc_root(const crater_doc_t *doc, size_t i)
{
    return doc && i < doc->n ? doc->roots[i] : NULL;
}

const char *crater_doc_name(const crater_doc_t *doc)
{
    return doc ? doc->name : "<input>";
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct pathent *)a)->path,
                  ((const struct pathent *)b)->path);
}

static const struct pathent *lookup(const crater_doc_t *doc,
                                    size_t i,
                                    const char *path)
{
    struct pathent key = {.path = (char *)path};

    if (!doc || i >= doc->n || !doc->maps[i].n)
        return NULL;
    return bsearch(&key,
                   doc->maps[i].ents,
                   doc->maps[i].n,
                   sizeof(key),
                   cmp_ent);
}

int crater_doc_where(
    const crater_doc_t *doc, size_t i, const char *path, int *line, int *col)
{
    const struct pathent *e = lookup(doc, i, path);

    if (!e)
        return -1;
    *line = e->line;
    *col = e->col;
    return 0;
}

const char *crater_doc_literal(const crater_doc_t *doc,
                               size_t i,
                               const char *path)
{
    const struct pathent *e = lookup(doc, i, path);

    return e ? e->literal : NULL;
}

/* ---- limits shared by both formats ------------------------------------- */

static int check_tree(const json_t *v, int depth, size_t *nodes)
{
    const char *k;
    json_t *c;
    size_t i;

    if (depth > CRATER_DOC_MAX_DEPTH || ++*nodes > CRATER_DOC_MAX_NODES)
        return -1;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v,
                            k,
                            c) if (check_tree(c, depth + 1, nodes)
                                   < 0) return -1;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, c) if (check_tree(c, depth + 1, nodes)
                                        < 0) return -1;
    }
    return 0;
}

/* ---- JSON --------------------------------------------------------------- */

static int parse_json(crater_doc_t *doc,
                      const char *buf,
                      size_t len,
                      crater_error_t *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    size_t nodes = 0;

    if (!root)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "%s:%d:%d: %s",
                             doc->name,
                             jerr.line,
                             jerr.column,
                             jerr.text);
    if (check_tree(root, 0, &nodes) < 0) {
        json_decref(root);
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "%s: document nested deeper than %d or holding "
                             "more than %d values",
                             doc->name,
                             CRATER_DOC_MAX_DEPTH,
                             CRATER_DOC_MAX_NODES);
    }
    if (doc_append(doc, root, NULL) < 0) {
        json_decref(root);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    return 0;
}

/* ---- YAML --------------------------------------------------------------- */

struct frame {
    json_t *container;
    char *key; /* mapping: key awaiting its value, NULL when none */
    struct fy_mark keymark; /* where that key starts */
    size_t pathlen;         /* length of this container's own path */
    size_t index;           /* sequence: next index */
};

struct builder {
    const char *buf; /* the input, for single-quoted scalars */
    crater_doc_t *doc;
    crater_error_t *err;
    struct docmap map;
    struct frame stack[CRATER_DOC_MAX_DEPTH + 1];
    int depth;
    json_t *root;
    char path[CRATER_PATH_MAX];
    size_t nodes;
};

static int bfail(struct builder *b,
                 const struct fy_mark *m,
                 crater_errno_t errnum,
                 const char *msg)
{
    if (m)
        return crater_errorf(b->err,
                             errnum,
                             "%s:%d:%d: %s",
                             b->doc->name,
                             m->line + 1,
                             m->column + 1,
                             msg);
    return crater_errorf(b->err, errnum, "%s: %s", b->doc->name, msg);
}

static void builder_reset(struct builder *b)
{
    for (int i = 0; i < b->depth; i++)
        free(b->stack[i].key);
    b->depth = 0;
    json_decref(b->root);
    b->root = NULL;
    map_free(&b->map);
}

static int map_add(struct builder *b,
                   const struct fy_mark *m,
                   const char *literal)
{
    struct pathent *e;

    if (b->map.n == b->map.cap) {
        size_t cap = b->map.cap ? b->map.cap * 2 : 32;
        e = realloc(b->map.ents, cap * sizeof(*e));
        if (!e)
            return -1;
        b->map.ents = e;
        b->map.cap = cap;
    }
    e = &b->map.ents[b->map.n];
    e->path = strdup(b->path);
    e->literal = literal ? strdup(literal) : NULL;
    e->line = m ? m->line + 1 : 0;
    e->col = m ? m->column + 1 : 0;
    if (!e->path || (literal && !e->literal)) {
        free(e->path);
        free(e->literal);
        return -1;
    }
    b->map.n++;
    return 0;
}

/* Extend b->path with the segment for a new child of the top frame. */
static int child_path(struct builder *b)
{
    struct frame *f;
    size_t base;
    int n;

    if (b->depth == 0) {
        b->path[0] = '\0';
        return 0;
    }
    f = &b->stack[b->depth - 1];
    base = f->pathlen;
    if (json_is_object(f->container))
        n = snprintf(b->path + base,
                     sizeof(b->path) - base,
                     "%s%s",
                     base ? "." : "",
                     f->key);
    else
        n = snprintf(b->path + base, sizeof(b->path) - base, "[%zu]", f->index);
    return n < 0 || (size_t)n >= sizeof(b->path) - base ? -1 : 0;
}

/* Attach v (reference stolen) to the top frame or make it the root. */
static int attach(struct builder *b, json_t *v)
{
    struct frame *f;
    int rc;

    if (b->depth == 0) {
        b->root = v;
        return 0;
    }
    f = &b->stack[b->depth - 1];
    if (json_is_object(f->container)) {
        rc = json_object_set_new(f->container, f->key, v);
        free(f->key);
        f->key = NULL;
    } else {
        rc = json_array_append_new(f->container, v);
        f->index++;
    }
    return rc;
}

static int is_int_text(const char *s)
{
    s += (*s == '-' || *s == '+');
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

static int is_float_text(const char *s)
{
    int digits = 0;

    s += (*s == '-' || *s == '+');
    for (; isdigit((unsigned char)*s); s++)
        digits++;
    if (*s == '.')
        for (s++; isdigit((unsigned char)*s); s++)
            digits++;
    if (digits && (*s == 'e' || *s == 'E')) {
        s++;
        s += (*s == '-' || *s == '+');
        if (!isdigit((unsigned char)*s))
            return 0;
        while (isdigit((unsigned char)*s))
            s++;
    }
    return digits && !*s;
}

/* YAML 1.2 core schema for a plain scalar. *literal says whether the text
 * must be kept (every non-string result). */
static json_t *plain_scalar(const char *s, int *literal)
{
    *literal = 1;
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null")
        || !strcmp(s, "NULL"))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return json_false();
    if (is_int_text(s)) {
        errno = 0;
        long long v = strtoll(s, NULL, 10);
        if (errno == 0)
            return json_integer(v);
    } else if (is_float_text(s)) {
        double d = strtod(s, NULL);
        if (isfinite(d))
            return json_real(d);
    }
    *literal = 0;
    return json_string(s);
}

/* Fold a single-quoted scalar's raw content (YAML 1.2 7.3.2): '' is a
 * quote; whitespace around a line break is dropped; one break becomes a
 * space, n > 1 breaks become n - 1 newlines. libfyaml 0.7.12 leaks its
 * text buffer for such scalars once they hold several '' escapes (found
 * by fuzzing), so Crater decodes them itself from the input. */
static char *single_quoted(const char *raw, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = 0, breaks;

    for (size_t i = 0; out && i < n;) {
        if (raw[i] == '\'' && i + 1 < n && raw[i + 1] == '\'') {
            out[o++] = '\'';
            i += 2;
        } else if (raw[i] == '\n' || raw[i] == '\r') {
            while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '\t'))
                o--;
            for (breaks = 0; i < n && strchr(" \t\r\n", raw[i]); i++)
                breaks += raw[i] == '\n';
            if (breaks <= 1)
                out[o++] = ' ';
            for (size_t k = 1; k < breaks; k++)
                out[o++] = '\n';
        } else {
            out[o++] = raw[i++];
        }
    }
    if (out)
        out[o] = '\0';
    return out;
}

/* The scalar's text as a malloc'd string (caller frees); NULL on ENOMEM. */
static char *token_text(const struct builder *b, struct fy_token *tok)
{
    const struct fy_mark *s, *e;
    const char *t;

    if (!tok)
        return strdup("");
    if (fy_token_scalar_style(tok) == FYSS_SINGLE_QUOTED) {
        s = fy_token_start_mark(tok);
        e = fy_token_end_mark(tok);
        if (s && e && e->input_pos >= s->input_pos)
            return single_quoted(b->buf + s->input_pos,
                                 e->input_pos - s->input_pos);
    }
    t = fy_token_get_text0(tok);
    return t ? strdup(t) : NULL;
}

/* Does the scalar hold a NUL ("a\0b" in double quotes)? Its C string
 * would end there: a command "a\0b" ran as "a". */
static bool holds_nul(struct fy_token *tok)
{
    size_t len = 0;
    const char *t;

    /* only a double-quoted escape makes one (the input itself holds no
     * control bytes: check_text refuses them); asking libfyaml for other
     * scalars' text would hit its single-quote leak (token_text) */
    if (!tok || fy_token_scalar_style(tok) != FYSS_DOUBLE_QUOTED)
        return false;
    t = fy_token_get_text(tok, &len);
    return t && memchr(t, '\0', len) != NULL;
}

#define NUL_MSG                                                        \
    "a string holds a NUL character (\\0), which no command, path or " \
    "name can carry"

/* The value of a scalar event; *text receives its text (caller frees),
 * *literal whether that text must be kept as the literal. */
static json_t *scalar_value(const struct builder *b,
                            struct fy_event *fye,
                            char **text,
                            int *literal)
{
    struct fy_token *tok = fy_event_get_token(fye);

    *literal = 0;
    if (!(*text = token_text(b, tok)))
        return NULL;
    if (tok && fy_token_scalar_style(tok) != FYSS_PLAIN)
        return json_string(*text);
    return plain_scalar(*text, literal);
}

static int take_key(struct builder *b,
                    struct fy_event *fye,
                    const struct fy_mark *m)
{
    struct frame *f = &b->stack[b->depth - 1];
    struct fy_token *tok;
    char msg[200];

    if (fye->type != FYET_SCALAR)
        return bfail(b, m, CRATER_EPARSE, "mapping keys must be plain strings");
    tok = fy_event_get_token(fye);
    if (!tok || !m) /* an implicit key, as in ": value" */
        return bfail(b, m, CRATER_EPARSE, "empty mapping key");
    if (holds_nul(tok))
        return bfail(b, m, CRATER_EINVAL, NUL_MSG);
    if (!(f->key = token_text(b, tok)))
        return bfail(b, m, CRATER_ENOMEM, "out of memory");
    f->keymark = *m;
    if (json_object_get(f->container, f->key)) {
        snprintf(msg, sizeof(msg), "duplicate key '%.100s'", f->key);
        return bfail(b, m, CRATER_EPARSE, msg);
    }
    return 0;
}

static int push_container(struct builder *b, json_t *c)
{
    struct frame *f;

    if (b->depth >= CRATER_DOC_MAX_DEPTH) {
        json_decref(c);
        return -1;
    }
    if (attach(b, json_incref(c)) < 0) { /* attach consumed its ref */
        json_decref(c);
        return -1;
    }
    f = &b->stack[b->depth++];
    f->container = c;
    f->key = NULL;
    f->pathlen = strlen(b->path);
    f->index = 0;
    json_decref(c); /* the parent (or b->root) holds it */
    return 0;
}

/* A value in a mapping is reported at its key ("memory:" rather than the
 * value after it), which is where editors and linters point too. */
static const struct fy_mark *value_mark(struct builder *b,
                                        const struct fy_mark *m)
{
    struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;

    return f && f->key ? &f->keymark : m;
}

static int on_value(struct builder *b,
                    struct fy_event *fye,
                    const struct fy_mark *vm)
{
    const struct fy_mark *m = value_mark(b, vm);
    char *text = NULL;
    int literal, rc;
    json_t *v;

    if (++b->nodes > CRATER_DOC_MAX_NODES)
        return bfail(b, m, CRATER_ELIMIT, "document holds too many values");
    if (child_path(b) < 0)
        return bfail(b, m, CRATER_ELIMIT, "document nested too deeply");
    if (fye->type == FYET_SCALAR) {
        if (holds_nul(fy_event_get_token(fye)))
            return bfail(b, m, CRATER_EINVAL, NUL_MSG);
        v = scalar_value(b, fye, &text, &literal);
        rc = v ? map_add(b, m, literal ? text : NULL) : -1;
        if (v && rc < 0)
            json_decref(v);
        free(text);
        if (rc < 0 || attach(b, v) < 0)
            return bfail(b, m, CRATER_ENOMEM, "out of memory");
        return 0;
    }
    if (map_add(b, m, NULL) < 0)
        return bfail(b, m, CRATER_ENOMEM, "out of memory");
    v = fye->type == FYET_MAPPING_START ? json_object() : json_array();
    if (!v)
        return bfail(b, m, CRATER_ENOMEM, "out of memory");
    if (push_container(b, v) < 0)
        return bfail(b,
                     m,
                     CRATER_ELIMIT,
                     "document nested deeper than 32 levels");
    return 0;
}

static int on_node_event(struct builder *b, struct fy_event *fye)
{
    const struct fy_mark *m = fy_event_start_mark(fye);
    struct frame *top = b->depth ? &b->stack[b->depth - 1] : NULL;

    if (fye->type == FYET_ALIAS)
        return bfail(b,
                     value_mark(b, m),
                     CRATER_EPARSE,
                     "YAML aliases (*name) are not supported");
    if (fy_event_get_tag_token(fye))
        return bfail(b,
                     value_mark(b, m),
                     CRATER_EPARSE,
                     "YAML tags (!!str, !name) are not supported; quote the "
                     "value instead");
    if (top && json_is_object(top->container) && !top->key)
        return take_key(b, fye, m);
    return on_value(b, fye, m);
}

static int on_end(struct builder *b)
{
    struct frame *f = &b->stack[--b->depth];

    free(f->key);
    f->key = NULL;
    b->path[f->pathlen] = '\0';
    return 0;
}

static int on_doc_end(struct builder *b)
{
    json_t *root = b->root ? b->root : json_null();

    if (b->doc->n >= CRATER_DOC_MAX_DOCS)
        return bfail(b, NULL, CRATER_ELIMIT, "too many documents in stream");
    qsort(b->map.ents, b->map.n, sizeof(*b->map.ents), cmp_ent);
    if (doc_append(b->doc, root, &b->map) < 0)
        return bfail(b, NULL, CRATER_ENOMEM, "out of memory");
    b->root = NULL;
    b->map = (struct docmap){0};
    return 0;
}

static int on_event(struct builder *b, struct fy_event *fye)
{
    switch (fye->type) {
    case FYET_DOCUMENT_START:
        builder_reset(b);
        return 0;
    case FYET_DOCUMENT_END:
        return on_doc_end(b);
    case FYET_MAPPING_END:
    case FYET_SEQUENCE_END:
        return on_end(b);
    case FYET_SCALAR:
    case FYET_ALIAS:
    case FYET_MAPPING_START:
    case FYET_SEQUENCE_START:
        return on_node_event(b, fye);
    default:
        return 0;
    }
}

/* libfyaml reports through a diag object. Errors are collected, never
 * printed (library code must not write to stderr): printing also draws the
 * offending line, and libfyaml 0.7.12 crashes doing that for lines wider
 * than about 330 columns (fy_diag_error_atom_display, found by the
 * fuzzer). Messages that are not token reports still reach the output
 * callback ("<source>:LINE:COL: error: MESSAGE"), which keeps the first. */
struct diagcap {
    char msg[160];
    int line, col;
    int got;
};

/* buf is not NUL-terminated (libfyaml passes a length), and sscanf and
 * strcspn would read past it: parse a bounded, terminated copy. */
static void diag_output(struct fy_diag *diag,
                        void *user,
                        const char *buf,
                        size_t len)
{
    struct diagcap *cap = user;
    char line[512];
    const char *e, *p;
    size_t mlen;

    (void)diag;
    if (cap->got)
        return;
    if (len >= sizeof(line))
        len = sizeof(line) - 1;
    memcpy(line, buf, len);
    line[len] = '\0';
    e = strstr(line, ": error: ");
    if (!e)
        return;
    mlen = strcspn(e + 9, "\n");
    snprintf(cap->msg, sizeof(cap->msg), "%.*s", (int)mlen, e + 9);
    for (p = e > line ? e - 1 : line;
         p > line && (isdigit((unsigned char)*p) || *p == ':');)
        p--;
    while (p < e && !isdigit((unsigned char)*p))
        p++;
    if (sscanf(p, "%d:%d", &cap->line, &cap->col) != 2)
        cap->line = cap->col = 0;
    cap->got = 1;
}

static struct fy_diag *quiet_diag(struct diagcap *cap)
{
    struct fy_diag_cfg dcfg;
    struct fy_diag *diag;

    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = diag_output;
    dcfg.user = cap;
    dcfg.colorize = false;
    dcfg.show_source = false;
    if ((diag = fy_diag_create(&dcfg)))
        fy_diag_set_collect_errors(diag, true);
    return diag;
}

/* The first collected error (it has the token's position), else what the
 * output callback kept. */
static void first_error(struct fy_diag *diag, struct diagcap *cap)
{
    void *it = NULL;
    struct fy_diag_error *e = fy_diag_errors_iterate(diag, &it);

    if (!e)
        return;
    snprintf(cap->msg, sizeof(cap->msg), "%s", e->msg ? e->msg : "");
    cap->line = e->line;
    cap->col = e->column;
    cap->got = 1;
}

static int parser_error(struct builder *b, const struct diagcap *cap)
{
    if (cap->got && cap->line > 0)
        return crater_errorf(b->err,
                             CRATER_EPARSE,
                             "%s:%d:%d: %s",
                             b->doc->name,
                             cap->line,
                             cap->col,
                             cap->msg);
    if (cap->got)
        return crater_errorf(b->err,
                             CRATER_EPARSE,
                             "%s: %s",
                             b->doc->name,
                             cap->msg);
    return crater_errorf(b->err,
                         CRATER_EPARSE,
                         "%s: YAML syntax error",
                         b->doc->name);
}

static int run_parser(struct builder *b,
                      struct fy_parser *fyp,
                      struct fy_diag *diag,
                      struct diagcap *cap)
{
    struct fy_event *fye;
    int rc = 0;

    while (rc == 0 && (fye = fy_parser_parse(fyp))) {
        rc = on_event(b, fye);
        fy_parser_event_free(fyp, fye);
    }
    if (rc == 0 && fy_parser_get_stream_error(fyp)) {
        first_error(diag, cap);
        rc = parser_error(b, cap);
    }
    return rc;
}

/* YAML's explicit key indicator ("? key") has no use in Crater's
 * documents, and libfyaml 0.7.12 corrupts its indentation stack on some
 * inputs with it (a crash in fy_parser_destroy, found by the fuzzer), so it
 * is refused up front: a '?' followed by a blank or the end where a token
 * starts (first on a line, after '[', '{', ',', "- " or ": "), outside
 * quotes and comments. A '?' inside a scalar ("a? b", "'? x'") is kept. */
struct qscan {
    int line, col;
    char quote; /* '\'' or '"' inside a quoted scalar, '#' in a comment */
    bool start; /* a token may start here */
};

static bool blank_at(const char *buf, size_t len, size_t i)
{
    return i >= len || buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n'
           || buf[i] == '\r';
}

/* One character outside quotes and comments; 1 for an explicit key. */
static int qscan_plain(struct qscan *q, const char *buf, size_t len, size_t i)
{
    char c = buf[i];

    if (c == ' ' || c == '\t' || c == '\r')
        return 0;
    if (c == '#' && (i == 0 || blank_at(buf, len, i - 1)))
        q->quote = '#';
    else if (q->start && c == '?' && blank_at(buf, len, i + 1))
        return 1;
    else if (q->start && (c == '\'' || c == '"'))
        q->quote = c;
    q->start = c == '[' || c == '{' || c == ','
               || ((c == '-' || c == ':') && blank_at(buf, len, i + 1));
    return 0;
}

static int explicit_key(crater_doc_t *doc,
                        const char *buf,
                        size_t len,
                        crater_error_t *err)
{
    struct qscan q = {1, 0, 0, true};

    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        q.col++;
        if (c == '\n') {
            q.line++;
            q.col = 0;
            if (q.quote == '#')
                q.quote = 0;
            q.start = q.quote == 0;
        } else if (q.quote == '\'' || q.quote == '"') {
            if (c == '\\' && q.quote == '"')
                i++, q.col++;
            else if (c == q.quote
                     && !(c == '\'' && i + 1 < len && buf[i + 1] == '\''))
                q.quote = 0;
            else if (c == '\'' && q.quote == '\'')
                i++, q.col++;
        } else if (q.quote != '#' && qscan_plain(&q, buf, len, i))
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%d:%d: YAML explicit keys ('? key') are "
                                 "not supported; write key: value",
                                 doc->name,
                                 q.line,
                                 q.col);
    }
    return 0;
}

static int parse_yaml(crater_doc_t *doc,
                      const char *buf,
                      size_t len,
                      crater_error_t *err)
{
    struct diagcap cap = {.got = 0};
    struct fy_parse_cfg cfg = {
        .flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_JSON_NONE,
        .diag = quiet_diag(&cap),
    };
    struct builder b = {.buf = buf, .doc = doc, .err = err};
    struct fy_parser *fyp;
    int rc;

    if (explicit_key(doc, buf, len, err) < 0) {
        fy_diag_destroy(cfg.diag);
        return -1;
    }
    fyp = cfg.diag ? fy_parser_create(&cfg) : NULL;
    if (!fyp || fy_parser_set_string(fyp, buf, len) < 0) {
        fy_parser_destroy(fyp);
        fy_diag_destroy(cfg.diag);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    rc = run_parser(&b, fyp, cfg.diag, &cap);
    builder_reset(&b);
    fy_parser_destroy(fyp);
    fy_diag_destroy(cfg.diag);
    return rc;
}

/* ---- input checks -------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid:
 * overlong forms, surrogates and code points above U+10FFFF are invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80   ? 1
                 : p[0] < 0xc2 ? 0
                 : p[0] < 0xe0 ? 2
                 : p[0] < 0xf0 ? 3
                 : p[0] < 0xf5 ? 4
                               : 0;

    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f)
        || (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

/* YAML and JSON are Unicode text: refuse invalid UTF-8 and control
 * characters other than tab, CR and LF up front. Besides giving a clear
 * message, this keeps such bytes away from libfyaml 0.7.12, which loops
 * forever on invalid UTF-8 inside a directive line (found by fuzzing). */
static int check_text(const char *buf,
                      size_t len,
                      const char *name,
                      crater_error_t *err)
{
    const unsigned char *p = (const unsigned char *)buf;
    int line = 1, col = 1;

    for (size_t i = 0, n; i < len; i += n, col++) {
        n = utf8_len(p + i, len - i);
        if (n == 1 && p[i] < 0x20 && p[i] != '\t' && p[i] != '\n'
            && p[i] != '\r')
            n = 0;
        if (n == 0)
            return crater_errorf(err,
                                 CRATER_EPARSE,
                                 "%s:%d:%d: not UTF-8 text (byte 0x%02x)",
                                 name,
                                 line,
                                 col,
                                 p[i]);
        if (p[i] == '\n') {
            line++;
            col = 0;
        }
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------- */

static int looks_like_json(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (isspace((unsigned char)buf[i]))
            continue;
        return buf[i] == '{' || buf[i] == '[';
    }
    return 0;
}

int crater_doc_parse(const char *buf,
                     size_t len,
                     const char *name,
                     crater_doc_t **out,
                     crater_error_t *err)
{
    crater_doc_t *doc;
    int rc;

    if (len > CRATER_DOC_MAX_BYTES)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "%s: input is %zu bytes, the limit is %u",
                             name ? name : "<input>",
                             len,
                             CRATER_DOC_MAX_BYTES);
    if (check_text(buf, len, name ? name : "<input>", err) < 0)
        return -1;
    if (!(doc = doc_new(name)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = looks_like_json(buf, len) ? parse_json(doc, buf, len, err)
                                   : parse_yaml(doc, buf, len, err);
    if (rc == 0 && doc->n == 0)
        rc = crater_errorf(err, CRATER_EPARSE, "%s: empty document", doc->name);
    if (rc < 0) {
        crater_doc_destroy(doc);
        return -1;
    }
    *out = doc;
    return 0;
}

static char *read_all(FILE *fp, size_t *len)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap), *nb;

    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap || n > CRATER_DOC_MAX_BYTES)
            break;
        cap *= 2;
        if (!(nb = realloc(buf, cap)))
            free(buf);
        buf = nb;
    }
    *len = n;
    return buf;
}

int crater_doc_load(const char *path, crater_doc_t **out, crater_error_t *err)
{
    int is_stdin = strcmp(path, "-") == 0;
    FILE *fp = is_stdin ? stdin : fopen(path, "rb");
    size_t len;
    char *buf;
    int rc, failed;

    if (!fp)
        return crater_errorf(err,
                             errno == ENOENT ? CRATER_ENOENT : CRATER_EIO,
                             "%s: %s",
                             path,
                             strerror(errno));
    buf = read_all(fp, &len);
    failed = ferror(fp);
    if (!is_stdin)
        fclose(fp);
    if (!buf || failed) {
        free(buf);
        return crater_errorf(err,
                             buf ? CRATER_EIO : CRATER_ENOMEM,
                             "%s: read failed",
                             path);
    }
    rc = crater_doc_parse(buf, len, is_stdin ? "<stdin>" : path, out, err);
    free(buf);
    return rc;
}

char *crater_json_to_yaml(const json_t *v)
{
    struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | FYPCF_JSON_FORCE};
    char *json = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    struct fy_document *fyd;
    char *yaml;

    if (!json)
        return NULL;
    fyd = fy_document_build_from_string(&cfg, json, FY_NT);
    yaml = fyd ? fy_emit_document_to_string(fyd,
                                            FYECF_MODE_BLOCK | FYECF_INDENT_2
                                                | FYECF_WIDTH_INF)
               : NULL;
    fy_document_destroy(fyd);
    free(json);
    return yaml;
}
