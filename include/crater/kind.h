/* kind.h - what a loaded document is (job spec, profile, hardware, config).
 *
 * An explicit `kind:` field decides; without one the shape does (a legacy
 * job spec like {gpu: 2} has no kind). crater validate and the API's
 * generic endpoints use this to pick a decoder.
 */
#ifndef CRATER_KIND_H
#define CRATER_KIND_H

#include <jansson.h>

typedef enum crater_kind {
    CRATER_KIND_UNKNOWN,
    CRATER_KIND_JOB,
    CRATER_KIND_PROFILE,
    CRATER_KIND_NODE,
    CRATER_KIND_CLUSTER,
    CRATER_KIND_CONFIG,
    CRATER_KIND_JOBLIST, /* simulator input: jobs with submit times */
} crater_kind_t;

/* The kind of root. An explicit but unrecognised `kind` value yields
 * CRATER_KIND_UNKNOWN. */
crater_kind_t crater_kind_of(const json_t *root);
/* "Job", "Profile", "Node", "Cluster", "Config", "JobList", "unknown". */
const char *crater_kind_name(crater_kind_t kind);

#endif /* CRATER_KIND_H */
