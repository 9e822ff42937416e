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

int fidelity_profile(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, FidelityRow *rows, KvErr *e)
{
    const ModelSpec *model = NULL;
    const GpuSpec *gpu = NULL;
    KvDtype dt;
    if (profile_resolve(m, mc, hw, &model, &gpu, &dt, e) != 0) return -1;
    ModelLayout ly = {model, dt, m->tp, 1};
    if (model_layout_check(&ly, e) != 0) return -1;
    SpecInputs in;
    memset(&in, 0, sizeof in);
    in.ly = &ly;
    in.gpu = gpu;
    in.stack = spec_stack_resolve(gpu, SPEC_STACK_AUTO);
    ProfilePoints pp = {0};
    for (int i = 0; i < m->n_files; i++) {
        size_t len;
        char *text = kv_read_file(m->files[i], &len, e);
        if (!text) return profile_points_free(&pp), kv_err_prefix(e, "%s: files[%d]: ", m->origin, i);
        int rc = profile_read_csv(m, model, text, m->files[i], &pp, e);
        free(text);
        if (rc) return profile_points_free(&pp), -1;
    }
    double *abs_err = malloc((pp.n ? pp.n : 1) * sizeof *abs_err), *sgn = malloc((pp.n ? pp.n : 1) * sizeof *sgn);
    if (!abs_err || !sgn) {
        free(abs_err);
        free(sgn);
        profile_points_free(&pp);
        return kv_err(e, "out of memory");
    }
    for (int f = 0; f < FID_FAMILIES; f++) {
        FidelityRow *r = &rows[f];
        memset(r, 0, sizeof *r);
        snprintf(r->device, sizeof r->device, "%s", m->device);
        snprintf(r->model, sizeof r->model, "%s", m->model);
        snprintf(r->dtype, sizeof r->dtype, "%s", m->dtype);
        snprintf(r->source, sizeof r->source, "%s", m->repo);
        r->tp = m->tp;
        r->family = f;
        size_t n = 0;
        for (size_t i = 0; i < pp.n; i++) {
            const StorePoint *p = &pp.v[i];
            if (family_of(p) != f) continue;
            /* before the grids a decode point holds the context per request in p2 */
            int64_t p2 = p->op == OP_ATTN_DECODE ? p->p1 * p->p2 : p->p2;
            double s = spec_op_ns(&in, p->op, p->p1, p2, 0) / p->median_ns - 1;
            abs_err[n] = fabs(s);
            sgn[n++] = s;
        }
        r->n = n;
        if (!n) continue;
        qsort(abs_err, n, sizeof *abs_err, cmp_d);
        qsort(sgn, n, sizeof *sgn, cmp_d);
        r->median_abs = nearest_rank(abs_err, n, 0.5);
        r->p90_abs = nearest_rank(abs_err, n, 0.9);
        r->median_signed = nearest_rank(sgn, n, 0.5);
    }
    free(abs_err);
    free(sgn);
    profile_points_free(&pp);
    return 0;
}
