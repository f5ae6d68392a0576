/* doc.h - one loaded input document (YAML 1.2 or JSON) as jansson values,
 * with a path -> line:column map for error messages.
 *
 * Every Crater input (job spec, profile, hardware file, config) is loaded
 * here first, so JSON and YAML share one validation path: YAML is turned
 * into the same jansson tree JSON produces. YAML plain scalars follow the
 * 1.2 core schema (null, true/false, integers, floats; everything else a
 * string); quoted scalars are always strings. The literal text of every
 * non-string scalar is kept so that "0.1" or "1.0" reach the unit parser
 * and the profile-version parser exactly as written.
 *
 * Hostile input is bounded: at most CRATER_DOC_MAX_BYTES of input,
 * CRATER_DOC_MAX_DEPTH of nesting, CRATER_DOC_MAX_NODES values and
 * CRATER_DOC_MAX_DOCS documents per stream; YAML aliases (the "billion
 * laughs" vector) and duplicate keys are refused.
 *
 * Paths look like "resources.gpu.memory" and "nodes[2].gpus[0].uuid".
 */
#ifndef CRATER_DOC_H
#define CRATER_DOC_H

#include <jansson.h>
#include <stddef.h>

#include "crater/error.h"

#define CRATER_DOC_MAX_BYTES (4u * 1024 * 1024)
#define CRATER_DOC_MAX_DEPTH 32
#define CRATER_DOC_MAX_NODES 200000
#define CRATER_DOC_MAX_DOCS 256
#define CRATER_PATH_MAX 256

typedef struct crater_doc crater_doc_t;

/* Parse buf (len bytes; need not be NUL-terminated). Input whose first
 * non-blank character is '{' or '[' is JSON (jansson), anything else YAML
 * (libfyaml). name appears in messages ("examples/a.yaml"); NULL means
 * "<input>". On success the caller owns *out (crater_doc_destroy). */
int crater_doc_parse(const char *buf,
                     size_t len,
                     const char *name,
                     crater_doc_t **out,
                     crater_error_t *err);

/* Read and parse the file at path ("-" is stdin). */
int crater_doc_load(const char *path, crater_doc_t **out, crater_error_t *err);

/* Wrap an existing value (takes a new reference); no line information. */
crater_doc_t *crater_doc_from_json(json_t *root, const char *name);

void crater_doc_destroy(crater_doc_t *doc);

/* Number of documents ("---" separated YAML may hold several). */
size_t crater_doc_count(const crater_doc_t *doc);
/* Borrowed reference to document i's root; NULL when out of range. */
json_t *crater_doc_root(const crater_doc_t *doc, size_t i);
const char *crater_doc_name(const crater_doc_t *doc);

/* Line and column (1-based) of the value at path in document i.
 * Returns 0 when known, -1 otherwise (JSON input, unknown path). */
int crater_doc_where(
    const crater_doc_t *doc, size_t i, const char *path, int *line, int *col);

/* Literal source text of the non-string scalar at path in document i, or
 * NULL (borrowed; valid while doc lives). */
const char *crater_doc_literal(const crater_doc_t *doc,
                               size_t i,
                               const char *path);

/* Render v as block-style YAML. Caller frees. NULL on allocation failure. */
char *crater_json_to_yaml(const json_t *v);

#endif /* CRATER_DOC_H */
