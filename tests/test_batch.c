/* test_batch.c — the batching rule (sim/engine/batch.c) on hand-made requests: decode first, the
 * token and restoration budgets, low priority after new input, a history ending in the iteration
 * letting its new input follow, unchunked prefills, layer-wise waits, re-prefills. */
#include <stdint.h>

#include "sim/engine/batch.h"
#include "tests/harness.h"

/* item j is row `req`'s `kind` of `tokens` at `ctx` */
#define CHECK_ITEM(it, j, req_, kind_, tokens_, ctx_)                                                               \
    CHECK_MSG((it)[j].req == (req_) && (it)[j].kind == (kind_) && (it)[j].tokens == (tokens_) && (it)[j].ctx == (ctx_), \
              "item %d: row %d kind %d tokens %lld ctx %lld", j, (it)[j].req, (it)[j].kind, (long long)(it)[j].tokens,   \
              (long long)(it)[j].ctx)

TEST(batch_restore_budget_is_the_share_of_the_token_budget)
{
    CHECK(batch_restore_budget(64, 1) == INT64_MAX);
    CHECK_EQ_I(batch_restore_budget(64, 0.5), 32);
    CHECK_EQ_I(batch_restore_budget(512, 0.1), 51);
}

/* three decoding requests and one prefilling between them: the decode tokens first (admission
 * order), the prefill gets what is left of the budget */
TEST(batch_decode_first_then_new_input)
{
    BatchReq rq[4] = {
        {.decode = 1, .decode_ctx = 100},
        {.new_left = 40, .new_ctx = 7},
        {.decode = 1, .decode_ctx = 200},
        {.decode = 1, .decode_ctx = 300},
    };
    BatchItem it[8];
    int n = batch_form(rq, 4, 10, INT64_MAX, it);
    CHECK_EQ_I(n, 4);
    CHECK_ITEM(it, 0, 0, IT_DECODE, 1, 100);
    CHECK_ITEM(it, 1, 2, IT_DECODE, 1, 200);
    CHECK_ITEM(it, 2, 3, IT_DECODE, 1, 300);
    CHECK_ITEM(it, 3, 1, IT_NEW, 7, 7);
    /* more decoding requests than the budget: all of them decode, nothing else joins */
    n = batch_form(rq, 4, 2, INT64_MAX, it);
    CHECK_EQ_I(n, 3);
}

/* a token-wise restoration's chunk is capped by the restoration budget, its chunk size and the
 * tokens between its pointers; a chunk in flight blocks the next */
TEST(batch_token_wise_chunk_under_the_budgets)
{
    BatchReq rq[2] = {{.tw = 1, .tw_avail = 100, .tw_comp = 30}, {.new_left = 80, .new_ctx = 500}};
    BatchItem it[4];
    int n = batch_form(rq, 2, 64, batch_restore_budget(64, 0.25), it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 16, 30);
    CHECK_ITEM(it, 1, 1, IT_NEW, 48, 500);
    rq[0].tw_chunk = 8;
    n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 8, 30);
    CHECK_ITEM(it, 1, 1, IT_NEW, 56, 500);
    rq[0].tw_chunk = 0;
    rq[0].tw_avail = 5;
    n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 5, 30);
    rq[0].tw_busy = 1;
    n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 1);
    CHECK_ITEM(it, 0, 1, IT_NEW, 64, 500);
}

/* Cake's priorities: a low-priority restoration's compute comes after every new input, even an
 * earlier-admitted one's */
TEST(batch_low_priority_after_new_input)
{
    BatchReq rq[2] = {{.low_prio = 1, .tw = 1, .tw_avail = 50}, {.new_left = 30, .new_ctx = 9}};
    BatchItem it[4];
    int n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 1, IT_NEW, 30, 9);
    CHECK_ITEM(it, 1, 0, IT_RECOMP, 34, 0);
    rq[0].low_prio = 0; /* ordinary priority: admission order */
    n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 50, 0);
    CHECK_ITEM(it, 1, 1, IT_NEW, 14, 9);
}

/* a recomputed history whose last chunk is in this iteration lets its new input follow in the same
 * one; not when a chunk is left, nor with layer-wise work (the walk waits for it) */
TEST(batch_history_end_then_new_input)
{
    BatchReq rq[1] = {{.recompute_left = 20, .recompute_done = 100, .new_left = 10, .new_ctx = 120}};
    BatchItem it[2];
    int n = batch_form(rq, 1, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 20, 100);
    CHECK_ITEM(it, 1, 0, IT_NEW, 10, 120);
    rq[0].recompute_chunk = 16; /* a chunk of it left: the new input waits */
    n = batch_form(rq, 1, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 1);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 16, 100);
    rq[0].recompute_chunk = 0;
    rq[0].lw_tokens = 50;
    n = batch_form(rq, 1, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 1);
    rq[0].lw_tokens = 0;
    n = batch_form(rq, 1, 20, INT64_MAX, it); /* the history takes the whole budget */
    CHECK_EQ_I(n, 1);
    n = batch_form(rq, 1, 64, 8, it); /* the restoration budget cuts the chunk */
    CHECK_EQ_I(n, 1);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 8, 100);
}

/* the policy's unchunked prefill: the whole history as one item past the budget, then the whole new
 * input with it */
TEST(batch_unchunked_prefill)
{
    BatchReq rq[1] = {{.recompute_left = 500, .recompute_chunk = -1, .new_left = 90, .new_ctx = 500, .new_unchunked = 1}};
    BatchItem it[2];
    int n = batch_form(rq, 1, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 0, IT_RECOMP, 500, 0);
    CHECK_ITEM(it, 1, 0, IT_NEW, 90, 500);
}

/* a layer-wise restoration's first new-input chunk waits for its early layers; it carries the
 * layer-wise work (lw) once it joins */
TEST(batch_layer_wise_new_input)
{
    BatchReq rq[2] = {{.lw_pending = 1, .lw_wait = 1, .new_left = 32, .new_ctx = 256}, {.new_left = 8, .new_ctx = 0}};
    BatchItem it[4];
    int n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 1);
    CHECK_ITEM(it, 0, 1, IT_NEW, 8, 0);
    rq[0].lw_wait = 0;
    n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 0, IT_NEW, 32, 256);
    CHECK(it[0].lw == 1 && it[1].lw == 0);
}

/* a preempted request re-prefills its context before anything of its own, in pass 0 only */
TEST(batch_resume_chunk)
{
    BatchReq rq[2] = {{.low_prio = 1, .resume_left = 100, .resume_done = 40, .new_left = 5}, {.decode = 1, .decode_ctx = 3}};
    BatchItem it[4];
    int n = batch_form(rq, 2, 64, INT64_MAX, it);
    CHECK_EQ_I(n, 2);
    CHECK_ITEM(it, 0, 1, IT_DECODE, 1, 3);
    CHECK_ITEM(it, 1, 0, IT_RESUME, 63, 40);
}
