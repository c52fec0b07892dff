/* ls_switchboard: the one CUPTI callback.  Every enabled callback id
 * (ls_cbids) arrives here and is dispatched by its role: a launch call is
 * stamped into ls_launches, a call that can wait for the GPU into ls_calls
 * (enter and exit, with the caller's Python stack), and a sure wait is
 * shown to strict mode (ls_strict).  It never allocates, never raises and
 * never takes the GIL.  The test hook drives the same dispatch with fake
 * callback data, so CI exercises it without a GPU. */
#ifndef LS_SWITCHBOARD_H
#define LS_SWITCHBOARD_H

#include <cupti.h>
#include <stdint.h>

/* Dispatches one API callback; `now` reads the clock (CUPTI's timestamp in
 * a real callback). */
void ls_switchboard_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const CUpti_CallbackData *call, uint64_t (*now)(void));

/* Where a CUDA context's creation (the resource domain) is told; NULL: nowhere. */
void ls_switchboard_on_context(void (*on_context)(void *context));

/* CUDA graph execs instantiated while ls_subscriber_watch_graph_execs was
 * on, since the process began (the resource callback counts them; no
 * allocation, no lock). */
uint64_t ls_switchboard_graph_execs_created(void);

/* The function registered with cuptiSubscribe. */
void CUPTIAPI ls_switchboard_callback(void *userdata, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void *data);

#endif
