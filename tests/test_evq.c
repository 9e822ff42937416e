/* test_evq.c — event order (time, rank, seq), ties, invariants, heap under random load. */
#include <stdlib.h>

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
