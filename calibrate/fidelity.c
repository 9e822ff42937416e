/* fidelity.c — the spec roofline against public measurements; see fidelity.h. */
#include "calibrate/fidelity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cost/spec.h"

const char *fidelity_family_name(int f)
{
    static const char *const names[FID_FAMILIES] = {"gemm_small", "gemm", "elementwise", "attn_prefill", "attn_decode"};
    return f >= 0 && f < FID_FAMILIES ? names[f] : "?";
}

static int family_of(const StorePoint *p)
{
    switch (p->op) {
    case OP_GEMM_QKV:
    case OP_GEMM_O:
    case OP_GEMM_FFN_UP:
    case OP_GEMM_FFN_DOWN: return p->p1 <= FID_SMALL_M ? FID_GEMM_SMALL : FID_GEMM;
    case OP_NORM:
    case OP_ACT:
    case OP_ROPE: return FID_ELEMENTWISE;
    case OP_ATTN_PREFILL: return FID_ATTN_PREFILL;
    case OP_ATTN_DECODE: return FID_ATTN_DECODE;
    default: return -1;
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double nearest_rank(const double *sorted, size_t n, double q)
{
    size_t k = (size_t)ceil(q * (double)n);
    return sorted[k ? k - 1 : 0];
}

int fidelity_points(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, SpecStack stack, FidelityPointFn fn,
                    void *ctx, KvErr *e)
{
    const ModelSpec *model = NULL;
    const GpuSpec *gpu = NULL;
    KvDtype dt;
    if (profile_resolve(m, mc, hw, &model, &gpu, &dt, e) != 0) return -1;
    ModelLayout ly = {model, dt, m->tp, 1};
    if (model_layout_check(&ly, e) != 0) return -1;
    if (spec_stack_check(gpu, stack, e) != 0) return kv_err_prefix(e, "%s: ", m->origin);
    SpecInputs in;
    memset(&in, 0, sizeof in);
    in.ly = &ly;
    in.gpu = gpu;
    in.stack = spec_stack_resolve(gpu, stack);
    ProfilePoints pp = {0};
    for (int i = 0; i < m->n_files; i++) {
        size_t len;
        char *text = kv_read_file(m->files[i], &len, e);
        if (!text) return profile_points_free(&pp), kv_err_prefix(e, "%s: files[%d]: ", m->origin, i);
        int rc = profile_read_csv(m, model, text, m->files[i], &pp, e);
        free(text);
        if (rc) return profile_points_free(&pp), -1;
    }
    int rc = 0;
    for (size_t i = 0; i < pp.n && rc == 0; i++) {
        const StorePoint *p = &pp.v[i];
        int f = family_of(p);
        if (f < 0) continue;
        FidelityPoint q = {.op = p->op, .family = f, .p1 = p->p1, .p2 = p->p2, .measured_ns = p->median_ns, .gpu = gpu};
        q.heads = (model->heads + m->tp - 1) / m->tp;
        /* before the grids a decode point holds the context per request in p2 */
        if (p->op == OP_ATTN_DECODE) q.p2 = p->p1 * p->p2;
        q.spec_ns = spec_op_ns(&in, p->op, q.p1, q.p2, 0);
        q.flops = model_op_flops(&ly, p->op, q.p1, q.p2);
        q.bytes = model_op_bytes(&ly, p->op, q.p1, q.p2);
        int64_t M = q.p1, N, K;
        if (f == FID_GEMM_SMALL || f == FID_GEMM) {
            if (!model_gemm_shape(&ly, p->op, q.p1, &M, &N, &K)) M = q.p1;
            q.gemm_shape = spec_gemm_shape(M);
        }
        rc = fn(ctx, &q, e);
    }
    profile_points_free(&pp);
    return rc;
}

typedef struct {
    double *abs_err[FID_FAMILIES], *sgn[FID_FAMILIES];
    size_t n[FID_FAMILIES], cap[FID_FAMILIES];
} Errs;

static int collect_err(void *ctx, const FidelityPoint *p, KvErr *e)
{
    Errs *c = ctx;
    int f = p->family;
    if (c->n[f] == c->cap[f]) {
        size_t nc = c->cap[f] ? 2 * c->cap[f] : 256;
        double *a = realloc(c->abs_err[f], nc * sizeof *a);
        if (a) c->abs_err[f] = a;
        double *s = a ? realloc(c->sgn[f], nc * sizeof *s) : NULL;
        if (!s) return kv_err(e, "out of memory");
        c->sgn[f] = s;
        c->cap[f] = nc;
    }
    double s = p->spec_ns / p->measured_ns - 1;
    c->abs_err[p->family][c->n[p->family]] = fabs(s);
    c->sgn[p->family][c->n[p->family]++] = s;
    return 0;
}

int fidelity_profile(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, SpecStack stack, FidelityRow *rows,
                     KvErr *e)
{
    Errs c;
    memset(&c, 0, sizeof c);
    int rc = fidelity_points(m, mc, hw, stack, collect_err, &c, e);
    for (int f = 0; f < FID_FAMILIES && rc == 0; f++) {
        FidelityRow *r = &rows[f];
        memset(r, 0, sizeof *r);
        snprintf(r->device, sizeof r->device, "%s", m->device);
        snprintf(r->model, sizeof r->model, "%s", m->model);
        snprintf(r->dtype, sizeof r->dtype, "%s", m->dtype);
        snprintf(r->source, sizeof r->source, "%s", m->repo);
        r->tp = m->tp;
        r->family = f;
        r->stack = stack;
        size_t n = c.n[f];
        r->n = n;
        if (!n) continue;
        qsort(c.abs_err[f], n, sizeof(double), cmp_d);
        qsort(c.sgn[f], n, sizeof(double), cmp_d);
        r->median_abs = nearest_rank(c.abs_err[f], n, 0.5);
        r->p90_abs = nearest_rank(c.abs_err[f], n, 0.9);
        r->median_signed = nearest_rank(c.sgn[f], n, 0.5);
    }
    for (int f = 0; f < FID_FAMILIES; f++) {
        free(c.abs_err[f]);
        free(c.sgn[f]);
    }
    return rc;
}
