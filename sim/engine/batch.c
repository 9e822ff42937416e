/* batch.c — the batching rule (batch.h).
 *
 * Complexity: O(n) per iteration (two passes over the requests when one is low-priority).
 */
#include <stdint.h>

#include "sim/engine/batch.h"

int64_t batch_restore_budget(int64_t token_budget, double restore_share)
{
    return restore_share >= 1 ? INT64_MAX : (int64_t)(restore_share * (double)token_budget);
}

int batch_form(const BatchReq *rq, int n, int64_t token_budget, int64_t restore_budget, BatchItem *out)
{
    int k = 0, low = 0; /* low: some request's restoration compute is low-priority (else no pass 1) */
    int64_t budget = token_budget, rbudget = restore_budget;
    for (int i = 0; i < n; i++) {
        low |= rq[i].low_prio;
        if (rq[i].decode) {
            out[k++] = (BatchItem){i, IT_DECODE, 0, 1, rq[i].decode_ctx};
            budget--;
        }
    }
    /* every request decodes: the passes add nothing (a decoding request has no re-prefill,
     * restoration compute or new input left) */
    if (k == n) return k;
    /* pass 1 takes only the restoration compute of low-priority requests; new input is pass 0's */
    for (int pass = 0; pass < (low ? 2 : 1); pass++)
        for (int i = 0; i < n && budget > 0; i++) {
            const BatchReq *r = &rq[i];
            if (r->resume_left > 0) { /* re-prefilling its context after a preemption */
                if (pass == 0) {
                    int64_t c = r->resume_left < budget ? r->resume_left : budget;
                    out[k++] = (BatchItem){i, IT_RESUME, 0, c, r->resume_done};
                    budget -= c;
                }
                continue;
            }
            int history_ends = 0; /* its history's last chunk is in this iteration: its new input may follow */
            if (pass == r->low_prio) { /* restoration compute in its pass */
                if (r->tw) {
                    if (r->tw_avail > 0 && !r->tw_busy && rbudget > 0) {
                        int64_t c = r->tw_avail < budget ? r->tw_avail : budget;
                        if (c > rbudget) c = rbudget;
                        if (r->tw_chunk > 0 && c > r->tw_chunk) c = r->tw_chunk;
                        out[k++] = (BatchItem){i, IT_RECOMP, 0, c, r->tw_comp};
                        budget -= c;
                        rbudget -= c;
                    }
                    continue;
                }
                if (r->recompute_left > 0) {
                    /* the history is prefilled again as the head of one sequence: its last chunk and
                     * the first chunk of the new input may share an iteration */
                    if (rbudget <= 0) continue;
                    int unchunked = r->recompute_chunk < 0; /* the policy's: one prefill of it all */
                    int64_t c = r->recompute_left < budget ? r->recompute_left : budget;
                    if (c > rbudget) c = rbudget;
                    if (r->recompute_chunk > 0 && c > r->recompute_chunk) c = r->recompute_chunk;
                    if (unchunked) c = r->recompute_left;
                    out[k++] = (BatchItem){i, IT_RECOMP, 0, c, r->recompute_done};
                    budget = budget > c ? budget - c : 0;
                    rbudget -= c;
                    if (c < r->recompute_left || (budget == 0 && !unchunked) || r->lw_tokens > 0 || pass == 1) continue;
                    history_ends = 1;
                }
            }
            if (!history_ends && (pass == 1 || r->tw || r->recompute_left > 0)) continue;
            if (r->new_left > 0) {
                /* stage-parallel: joins at once, each stage's lane waits for its own boundary (walk.c) */
                if (r->lw_wait) continue;
                int64_t c = r->new_left < budget ? r->new_left : budget;
                if (r->new_unchunked) c = r->new_left;
                out[k++] = (BatchItem){i, IT_NEW, r->lw_pending, c, r->new_ctx};
                budget = budget > c ? budget - c : 0;
            }
        }
    return k;
}
