/* hwfile.h - hardware files: one node or a whole cluster described in
 * the capability model's schema (YAML or JSON), for tests, demos, the
 * simulator and agents run without discovery. Schema: doc/hardware.md.
 *
 * GPUs and CPUs that name a known model are completed from the knowledge
 * base; values written in the file win over the knowledge base. Results
 * are owned by the caller (crater_cluster_destroy).
 */
#ifndef CRATER_HWFILE_H
#define CRATER_HWFILE_H

#include <jansson.h>

#include "crater/dec.h"
#include "crater/kb.h"
#include "crater/model.h"

/* Decode one document (kind: Node or Cluster; a Node yields a one-node
 * cluster). kb may be NULL (no completion). */
int crater_hw_decode(crater_dec_t *d,
                     json_t *root,
                     const crater_kb_t *kb,
                     crater_cluster_t **out);

/* Load every document of a file and concatenate their nodes. */
int crater_hw_load(const char *path,
                   const crater_kb_t *kb,
                   crater_cluster_t **out,
                   crater_error_t *err);

/* Normalised documents (all quantities in base units; bandwidths as
 * "<integer>B/s", since a bare bandwidth number is refused) that decode
 * back to an equal cluster: encode_node gives a kind: Node document,
 * encode a kind: Cluster one with every node and GPU spelled out. New
 * references; NULL on allocation failure. */
json_t *crater_hw_encode_node(const crater_node_t *n);
json_t *crater_hw_encode(const crater_cluster_t *c);

#endif /* CRATER_HWFILE_H */
