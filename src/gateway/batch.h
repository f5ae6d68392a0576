/* batch.h - KServe V2 infer requests taken apart and put together for
 * dynamic batching (internal to crater-gateway; pure: no I/O, no clock).
 *
 *     gw_v2_t *a = gw__v2_parse("resnet", body, len, &err);   // 400 if NULL
 *     a->key: requests whose keys are equal can share a batch (NULL: it
 *             cannot batch at all and goes alone, as it came)
 *     char *batch = gw__v2_concat(reqs, n, &blen, &err);      // one request
 *     ... send it, get the answer ...
 *     gw__v2_split(answer, alen, reqs, n, bodies, lens, &err); // n answers
 *
 * Batching concatenates every input along its first dimension (the rows),
 * in the order of reqs; the backend answers each output with a first
 * dimension of the total rows, and split() gives each request its own rows
 * back, in the same order.
 *
 * Ownership: gw__v2_parse() returns a request the caller frees with
 * gw__v2_free() (NULL accepted); it holds no pointer into body. concat()
 * returns a malloc'd JSON text the caller frees. split() fills bodies[i]
 * with malloc'd JSON texts the caller frees (all or none: on failure none
 * is left allocated). Errors: CRATER_EPARSE / ETYPE / EINVAL / EMISSING /
 * EFIELD with err->field the path of the offending value
 * ("inputs[1].shape"), CRATER_ENOMEM.
 */
#ifndef CRATER_GATEWAY_BATCH_H
#define CRATER_GATEWAY_BATCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

#define GW_MAX_RANK 8

typedef struct gw_tensor {
    char name[128];
    char datatype[8];
    unsigned rank;
    int64_t shape[GW_MAX_RANK];
    size_t inner;   /* elements per row: product of shape[1..] */
    json_t *data;   /* flat array of product(shape) elements (owned) */
    json_t *params; /* the input's "parameters" object or NULL (owned) */
} gw_tensor_t;

typedef struct gw_v2 {
    unsigned ninputs;
    gw_tensor_t *inputs;
    int64_t rows; /* the inputs' common shape[0]; 0 when not batchable */
    json_t *id;   /* the caller's "id" or NULL (owned) */
    json_t *rest; /* "parameters" and "outputs" of the request (owned) */
    char *key;    /* batching compatibility key, or NULL (see above) */
} gw_v2_t;

/* Parse and check one infer request for model. Strict: an unknown field,
 * a wrong type, a datatype V2 does not have, a shape that does not match
 * the number of data elements, or an element of the wrong kind for the
 * datatype is an error naming the field. Batchable (key != NULL) when every
 * input has at least one dimension and they all have the same first
 * dimension >= 1. */
gw_v2_t *gw__v2_parse(const char *model,
                      const char *body,
                      size_t len,
                      crater_error_t *err);
void gw__v2_free(gw_v2_t *r);

/* One V2 request with the rows of reqs[0..n-1] (all with the same key) in
 * order; "outputs" and "parameters" from reqs[0]. NULL on ENOMEM or when
 * the keys differ (EINVAL). *len gets the text's length. */
char *gw__v2_concat(gw_v2_t *const *reqs,
                    size_t n,
                    size_t *len,
                    crater_error_t *err);

/* Split the backend's answer to a concat() of reqs: bodies[i] gets outputs
 * with reqs[i]'s rows, the answer's other fields, and reqs[i]'s "id" (when
 * it had one). -1 (CRATER_EPARSE/ETYPE/EINVAL naming "outputs[k]...") when
 * the answer is not V2 or an output's first dimension is not the total of
 * the rows. */
int gw__v2_split(const char *answer,
                 size_t len,
                 gw_v2_t *const *reqs,
                 size_t n,
                 char **bodies,
                 size_t *lens,
                 crater_error_t *err);

#endif /* CRATER_GATEWAY_BATCH_H */
