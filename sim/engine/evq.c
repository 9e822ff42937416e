/* evq.c — binary heap under (time, rank, seq), with the minimum cached in `front`, and a second
 * heap of armed timers under the same order; see evq.h. */
#include "sim/engine/evq.h"

#include <stdlib.h>

int evq_init(EventQueue *q, KvErr *e)
{
    q->cap = 1024;
    q->n = 0;
    q->has_front = 0;
    q->next_seq = 1;
    q->now_ns = 0;
    q->popped = 0;
    q->tm = NULL;
    q->tn = q->tcap = 0;
    q->cancelled = 0;
    q->cancelled_last_ns = 0;
    q->heap = malloc(q->cap * sizeof *q->heap);
    if (!q->heap) return kv_err(e, "event queue: out of memory");
    return 0;
}

void evq_free(EventQueue *q)
{
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
    q->has_front = 0;
    evq_drop_timers(q);
    free(q->tm);
    q->tm = NULL;
    q->tcap = 0;
}

/* sift ev up from the heap's new last slot hn (room for it is there) */
static void heap_insert(Event *h, uint64_t hn, const Event *ev)
{
    uint64_t i = hn;
    while (i > 0) {
        uint64_t parent = (i - 1) / 2;
        if (!ev_less(ev, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = *ev;
}

uint64_t evq_arm_slow(EventQueue *q, EvTimer *t, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, KvErr *e)
{
    if (time_ns < q->now_ns) {
        kv_err(e, "event queue: event kind %u armed at %lld ns, before now (%lld ns)", kind, (long long)time_ns,
               (long long)q->now_ns);
        return 0;
    }
    Event ev = {time_ns, rank, kind, q->next_seq++, obj, 0};
    if (t->pos) { /* its pending event is cancelled: counted, and its time kept for the clock */
        q->cancelled++;
        if (t->ev.time_ns > q->cancelled_last_ns) q->cancelled_last_ns = t->ev.time_ns;
        uint32_t i = t->pos - 1;
        int up = ev_less(&ev, &t->ev);
        t->ev = ev;
        if (up) evq_tm_up(q->tm, i, t);
        else evq_tm_down(q->tm, q->tn, i, t);
        return ev.seq;
    }
    if (q->tn == q->tcap) {
        uint32_t nc = q->tcap ? q->tcap * 2 : 16;
        EvTimer **nt = realloc(q->tm, nc * sizeof *nt);
        if (!nt) {
            kv_err(e, "event queue: out of memory (%u timers)", q->tn);
            return 0;
        }
        q->tm = nt;
        q->tcap = nc;
    }
    t->ev = ev;
    evq_tm_up(q->tm, q->tn++, t);
    return ev.seq;
}

void evq_drop_timers(EventQueue *q)
{
    for (uint32_t i = 0; i < q->tn; i++) q->tm[i]->pos = 0;
    q->tn = 0;
}

uint64_t evq_push(EventQueue *q, int64_t time_ns, uint32_t rank, uint32_t kind, void *obj, int64_t arg, KvErr *e)
{
    if (time_ns < q->now_ns) {
        kv_err(e, "event queue: event kind %u pushed at %lld ns, before now (%lld ns)", kind, (long long)time_ns,
               (long long)q->now_ns);
        return 0;
    }
    uint64_t hn = q->n - (uint64_t)q->has_front; /* events in the heap */
    if (hn + 1 > q->cap) {
        uint64_t nc = q->cap * 2;
        Event *nh = realloc(q->heap, nc * sizeof *nh);
        if (!nh) {
            kv_err(e, "event queue: out of memory (%llu events)", (unsigned long long)q->n);
            return 0;
        }
        q->heap = nh;
        q->cap = nc;
    }
    Event ev = {time_ns, rank, kind, q->next_seq++, obj, arg};
    q->n++;
    if (q->has_front) {
        /* front precedes the heap; the smaller of front and ev becomes (or stays) the front */
        if (ev_less(&ev, &q->front)) {
            heap_insert(q->heap, hn, &q->front);
            q->front = ev;
        } else {
            heap_insert(q->heap, hn, &ev);
        }
    } else if (hn == 0 || ev_less(&ev, &q->heap[0])) {
        q->front = ev; /* it precedes everything pending */
        q->has_front = 1;
    } else {
        heap_insert(q->heap, hn, &ev);
    }
    return ev.seq;
}

/* Pop as in bottom-up heapsort (Floyd): the hole at the root moves down to a leaf along the smaller
 * children (one comparison per level), then the last event rises from there to its place (it came
 * from the bottom: rarely more than a level). The heap property holds as in the textbook sift-down,
 * and under a total order (seq is unique) every heap shape pops the same sequence. A cached front
 * precedes the whole heap: it is popped without touching the heap (evq_pop, inline in evq.h).
 * This: the heap's root into *out; the heap not empty, no front. */
void evq_heap_take(EventQueue *q, Event *out)
{
    *out = q->heap[0];
    uint64_t n = --q->n;
    if (n) {
        Event *h = q->heap;
        uint64_t i = 0, c;
        while ((c = 2 * i + 1) < n) {
            if (c + 1 < n && ev_less(&h[c + 1], &h[c])) c++;
            h[i] = h[c];
            i = c;
        }
        const Event *last = &h[n];
        while (i > 0) {
            uint64_t parent = (i - 1) / 2;
            if (!ev_less(last, &h[parent])) break;
            h[i] = h[parent];
            i = parent;
        }
        h[i] = *last;
    }
}

int evq_clock_back(EventQueue *q, const Event *out, KvErr *e)
{
    return kv_err(e, "event queue: clock would go back from %lld to %lld ns (kind %u)", (long long)q->now_ns,
                  (long long)out->time_ns, out->kind);
}

int64_t evq_next_time(const EventQueue *q)
{
    int64_t t = q->has_front ? q->front.time_ns : q->n ? q->heap[0].time_ns : INT64_MAX;
    if (q->tn && q->tm[0]->ev.time_ns < t) t = q->tm[0]->ev.time_ns;
    return t;
}
