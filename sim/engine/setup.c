/* setup.c — building a run from the catalogs, and taking it down.
 *
 * Responsible for: sim_world_open/close (the catalogs, the model and platform entries, the cost
 * model: the in-memory spec one or a store's, which must have the per-layer compute ops),
 * sim_result_free, and per run sim_setup (pipeline stages and their layers, state sizes per token,
 * the engine profile's overhead, link rates — measured curves win over the catalog — the channels
 * of each replica, the tier table's run rows: which tiers are on (store=), their capacities and
 * spill targets, the KV pool from HBM × mem_util − weights) and sim_teardown (every request, unit,
 * session and event left, on success and on failure).
 * Not responsible for: validating the configuration (config.c), the run itself (engine.c).
 * Invariants: after a failed sim_setup, sim_teardown still frees everything allocated so far.
 * Complexity: O(replicas × (stages + L)) setup; teardown O(everything left).
 */
#include <stdlib.h>
#include <string.h>

#include "sim/cost/spec.h"
#include "sim/engine/engine_int.h"
#include "sim/engine/metrics.h"

int sim_world_open(SimWorld *w, const SimConfig *cfg, KvErr *e)
{
    memset(w, 0, sizeof *w);
    /* the tables first, then the settings: all before any catalog, trace or cost store is opened */
    if (policy_registry_check_builtin(e) != 0 || sim_config_table_check(e) != 0 || sim_config_check(cfg, e) != 0) return -1;
    w->cfg = &w->resolved;
    if (sim_catalogs_open(cfg, &w->models, &w->hw, e) != 0) return -1;
    if (!(w->model = model_find(&w->models, cfg->model, e))) goto fail;
    if (!(w->platform = hw_find_platform(&w->hw, cfg->platform, e))) goto fail;
    if (sim_config_apply_parts(cfg, &w->hw, w->platform, e) != 0) goto fail;
    if (sim_config_resolve(&w->resolved, cfg, &w->hw, w->platform, w->model, &w->nic, e) != 0) goto fail;
    Tier chain[SIM_STORE_MAX_TIERS];
    int n_chain = sim_store_chain(w->resolved.store, chain);
    w->save_tier = n_chain > 1 && chain[0] == TIER_DRAM ? chain[1] : chain[0]; /* (resolved: n_chain >= 1) */
    cfg = w->cfg;
    KvDtype dt;
    if (kv_dtype_parse(cfg->dtype, &dt, e) != 0) goto fail;
    w->ly = (ModelLayout){w->model, dt, cfg->tp, cfg->pp};
    if (model_layout_check(&w->ly, e) != 0) goto fail;
    if (cfg->pp > SIM_MAX_STAGES) {
        kv_err(e, "pp %d: at most %d stages", cfg->pp, SIM_MAX_STAGES);
        goto fail;
    }
    if (w->model->layers > SIM_MAX_LAYERS) {
        kv_err(e, "%s: %d layers, the simulator supports %d", w->model->name, w->model->layers, SIM_MAX_LAYERS);
        goto fail;
    }
    if (!cfg->costs[0] || strcmp(cfg->costs, "spec") == 0) {
        SpecInputs in;
        spec_inputs_from_platform(&in, &w->hw, w->platform, &w->ly);
        in.stack = cfg->stack;
        if (spec_cost_model(&w->cost, &in, e) != 0) goto fail;
    } else {
        const char *dev = cfg->cost_device[0] ? cfg->cost_device : w->hw.gpus[w->platform->gpu].name;
        if (cost_model_load_db(&w->cost, cfg->costs, dev, w->model->name, kv_dtype_name(dt), cfg->tp, e) != 0) goto fail;
        static const CostOp need[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN, OP_ATTN_PREFILL, OP_ATTN_DECODE};
        for (size_t i = 0; i < KV_ARRAY_LEN(need); i++)
            if (!cost_has(&w->cost, need[i])) {
                kv_err(e, "%s: the cost model of %s / %s lacks op %s", cfg->costs, dev, w->model->name, cost_op_name(need[i]));
                cost_model_free(&w->cost);
                goto fail;
            }
    }
    snprintf(w->cost_source, sizeof w->cost_source, "%s", w->cost.source);
    return 0;
fail:
    sim_world_close(w);
    return -1;
}

void sim_world_close(SimWorld *w)
{
    cost_model_free(&w->cost);
    model_catalog_free(&w->models);
    hw_catalog_free(&w->hw);
}

void sim_result_free(SimResult *r)
{
    hist_free(&r->ttft);
    hist_free(&r->queue);
    hist_free(&r->restore);
    hist_free(&r->prefill);
    hist_free(&r->tbt);
    hist_free(&r->lb_ratio);
    hist_free(&r->e2e);
    for (int c = 0; c < SIM_CLASSES; c++) {
        hist_free(&r->cls[c].ttft);
        hist_free(&r->cls[c].restore);
    }
}

/* a link's streaming rate from a measured (not spec) cost curve: the slope between 64 MiB and 1 GiB,
 * which removes the per-transfer latency; the catalog's rate otherwise. Probes, not lookups of the
 * simulated work: a curve sampled to 64 MiB only is extrapolated to 1 GiB (its last segment's
 * slope) without counting as the run's extrapolation. */
static double link_rate(CostModel *cm, CostOp op, double catalog_bytes_per_s)
{
    if (!cost_has(cm, op) || !strcmp(cm->c[op].backend, "spec")) return catalog_bytes_per_s;
    double a = cost_probe_ns(cm, op, 1LL << 26, 0, 0), b = cost_probe_ns(cm, op, 1LL << 30, 0, 0);
    if (!(b > a)) return catalog_bytes_per_s;
    return (double)((1LL << 30) - (1LL << 26)) / ((b - a) / 1e9);
}

void sim_world_capacity(const SimWorld *w, SimCapacity *out)
{
    const SimConfig *cfg = w->cfg;
    const GpuSpec *gpu = &w->hw.gpus[w->platform->gpu];
    memset(out, 0, sizeof *out);
    out->hbm_bytes = gpu->mem_bytes;
    out->weight_bytes_per_gpu = model_weight_bytes_per_gpu(&w->ly);
    out->usable_bytes = (double)gpu->mem_bytes * cfg->mem_util - (double)out->weight_bytes_per_gpu;
    int max_stage_layers = 0;
    for (int s = 0; s < w->ly.pp; s++) {
        int first, count;
        model_stage_layers(&w->ly, s, &first, &count);
        if (count > max_stage_layers) max_stage_layers = count;
    }
    double per_tok = (double)model_kv_bytes_per_token_layer_gpu(&w->ly) * max_stage_layers;
    out->kv_bytes_per_token_gpu = per_tok;
    if (cfg->num_gpu_blocks > 0) { /* the pool as given, which must fit beside the weights */
        double tokens = (double)cfg->num_gpu_blocks * cfg->block_tokens;
        out->fits = out->usable_bytes >= 0 && !(out->usable_bytes < per_tok * tokens) && tokens < (double)INT64_MAX / 2;
        if (out->fits) out->pool_tokens = cfg->num_gpu_blocks * cfg->block_tokens;
        return;
    }
    out->fits = !(out->usable_bytes < per_tok * 1024);
    if (out->fits) out->pool_tokens = (int64_t)(out->usable_bytes / per_tok) / cfg->block_tokens * cfg->block_tokens;
}

int sim_setup(Sim *sm)
{
    SimWorld *w = sm->w;
    const SimConfig *cfg = sm->cfg;
    const HwCatalog *hw = &w->hw;
    const PlatformSpec *p = w->platform;
    const GpuSpec *gpu = &hw->gpus[p->gpu];
    const LinkSpec *link = &hw->links[p->link];
    sm->L = w->model->layers;
    sm->S = cfg->pp;
    sm->T = cfg->tp;
    sm->R = cfg->replicas < 1 ? 1 : cfg->replicas;
    if ((int64_t)sm->R * sm->S * sm->T > (int64_t)p->gpus_per_node * 64)
        return kv_err(sm->e, "%d replicas × %d stages × %d GPUs exceed what platform %s models (%d GPUs per node, up to 64 nodes)",
                      sm->R, sm->S, sm->T, p->name, p->gpus_per_node);
    for (int s = 0; s < sm->S; s++) {
        int first, count;
        model_stage_layers(&w->ly, s, &first, &count);
        sm->stage_layers[s] = count;
        for (int l = first; l < first + count; l++) sm->stage_of[l] = s;
    }
    sm->kv_tok_layer = (double)model_kv_bytes_per_token_layer(&w->ly);
    sm->kv_tok_layer_gpu = (double)model_kv_bytes_per_token_layer_gpu(&w->ly);
    sm->hid_tok_layer = (double)model_hidden_bytes_per_token_layer(&w->ly);
    sm->overhead_ns = cfg->iter_overhead_ns; /* resolved from the engine profile by sim_world_open */
    sm->max_ctx = cfg->max_context > 0 ? cfg->max_context : w->model->max_pos;
    /* host-link rates: measured curves of the cost model when it has them, else the catalog */
    double h2d_bps = link_rate(&w->cost, OP_H2D, link->h2d_bytes_per_s);
    double d2h_bps = link_rate(&w->cost, OP_D2H, link->d2h_bytes_per_s);
    double h2d_bi_bps = link_rate(&w->cost, OP_H2D_BIDIR, link->h2d_bidir_bytes_per_s);
    double d2h_bi_bps = link_rate(&w->cost, OP_D2H_BIDIR, link->d2h_bidir_bytes_per_s);
    sm->rate_h2d = h2d_bps / 1e9;
    sm->rate_d2h = d2h_bps / 1e9;
    sm->lat_link = link->latency_ns;
    int n_ssd = cfg->n_ssd; /* n_ssd, nic and store: resolved and checked by sim_world_open */
    const SsdSpec *ssd = p->ssd >= 0 ? &hw->ssds[p->ssd] : (hw->n_ssds ? &hw->ssds[0] : NULL);
    if (n_ssd > 0 && !ssd) return kv_err(sm->e, "n_ssd %d but the catalog has no SSD", n_ssd);
    const NicSpec *nic = w->nic;
    /* loads' second hop: per channel kind, the streaming read rate and latency */
    sm->hop_rate[CH_SSD] = n_ssd > 0 ? ssd->read_bytes_per_s * n_ssd / 1e9 : 0;
    sm->hop_lat[CH_SSD] = n_ssd > 0 ? ssd->read_latency_ns : 0;
    sm->hop_rate[CH_NIC_IN] = nic ? nic->bytes_per_s / 1e9 : 0;
    sm->hop_lat[CH_NIC_IN] = nic ? nic->latency_ns : 0;
    const MemdevSpec *md[KV_MEMDEVS]; /* each memory device's module (n_memdev of them, interleaved) */
    for (int m = 0; m < KV_MEMDEVS; m++) {
        int n = cfg->n_memdev[m];
        md[m] = p->memdev[m] >= 0 ? &hw->memdevs[m][p->memdev[m]] : (hw->n_memdevs[m] ? &hw->memdevs[m][0] : NULL);
        if (n > 0 && !md[m]) return kv_err(sm->e, "n_%s %d but the catalog has no %s", kv_memdev_row(m)->key, n, kv_memdev_row(m)->whats);
        sm->hop_rate[CH_MEMDEV(m)] = n > 0 ? md[m]->read_bytes_per_s * n / 1e9 : 0;
        sm->hop_lat[CH_MEMDEV(m)] = n > 0 ? md[m]->latency_ns : 0;
    }
    sm->rate_ssd_w = n_ssd > 0 ? ssd->write_bytes_per_s * n_ssd / 1e9 : 0;
    sm->lat_ssd_w = n_ssd > 0 ? ssd->write_latency_ns : 0;
    sm->n_ssd = n_ssd;
    sm->ssd = n_ssd > 0 ? ssd : NULL;
    /* tiers: which are on, their capacities (per place) and spill targets */
    Tier chain[SIM_STORE_MAX_TIERS];
    int n_chain = sim_store_chain(cfg->store, chain);
    if (n_chain < 1) return kv_err(sm->e, "store %s: not resolved", sim_store_name(cfg->store));
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) sm->tiers[t] = (TierRun){.spill_to = TIER_NONE};
    uint64_t remote_cap = cfg->remote_bytes ? cfg->remote_bytes : p->remote_bytes;
    sm->tiers[TIER_REMOTE].capped = remote_cap != 0; /* the platform's remote store, used or not */
    sm->tiers[TIER_REMOTE].cap_bytes = (double)remote_cap;
    for (int i = 0; i < n_chain; i++) { /* each tier's LRU victims go down the chain; the last one's are dropped */
        TierRun *tr = &sm->tiers[chain[i]];
        tr->on = 1;
        tr->spill_to = i + 1 < n_chain ? chain[i + 1] : TIER_NONE;
        if (chain[i] == TIER_DRAM) tr->capped = 1, tr->cap_bytes = (double)(cfg->dram_bytes ? cfg->dram_bytes : p->dram_bytes);
        const int m = tier_memdev(chain[i]);
        if (m >= 0) tr->capped = 1, tr->cap_bytes = (double)cfg->n_memdev[m] * (double)md[m]->capacity_bytes;
        if (chain[i] == TIER_SSD)
            tr->capped = 1, tr->cap_bytes = cfg->ssd_bytes ? (double)cfg->ssd_bytes : (double)n_ssd * (double)ssd->capacity_bytes;
    }
    if (sm->tiers[TIER_SSD].on && cfg->ssd_bytes > (double)n_ssd * (double)ssd->capacity_bytes)
        return kv_err(sm->e, "ssd_capacity %.0f GB: more than the array holds (%d × %s of %.0f GB)", (double)cfg->ssd_bytes / 1e9, n_ssd,
                      ssd->name, (double)ssd->capacity_bytes / 1e9);
    sm->save_first = chain[0];
    sm->direct_first = sm->tiers[TIER_SSD].on ? TIER_SSD : chain[0];
    /* KV pool */
    SimCapacity cap;
    sim_world_capacity(w, &cap);
    if (!cap.fits) { /* the weights themselves, or a KV pool under sim_world_capacity's 1024 tokens */
        double budget = (double)gpu->mem_bytes * cfg->mem_util;
        if (cap.usable_bytes < 0)
            return kv_err(sm->e, "%s (%s, tp %d, pp %d) does not fit on %s: weights %.1f GB per GPU, more than %.1f GB × mem_util %.2f = %.2f GB",
                          w->model->name, cfg->dtype, sm->T, sm->S, gpu->name, (double)cap.weight_bytes_per_gpu / 1e9,
                          (double)gpu->mem_bytes / 1e9, cfg->mem_util, budget / 1e9);
        if (cfg->num_gpu_blocks > 0)
            return kv_err(sm->e, "num_gpu_blocks %lld (× block_tokens %d = %.0f tokens, %.2f GB of KV per GPU) does not fit on %s beside "
                                 "%s's weights: %.1f GB × mem_util %.2f − weights %.2f GB leaves %.2f GB; lower num_gpu_blocks or raise mem_util",
                          (long long)cfg->num_gpu_blocks, cfg->block_tokens, (double)cfg->num_gpu_blocks * cfg->block_tokens,
                          cap.kv_bytes_per_token_gpu * (double)cfg->num_gpu_blocks * cfg->block_tokens / 1e9, gpu->name,
                          w->model->name, (double)gpu->mem_bytes / 1e9, cfg->mem_util, (double)cap.weight_bytes_per_gpu / 1e9,
                          cap.usable_bytes / 1e9);
        return kv_err(sm->e, "%s (%s, tp %d, pp %d) does not fit on %s: weights %.2f GB per GPU leave %.2f GB of %.1f GB × mem_util %.2f "
                             "for the KV cache, less than 1024 tokens (%.2f GB); raise mem_util or split the model over more GPUs (tp, pp)",
                      w->model->name, cfg->dtype, sm->T, sm->S, gpu->name, (double)cap.weight_bytes_per_gpu / 1e9,
                      cap.usable_bytes / 1e9, (double)gpu->mem_bytes / 1e9, cfg->mem_util, cap.kv_bytes_per_token_gpu * 1024 / 1e9);
    }
    sm->rep = calloc((size_t)sm->R, sizeof *sm->rep);
    if (!sm->rep) return kv_err(sm->e, "out of memory");
    for (int i = 0; i < sm->R; i++) {
        Replica *rp = &sm->rep[i];
        rp->id = i;
        rp->pool_cap = cap.pool_tokens;
        for (int s = 0; s < sm->S; s++) {
            Channel *h = &rp->ch[CH_H2D][s], *d = &rp->ch[CH_D2H][s];
            ch_init(h, CH_H2D, s, h2d_bps, h2d_bi_bps, link->latency_ns);
            ch_init(d, CH_D2H, s, d2h_bps, d2h_bi_bps, link->latency_ns);
            h->peer = d;
            d->peer = h;
        }
        rp->has_ch[CH_H2D] = rp->has_ch[CH_D2H] = 1;
        if (n_ssd > 0) {
            Channel *c = &rp->ch[CH_SSD][0];
            ch_init(c, CH_SSD, 0, ssd->read_bytes_per_s * n_ssd, 0, ssd->read_latency_ns);
            c->rate_write = ssd->write_bytes_per_s * n_ssd / 1e9;
            c->latency_write_ns = ssd->write_latency_ns;
            if (ssd->mixed_efficiency > 0) c->mixed_eff = ssd->mixed_efficiency; /* (not given: taking turns) */
            c->n_drives = n_ssd;
            c->stripe_bytes = p->stripe_chunk_bytes > 0 ? (double)p->stripe_chunk_bytes : 131072.0;
            rp->has_ch[CH_SSD] = 1;
        }
        for (int m = 0; m < KV_MEMDEVS; m++) { /* the host's link to a memory device: reads and writes take turns at their own rates */
            const int n = cfg->n_memdev[m], k = CH_MEMDEV(m);
            if (n <= 0) continue;
            Channel *c = &rp->ch[k][0];
            ch_init(c, k, 0, md[m]->read_bytes_per_s * n, 0, md[m]->latency_ns);
            c->rate_write = md[m]->write_bytes_per_s * n / 1e9;
            c->latency_write_ns = md[m]->latency_ns;
            rp->has_ch[k] = 1;
        }
        for (int k = 0; k < CH_COUNT; k++) rp->ch_per_stage[k] = (uint8_t)ch_kind_per_stage(k);
        if (nic) { /* one per replica, or one per stage (nic_per_stage: each stage's node has its own) */
            rp->ch_per_stage[CH_NIC_IN] = rp->ch_per_stage[CH_NIC_OUT] = cfg->nic_per_stage ? 1 : 0;
            for (int s = 0; s < (cfg->nic_per_stage ? sm->S : 1); s++) {
                ch_init(&rp->ch[CH_NIC_IN][s], CH_NIC_IN, s, nic->bytes_per_s, 0, nic->latency_ns);
                ch_init(&rp->ch[CH_NIC_OUT][s], CH_NIC_OUT, s, nic->bytes_per_s, 0, nic->latency_ns);
            }
            rp->has_ch[CH_NIC_IN] = rp->has_ch[CH_NIC_OUT] = 1;
        }
        waitq_init(sm, rp);
        rp->layer_ns = calloc((size_t)sm->L, sizeof *rp->layer_ns);
        if (!rp->layer_ns) return kv_err(sm->e, "out of memory");
    }
    sm->state_dropped = waitq_state_dropped; /* tier.c's drops reach the admission queue's spill file */
    metrics_on_setup(sm);
    sm->tab_cap = 1024;
    sm->tab = calloc(sm->tab_cap, sizeof *sm->tab);
    if (!sm->tab) return kv_err(sm->e, "out of memory");
    return 0;
}

void sim_teardown(Sim *sm)
{
    if (sm->rep) {
        for (int i = 0; i < sm->R; i++) {
            Replica *rp = &sm->rep[i];
            for (int k = 0; k < rp->n_active; k++) request_free(rp->active[k]);
            waitq_free(sm, rp);
            for (int k = 0; k < rp->pre_n; k++) request_free(rp->pre[k]);
            free(rp->pre);
            free(rp->active);
            free(rp->items);
            free(rp->lw_idx);
            free(rp->dr.gaps);
            free(rp->dr.rb_c);
            free(rp->dr.rb_next);
            free(rp->dr.rb_head);
            free(rp->layer_ns);
            prefix_free(&rp->pfx);
            for (int t = 0; t < SIM_TIERS; t++) prefix_free(&rp->tier[t].blk);
            for (int k = 0; k < CH_COUNT; k++)
                for (int s = 0; s < SIM_MAX_STAGES; s++) ch_free_units(&rp->ch[k][s]);
        }
        evq_drop_timers(&sm->q); /* the channels' timers go with them */
        free(sm->rep);
    }
    /* pending events own turns (arrivals, releases) */
    Event ev;
    KvErr e2;
    while (sm->q.n && evq_pop(&sm->q, &ev, &e2) == 1)
        if (ev.kind == EV_ARRIVAL || ev.kind == EV_RELEASE) turn_free(sm, ev.obj);
    sess_free_all(sm);
    for (int t = 0; t < SIM_TIERS; t++) prefix_free(&sm->shared[t].blk);
    pnames_free(&sm->names);
    powners_free(&sm->owners);
    lifecycle_free(sm);
    metrics_free(sm);
    while (sm->free_units) {
        Unit *nx = sm->free_units->next;
        free(sm->free_units);
        sm->free_units = nx;
    }
    evq_free(&sm->q);
    ctab_free(sm);
    free(sm->lb_layer_ns);
    sm->lb_layer_ns = NULL;
    free(sm->batch_rq);
    free(sm->batch_it);
    sm->batch_rq = NULL;
    sm->batch_it = NULL;
    sm->batch_cap = 0;
    if (sm->trace) trace_close(sm->trace);
    if (sm->pol && sm->pol->fini) sm->pol->fini(sm->pstate);
}
