/* index.c - equivalence classes of nodes, the core's index.
 *
 * Two nodes with the same static type (capacities, GPU models, topology,
 * labels, taints, datasets) and the same dynamic state (every reservation,
 * measurement and health flag, byte for byte) give the same answer from
 * every filter and score for any request. The core therefore keeps nodes
 * grouped by (type, state): a decision evaluates one representative per
 * class - its lowest node id, which is also the node a brute-force scan
 * would pick among equal scores - after a request-independent precheck of
 * the class's summary (free whole GPUs, largest admissible GPU charge,
 * free CPU and memory) that skips classes that cannot fit. Live classes
 * are also listed in two grids, by free whole GPUs and by largest
 * admissible charge (1 GiB buckets), each split by free CPU (2-core
 * buckets), so that a decision visits only the cells its precheck could
 * pass instead of every class (most classes of a busy cluster are short
 * of CPU or GPUs).
 *
 * The workload this is shaped for: a cluster of a few node types where a
 * packing policy keeps most nodes either empty (one class per type) or
 * full (skipped by the precheck), so a decision touches tens of classes
 * instead of thousands of nodes. With per-node measurements that all
 * differ, every node is its own class and the scan degrades gracefully to
 * a brute-force scan with a cheap precheck.
 *
 * Maps are open addressing with linear probing and backward-shift
 * deletion, keyed by byte blobs.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/internal.h"

uint64_t sched__hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix */

    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* ---- blob map
 * ------------------------------------------------------------------ */

struct keyops {
    uint64_t (*hash)(const crater_sched_t *s, uint32_t v);
    int (*eq)(const crater_sched_t *s,
              uint32_t v,
              const uint8_t *b,
              uint32_t len);
};

static uint32_t bm_probe(const crater_sched_t *s,
                         const struct blobmap *m,
                         const struct keyops *ops,
                         uint64_t h,
                         const uint8_t *b,
                         uint32_t len)
{
    uint32_t mask = m->size - 1, i = (uint32_t)h & mask;

    while (m->slots[i] && !ops->eq(s, m->slots[i] - 1, b, len))
        i = (i + 1) & mask;
    return i;
}

static int bm_grow(const crater_sched_t *s,
                   struct blobmap *m,
                   const struct keyops *ops)
{
    struct blobmap nm = {.size = m->size ? m->size * 2 : 64};

    if (!(nm.slots = calloc(nm.size, sizeof(*nm.slots))))
        return -1;
    for (uint32_t i = 0; i < m->size; i++) {
        if (!m->slots[i])
            continue;
        uint32_t j = (uint32_t)ops->hash(s, m->slots[i] - 1) & (nm.size - 1);
        while (nm.slots[j])
            j = (j + 1) & (nm.size - 1);
        nm.slots[j] = m->slots[i];
    }
    nm.used = m->used;
    free(m->slots);
    *m = nm;
    return 0;
}

/* Value for blob, or UINT32_MAX. */
static uint32_t bm_get(const crater_sched_t *s,
                       const struct blobmap *m,
                       const struct keyops *ops,
                       uint64_t h,
                       const uint8_t *b,
                       uint32_t len)
{
    uint32_t i;

    if (!m->size)
        return UINT32_MAX;
    i = bm_probe(s, m, ops, h, b, len);
    return m->slots[i] ? m->slots[i] - 1 : UINT32_MAX;
}

/* Insert v, whose key must not be present. */
static int bm_put(const crater_sched_t *s,
                  struct blobmap *m,
                  const struct keyops *ops,
                  uint32_t v)
{
    uint32_t i;

    if ((m->used + 1) * 4 > m->size * 3 && bm_grow(s, m, ops) < 0)
        return -1;
    i = (uint32_t)ops->hash(s, v) & (m->size - 1);
    while (m->slots[i])
        i = (i + 1) & (m->size - 1);
    m->slots[i] = v + 1;
    m->used++;
    return 0;
}

static void bm_del(const crater_sched_t *s,
                   struct blobmap *m,
                   const struct keyops *ops,
                   uint32_t v)
{
    uint32_t mask = m->size - 1, i = (uint32_t)ops->hash(s, v) & mask, j;

    while (m->slots[i] != v + 1)
        i = (i + 1) & mask;
    for (j = i;;) {
        j = (j + 1) & mask;
        if (!m->slots[j])
            break;
        uint32_t home = (uint32_t)ops->hash(s, m->slots[j] - 1) & mask;
        if ((j > i && (home <= i || home > j))
            || (j < i && home <= i && home > j)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = 0;
    m->used--;
}

/* ---- node names
 * ----------------------------------------------------------------- */

static uint64_t name_hash(const crater_sched_t *s, uint32_t v)
{
    const char *n = s->nodes[v].name;
    return sched__hash((const uint8_t *)n, strlen(n));
}

static int name_eq(const crater_sched_t *s,
                   uint32_t v,
                   const uint8_t *b,
                   uint32_t len)
{
    const char *n = s->nodes[v].name;
    return strlen(n) == len && memcmp(n, b, len) == 0;
}

static const struct keyops name_ops = {name_hash, name_eq};

int sched__name_add(crater_sched_t *s, uint32_t node)
{
    return bm_put(s, &s->namemap, &name_ops, node);
}

uint32_t crater_sched_find_node(const crater_sched_t *s, const char *name)
{
    uint32_t len = (uint32_t)strlen(name);
    uint32_t v = bm_get(s,
                        &s->namemap,
                        &name_ops,
                        sched__hash((const uint8_t *)name, len),
                        (const uint8_t *)name,
                        len);

    return v == UINT32_MAX ? CRATER_SCHED_NO_NODE : v;
}

/* ---- blobs
 * ---------------------------------------------------------------------- */

static int scratch_need(crater_sched_t *s, uint32_t len)
{
    uint8_t *p;

    if (len <= s->scratchcap)
        return 0;
    if (!(p = realloc(s->scratch, len * 2)))
        return -1;
    s->scratch = p;
    s->scratchcap = len * 2;
    return 0;
}

static uint32_t put(uint8_t *dst, uint32_t off, const void *src, size_t n)
{
    if (dst)
        memcpy(dst + off, src, n);
    return off + (uint32_t)n;
}

static uint32_t put_str(uint8_t *dst, uint32_t off, const char *str)
{
    return put(dst, off, str ? str : "", (str ? strlen(str) : 0) + 1);
}

/* Static description of a node; dst NULL only measures. */
static uint32_t static_blob(const crater_sched_t *s, uint32_t id, uint8_t *dst)
{
    struct node_static st = s->st[id];
    const crater_node_t *n = &s->nodes[id];
    uint32_t off;

    st.type = st.gpu_first = st.dev_first = 0;
    off = put(dst, 0, &st, sizeof(st));
    /* a cluster without GPUs (or disks) has NULL arrays: no &NULL[0] */
    if (st.ngpus)
        off = put(dst,
                  off,
                  &s->gs[s->st[id].gpu_first],
                  st.ngpus * sizeof(*s->gs));
    if (st.ndevs)
        off = put(dst,
                  off,
                  &s->ds[s->st[id].dev_first],
                  st.ndevs * sizeof(*s->ds));
    for (size_t i = 0; i < n->nlabels; i++) {
        off = put_str(dst, off, n->labels[i].key);
        off = put_str(dst, off, n->labels[i].value);
    }
    off = put(dst, off, "\1", 1);
    for (size_t i = 0; i < n->ntaints; i++) {
        off = put_str(dst, off, n->taints[i].key);
        off = put_str(dst, off, n->taints[i].value);
        off = put(dst, off, &n->taints[i].effect, sizeof(n->taints[i].effect));
    }
    off = put(dst, off, "\2", 1);
    for (size_t i = 0; n->datasets && n->datasets[i]; i++)
        off = put_str(dst, off, n->datasets[i]);
    return off;
}

/* Class key: type id followed by the node's dynamic state. */
static uint32_t class_blob(const crater_sched_t *s, uint32_t id, uint8_t *dst)
{
    const struct node_static *st = &s->st[id];
    uint32_t off = put(dst, 0, &st->type, sizeof(st->type));

    off = put(dst, off, &s->dyn[id], sizeof(s->dyn[id]));
    if (st->ngpus)
        off = put(dst, off, &s->gd[st->gpu_first], st->ngpus * sizeof(*s->gd));
    if (st->ndevs)
        off = put(dst, off, &s->dd[st->dev_first], st->ndevs * sizeof(*s->dd));
    return off;
}

/* ---- types
 * ----------------------------------------------------------------------- */

static uint64_t type_hash(const crater_sched_t *s, uint32_t v)
{
    return s->types[v].hash;
}

static int type_eq(const crater_sched_t *s,
                   uint32_t v,
                   const uint8_t *b,
                   uint32_t len)
{
    return s->types[v].bloblen == len && !memcmp(s->types[v].blob, b, len);
}

static const struct keyops type_ops = {type_hash, type_eq};

static int new_type(crater_sched_t *s, uint64_t h, uint32_t len)
{
    struct stype *t;

    if (s->ntypes == s->typecap) {
        uint32_t cap = s->typecap ? s->typecap * 2 : 8;
        if (!(t = realloc(s->types, cap * sizeof(*t))))
            return -1;
        s->types = t;
        s->typecap = cap;
    }
    t = &s->types[s->ntypes];
    if (!(t->blob = malloc(len)))
        return -1;
    memcpy(t->blob, s->scratch, len);
    t->bloblen = len;
    t->hash = h;
    if (bm_put(s, &s->typemap, &type_ops, s->ntypes) < 0) {
        free(t->blob);
        return -1;
    }
    return (int)s->ntypes++;
}

int sched__type_of(crater_sched_t *s, uint32_t id)
{
    uint32_t len = static_blob(s, id, NULL), t;
    uint64_t h;
    int nt;

    if (scratch_need(s, len) < 0)
        return -1;
    static_blob(s, id, s->scratch);
    h = sched__hash(s->scratch, len);
    t = bm_get(s, &s->typemap, &type_ops, h, s->scratch, len);
    if (t == UINT32_MAX) {
        if ((nt = new_type(s, h, len)) < 0)
            return -1;
        t = (uint32_t)nt;
    }
    s->st[id].type = t;
    return 0;
}

/* ---- classes
 * ----------------------------------------------------------------------- */

static uint64_t class_hash(const crater_sched_t *s, uint32_t v)
{
    return s->classes[v].hash;
}

static int class_eq(const crater_sched_t *s,
                    uint32_t v,
                    const uint8_t *b,
                    uint32_t len)
{
    return s->classes[v].bloblen == len && !memcmp(s->classes[v].blob, b, len);
}

static const struct keyops class_ops = {class_hash, class_eq};

static void summarise(crater_sched_t *s, struct sclass *c, uint32_t node)
{
    const struct node_static *st = &s->st[node];

    c->free_whole = 0;
    c->max_room_mib = 0;
    for (uint32_t i = 0; i < st->ngpus; i++) {
        uint32_t g = st->gpu_first + i, room = sched__room_mib(s, g);
        c->free_whole += s->gd[g].ntasks == 0;
        c->max_room_mib = room > c->max_room_mib ? room : c->max_room_mib;
    }
    c->cpu_free = s->dyn[node].cpu_free;
    c->mem_free = s->dyn[node].mem_free;
    c->usable = s->dyn[node].ready && !s->dyn[node].cordoned;
}

static int push_u32(uint32_t **arr, uint32_t *n, uint32_t *cap, uint32_t v)
{
    uint32_t *p;

    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 4;
        if (!(p = realloc(*arr, nc * sizeof(*p))))
            return -1;
        *arr = p;
        *cap = nc;
    }
    (*arr)[(*n)++] = v;
    return 0;
}

static int class_alloc(crater_sched_t *s, uint32_t *id)
{
    struct sclass *c;

    if (s->nfree_classes) {
        *id = s->free_classes[--s->nfree_classes];
        return 0;
    }
    if (s->nclasses == s->classcap) {
        uint32_t cap = s->classcap ? s->classcap * 2 : 16;
        if (!(c = realloc(s->classes, cap * sizeof(*c))))
            return -1;
        s->classes = c;
        s->classcap = cap;
    }
    *id = s->nclasses++;
    return 0;
}

static int class_new(
    crater_sched_t *s, uint64_t h, uint32_t len, uint32_t node, uint32_t *out)
{
    struct sclass *c;
    uint32_t id;

    if (class_alloc(s, &id) < 0)
        return -1;
    c = &s->classes[id];
    memset(c, 0, sizeof(*c));
    c->live_pos = UINT32_MAX;
    if (!(c->blob = malloc(len)))
        goto fail;
    memcpy(c->blob, s->scratch, len);
    c->bloblen = len;
    c->hash = h;
    summarise(s, c, node);
    if (bm_put(s, &s->classmap, &class_ops, id) < 0)
        goto fail;
    *out = id;
    return 0;
fail:
    free(c->blob);
    push_u32(&s->free_classes, &s->nfree_classes, &s->freecap, id);
    return -1;
}

/* ---- buckets: live classes by GPU summary and free CPU -------------- */

static int bucket_add(struct cgrid *g, uint32_t cpu, uint32_t id, uint32_t *pos)
{
    *pos = g->cell[cpu].n;
    if (push_u32(&g->cell[cpu].ids, &g->cell[cpu].n, &g->cell[cpu].cap, id) < 0)
        return -1;
    g->nonempty |= 1ull << cpu;
    return 0;
}

/* Swap-remove the entry at pos; the moved class's position is updated
 * through its wpos (by_whole) or rpos (by_room). */
static void bucket_del(
    crater_sched_t *s, struct cgrid *g, uint32_t cpu, uint32_t pos, int whole)
{
    struct cbucket *b = &g->cell[cpu];
    uint32_t last = b->ids[--b->n];
    struct sclass *m = &s->classes[last];

    b->ids[pos] = last;
    if (whole)
        m->wpos = pos;
    else
        m->rpos = pos;
    if (!b->n)
        g->nonempty &= ~(1ull << cpu);
}

static int buckets_add(crater_sched_t *s, uint32_t id)
{
    struct sclass *c = &s->classes[id];
    struct cgrid *w = &s->by_whole[c->free_whole];
    uint32_t cpu = sched__cpu_bucket(c->cpu_free);

    if (bucket_add(w, cpu, id, &c->wpos) < 0)
        return -1;
    if (bucket_add(&s->by_room[sched__room_bucket(c->max_room_mib)],
                   cpu,
                   id,
                   &c->rpos)
        < 0) {
        bucket_del(s, w, cpu, c->wpos, 1);
        return -1;
    }
    return 0;
}

static void buckets_del(crater_sched_t *s, uint32_t id)
{
    struct sclass *c = &s->classes[id];
    uint32_t cpu = sched__cpu_bucket(c->cpu_free);

    bucket_del(s, &s->by_whole[c->free_whole], cpu, c->wpos, 1);
    bucket_del(s,
               &s->by_room[sched__room_bucket(c->max_room_mib)],
               cpu,
               c->rpos,
               0);
}

static void class_drop(crater_sched_t *s, uint32_t id)
{
    struct sclass *c = &s->classes[id];
    uint32_t last = s->live[--s->nlive];

    buckets_del(s, id);
    s->live[c->live_pos] = last; /* swap-remove from the live list */
    s->lsum[c->live_pos] = s->lsum[s->nlive];
    s->classes[last].live_pos = c->live_pos;
    bm_del(s, &s->classmap, &class_ops, id);
    free(c->blob);
    free(c->members);
    memset(c, 0, sizeof(*c));
    c->live_pos = UINT32_MAX;
    push_u32(&s->free_classes, &s->nfree_classes, &s->freecap, id);
}

static uint32_t lower_bound(const uint32_t *a, uint32_t n, uint32_t v)
{
    uint32_t lo = 0, hi = n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void class_remove(crater_sched_t *s, uint32_t id, uint32_t node)
{
    struct sclass *c = &s->classes[id];
    uint32_t i = lower_bound(c->members, c->nmembers, node);

    memmove(&c->members[i],
            &c->members[i + 1],
            (c->nmembers - i - 1) * sizeof(*c->members));
    if (--c->nmembers == 0)
        class_drop(s, id);
}

/* Append c's summary at lsum[nlive - 1] (live[] was just pushed). */
static int push_sum(crater_sched_t *s, const struct sclass *c)
{
    struct live_sum *p;

    if (s->nlive > s->lsumcap) {
        uint32_t cap = s->livecap;
        if (!(p = realloc(s->lsum, cap * sizeof(*p)))) {
            s->nlive--; /* undo the push of live[] */
            return -1;
        }
        s->lsum = p;
        s->lsumcap = cap;
    }
    p = &s->lsum[s->nlive - 1];
    memset(p, 0, sizeof(*p));
    p->cpu_free = c->cpu_free;
    p->mem_free = c->mem_free;
    p->max_room_mib = c->max_room_mib;
    p->free_whole = c->free_whole;
    p->usable = c->usable;
    return 0;
}

static int class_insert(crater_sched_t *s, uint32_t id, uint32_t node)
{
    struct sclass *c = &s->classes[id];
    uint32_t i;

    if (push_u32(&c->members, &c->nmembers, &c->cap, node) < 0)
        return -1;
    i = lower_bound(c->members, c->nmembers - 1, node);
    memmove(&c->members[i + 1],
            &c->members[i],
            (c->nmembers - 1 - i) * sizeof(*c->members));
    c->members[i] = node;
    if (c->live_pos == UINT32_MAX) {
        if (buckets_add(s, id) < 0)
            return -1;
        if (push_u32(&s->live, &s->nlive, &s->livecap, id) < 0
            || push_sum(s, c) < 0) {
            buckets_del(s, id);
            return -1;
        }
        c->live_pos = s->nlive - 1;
    }
    return 0;
}

static int ensure_node_class(crater_sched_t *s, uint32_t node)
{
    uint32_t *p;

    if (node < s->nccap)
        return 0;
    if (!(p = realloc(s->node_class, s->ncap * sizeof(*p))))
        return -1;
    for (uint32_t i = s->nccap; i < s->ncap; i++)
        p[i] = UINT32_MAX;
    s->node_class = p;
    s->nccap = s->ncap;
    return 0;
}

int sched__reindex(crater_sched_t *s, uint32_t node)
{
    uint32_t len = class_blob(s, node, NULL), old, id;
    uint64_t h;

    if (ensure_node_class(s, node) < 0 || scratch_need(s, len) < 0)
        return -1;
    class_blob(s, node, s->scratch);
    h = sched__hash(s->scratch, len);
    old = s->node_class[node];
    if (old != UINT32_MAX && s->classes[old].hash == h
        && class_eq(s, old, s->scratch, len))
        return 0;
    if (old != UINT32_MAX)
        class_remove(s, old, node);
    id = bm_get(s, &s->classmap, &class_ops, h, s->scratch, len);
    if (id == UINT32_MAX && class_new(s, h, len, node, &id) < 0)
        return -1;
    s->node_class[node] = id;
    return class_insert(s, id, node);
}

uint32_t crater_sched_class_count(const crater_sched_t *s)
{
    return s->nlive;
}

void sched__index_free(crater_sched_t *s)
{
    for (uint32_t i = 0; i < s->ntypes; i++)
        free(s->types[i].blob);
    for (uint32_t i = 0; i < s->nclasses; i++) {
        free(s->classes[i].blob);
        free(s->classes[i].members);
    }
    free(s->types);
    free(s->classes);
    free(s->typemap.slots);
    free(s->classmap.slots);
    free(s->namemap.slots);
    free(s->free_classes);
    free(s->live);
    free(s->lsum);
    for (uint32_t j = 0; j < CPU_BUCKETS; j++) {
        for (uint32_t i = 0; i <= MAX_GPUS; i++)
            free(s->by_whole[i].cell[j].ids);
        for (uint32_t i = 0; i < ROOM_BUCKETS; i++)
            free(s->by_room[i].cell[j].ids);
    }
    free(s->node_class);
    free(s->scratch);
}
