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
 * Timers: an owner that re-arms one event again and again (a channel's completion, re-armed
 * at every rate change) holds an EvTimer; evq_arm gives it a new event (a new seq, as a push would)
 * and the event it held, if any, is cancelled on the spot instead of being left in the heap to be
 * popped and ignored. Armed timers sit in a second binary heap (one entry per timer, positions kept
 * in the timers), and a pop takes the smaller of its top and the main minimum under the same total
 * order: the events delivered are exactly those a plain heap delivers, minus the cancelled ones.
 * What a cancelled event would still have done when popped is kept: `cancelled` counts them (the
 * engine counts them as events, as it counted the ignored pops) and the clock, when the queue runs
 * empty, moves on to the latest time one of them had (where its pop would have left it).
 * Complexity: push and pop O(log n), O(1) when the event pushed is the next one popped; arm and a
 * timer's pop O(log armed timers); memory O(pending events + timers).
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

/* an owner's re-armable event (see above); zeroed = not armed */
typedef struct EvTimer {
    Event ev;
    uint32_t pos; /* its place in the timer heap + 1; 0: not armed */
} EvTimer;

typedef struct EventQueue {
    Event *heap;
    uint64_t n, cap;  /* n: pending events, front included; the heap holds n - has_front */
    Event front;      /* the smallest pending event when has_front (see above) */
    int has_front;
    uint64_t next_seq;
    int64_t now_ns;
    uint64_t popped;
    EvTimer **tm;            /* the armed timers, a binary heap under the same order */
    uint32_t tn, tcap;
    uint64_t cancelled;      /* events of timers re-armed before they were popped */
    int64_t cancelled_last_ns; /* the latest time such an event had */
} EventQueue;

int evq_init(EventQueue *q, KvErr *e);
void evq_free(EventQueue *q);
/* Push; returns the event's seq (> 0), or 0 with a message when time_ns < now or out of memory. */
uint64_t evq_push(EventQueue *q, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, int64_t arg, KvErr *e);
/* the total order (time, rank, seq) */
static inline int ev_less(const Event *a, const Event *b)
{
    if (a->time_ns != b->time_ns) return a->time_ns < b->time_ns;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->seq < b->seq;
}

/* the timer heap: tm[i]->pos == i + 1 for every armed timer */
static inline void evq_tm_set(EvTimer **tm, uint32_t i, EvTimer *t)
{
    tm[i] = t;
    t->pos = i + 1;
}

/* sift t up from slot i of the timer heap */
static inline void evq_tm_up(EvTimer **tm, uint32_t i, EvTimer *t)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!ev_less(&t->ev, &tm[parent]->ev)) break;
        evq_tm_set(tm, i, tm[parent]);
        i = parent;
    }
    evq_tm_set(tm, i, t);
}

/* sift t down from slot i of the timer heap of n timers */
static inline void evq_tm_down(EvTimer **tm, uint32_t n, uint32_t i, EvTimer *t)
{
    uint32_t c;
    while ((c = 2 * i + 1) < n) {
        if (c + 1 < n && ev_less(&tm[c + 1]->ev, &tm[c]->ev)) c++;
        if (!ev_less(&tm[c]->ev, &t->ev)) break;
        evq_tm_set(tm, i, tm[c]);
        i = c;
    }
    evq_tm_set(tm, i, t);
}

uint64_t evq_arm_slow(EventQueue *q, EvTimer *t, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, KvErr *e);

/* Arm t: a new event (its seq returned, > 0; 0 with a message as evq_push); the one t held, if
 * still pending, is cancelled (counted in `cancelled`). Inline: a timer not armed, with room (a
 * channel starting its next unit); evq_arm_slow: re-arming, growing, refusing. */
static inline uint64_t evq_arm(EventQueue *q, EvTimer *t, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, KvErr *e)
{
    if (t->pos || q->tn == q->tcap || time_ns < q->now_ns) return evq_arm_slow(q, t, time_ns, rank, kind, obj, e);
    t->ev = (Event){time_ns, rank, kind, q->next_seq++, obj, 0};
    evq_tm_up(q->tm, q->tn++, t);
    return t->ev.seq;
}
/* forget every armed timer without popping it (teardown: the timers' owners are going away) */
void evq_drop_timers(EventQueue *q);
/* evq_pop's parts out of line (evq.c): the heap's root (no front), the clock-goes-back error */
void evq_heap_take(EventQueue *q, Event *out);
int evq_clock_back(EventQueue *q, const Event *out, KvErr *e);
/* evq_pop's end: the clock to the event taken (1), or the clock-goes-back error (-1) */
static inline int evq_delivered(EventQueue *q, const Event *out, KvErr *e)
{
    if (out->time_ns < q->now_ns) return evq_clock_back(q, out, e);
    q->now_ns = out->time_ns;
    q->popped++;
    return 1;
}
/* the smallest event of the front and the heap (n >= 1) into *out, delivered */
static inline int evq_take(EventQueue *q, Event *out, KvErr *e)
{
    if (q->has_front) {
        *out = q->front;
        q->has_front = 0;
        q->n--;
    } else {
        evq_heap_take(q, out);
    }
    return evq_delivered(q, out, e);
}
/* evq_pop while a timer is armed: the smaller of the timer heap's top and the heap's minimum */
static inline int evq_pop_timers(EventQueue *q, Event *out, KvErr *e)
{
    if (q->n == 0 || ev_less(&q->tm[0]->ev, q->has_front ? &q->front : &q->heap[0])) {
        EvTimer **tm = q->tm, *t = tm[0];
        *out = t->ev;
        t->pos = 0;
        if (--q->tn) evq_tm_down(tm, q->tn, 0, tm[q->tn]);
        return evq_delivered(q, out, e);
    }
    return evq_take(q, out, e);
}
/* Pop the smallest event into *out and advance the clock to its time. 1: got one, 0: empty,
 * -1: invariant broken (message). Inline: the front or the heap while no timer is armed. */
static inline int evq_pop(EventQueue *q, Event *out, KvErr *e)
{
    if (q->tn) return evq_pop_timers(q, out, e);
    if (q->n == 0) {
        /* empty: the clock ends where the latest cancelled event's pop would have left it */
        if (q->cancelled_last_ns > q->now_ns) q->now_ns = q->cancelled_last_ns;
        return 0;
    }
    return evq_take(q, out, e);
}
static inline int64_t evq_now(const EventQueue *q) { return q->now_ns; }
static inline uint64_t evq_pending(const EventQueue *q) { return q->n + q->tn; }
/* Peek at the time of the next event; INT64_MAX when empty. */
int64_t evq_next_time(const EventQueue *q);

#endif
