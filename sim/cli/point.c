/* point.c — one experiment's settings, runs and metrics; see point.h for the contract.
 *
 * How: settings go through sim_config_set exactly as --set does (so a point accepts what the
 * command line accepts, knobs included); the runs share one SimWorld as `kvsim compare` does; the
 * metrics are the metric table's sweep rows (results/metric.h), in its order. The text form escapes nothing: tabs and line breaks inside a
 * message are replaced by spaces, metric names and policy names contain neither.
 * Complexity: O(policies × simulation) per point; parsing a result O(text).
 */
#include "sim/cli/point.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "results/metric.h"
#include "sim/base/units.h"
#include "sim/cost/spec.h"

void point_result_free(PointResult *r)
{
    free(r->m);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- settings */

static int value_text(const cJSON *it, char *val, size_t n)
{
    if (cJSON_IsString(it)) snprintf(val, n, "%s", it->valuestring);
    else if (cJSON_IsBool(it)) snprintf(val, n, "%s", cJSON_IsTrue(it) ? "true" : "false");
    else if (cJSON_IsNumber(it)) { /* the shortest form that reads back exactly */
        snprintf(val, n, "%.15g", it->valuedouble);
        if (strtod(val, NULL) != it->valuedouble) snprintf(val, n, "%.17g", it->valuedouble);
    } else return -1;
    return 0;
}

static int apply_scenario(SimConfig *c, const char *name, char *policies, size_t plen, KvErr *e)
{
    char rel[600], origin[700];
    snprintf(rel, sizeof rel, "configs/scenarios/%s.json", name);
    char *text = kv_catalog_text(rel, strchr(name, '/') ? name : NULL, origin, sizeof origin, e);
    if (!text) return kv_err(e, "unknown scenario '%s' (kvsim list scenarios)", name);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return kv_err(e, "%s: expected a JSON object of settings", origin);
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "scenario")) {
        cJSON_Delete(root);
        return kv_err(e, "%s: a scenario may not name another scenario", origin);
    }
    int rc = point_apply(c, root, origin, policies, plen, e);
    cJSON_Delete(root);
    return rc;
}

int point_apply(SimConfig *c, const cJSON *obj, const char *origin, char *policies, size_t plen, KvErr *e)
{
    if (!cJSON_IsObject(obj)) return kv_err(e, "%s: expected a JSON object of settings", origin);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(obj, "scenario");
    if (sc) {
        if (!cJSON_IsString(sc)) return kv_err(e, "%s: \"scenario\": expected a scenario name", origin);
        if (apply_scenario(c, sc->valuestring, policies, plen, e) != 0) return kv_err_prefix(e, "%s: \"scenario\": ", origin);
    }
    SimJsonOut out = {policies, plen, NULL, 0, NULL, 0};
    return sim_config_apply_json(c, obj, origin, &out, e);
}

/* Every name of a comma-separated list is a policy; "all" becomes every registered policy. */
static int expand_policies(char *policies, size_t plen, KvErr *e)
{
    if (!policies[0]) snprintf(policies, plen, "recompute,kv-offload");
    if (!strcmp(policies, "all")) {
        size_t len = 0;
        policies[0] = '\0';
        for (int i = 0; i < policy_count() && len + 40 < plen; i++)
            len += (size_t)snprintf(policies + len, plen - len, "%s%s", i ? "," : "", policy_at(i)->name);
    }
    int n = 0;
    for (const char *tok = policies; *tok;) {
        size_t len = strcspn(tok, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, tok);
        if (!policy_find(name, e)) return kv_err_prefix(e, "policies: ");
        if (++n > 16) return kv_err(e, "policies: at most 16 per point");
        tok += len;
        if (*tok == ',') tok++;
    }
    return 0;
}

int point_config(SimConfig *c, const cJSON *params, const char *origin, char *policies, size_t plen, KvErr *e)
{
    sim_config_defaults(c);
    c->quiet = 1;
    policies[0] = '\0';
    if (point_apply(c, params, origin, policies, plen, e) != 0 || expand_policies(policies, plen, e) != 0) return -1;
    if (sim_config_check(c, e) != 0) return kv_err_prefix(e, "%s: ", origin);
    return 0;
}

/* ---------------------------------------------------------------- metrics */

/* the point metrics: the metric table's METRIC_SWEEP rows, in its order */
const char *point_metric_name(int i)
{
    for (int k = 0; metric_at(k); k++)
        if ((metric_at(k)->outputs & METRIC_SWEEP) && i-- == 0) return metric_at(k)->name;
    return NULL;
}

static int add_metric(PointResult *r, const char *policy, const char *name, double value, KvErr *e)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        PointMetric *m = realloc(r->m, (size_t)cap * sizeof *m);
        if (!m) return kv_err(e, "out of memory");
        r->m = m;
        r->cap = cap;
    }
    PointMetric *m = &r->m[r->n++];
    snprintf(m->policy, sizeof m->policy, "%s", policy);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->value = value;
    return 0;
}

int point_add_metrics(PointResult *r, const SimResult *res, KvErr *e)
{
    for (int k = 0; metric_at(k); k++) {
        const Metric *m = metric_at(k);
        if ((m->outputs & METRIC_SWEEP) && add_metric(r, res->policy, m->name, metric_value(m, res), e) != 0) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- runs */

int point_spec_warning(const SimWorld *w, char *buf, size_t n)
{
    if (w->cfg->costs[0] && strcmp(w->cfg->costs, "spec") != 0) return 0;
    const GpuSpec *g = &w->hw.gpus[w->platform->gpu];
    if (spec_stack_is_fitted(w->cfg->stack) && spec_fit_row_for(g, w->cfg->stack)) return 0; /* a row fitted to its kernels */
    const SpecGpuRow *row = spec_gpu_row_for(g);
    if (!row || row->match[0]) return 0;
    snprintf(buf, n,
             "GPU %s has no efficiency row of its own in the spec cost model (sim/cost/spec.c); it gets the default row "
             "(matmul %.0f%%, attention %.0f%% of peak): treat its compute times as rough",
             g->name, 100 * row->mamf, 100 * row->attn_fa2);
    return 1;
}

static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\t' || *s == '\r') *s = ' ';
}

int point_run(const SimConfig *c, const char *policies, PointResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    SimWorld w;
    if (sim_world_open(&w, c, e) != 0) {
        snprintf(r->error, sizeof r->error, "%s", e->msg);
        one_line(r->error);
        return -1;
    }
    point_spec_warning(&w, r->warning, sizeof r->warning);
    int rc = 0;
    for (const char *tok = policies; *tok && rc == 0;) {
        size_t len = strcspn(tok, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, tok);
        SimResult res;
        memset(&res, 0, sizeof res);
        if (sim_run(&w, name, NULL, NULL, NULL, NULL, &res, e) != 0) {
            kv_err_prefix(e, "%s: ", name);
            rc = -1;
        } else if (point_add_metrics(r, &res, e) != 0) {
            rc = -1;
        }
        sim_result_free(&res);
        tok += len;
        if (*tok == ',') tok++;
    }
    sim_world_close(&w);
    if (rc != 0) {
        free(r->m);
        r->m = NULL;
        r->n = r->cap = 0;
        snprintf(r->error, sizeof r->error, "%s", e->msg);
        one_line(r->error);
    }
    one_line(r->warning);
    return rc;
}

/* ---------------------------------------------------------------- text form */

char *point_result_text(const PointResult *r, size_t *len)
{
    size_t cap = 256 + strlen(r->warning) + strlen(r->error) + (size_t)r->n * 140;
    char *t = malloc(cap);
    if (!t) return NULL;
    size_t n = 0;
    if (r->warning[0]) n += (size_t)snprintf(t + n, cap - n, "W\t%s\n", r->warning);
    if (r->error[0]) n += (size_t)snprintf(t + n, cap - n, "E\t%s\n", r->error);
    for (int i = 0; i < r->n; i++)
        n += (size_t)snprintf(t + n, cap - n, "M\t%s\t%s\t%.17g\n", r->m[i].policy, r->m[i].name, r->m[i].value);
    n += (size_t)snprintf(t + n, cap - n, "END\n");
    if (len) *len = n;
    return t;
}

int point_result_parse(PointResult *r, const char *text, size_t len, KvErr *e)
{
    memset(r, 0, sizeof *r);
    int ended = 0;
    for (size_t at = 0; at < len && !ended;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', len - at);
        if (!nl) break;
        size_t ll = (size_t)(nl - line);
        at += ll + 1;
        char buf[2048];
        if (ll >= sizeof buf) goto bad;
        memcpy(buf, line, ll);
        buf[ll] = '\0';
        if (!strcmp(buf, "END")) {
            ended = 1;
        } else if (!strncmp(buf, "W\t", 2)) {
            snprintf(r->warning, sizeof r->warning, "%s", buf + 2);
        } else if (!strncmp(buf, "E\t", 2)) {
            snprintf(r->error, sizeof r->error, "%s", buf + 2);
        } else if (!strncmp(buf, "M\t", 2)) {
            char *pol = buf + 2, *name = strchr(pol, '\t'), *val = name ? strchr(name + 1, '\t') : NULL;
            if (!val) goto bad;
            *name++ = '\0';
            *val++ = '\0';
            char *end;
            double v = strtod(val, &end);
            if (*end || end == val || add_metric(r, pol, name, v, e) != 0) goto bad;
        } else {
            goto bad;
        }
    }
    if (!ended) {
        point_result_free(r);
        return kv_err(e, "a point's result ends early (no END line: the worker died while writing it)");
    }
    return 0;
bad:
    point_result_free(r);
    return kv_err(e, "a point's result is malformed");
}

/* ---------------------------------------------------------------- dry run */

int point_dry_run(FILE *out, const SimWorld *w, const char *policies)
{
    const SimConfig *c = w->cfg;
    const HwCatalog *hw = &w->hw;
    const PlatformSpec *p = w->platform;
    const GpuSpec *g = &hw->gpus[p->gpu];
    const LinkSpec *l = &hw->links[p->link];
    char a[48], b[48], d[48];
    SimCapacity cap;
    sim_world_capacity(w, &cap);
    fprintf(out, "dry run: %s (%s, tp %d, pp %d, %d replica%s) on platform %s; nothing simulated\n", w->model->name, c->dtype,
            c->tp, c->pp, c->replicas, c->replicas == 1 ? "" : "s", p->name);
    kv_fmt_size(a, sizeof a, (double)g->mem_bytes);
    kv_fmt_rate(b, sizeof b, g->mem_bw_bytes_per_s);
    kv_fmt_flops(d, sizeof d, g->fp16_flops);
    fprintf(out, "  gpu          %s (%s): %s HBM at %s, %s fp16; %d per node\n", g->name, g->full_name, a, b, d,
            p->gpus_per_node);
    kv_fmt_rate(a, sizeof a, l->h2d_bytes_per_s);
    kv_fmt_rate(b, sizeof b, l->d2h_bytes_per_s);
    fprintf(out, "  host link    %s: h2d %s, d2h %s\n", l->name, a, b);
    if (c->n_ssd > 0) {
        const SsdSpec *s = &hw->ssds[p->ssd >= 0 ? p->ssd : 0];
        kv_fmt_rate(a, sizeof a, s->read_bytes_per_s * c->n_ssd);
        kv_fmt_size(b, sizeof b, (double)s->capacity_bytes * c->n_ssd);
        fprintf(out, "  ssd          %d × %s: read %s, %s in all\n", c->n_ssd, s->name, a, b);
    } else {
        fprintf(out, "  ssd          none\n");
    }
    for (int m = 0; m < KV_MEMDEVS; m++) {
        if (c->n_memdev[m] <= 0) continue;
        const MemdevSpec *x = &hw->memdevs[m][p->memdev[m] >= 0 ? p->memdev[m] : 0];
        kv_fmt_rate(a, sizeof a, x->read_bytes_per_s * c->n_memdev[m]);
        kv_fmt_size(b, sizeof b, (double)x->capacity_bytes * c->n_memdev[m]);
        fprintf(out, "  %-12s %d × %s: read %s, %s in all\n", kv_memdev_row(m)->key, c->n_memdev[m], x->name, a, b);
    }
    if (w->nic) {
        kv_fmt_rate(a, sizeof a, w->nic->bytes_per_s);
        fprintf(out, "  nic          %s: %s effective\n", w->nic->name, a);
    } else {
        fprintf(out, "  nic          none\n");
    }
    kv_fmt_size(a, sizeof a, (double)c->dram_bytes);
    fprintf(out, "  dram         %s for saved state\n", a);
    /* where saved state goes: store=auto picks the SSDs, else the remote store over the NIC, else DRAM */
    const char *store = sim_store_name(c->store);
    if (sim_store_has(c->store, TIER_REMOTE))
        fprintf(out, "  store        %s: the remote store over %s%s\n", store, w->nic ? w->nic->name : "?",
                c->n_ssd == 0 && p->ssd >= 0 ? " (n_ssd=0: no SSD, so the remote store takes its place)" : "");
    else fprintf(out, "  store        %s\n", store);
    kv_fmt_size(a, sizeof a, (double)cap.weight_bytes_per_gpu);
    fprintf(out, "  weights      %s per GPU (%llu bytes)\n", a, (unsigned long long)cap.weight_bytes_per_gpu);
    fprintf(out, "  kv           %.0f bytes per token per GPU (the stage with the most layers)\n", cap.kv_bytes_per_token_gpu);
    kv_fmt_size(a, sizeof a, (double)cap.hbm_bytes);
    kv_fmt_size(b, sizeof b, cap.usable_bytes > 0 ? cap.usable_bytes : 0);
    fprintf(out, "  kv pool      %lld tokens per replica (HBM %s × mem_util %.2f − weights = %s)\n", (long long)cap.pool_tokens,
            a, c->mem_util, b);
    fprintf(out, "  fits         %s\n", cap.fits ? "yes" : "no: the weights leave less than 1024 tokens of KV");
    fprintf(out, "  cost model   %s\n", w->cost_source);
    fprintf(out, "  policies     %s\n", policies);
    fprintf(out, "settings (resolved):\n");
    cJSON *o = sim_config_json(c);
    for (const cJSON *it = o ? o->child : NULL; it; it = it->next) {
        char v[4200];
        if (value_text(it, v, sizeof v) != 0) snprintf(v, sizeof v, "?");
        fprintf(out, "  %s = %s\n", it->string, v);
    }
    cJSON_Delete(o);
    return cap.fits;
}

/* one storage part of kvsim list (an SSD, a memory device's module): rates, latency, capacity, its name */
static void part_line(FILE *out, const char *name, double read, double write, int64_t latency_ns, uint64_t capacity,
                      const char *full_name, const char *source)
{
    char a[48], b[48], c[48], d[48];
    kv_fmt_rate(a, sizeof a, read);
    kv_fmt_rate(b, sizeof b, write);
    kv_fmt_duration(c, sizeof c, (double)latency_ns);
    kv_fmt_size(d, sizeof d, (double)capacity);
    fprintf(out, "%-12s read %-12s write %-12s latency %-8s %-10s  %s\n", name, a, b, c, d, full_name[0] ? full_name : source);
}

int point_memdev_key(const char *what)
{
    for (int m = 0; m < KV_MEMDEVS; m++)
        if (!strcmp(what, kv_memdev_row(m)->key)) return m;
    return -1;
}

void point_list_parts(FILE *out, const HwCatalog *hw, const char *what)
{
    char a[48], b[48], c[48], d[48];
    if (!strcmp(what, "ssds")) {
        for (int i = 0; i < hw->n_ssds; i++) {
            const SsdSpec *s = &hw->ssds[i];
            part_line(out, s->name, s->read_bytes_per_s, s->write_bytes_per_s, s->read_latency_ns, s->capacity_bytes, s->full_name,
                      s->source);
        }
    } else if (point_memdev_key(what) >= 0) {
        const int m = point_memdev_key(what);
        for (int i = 0; i < hw->n_memdevs[m]; i++) {
            const MemdevSpec *x = &hw->memdevs[m][i];
            part_line(out, x->name, x->read_bytes_per_s, x->write_bytes_per_s, x->latency_ns, x->capacity_bytes, x->full_name, x->source);
        }
    } else if (!strcmp(what, "nics")) {
        for (int i = 0; i < hw->n_nics; i++) {
            const NicSpec *n = &hw->nics[i];
            kv_fmt_rate(a, sizeof a, n->line_bytes_per_s);
            kv_fmt_rate(b, sizeof b, n->bytes_per_s);
            kv_fmt_duration(c, sizeof c, (double)n->latency_ns);
            fprintf(out, "%-10s line %-12s effective %-12s latency %s\n", n->name, a, b, c);
        }
    } else if (!strcmp(what, "links")) {
        for (int i = 0; i < hw->n_links; i++) {
            const LinkSpec *l = &hw->links[i];
            kv_fmt_rate(a, sizeof a, l->h2d_bytes_per_s);
            kv_fmt_rate(b, sizeof b, l->d2h_bytes_per_s);
            kv_fmt_rate(c, sizeof c, l->theoretical_bytes_per_s);
            kv_fmt_duration(d, sizeof d, (double)l->latency_ns);
            fprintf(out, "%-8s h2d %-12s d2h %-12s (theoretical %s) latency %s\n", l->name, a, b, c, d);
        }
    }
}
