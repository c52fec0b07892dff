/* ls_finish: see ls_finish.h. */
#define _POSIX_C_SOURCE 200809L
#include "ls_finish.h"

#include "ls_activity.h"
#include "ls_buffers.h"
#include "ls_clock.h"
#include "ls_cuda.h"
#include "ls_cupti.h"
#include "ls_ids.h"
#include "ls_launches.h"
#include "ls_names.h"
#include "ls_owncalls.h"
#include "ls_sampler.h"
#include "ls_samples.h"
#include "ls_threads.h"
#include "ls_worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ls_finish {
    ls_task task;           /* first: the worker sees the job as its task */
    ls_records activity;    /* parsed activity records of the profile */
    uint64_t drains, drain_ns; /* the worker's drains while the profile ran */
    int tick_tracing;       /* the ticks drain activity buffers (set before they start) */
    ls_capture capture;     /* handed over at the stop */
    ls_finish_plan plan;
    uint64_t delay_ns;      /* test hook */
    int on_worker;
};

static _Atomic(ls_finish *) current; /* the running profile's job, for the ticks */
static atomic_uint_fast64_t test_delay_ns;
static atomic_int in_flight; /* finishes posted to the worker and not yet done */

int ls_finish_in_flight(void) { return atomic_load(&in_flight); }

void ls_finish_forget_in_child(void) { atomic_store(&in_flight, 0); }

ls_finish *ls_finish_new(void) { return calloc(1, sizeof(ls_finish)); }

ls_records *ls_finish_sink(ls_finish *job) { return &job->activity; }

static void free_job(ls_finish *job)
{
    ls_records_clear(&job->activity);
    ls_records_clear(&job->capture.records);
    free(job);
}

void ls_finish_discard(ls_finish *job)
{
    if (job != NULL)
        free_job(job);
}

void ls_finish_set_test_delay(uint64_t delay_ns) { atomic_store(&test_delay_ns, delay_ns); }

/* On the worker, every period while the profile runs. */
static void profile_tick(void)
{
    ls_finish *job = atomic_load(&current);
    if (job == NULL)
        return;
    if (job->tick_tracing) {
        uint64_t t0 = ls_clock_monotonic_ns();
        if (ls_activity_drain()) {
            job->drains++;
            job->drain_ns += ls_clock_monotonic_ns() - t0;
        }
    }
}

void ls_finish_begin(ls_finish *job, int tracing, uint64_t period_ns)
{
    job->tick_tracing = tracing;
    atomic_store(&current, job);
    /* The sampler has its own tick, for as long as sampling runs. */
    if (tracing)
        ls_worker_set_tick(profile_tick, period_ns);
}

/* Adds the time since *t0 to finish phase `k` and moves *t0 to now. */
static void lap(ls_capture *c, int k, uint64_t *t0)
{
    uint64_t now = ls_clock_monotonic_ns();
    c->finish_phase_ns[k] += now - *t0;
    *t0 = now;
}

/* Moves src's items to the end of dst (dst takes src's array when empty). */
#define LS_MOVE_ALL(dst, src, append, dropped)                                  \
    do {                                                                        \
        if ((dst)->count == 0) {                                                \
            free((dst)->items);                                                 \
            *(dst) = *(src);                                                    \
        } else {                                                                \
            for (size_t i_ = 0; i_ < (src)->count; i_++) {                      \
                void *slot_ = append(dst);                                      \
                if (slot_ == NULL) {                                            \
                    (dropped) += (src)->count - i_;                             \
                    break;                                                      \
                }                                                               \
                memcpy(slot_, &(src)->items[i_], sizeof (src)->items[i_]);      \
            }                                                                   \
            free((src)->items);                                                 \
        }                                                                       \
        memset((src), 0, sizeof *(src));                                        \
    } while (0)

static void merge_activity(ls_records *into, ls_records *from)
{
    size_t ops_before = into->ops.count;
    LS_MOVE_ALL(&into->ops, &from->ops, ls_ops_append, into->dropped_records);
    LS_MOVE_ALL(&into->sync_records, &from->sync_records, ls_sync_records_append,
                into->dropped_records);
    LS_MOVE_ALL(&into->apis, &from->apis, ls_apis_append, into->dropped_records);
    into->dropped_records += from->dropped_records;
    into->invalid_records += from->invalid_records;
    into->later_incomplete += from->later_incomplete;
    ls_launch_id_raise(&into->earlier_launch_floor, from->earlier_launch_floor);
    from->dropped_records = from->invalid_records = 0;
    from->later_incomplete = 0;
    /* The kernel names the worker interned go with the records.  Should the
     * list not grow, `from` keeps them (released with the job): the moved
     * ops then lose their names rather than keep ids that may be reused. */
    if (ls_names_adopt(&into->names, &from->names) != 0)
        for (size_t i = ops_before; i < into->ops.count; i++)
            into->ops.items[i].name_id = LS_NO_NAME;
}

/* API records that ended before the start and launched no op of the
 * window: loopscope's own calls between enabling the callbacks and the
 * start (the warm-up, the first profile's PM set-up on the worker, ~0.4 s
 * of it), which the trace export drew far left of the loop.  A launch
 * whose op runs inside the window stays: it is the op's launch. */
static void drop_early_apis(ls_capture *c)
{
    ls_records *r = &c->records;
    size_t n = r->ops.count;
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (ids == NULL)
        return; /* keep them: a few early records, no wrong figure */
    for (size_t i = 0; i < n; i++)
        ids[i] = r->ops.items[i].correlation_id;
    n = ls_ids_sort_unique_u32(ids, n);
    size_t kept = 0;
    for (size_t i = 0; i < r->apis.count; i++) {
        const ls_api *a = &r->apis.items[i];
        if (a->end_ns < r->start_ns && ls_ids_find_u32(ids, n, a->correlation_id) < 0)
            c->calls_before_start++;
        else
            r->apis.items[kept++] = *a;
    }
    r->apis.count = kept;
    free(ids);
}

/* Back to back: how many launches inside the window have no op among the
 * records drained so far (SIZE_MAX when memory is short). */
static size_t launches_without_op(const ls_finish *job)
{
    const ls_records *r = &job->capture.records;
    const ls_op_array *ops = &job->activity.ops;
    uint32_t *ids = malloc((ops->count ? ops->count : 1) * sizeof *ids);
    if (ids == NULL)
        return SIZE_MAX;
    for (size_t i = 0; i < ops->count; i++)
        ids[i] = ops->items[i].correlation_id;
    size_t n = ls_ids_sort_unique_u32(ids, ops->count), missing = 0;
    for (size_t i = 0; i < r->apis.count; i++) {
        const ls_api *a = &r->apis.items[i];
        if (a->start_ns >= r->start_ns && a->start_ns <= r->stop_ns &&
            ls_ids_find_u32(ids, n, a->correlation_id) < 0)
            missing++;
    }
    free(ids);
    return missing;
}

/* For the stop's settling: 1 once every launch inside the window has its
 * op (the buffers CUPTI withholds while the next profile's kernels run
 * hold no more of this window's). */
static int window_settled(void *arg) { return launches_without_op((ls_finish *)arg) == 0; }

/* Back to back: the flush of this finish also brought the records of the
 * profile that started meanwhile and continued tracing (ls_activity).  What
 * began after this window's stop goes to that profile's sink: API and sync
 * records by their start, an op unless a launch of this window made it (the
 * rule ls_finish_filter_window keeps ops by).  The worker's own context sync (made
 * while the next profile's callbacks were on) goes to neither. */
void ls_finish_move_after_stop(ls_capture *c, ls_records *next)
{
    ls_records *r = &c->records;
    uint64_t stop = r->stop_ns;
    size_t n_apis = r->apis.count, n_ids = 0, kept = 0;
    uint32_t *ids = malloc((n_apis ? n_apis : 1) * sizeof *ids);
    uint32_t latest = 0; /* this window's latest launch id, in serial order (0: none) */
    for (size_t i = 0; i < n_apis; i++) {
        ls_api *a = &r->apis.items[i];
        if (stop < a->start_ns) { /* began after this window */
            ls_api *to = ls_apis_append(&next->apis);
            if (to != NULL)
                *to = *a;
            else
                next->dropped_records++;
            continue;
        }
        if (ids != NULL)
            ids[n_ids++] = a->correlation_id;
        ls_launch_id_raise(&latest, a->correlation_id);
        r->apis.items[kept++] = *a;
    }
    r->apis.count = kept;
    if (ids != NULL)
        n_ids = ls_ids_sort_unique_u32(ids, n_ids);
    /* Whatever of this window's launches still arrives there is not the
     * next profile's (ids grow, across their 32-bit wrap: its own launches
     * come later). */
    ls_launch_id_raise(&next->earlier_launch_floor, latest);
    kept = 0;
    for (size_t i = 0; i < r->ops.count; i++) {
        ls_op *op = &r->ops.items[i];
        int mine = op->start_ns <= stop ||
                   (ids != NULL && ls_ids_find_u32(ids, n_ids, op->correlation_id) >= 0);
        if (mine) {
            r->ops.items[kept++] = *op;
            continue;
        }
        ls_op *to = ls_ops_append(&next->ops);
        if (to == NULL) {
            next->dropped_records++;
            continue;
        }
        *to = *op;
        if (op->name_id != LS_NO_NAME && ls_names_hold(&next->names, op->name_id) != 0)
            to->name_id = LS_NO_NAME; /* no room for the name: the op stays, unnamed */
    }
    r->ops.count = kept;
    free(ids);
    kept = 0;
    for (size_t i = 0; i < r->sync_records.count; i++) {
        const ls_sync_record *sr = &r->sync_records.items[i];
        if (sr->start_ns <= stop) {
            r->sync_records.items[kept++] = *sr;
            continue;
        }
        if (ls_owncalls_has(sr->correlation_id))
            continue;
        ls_sync_record *to = ls_sync_records_append(&next->sync_records);
        if (to != NULL)
            *to = *sr;
        else
            next->dropped_records++;
    }
    r->sync_records.count = kept;
}

/* The records of the window only.  Ops that ended before the start (the
 * warm-up, work queued earlier) are left out of traced profiles, as are
 * API records, host syncs and calls that began after the stop, and the ops
 * those launches made: the user's code went on while the worker finished.
 * A traced op that started after the stop with no launch record inside the
 * window was launched after it (the callbacks were off by then). */
void ls_finish_filter_window(ls_capture *c)
{
    ls_records *r = &c->records;
    uint64_t start = r->start_ns, stop = r->stop_ns;
    size_t n_apis = r->apis.count;
    uint32_t *kept_ids = malloc((n_apis ? n_apis : 1) * sizeof *kept_ids);
    uint32_t *late_ids = malloc((n_apis ? n_apis : 1) * sizeof *late_ids);
    size_t n_kept = 0, n_late = 0, kept = 0;
    int by_id = kept_ids != NULL && late_ids != NULL;
    uint32_t first_own = 0; /* the window's earliest launch id, in serial order (0: none) */
    for (size_t i = 0; i < n_apis; i++) {
        ls_api *a = &r->apis.items[i];
        if (a->start_ns >= start && a->start_ns <= stop && a->correlation_id != 0 &&
            (first_own == 0 || ls_launch_id_later(first_own, a->correlation_id)))
            first_own = a->correlation_id;
        if (a->start_ns > stop) {
            if (by_id)
                late_ids[n_late++] = a->correlation_id;
            continue;
        }
        if (by_id)
            kept_ids[n_kept++] = a->correlation_id;
        r->apis.items[kept++] = *a;
    }
    c->records_after_stop += n_apis - kept;
    r->apis.count = kept;
    if (by_id) {
        n_kept = ls_ids_sort_unique_u32(kept_ids, n_kept);
        n_late = ls_ids_sort_unique_u32(late_ids, n_late);
    }
    /* Ids grow in the order calls begin: what was launched before this
     * window's first launch is not its own, though a light profile between
     * (which counts no launch) left the floor below it.  The id before 1 is
     * the last before the wrap (0 means none). */
    uint32_t floor = r->earlier_launch_floor;
    if (first_own != 0)
        ls_launch_id_raise(&floor, first_own == 1 ? UINT32_MAX : first_own - 1);
    kept = 0;
    for (size_t i = 0; i < r->ops.count; i++) {
        const ls_op *op = &r->ops.items[i];
        if (c->traced && op->end_ns < start) {
            c->ops_before_start++;
            continue;
        }
        /* Back to back: an earlier profile's launch that ran into this
         * window (its record came late) is that profile's, not this one's. */
        if (by_id && op->correlation_id != 0 && floor != 0 &&
            !ls_launch_id_later(op->correlation_id, floor) &&
            ls_ids_find_u32(kept_ids, n_kept, op->correlation_id) < 0) {
            c->ops_before_start++;
            continue;
        }
        /* An op that began by the stop was launched before it, whatever a
         * later record with its correlation id says (the model then finds
         * it no launch). */
        int late = op->start_ns > stop && by_id &&
                   ls_ids_find_u32(late_ids, n_late, op->correlation_id) >= 0 &&
                   ls_ids_find_u32(kept_ids, n_kept, op->correlation_id) < 0;
        if (!late && c->traced && op->start_ns > stop)
            late = !by_id || ls_ids_find_u32(kept_ids, n_kept, op->correlation_id) < 0;
        if (late) {
            c->ops_after_stop++;
            continue;
        }
        r->ops.items[kept++] = *op;
    }
    r->ops.count = kept;
    free(kept_ids);
    free(late_ids);
    if (c->traced)
        drop_early_apis(c);
    if (c->traced) {
        /* A sync record that ended before the start is the warm-up's own
         * wait (its stream sync): kept, it would sit far left of the loop
         * on every time line. */
        kept = 0;
        size_t early = 0;
        for (size_t i = 0; i < r->sync_records.count; i++) {
            const ls_sync_record *s = &r->sync_records.items[i];
            if (ls_owncalls_has(s->correlation_id))
                early++; /* the worker's wait at an earlier finish */
            else if (s->end_ns < start)
                early++;
            else if (s->start_ns <= stop)
                r->sync_records.items[kept++] = *s;
        }
        c->calls_before_start += early;
        c->records_after_stop += r->sync_records.count - kept - early;
        r->sync_records.count = kept;
    }
    kept = 0;
    for (size_t i = 0; i < r->calls.count; i++) {
        const ls_call *call = &r->calls.items[i];
        if (call->enter_ns < start)
            c->calls_before_start++;
        else if (call->enter_ns > stop)
            c->records_after_stop++;
        else
            r->calls.items[kept++] = *call;
    }
    r->calls.count = kept;
    for (size_t i = 0; i < r->ranges.count; i++) {
        ls_range *range = &r->ranges.items[i];
        if (range->end_ns == 0) {
            range->end_ns = stop;
            c->ranges_left_open++;
        }
    }
}

/* The counters' end (the sampler's stop and the last decode, ~4-6 ms on
 * an H200) on a thread of its own, beside the activity flush (~1.3 ms):
 * they share no state (the flush fills job->activity, the sampler the
 * capture's samples and figures), and summary() waits for the slower. */
typedef struct {
    ls_capture *capture;
    uint64_t ns;
} ls_counters_end;

static void *end_counters(void *arg)
{
    ls_counters_end *end = (ls_counters_end *)arg;
    uint64_t t0 = ls_clock_monotonic_ns();
    ls_sampler_finish(end->capture->pm_window, end->capture->records.start_ns,
                      end->capture->records.stop_ns, end->capture);
    end->ns = ls_clock_monotonic_ns() - t0;
    return NULL;
}

static void finish_run(ls_task *task)
{
    ls_finish *job = (ls_finish *)task;
    ls_capture *c = &job->capture;
    uint64_t begun = ls_clock_monotonic_ns(), t0 = begun;
    if (job->delay_ns > 0) {
        struct timespec pause = {(time_t)(job->delay_ns / 1000000000ull),
                                 (long)(job->delay_ns % 1000000000ull)};
        nanosleep(&pause, NULL);
        t0 = ls_clock_monotonic_ns();
    }
    ls_counters_end counters = {c, 0};
    ls_records *next = NULL; /* the sink of a profile that continued tracing */
    pthread_t counters_thread;
    int counters_beside = 0;
    if (job->plan.tracing) {
        /* Every kernel launched inside the profile must have finished, so
         * the flush returns all of them.  This sync's own records begin
         * after the stop and are filtered out below. */
        if (job->plan.context != NULL)
            ls_cuda_sync_context(job->plan.context);
        lap(c, LS_FINISH_SYNC, &t0);
        counters_beside = job->plan.sampling &&
                          pthread_create(&counters_thread, NULL, end_counters, &counters) == 0;
        char activity_error[sizeof c->stop_error] = "";
        job->activity.stop_launch_id = c->stop_launch_id; /* before the forced flush's parse */
        if (ls_activity_stop(&next, window_settled, job) != 0)
            snprintf(activity_error, sizeof activity_error, "%s", ls_cupti_error());
        if (next != NULL) {
            /* The settling's bound passed with launches still unrecorded:
             * counted as dropped, so the summary's drops check says so. */
            size_t missing = launches_without_op(job);
            if (missing != SIZE_MAX)
                c->records.dropped_records += missing;
        }
        c->buffer_bytes = ls_buffers_allocated_bytes();
        c->buffers_refused = ls_buffers_refused();
        lap(c, LS_FINISH_ACTIVITY, &t0);
        if (counters_beside) {
            pthread_join(counters_thread, NULL);
            c->finish_phase_ns[LS_FINISH_METRICS] += counters.ns;
            t0 = ls_clock_monotonic_ns();
        }
        if (activity_error[0] != '\0') /* the first error told, as before */
            snprintf(c->stop_error, sizeof c->stop_error, "%s", activity_error);
    }
    if (job->plan.sampling && !counters_beside) {
        ls_sampler_finish(c->pm_window, c->records.start_ns, c->records.stop_ns, c);
        lap(c, LS_FINISH_METRICS, &t0);
    }
    merge_activity(&c->records, &job->activity);
    if (next != NULL)
        ls_finish_move_after_stop(c, next);
    /* Samples in time order, whoever made them (the test hook injects any). */
    ls_samples_sort(c->records.samples.items, c->records.samples.count);
    c->drains += job->drains;
    c->drain_ns += job->drain_ns;
    ls_finish_filter_window(c);
    c->ops_after_stop += c->records.later_incomplete; /* a later profile's, incomplete */
    c->records.later_incomplete = 0;
    /* Out of memory: the launches keep CUPTI's ids and go by time. */
    ls_threads_widen_api_ids(&c->records);
    lap(c, LS_FINISH_RECORDS, &t0);
    c->finish_ns = ls_clock_monotonic_ns() - begun;
    c->finished_on_worker = job->on_worker;
    if (job->on_worker)
        atomic_fetch_sub(&in_flight, 1);
}

static void dispose(ls_task *task) { free_job((ls_finish *)task); }

void ls_finish_hand_over(ls_finish *job, ls_capture *capture, const ls_finish_plan *plan)
{
    ls_worker_set_tick(NULL, 0);
    atomic_store(&current, NULL);
    job->capture = *capture;
    memset(capture, 0, sizeof *capture);
    job->plan = *plan;
    job->delay_ns = atomic_load(&test_delay_ns);
    memset(&job->task, 0, sizeof job->task);
    job->task.run = finish_run;
    int wanted = plan->defer && (plan->tracing || plan->sampling || job->delay_ns > 0);
    char why[256] = "";
    job->on_worker = wanted;
    if (wanted) {
        atomic_fetch_add(&in_flight, 1);
        if (ls_worker_post(&job->task, why, sizeof why) == 0)
            return;
        atomic_fetch_sub(&in_flight, 1);
    }
    job->on_worker = 0;
    if (wanted)
        snprintf(job->capture.finish_error, sizeof job->capture.finish_error, "%s", why);
    /* The sampler's open task or a last tick may still run on the worker:
     * they touch what the finish does.  (The worker never takes the GIL.) */
    ls_worker_wait_idle();
    finish_run(&job->task);
    job->task.state = LS_TASK_DONE;
}

int ls_finish_done(ls_finish *job) { return ls_worker_done(&job->task); }

void ls_finish_hold(ls_finish *job) { ls_worker_hold(&job->task); }

void ls_finish_wait(ls_finish *job) { ls_worker_wait(&job->task); }

void ls_finish_take(ls_finish *job, ls_capture *out, uint64_t wait_ns)
{
    ls_worker_settle(&job->task);
    if (job->task.failed) {
        /* The process forked while a thread of the parent finished this
         * profile: the child cannot trust what that thread left. */
        memset(out, 0, sizeof *out);
        out->records.start_ns = job->capture.records.start_ns;
        out->records.stop_ns = job->capture.records.stop_ns;
        snprintf(out->reason, sizeof out->reason,
                 "this process was forked while loopscope's worker thread finished the "
                 "profile: its records stayed with the parent process");
        snprintf(out->finish_error, sizeof out->finish_error, "%.200s", out->reason);
        return; /* the job's memory may be half-written: left alone */
    }
    *out = job->capture;
    out->finish_wait_ns += wait_ns;
    memset(&job->capture, 0, sizeof job->capture);
    free_job(job);
}

void ls_finish_abandon(ls_finish *job)
{
    if (ls_worker_abandon(&job->task, dispose) && !job->task.failed)
        free_job(job);
}
