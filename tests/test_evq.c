/* test_evq.c — event order (time, rank, seq), ties, invariants, heap under random load, timers. */
#include <stdlib.h>
#include <string.h>

#include "sim/engine/evq.h"
#include "tests/harness.h"

TEST(evq_orders_by_time_rank_seq)
{
    EventQueue q;
    KvErr e;
    CHECK(evq_init(&q, &e) == 0);
    /* pushed out of order; same time 10 with ranks 2,1,1 → rank 1 first, then by push order */
    evq_push(&q, 10, 2, 100, NULL, 0, &e);
    evq_push(&q, 5, 9, 101, NULL, 0, &e);
    evq_push(&q, 10, 1, 102, NULL, 0, &e);
    evq_push(&q, 10, 1, 103, NULL, 0, &e);
    evq_push(&q, 7, 0, 104, NULL, 0, &e);
    unsigned want[] = {101, 104, 102, 103, 100};
    Event ev;
    for (int i = 0; i < 5; i++) {
        CHECK(evq_pop(&q, &ev, &e) == 1);
        CHECK_EQ_U(ev.kind, want[i]);
    }
    CHECK_EQ_I(evq_now(&q), 10);
    CHECK(evq_pop(&q, &ev, &e) == 0);
    evq_free(&q);
}

TEST(evq_refuses_past_events)
{
    EventQueue q;
    KvErr e = {{0}};
    CHECK(evq_init(&q, &e) == 0);
    evq_push(&q, 100, 0, 1, NULL, 0, &e);
    Event ev;
    CHECK(evq_pop(&q, &ev, &e) == 1);
    CHECK(evq_push(&q, 99, 0, 2, NULL, 0, &e) == 0);
    CHECK_CONTAINS(e.msg, "before now");
    CHECK(evq_push(&q, 100, 0, 3, NULL, 0, &e) > 0); /* now is allowed */
    evq_free(&q);
}

TEST(evq_random_load_is_sorted_and_stable)
{
    EventQueue q;
    KvErr e;
    CHECK(evq_init(&q, &e) == 0);
    uint64_t x = 12345;
    int64_t base = 0;
    Event prev = {0};
    int have_prev = 0, bad = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 50; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t at = base + (int64_t)((x >> 33) % 1000);
            evq_push(&q, at, (uint32_t)((x >> 20) % 3), 0, NULL, 0, &e);
        }
        for (int i = 0; i < 40; i++) {
            Event ev;
            if (evq_pop(&q, &ev, &e) != 1) break;
            if (have_prev) {
                /* time never goes back; at one time and rank, push order holds (an event of a lower
                 * rank pushed later at the current time legitimately comes after) */
                int ok = prev.time_ns < ev.time_ns ||
                         (prev.time_ns == ev.time_ns && (prev.rank != ev.rank || prev.seq < ev.seq));
                if (!ok) bad++;
            }
            prev = ev;
            have_prev = 1;
        }
        base = evq_now(&q);
    }
    CHECK_EQ_I(bad, 0);
    CHECK_EQ_U(q.popped + q.n, 200 * 50);
    evq_free(&q);
}

/* the cached front (evq.h): pushes that precede everything pending (the front path), that displace
 * the front, and that go to the heap, interleaved with pops, pop in exactly the order a sort by
 * (time, rank, seq) gives; the pending count includes the front */
TEST(evq_front_cache_pops_in_total_order)
{
    EventQueue q;
    KvErr e;
    CHECK(evq_init(&q, &e) == 0);
    enum { N = 6000 };
    static Event got[N], want[N];
    static int seen[N]; /* pushes made before the k-th pop */
    int ng = 0, nw = 0, fronts = 0;
    uint64_t x = 777;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t now = evq_now(&q);
        /* often the earliest event (now, or just after), sometimes far out, ranks colliding */
        int64_t at = (x >> 60) < 8 ? now + (int64_t)((x >> 40) % 3) : now + (int64_t)((x >> 33) % 5000);
        uint32_t rank = (uint32_t)((x >> 20) % 3);
        int before = q.has_front;
        uint64_t seq = evq_push(&q, at, rank, (uint32_t)i, NULL, 0, &e);
        CHECK(seq > 0);
        if (!before && q.has_front) fronts++;
        want[nw++] = (Event){at, rank, (uint32_t)i, seq, NULL, 0};
        if ((x >> 50) % 3 != 0) { /* pop two thirds of the time */
            Event ev;
            CHECK(evq_pop(&q, &ev, &e) == 1);
            seen[ng] = nw;
            got[ng++] = ev;
        }
        CHECK_EQ_U(q.n + (uint64_t)ng, (uint64_t)nw);
    }
    Event ev;
    while (evq_pop(&q, &ev, &e) == 1) {
        seen[ng] = nw;
        got[ng++] = ev;
    }
    CHECK_EQ_I(ng, nw);
    CHECK(fronts > 100); /* the front path was taken */
    /* the reference: at each pop, the smallest of what was pushed and not popped (a replay) */
    static int taken[N];
    int bad = 0;
    for (int k = 0; k < ng; k++) {
        int best = -1;
        for (int j = 0; j < seen[k]; j++) {
            if (taken[j]) continue;
            const Event *a = &want[j];
            if (best < 0 || a->time_ns < want[best].time_ns ||
                (a->time_ns == want[best].time_ns && (a->rank < want[best].rank || (a->rank == want[best].rank && a->seq < want[best].seq))))
                best = j;
        }
        if (best < 0 || want[best].seq != got[k].seq || want[best].kind != got[k].kind) bad++;
        if (best >= 0) taken[best] = 1;
    }
    CHECK_EQ_I(bad, 0);
    evq_free(&q);
}

/* timers (evq.h): pushes interleaved with arms and re-arms of a few timers and with pops deliver
 * exactly the events a sort by (time, rank, seq) of the live ones gives — every pushed event and
 * each timer's latest event, an older one of a re-armed timer never; the cancelled ones are
 * counted, and the clock, once the queue is empty, stands at the latest time any event had */
TEST(evq_timers_pop_in_total_order_and_count_cancellations)
{
    EventQueue q;
    KvErr e;
    CHECK(evq_init(&q, &e) == 0);
    enum { N = 6000, NT = 5 };
    static Event live[N + 2];
    static int dead[N + 2];
    EvTimer tm[NT];
    int tm_ev[NT]; /* the index in live[] of each timer's pending event (-1: none) */
    memset(tm, 0, sizeof tm);
    for (int k = 0; k < NT; k++) tm_ev[k] = -1;
    int nl = 0, bad = 0, arms = 0, rearms = 0, popped_timer = 0;
    int64_t latest = 0;
    uint64_t x = 4242, cancelled = 0;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t now = evq_now(&q);
        int64_t at = (x >> 60) < 6 ? now + (int64_t)((x >> 40) % 3) : now + (int64_t)((x >> 33) % 3000);
        uint32_t rank = (uint32_t)((x >> 20) % 2);
        uint64_t seq;
        if ((x >> 52) % 2) { /* arm a timer (re-arm when it is pending) */
            int k = (int)((x >> 24) % NT);
            if (tm_ev[k] >= 0) {
                dead[tm_ev[k]] = 1;
                cancelled++;
                rearms++;
            }
            seq = evq_arm(&q, &tm[k], at, rank, 100 + (uint32_t)k, &tm[k], &e);
            tm_ev[k] = nl;
            arms++;
        } else {
            seq = evq_push(&q, at, rank, (uint32_t)i % 100, NULL, 0, &e);
        }
        CHECK(seq > 0);
        if (at > latest) latest = at;
        live[nl++] = (Event){at, rank, 0, seq, NULL, 0};
        int pops = (int)((x >> 44) % 3); /* 0, 1 or 2 pops */
        for (int p = 0; p < pops; p++) {
            Event ev;
            int rc = evq_pop(&q, &ev, &e);
            int best = -1;
            for (int j = 0; j < nl; j++) {
                if (dead[j]) continue;
                const Event *a = &live[j];
                if (best < 0 || a->time_ns < live[best].time_ns ||
                    (a->time_ns == live[best].time_ns && (a->rank < live[best].rank || (a->rank == live[best].rank && a->seq < live[best].seq))))
                    best = j;
            }
            if (best < 0) {
                if (rc != 0) bad++;
                break;
            }
            if (rc != 1 || ev.seq != live[best].seq || ev.time_ns != live[best].time_ns) bad++;
            dead[best] = 1;
            if (ev.kind >= 100) {
                int k = (int)ev.kind - 100;
                if (tm_ev[k] != best || tm[k].pos != 0) bad++; /* a popped timer is no longer armed */
                tm_ev[k] = -1;
                popped_timer++;
            }
        }
    }
    /* the latest event of all is one a re-arm cancels: the clock still ends at its time */
    for (int k = 0; k < 2; k++) {
        int64_t at = k == 0 ? latest + 10000 : evq_now(&q) + 1;
        if (tm_ev[0] >= 0) {
            dead[tm_ev[0]] = 1;
            cancelled++;
        }
        uint64_t seq = evq_arm(&q, &tm[0], at, 0, 100, &tm[0], &e);
        if (at > latest) latest = at;
        tm_ev[0] = nl;
        live[nl++] = (Event){at, 0, 0, seq, NULL, 0};
    }
    Event ev;
    while (evq_pop(&q, &ev, &e) == 1) {
        int best = -1;
        for (int j = 0; j < nl; j++)
            if (!dead[j] && (best < 0 || live[j].time_ns < live[best].time_ns ||
                             (live[j].time_ns == live[best].time_ns &&
                              (live[j].rank < live[best].rank || (live[j].rank == live[best].rank && live[j].seq < live[best].seq)))))
                best = j;
        if (best < 0 || ev.seq != live[best].seq) bad++;
        if (best >= 0) dead[best] = 1;
    }
    for (int j = 0; j < nl; j++)
        if (!dead[j]) bad++; /* every live event was delivered */
    CHECK_EQ_I(bad, 0);
    CHECK_EQ_U(q.cancelled, cancelled);
    CHECK(rearms > 100 && popped_timer > 100 && arms > rearms);
    CHECK_EQ_I(evq_now(&q), latest); /* a cancelled event's time included */
    CHECK_EQ_U(q.popped + q.cancelled, (uint64_t)nl);
    evq_free(&q);
}
