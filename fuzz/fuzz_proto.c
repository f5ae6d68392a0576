/* fuzz_proto.c - the agent protocol's decoders (crater/proto.h).
 *
 * The first byte picks the message (modulo the number of decoders), the
 * rest is the document. Whatever decodes must encode to a document that
 * decodes again to the same encoding (fuzz_common.h), and no input may
 * crash, leak or trip a sanitizer. The seeds in fuzz/corpus/proto start
 * with '0'..'7' in the order of the table below.
 */
#include "crater/proto.h"
#include "fuzz_common.h"

#define ROUND(name, type)                                      \
    static json_t *name##_round(crater_dec_t *d, json_t *root) \
    {                                                          \
        type m;                                                \
        json_t *out;                                           \
        if (crater_proto_##name##_decode(d, root, &m) < 0)     \
            return NULL;                                       \
        out = crater_proto_##name##_encode(&m);                \
        crater_proto_##name##_clear(&m);                       \
        return out;                                            \
    }

ROUND(task, crater_proto_task_t)
ROUND(item, crater_proto_item_t)
ROUND(event, crater_proto_event_t)
ROUND(events, crater_proto_events_t)
ROUND(register, crater_proto_register_t)
ROUND(registered, crater_proto_registered_t)

/* The heartbeat is large (a fixed GPU table): on the heap. */
static json_t *heartbeat_round(crater_dec_t *d, json_t *root)
{
    crater_proto_heartbeat_t *m = malloc(sizeof(*m));
    json_t *out = NULL;

    if (m && crater_proto_heartbeat_decode(d, root, m) == 0) {
        out = crater_proto_heartbeat_encode(m);
        crater_proto_heartbeat_clear(m);
    }
    free(m);
    return out;
}

/* The work response: its items are re-encoded one by one. */
static json_t *work_round(crater_dec_t *d, json_t *root)
{
    crater_proto_work_t w;
    json_t *items, *out;

    if (crater_proto_work_decode(d, root, &w) < 0)
        return NULL;
    items = json_array();
    for (size_t i = 0; i < w.nitems; i++)
        json_array_append_new(items, crater_proto_item_encode(&w.items[i]));
    out = crater_proto_work_encode(w.seq, items);
    json_decref(items);
    crater_proto_work_clear(&w);
    return out;
}

static const fuzz_decode_f decoders[] = {
    task_round,
    item_round,
    work_round,
    event_round,
    events_round,
    register_round,
    registered_round,
    heartbeat_round,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = sizeof(decoders) / sizeof(decoders[0]);

    if (size < 1)
        return 0;
    return fuzz_run(data + 1, size - 1, decoders[data[0] % n]);
}
