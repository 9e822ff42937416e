/* batch.h — the batching rule: which work of the admitted requests joins the next iteration.
 *
 * One function, batch_form, decides it for the engine (iteration.c, from its requests) and for
 * kvcal execute --race (calibrate/execute.c, from the requests it replays), so that the validator
 * runs the rule it validates. Each caller describes its admitted requests in admission order as
 * BatchReq rows; batch_form returns the items, each naming its row.
 *
 * The rule (continuous batching under the token budget): decode tokens first (one per decoding
 * request); then, in admission order, a preempted request's re-prefill, restoration compute — a
 * token-wise request's next chunk between its two pointers, or the whole-model recompute of its
 * history as the head of one sequence — capped at the restoration budget, and new-input chunks
 * (a history that ends in this iteration lets its new input follow at once; a layer-wise
 * restoration's first chunk only once its early layers' state arrived); then low-priority
 * restoration compute (Cake: decode > ordinary prefill > restoration).
 */
#ifndef KV_BATCH_H
#define KV_BATCH_H

#include <stdint.h>

/* what an item of an iteration does */
enum { IT_DECODE, IT_RECOMP, IT_NEW, IT_RESUME };

/* an admitted request as batch_form sees it */
typedef struct BatchReq {
    int decode;                 /* decoding: one token per iteration, at context decode_ctx */
    int low_prio;               /* its restoration compute comes after every new input */
    int tw;                     /* token-wise two pointers not met yet */
    int tw_busy;                /* a compute chunk of it is in flight */
    int lw_pending;             /* its first new-input chunk carries layer-wise restoration */
    int lw_wait;                /* ... and must wait: its early layers have not arrived (not stage-parallel) */
    int new_unchunked;          /* its new input is one item (the policy's unchunked prefill) */
    int64_t decode_ctx;
    int64_t resume_left, resume_done;   /* re-prefill of its context after a preemption */
    int64_t tw_avail, tw_comp, tw_chunk; /* tokens between its pointers, the compute pointer, its chunk (0: the budgets) */
    int64_t recompute_left, recompute_done;
    int64_t recompute_chunk;    /* 0: the budgets; -1: one unchunked prefill; else at most this */
    int64_t lw_tokens;          /* history tokens restored layer-wise (its new input then waits for the walk) */
    int64_t new_left, new_ctx;  /* new-input tokens left and the context before them */
} BatchReq;

/* one item: row `req`'s work of kind IT_*, `tokens` at context `ctx` (lw: it carries layer-wise work) */
typedef struct BatchItem {
    int req, kind, lw;
    int64_t tokens, ctx;
} BatchItem;

/* the restoration budget of an iteration: restore_share of token_budget (1 or more: no cap) */
int64_t batch_restore_budget(int64_t token_budget, double restore_share);

/* The next iteration of the n requests rq (admission order): its items in out (room for 2 n: a
 * request has at most two, its history's last chunk and its first new-input chunk), their count. */
int batch_form(const BatchReq *rq, int n, int64_t token_budget, int64_t restore_budget, BatchItem *out);

#endif
