/* estimate.c — the per-layer estimates the engine gives policies (PolicyEnv callbacks) and uses
 * for its own iteration costs and restoration lower bounds.
 *
 * Responsible for: a layer's compute time from the cost model through the one composition in
 * sim/cost/layer_cost (est_linear_ns: the token-proportional part; est_layer_ns: + prefill
 * attention), and a layer's load time from a tier (est_load_layer_ns: the slower of H2D and the
 * tier's own channel, each at its streaming rate plus latency, from the tier table's in_hop;
 * est_load_hops_ns: the same two hops apart, the SSD hop striped as the channel stripes it).
 * Not responsible for: per-item extras of restoration (iteration.c adds projections, dequantize,
 * all-gathers), queueing (an estimate assumes idle channels).
 * Invariants: pure functions of the run's settings and the cost model (only its lookup counters
 * change). Complexity: O(1) lookups per call.
 */
#include <math.h>

#include "sim/engine/engine_int.h"

double est_linear_ns(Sim *sm, int64_t M) { return ctab_linear_ns(sm, M); }

/* layer_cost_prefill_ns's sum (linear + attn_prefill), its linear part from the run's table */
double est_layer_ns(void *core, int64_t new_tokens, int64_t ctx_tokens)
{
    Sim *sm = core;
    if (new_tokens < 1) new_tokens = 1;
    double lin = ctab_linear_ns(sm, new_tokens);
    double attn = ctab_attn_prefill_ns(sm, new_tokens, ctx_tokens);
    return lin + attn;
}

void est_load_hops_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu, int64_t chunk_tokens,
                      double *hop_ns, double *h2d_ns)
{
    Sim *sm = core;
    *h2d_ns = (double)tokens * bpt_layer_gpu / sm->rate_h2d + (double)sm->lat_link;
    *hop_ns = 0;
    int in = tier_table[tier].in_hop;
    if (in < 0 || sm->hop_rate[in] <= 0) return;
    double bytes = (double)tokens * bpt_layer, rate = sm->hop_rate[in];
    if (in == CH_SSD && sm->n_ssd > 0) { /* channel.c's striping: fewer pieces than drives keep some idle */
        const Channel *c = &sm->rep[0].ch[CH_SSD][0];
        double stripe = chunk_tokens > 0 ? (double)chunk_tokens * bpt_layer : c->stripe_bytes;
        double pieces = stripe > 0 ? ceil(bytes / stripe) : (double)sm->n_ssd;
        if (pieces < sm->n_ssd) rate = rate * pieces / sm->n_ssd;
    }
    *hop_ns = bytes / rate + (double)sm->hop_lat[in];
}

double est_load_layer_ns(void *core, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu)
{
    Sim *sm = core;
    double h2d = (double)tokens * bpt_layer_gpu / sm->rate_h2d + (double)sm->lat_link;
    double hop = 0;
    int in = tier_table[tier].in_hop;
    if (in >= 0 && sm->hop_rate[in] > 0) hop = (double)tokens * bpt_layer / sm->hop_rate[in] + (double)sm->hop_lat[in];
    return h2d > hop ? h2d : hop;
}
