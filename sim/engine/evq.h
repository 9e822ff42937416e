/* evq.h — the event queue: a binary min-heap of events under one total order
 *   (time_ns, kind rank, sequence number)
 * where the rank orders kinds that fall at the same instant (e.g. a transfer completing before the
 * iteration that waits on it is re-checked) and the sequence number (assigned at push, strictly
 * increasing) makes the order total and deterministic.
 *
 * Cancellation is lazy: an owner that re-schedules keeps the seq of the event it still wants and
 * ignores popped events whose seq no longer matches (evq never searches the heap).
 * Invariants (always checked, not only in debug builds): the clock never goes back; an event is
 * never pushed into the past. A violation makes evq_pop/evq_push return -1 with a message.
 * The smallest pending event may be held outside the heap, in `front` (a one-event cache of the
 * minimum): a push smaller than every pending event goes there, and the next pop takes it without
 * touching the heap (a layer load's completion is usually the next event). Invariant: when
 * has_front, front precedes every event in the heap under the total order, so the pop sequence is
 * the order's, whatever is cached — exactly that of a plain heap.
 * Complexity: push and pop O(log n), O(1) when the event pushed is the next one popped; memory
 * O(pending events).
 * Not responsible for: what events mean (engine.c dispatches on kind).
 */
#ifndef KV_EVQ_H
#define KV_EVQ_H

#include <stdint.h>

#include "sim/base/util.h"

typedef struct Event {
    int64_t time_ns;
    uint32_t rank;   /* tie-break among kinds at the same time: lower first */
    uint32_t kind;
    uint64_t seq;
    void *obj;       /* the object the event concerns */
    int64_t arg;     /* kind-specific */
} Event;

typedef struct EventQueue {
    Event *heap;
    uint64_t n, cap;  /* n: pending events, front included; the heap holds n - has_front */
    Event front;      /* the smallest pending event when has_front (see above) */
    int has_front;
    uint64_t next_seq;
    int64_t now_ns;
    uint64_t popped;
} EventQueue;

int evq_init(EventQueue *q, KvErr *e);
void evq_free(EventQueue *q);
/* Push; returns the event's seq (> 0), or 0 with a message when time_ns < now or out of memory. */
uint64_t evq_push(EventQueue *q, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, int64_t arg, KvErr *e);
/* Pop the smallest event into *out and advance the clock to its time. 1: got one, 0: empty,
 * -1: invariant broken (message). */
int evq_pop(EventQueue *q, Event *out, KvErr *e);
static inline int64_t evq_now(const EventQueue *q) { return q->now_ns; }
static inline uint64_t evq_pending(const EventQueue *q) { return q->n; }
/* Peek at the time of the next event; INT64_MAX when empty. */
int64_t evq_next_time(const EventQueue *q);

#endif
