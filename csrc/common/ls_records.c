/* ls_records: see ls_records.h. */
#include "ls_records.h"

#include <stdlib.h>
#include <string.h>

/* Doubles the capacity so appends cost amortised O(1) and rarely allocate. */
static int grow(void **items, size_t *capacity, size_t needed, size_t item_size)
{
    if (needed <= *capacity)
        return 0;
    size_t cap = *capacity ? *capacity : 256;
    while (cap < needed)
        cap *= 2;
    void *bigger = realloc(*items, cap * item_size);
    if (bigger == NULL)
        return -1;
    *items = bigger;
    *capacity = cap;
    return 0;
}

#define LS_APPEND_IMPL(fn, array_type, item_type)                                  \
    item_type *fn(array_type *a)                                                   \
    {                                                                              \
        if (grow((void **)&a->items, &a->capacity, a->count + 1, sizeof(item_type)) \
            != 0)                                                                  \
            return NULL;                                                           \
        item_type *slot = &a->items[a->count++];                                   \
        memset(slot, 0, sizeof *slot);                                             \
        return slot;                                                               \
    }

ls_op ls_op_make(ls_op_kind kind, uint64_t start_ns, uint64_t end_ns, uint32_t device_id,
                 uint32_t stream_id, uint32_t correlation_id, uint32_t name_id, uint64_t bytes)
{
    ls_op op;
    memset(&op, 0, sizeof op); /* padding too: ops are copied and compared whole */
    op.start_ns = start_ns;
    op.end_ns = end_ns;
    op.bytes = bytes;
    op.correlation_id = correlation_id;
    op.device_id = device_id;
    op.stream_id = stream_id;
    op.name_id = name_id;
    op.kind = (uint8_t)kind;
    op.graph_launched = kind == LS_OP_GRAPH;
    return op;
}

LS_APPEND_IMPL(ls_ops_append, ls_op_array, ls_op)
LS_APPEND_IMPL(ls_apis_append, ls_api_array, ls_api)
LS_APPEND_IMPL(ls_sync_records_append, ls_sync_record_array, ls_sync_record)
LS_APPEND_IMPL(ls_ranges_append, ls_range_array, ls_range)
LS_APPEND_IMPL(ls_calls_append, ls_call_array, ls_call)
LS_APPEND_IMPL(ls_samples_append, ls_sample_array, ls_sample)

int ls_ranges_reserve(ls_range_array *a, size_t n)
{
    return grow((void **)&a->items, &a->capacity, a->count + n, sizeof(ls_range));
}

const ls_device_facts *ls_records_device(const ls_records *r, uint32_t device_id)
{
    for (size_t i = 0; i < r->device_count; i++)
        if (r->devices[i].device_id == device_id)
            return &r->devices[i];
    return NULL;
}

int ls_records_set_device(ls_records *r, const ls_device_facts *facts)
{
    for (size_t i = 0; i < r->device_count; i++)
        if (r->devices[i].device_id == facts->device_id) {
            r->devices[i] = *facts;
            return 0;
        }
    if (r->device_count >= LS_MAX_DEVICE_FACTS)
        return -1;
    r->devices[r->device_count++] = *facts;
    return 0;
}

void ls_records_clear(ls_records *r)
{
    free(r->ops.items);
    free(r->apis.items);
    free(r->sync_records.items);
    free(r->ranges.items);
    free(r->calls.items);
    free(r->samples.items);
    free(r->codes.items);
    free(r->codes.arena);
    ls_names_release_all(&r->names);
    memset(r, 0, sizeof *r);
}

size_t ls_range_name(const ls_range *range, char *out, size_t size)
{
    if (range->step_index >= 0)
        return ls_names_format(range->name_id, range->step_index, out, size);
    const char *text = ls_names_text(range->name_id);
    if (text == NULL)
        return SIZE_MAX;
    size_t len = strlen(text);
    size_t copied = len < size ? len : size - 1;
    memcpy(out, text, copied);
    out[copied] = '\0';
    return len;
}
