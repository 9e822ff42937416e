/* validate.c — kvcal validate: a real restoration of K layers × N tokens on this CPU (recompute,
 * KV load, hidden-state load + projection), measured, against the cpu cost model's prediction.
 * See validate.h for what is measured, what is predicted and the invariants.
 *
 * Layout of the work (fp32, row-major, ref.h conventions; tp 1):
 *   weights   w_qkv [(h + 2·h_kv)·d_h][D] (Q rows, then K rows, then V rows: the K and V rows are
 *             the kv_proj weight), w_o [D][h·d_h], w_up [gate·I][D], w_down [D][I], shared by all
 *             K layers (the time of a GEMM does not depend on the values).
 *   files     <scratch>/kvcal-validate.<pid>.{calib,kv,hidden}, each padded to 4 KiB for O_DIRECT,
 *             written once (untimed, fdatasync) and removed at the end.
 * Library code: never prints (the command line, kvcal validate, is calibrate/cli/validate_cmd.c).
 */
#include "calibrate/validate.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/cost/layer_cost.h"
#include "kernels/cpu.h"

#define VAL_ALIGN 4096
#define VAL_CHUNK_BYTES (1 << 20)
#define VAL_ROPE_THETA 10000.0f
#define VAL_NORM_EPS 1e-5f

static const char *const k_names[VALIDATE_N_ROWS] = {"recompute", "kv_load", "hidden_load", "  hidden read",
                                                     "  kv_proj+rope"};

const char *validate_what_name(ValidateWhat w)
{
    return (int)w >= 0 && w < VALIDATE_N_ROWS ? k_names[w] : NULL;
}

uint64_t validate_kv_bytes(const ModelSpec *m, int layers, int64_t tokens)
{
    return (uint64_t)layers * (uint64_t)tokens * 2u * (uint64_t)m->kv_heads * (uint64_t)m->head_dim * 4u;
}

uint64_t validate_hidden_bytes(const ModelSpec *m, int layers, int64_t tokens)
{
    return (uint64_t)layers * (uint64_t)tokens * (uint64_t)m->hidden * 4u;
}

int validate_ratio_ok(double measured_ns, double predicted_ns, double tol)
{
    if (!(predicted_ns > 0) || !isfinite(measured_ns) || !isfinite(predicted_ns)) return 0;
    double r = measured_ns / predicted_ns;
    return r >= 1.0 / (1.0 + tol) && r <= 1.0 + tol;
}

int validate_load_cost_model(CostModel *cm, const char *db_path, const char *device, const char *model, KvErr *e)
{
    struct stat sb;
    if (!db_path || !*db_path) return kv_err(e, "validate: no cost store given (--db FILE)");
    if (stat(db_path, &sb) != 0)
        return kv_err(e, "%s: no such cost store (%s); fill it with: kvcal run --backend cpu --quick --model %s --db %s",
                      db_path, strerror(errno), model, db_path);
    return cost_model_load_db(cm, db_path, device && *device ? device : "cpu", model, "fp16", 1, e);
}

/* ============================================================================ prediction */

static int need(CostModel *cm, CostOp op, const char *what, KvErr *e)
{
    if (cost_has(cm, op)) return 0;
    return kv_err(e, "cost model %s (device '%s', model '%s'): no %s curve, needed to predict %s",
                  cm->source[0] ? cm->source : "(in memory)", cm->device, cm->model, cost_op_name(op), what);
}

static uint64_t extrapolations_sum(const CostModel *cm)
{
    uint64_t n = 0;
    for (int i = 0; i < OP_COUNT; i++) n += cm->extrapolations[i];
    return n;
}

int validate_predict(CostModel *cm, const ModelSpec *m, int layers, int64_t tokens, double read_bytes_per_s,
                     ValidatePrediction *p, KvErr *e)
{
    memset(p, 0, sizeof *p);
    if (layers < 1 || tokens < 1)
        return kv_err(e, "validate: layers and tokens must be >= 1 (got %d layers, %lld tokens)", layers,
                      (long long)tokens);
    static const CostOp layer_ops[] = {OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_FFN_UP, OP_GEMM_FFN_DOWN,
                                       OP_ATTN_PREFILL, OP_NORM, OP_ACT};
    for (size_t i = 0; i < KV_ARRAY_LEN(layer_ops); i++)
        if (need(cm, layer_ops[i], "the recompute", e) != 0) return -1;
    int rope = m->pos == POS_ROPE;
    if (rope && need(cm, OP_ROPE, "the recompute", e) != 0) return -1;
    if (need(cm, OP_GEMM_KV_PROJ, "the hidden-state load", e) != 0) return -1;
    if (!(read_bytes_per_s > 0) && need(cm, OP_SSD_READ, "the file reads (and no read rate was measured)", e) != 0)
        return -1;

    uint64_t x0 = extrapolations_sum(cm);
    /* one layer's recompute: the same composition as the simulator's (sim/cost/layer_cost), tp 1
     * (no all-reduce), N new tokens over no context */
    ModelLayout ly = {m, KV_DT_FP16, 1, 1};
    LayerOps ops = layer_ops_of_model(cm);
    double layer = layer_cost_prefill_ns(&ops, &ly, tokens, 0, p->layer_op_ns);
    double kvb = (double)validate_kv_bytes(m, layers, tokens), hb = (double)validate_hidden_bytes(m, layers, tokens);
    if (read_bytes_per_s > 0) {
        p->kv_read_ns = kvb / read_bytes_per_s * 1e9;
        p->hidden_read_ns = hb / read_bytes_per_s * 1e9;
    } else {
        p->kv_read_ns = cost_lookup_ns(cm, OP_SSD_READ, (int64_t)kvb, 1, 1);
        p->hidden_read_ns = cost_lookup_ns(cm, OP_SSD_READ, (int64_t)hb, 1, 1);
    }
    double proj = layers * cost_lookup_ns(cm, OP_GEMM_KV_PROJ, tokens, 0, 0);
    p->layer_ns = layer;
    p->ns[VALIDATE_RECOMPUTE] = layers * layer;
    p->ns[VALIDATE_KV_LOAD] = p->kv_read_ns;
    p->ns[VALIDATE_HIDDEN_LOAD] = p->hidden_read_ns + proj;
    p->ns[VALIDATE_HIDDEN_READ] = p->hidden_read_ns;
    p->ns[VALIDATE_HIDDEN_PROJ] = proj;
    p->extrapolations = extrapolations_sum(cm) - x0;
    return 0;
}

/* ============================================================================ helpers */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t pad4k(uint64_t b) { return (b + VAL_ALIGN - 1) / VAL_ALIGN * VAL_ALIGN; }

/* An aligned buffer of n floats (n may be 0: one element); NULL with a message on failure. */
static float *fbuf(size_t n, KvErr *e)
{
    void *p = NULL;
    size_t bytes = pad4k((uint64_t)(n ? n : 1) * sizeof(float));
    if (posix_memalign(&p, VAL_ALIGN, bytes) != 0) {
        kv_err(e, "validate: out of memory (%zu bytes)", bytes);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [-scale, scale] */
static void fill(float *x, size_t n, float scale, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * ((float)(splitmix(s) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

/* ============================================================================ scratch files */

typedef struct Scratch {
    char dir[4096];
    int made_dir;      /* validate created it: remove it at the end */
    char files[3][4200];
    int nfiles;
    int o_direct;
} Scratch;

static int scratch_open(Scratch *sc, const char *dir, KvErr *e)
{
    memset(sc, 0, sizeof *sc);
    if (dir && *dir) {
        snprintf(sc->dir, sizeof sc->dir, "%s", dir);
        struct stat st;
        if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
            return kv_err(e, "scratch directory %s: exists and is not a directory", dir);
        if (kv_mkdirs(dir, e) != 0) return kv_err_prefix(e, "scratch directory %s: ", dir);
        if (access(dir, W_OK | X_OK) != 0)
            return kv_err(e, "scratch directory %s: not writable (%s)", dir, strerror(errno));
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(sc->dir, sizeof sc->dir, "%s/kvcal-validate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(sc->dir)) return kv_err(e, "scratch directory %s: cannot create (%s)", sc->dir, strerror(errno));
    sc->made_dir = 1;
    return 0;
}

static void scratch_close(Scratch *sc)
{
    for (int i = 0; i < sc->nfiles; i++) unlink(sc->files[i]);
    if (sc->made_dir) rmdir(sc->dir);
    sc->nfiles = 0;
}

/* Write `bytes` (already a multiple of 4 KiB) from buf to a new scratch file; fdatasync. */
static int scratch_write(Scratch *sc, const char *name, const void *buf, uint64_t bytes, char *path, size_t len,
                         KvErr *e)
{
    snprintf(path, len, "%s/kvcal-validate.%ld.%s", sc->dir, (long)getpid(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return kv_err(e, "scratch directory %s: cannot create %s (%s)", sc->dir, path, strerror(errno));
    if (sc->nfiles < 3) snprintf(sc->files[sc->nfiles++], sizeof sc->files[0], "%s", path);
    const char *p = buf;
    uint64_t done = 0;
    while (done < bytes) {
        ssize_t w = write(fd, p + done, (size_t)kv_min_i64((int64_t)(bytes - done), VAL_CHUNK_BYTES));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = errno;
            close(fd);
            return kv_err(e, "%s: write failed after %llu of %llu bytes (%s)", path, (unsigned long long)done,
                          (unsigned long long)bytes, w < 0 ? strerror(err) : "no progress");
        }
        done += (uint64_t)w;
    }
    if (fdatasync(fd) != 0 || close(fd) != 0) return kv_err(e, "%s: fdatasync/close failed (%s)", path, strerror(errno));
    return 0;
}

/* Whether O_DIRECT reads of this file work (open and one 4 KiB read into an aligned buffer). */
static int probe_o_direct(const char *path, void *aligned_buf)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) return 0;
    ssize_t r = pread(fd, aligned_buf, VAL_ALIGN, 0);
    close(fd);
    return r == VAL_ALIGN;
}

/* Untimed: drop the file's pages from the page cache (buffered mode only; advisory). */
static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Timed part: open, read `bytes` (a multiple of 4 KiB) in 1 MiB chunks into buf, close. */
static int read_all(const char *path, void *buf, uint64_t bytes, int o_direct, KvErr *e)
{
    int fd = open(path, O_RDONLY | (o_direct ? O_DIRECT : 0));
    if (fd < 0) return kv_err(e, "%s: cannot open for reading (%s)", path, strerror(errno));
    uint64_t done = 0;
    char *p = buf;
    while (done < bytes) {
        ssize_t r = pread(fd, p + done, (size_t)kv_min_i64((int64_t)(bytes - done), VAL_CHUNK_BYTES), (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int err = errno;
            close(fd);
            return kv_err(e, "%s: read failed after %llu of %llu bytes (%s)", path, (unsigned long long)done,
                          (unsigned long long)bytes, r < 0 ? strerror(err) : "unexpected end of file");
        }
        done += (uint64_t)r;
    }
    close(fd);
    return 0;
}

/* ============================================================================ the model slice */

typedef struct Slice {
    const ModelSpec *m;
    int64_t N, D, hq, hk, dh, qkvN, upN, dnK, kvN;
    int gated, rope, layernorm, norms;
    float *w_qkv, *w_o, *w_up, *w_dn, *nw, *nb;
    float *x0, *x, *xn, *qkv, *q, *k, *v, *ao, *h, *gu, *a, *dn, *kvp;
} Slice;

static void slice_free(Slice *s)
{
    float **bufs[] = {&s->w_qkv, &s->w_o, &s->w_up, &s->w_dn, &s->nw, &s->nb, &s->x0, &s->x, &s->xn, &s->qkv,
                      &s->q,     &s->k,   &s->v,    &s->ao,   &s->h,  &s->gu, &s->a,  &s->dn, &s->kvp};
    for (size_t i = 0; i < KV_ARRAY_LEN(bufs); i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

static int slice_init(Slice *s, const ModelSpec *m, int64_t N, uint64_t seed, KvErr *e)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    if (m->n_experts > 0)
        return kv_err(e, "validate: model %s is a mixture of experts; only dense models are supported", m->name);
    ModelLayout ly = {m, KV_DT_FP16, 1, 1};
    if (model_layout_check(&ly, e) != 0) return -1;
    int64_t M, K, oN, oK, dnN, upK, kvK;
    if (!model_gemm_shape(&ly, OP_GEMM_QKV, N, &M, &s->qkvN, &K) || !model_gemm_shape(&ly, OP_GEMM_O, N, &M, &oN, &oK) ||
        !model_gemm_shape(&ly, OP_GEMM_FFN_UP, N, &M, &s->upN, &upK) ||
        !model_gemm_shape(&ly, OP_GEMM_FFN_DOWN, N, &M, &dnN, &s->dnK) ||
        !model_gemm_shape(&ly, OP_GEMM_KV_PROJ, N, &M, &s->kvN, &kvK))
        return kv_err(e, "validate: model %s: no GEMM shape for a projection", m->name);
    s->N = N;
    s->D = m->hidden;
    s->hq = m->heads;
    s->hk = m->kv_heads;
    s->dh = m->head_dim;
    s->gated = m->gated_ffn != 0;
    s->rope = m->pos == POS_ROPE;
    s->layernorm = m->norm == NORM_LAYER;
    s->norms = m->norms_per_layer < 1 ? 1 : m->norms_per_layer;
    if (K != s->D || oN != s->D || oK != s->hq * s->dh || s->qkvN != oK + 2 * s->hk * s->dh || upK != s->D ||
        dnN != s->D || s->kvN != 2 * s->hk * s->dh || kvK != s->D || s->upN != (s->gated ? 2 : 1) * s->dnK)
        return kv_err(e, "validate: model %s: GEMM shapes do not match the layer's heads and widths", m->name);
    uint64_t st = seed ? seed : 1;
    size_t tD = (size_t)(N * s->D), tq = (size_t)(N * s->hq * s->dh), tk = (size_t)(N * s->hk * s->dh);
    if (!(s->w_qkv = fbuf((size_t)(s->qkvN * s->D), e)) || !(s->w_o = fbuf((size_t)(s->D * oK), e)) ||
        !(s->w_up = fbuf((size_t)(s->upN * s->D), e)) || !(s->w_dn = fbuf((size_t)(s->D * s->dnK), e)) ||
        !(s->nw = fbuf((size_t)s->D, e)) || !(s->nb = fbuf((size_t)s->D, e)) || !(s->x0 = fbuf(tD, e)) ||
        !(s->x = fbuf(tD, e)) || !(s->xn = fbuf(tD, e)) || !(s->qkv = fbuf((size_t)(N * s->qkvN), e)) ||
        !(s->q = fbuf(tq, e)) || !(s->k = fbuf(tk, e)) || !(s->v = fbuf(tk, e)) || !(s->ao = fbuf(tq, e)) ||
        !(s->h = fbuf(tD, e)) || !(s->gu = fbuf((size_t)(N * s->upN), e)) || !(s->a = fbuf((size_t)(N * s->dnK), e)) ||
        !(s->dn = fbuf(tD, e)) || !(s->kvp = fbuf((size_t)(N * s->kvN), e))) {
        slice_free(s);
        return -1;
    }
    /* weights ±1/sqrt(fan-in) keep activations O(1) through the layers (no overflow, no denormals) */
    fill(s->w_qkv, (size_t)(s->qkvN * s->D), 1.0f / sqrtf((float)s->D), &st);
    fill(s->w_o, (size_t)(s->D * oK), 1.0f / sqrtf((float)oK), &st);
    fill(s->w_up, (size_t)(s->upN * s->D), 1.0f / sqrtf((float)s->D), &st);
    fill(s->w_dn, (size_t)(s->D * s->dnK), 1.0f / sqrtf((float)s->dnK), &st);
    for (int64_t i = 0; i < s->D; i++) s->nw[i] = 1.0f;
    fill(s->x0, tD, 1.0f, &st);
    return 0;
}

static int norm(Slice *s, const float *in, float *out, KvErr *e)
{
    return s->layernorm ? kcpu_layernorm(in, s->nw, s->nb, out, (int)s->N, (int)s->D, VAL_NORM_EPS, e)
                        : kcpu_rmsnorm(in, s->nw, out, (int)s->N, (int)s->D, VAL_NORM_EPS, e);
}

/* Copy column blocks of rows [N][width] into contiguous [N][w_i] outputs: out_i = cols [off_i, off_i + w_i). */
static void split_cols(const float *in, int64_t N, int64_t width, float *out, int64_t off, int64_t w)
{
    for (int64_t t = 0; t < N; t++) memcpy(out + t * w, in + t * width + off, (size_t)w * sizeof(float));
}

static void add_inplace(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* Adds the time since *t to acc[op] (op OP_COUNT: "other") and restarts *t. */
static void lap(double *acc, int op, double *t)
{
    double n = now_ns();
    acc[op] += n - *t;
    *t = n;
}

/* One layer's forward on the residual stream s->x (N tokens, no context); the time of each part is
 * added to acc[op] (acc has OP_COUNT + 1 entries; the last is splits and residual adds). */
static int layer_forward(Slice *s, double *acc, KvErr *e)
{
    int N = (int)s->N, D = (int)s->D, hq = (int)s->hq, hk = (int)s->hk, dh = (int)s->dh;
    int64_t qw = s->hq * s->dh, kw = s->hk * s->dh;
    double t = now_ns();
    if (norm(s, s->x, s->xn, e)) return -1;
    lap(acc, OP_NORM, &t);
    if (kcpu_gemm(s->xn, s->w_qkv, s->qkv, N, (int)s->qkvN, D, e)) return -1;
    lap(acc, OP_GEMM_QKV, &t);
    split_cols(s->qkv, N, s->qkvN, s->q, 0, qw);
    split_cols(s->qkv, N, s->qkvN, s->k, qw, kw);
    split_cols(s->qkv, N, s->qkvN, s->v, qw + kw, kw);
    lap(acc, OP_COUNT, &t);
    if (s->rope && (kcpu_rope(s->q, N, hq, dh, 0, VAL_ROPE_THETA, e) || kcpu_rope(s->k, N, hk, dh, 0, VAL_ROPE_THETA, e)))
        return -1;
    lap(acc, OP_ROPE, &t);
    if (kcpu_attn_prefill(s->q, s->k, s->v, s->ao, N, 0, hq, hk, dh, e)) return -1;
    lap(acc, OP_ATTN_PREFILL, &t);
    if (kcpu_gemm(s->ao, s->w_o, s->h, N, D, (int)qw, e)) return -1;
    lap(acc, OP_GEMM_O, &t);
    add_inplace(s->x, s->h, (size_t)N * (size_t)D);
    lap(acc, OP_COUNT, &t);
    if (norm(s, s->x, s->xn, e)) return -1;
    lap(acc, OP_NORM, &t);
    if (kcpu_gemm(s->xn, s->w_up, s->gu, N, (int)s->upN, D, e)) return -1;
    lap(acc, OP_GEMM_FFN_UP, &t);
    if (s->gated) {
        if (kcpu_gated_act(KACT_SILU, s->gu, s->a, N, (int)s->dnK, e) != 0) return -1;
    } else {
        size_t n = (size_t)N * (size_t)s->dnK;
        for (size_t i = 0; i < n; i++) s->a[i] = kref_gelu_tanh(s->gu[i]);
    }
    lap(acc, OP_ACT, &t);
    if (kcpu_gemm(s->a, s->w_dn, s->dn, N, D, (int)s->dnK, e) != 0) return -1;
    lap(acc, OP_GEMM_FFN_DOWN, &t);
    add_inplace(s->x, s->dn, (size_t)N * (size_t)D);
    lap(acc, OP_COUNT, &t);
    for (int i = 2; i < s->norms; i++) /* the model's extra norms (Gemma-2: 4 per layer) */
        if (norm(s, s->x, s->xn, e) != 0) return -1;
    lap(acc, OP_NORM, &t);
    return 0;
}

/* ============================================================================ the run */

int validate_run(CostModel *cm, const ValidateOptions *o, ValidateResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    if (!o || !o->model) return kv_err(e, "validate: no model given");
    const ModelSpec *m = o->model;
    int K = o->layers ? o->layers : 2, reps = o->reps ? o->reps : 3;
    int64_t N = o->tokens ? o->tokens : 256;
    int64_t cal_bytes = o->calib_read_bytes ? o->calib_read_bytes : (int64_t)64 << 20;
    if (K < 1 || K > 4096) return kv_err(e, "validate: --layers: expected 1..4096, got %d", K);
    if (N < 1 || N > (1 << 20)) return kv_err(e, "validate: --tokens: expected 1..1048576, got %lld", (long long)N);
    if (reps < 1 || reps > 1000) return kv_err(e, "validate: --reps: expected 1..1000, got %d", reps);
    if (cal_bytes < 1) return kv_err(e, "validate: calibration read size must be positive");
    r->layers = K;
    r->tokens = N;
    r->kv_bytes = validate_kv_bytes(m, K, N);
    r->hidden_bytes = validate_hidden_bytes(m, K, N);

    /* check the cost model before spending minutes measuring (the read rate is filled in later) */
    ValidatePrediction dry;
    if (validate_predict(cm, m, K, N, 1e9, &dry, e) != 0) return -1;

    Slice s;
    if (slice_init(&s, m, N, o->seed, e) != 0) return -1;
    Scratch sc;
    int rc = -1;
    uint64_t kv_pad = pad4k(r->kv_bytes), h_pad = pad4k(r->hidden_bytes), cal_pad = pad4k((uint64_t)cal_bytes);
    uint64_t big = kv_pad > h_pad ? kv_pad : h_pad;
    big = big > cal_pad ? big : cal_pad;
    float *io = NULL, *hid = NULL;
    double *samples = calloc((size_t)reps * VALIDATE_N_ROWS, sizeof(double));
    double *op_samples = calloc((size_t)reps * (OP_COUNT + 1), sizeof(double));
    char cal_path[4200], kv_path[4200], h_path[4200];
    if (scratch_open(&sc, o->scratch_dir, e) != 0) {
        free(samples);
        free(op_samples);
        slice_free(&s);
        return -1;
    }
    if (!samples || !op_samples) {
        kv_err(e, "validate: out of memory");
        goto out;
    }
    if (!(io = fbuf(big / sizeof(float), e)) || !(hid = fbuf(h_pad / sizeof(float), e))) goto out;

    /* ---- a. recompute: warm-up + reps; x starts from the same input each time (untimed copy) */
    size_t tD = (size_t)(N * s.D);
    for (int i = -1; i < reps; i++) {
        memcpy(s.x, s.x0, tD * sizeof(float));
        double acc[OP_COUNT + 1] = {0};
        double t0 = now_ns();
        for (int l = 0; l < K; l++)
            if (layer_forward(&s, acc, e) != 0) goto out;
        double t1 = now_ns();
        if (i < 0) continue;
        samples[(size_t)VALIDATE_RECOMPUTE * reps + i] = t1 - t0;
        for (int op = 0; op <= OP_COUNT; op++) op_samples[(size_t)op * reps + i] = acc[op];
    }
    for (int op = 0; op < OP_COUNT; op++) r->recompute_op_ns[op] = median(op_samples + (size_t)op * reps, reps);
    r->recompute_other_ns = median(op_samples + (size_t)OP_COUNT * reps, reps);
    for (size_t i = 0; i < tD; i++)
        if (!isfinite(s.x[i])) {
            kv_err(e, "validate: the forward produced a non-finite value at element %zu", i);
            goto out;
        }

    /* ---- files: calibration, KV ([layer][K|V][N][h_kv][d] from the last forward), hidden states */
    memset(io, 0, (size_t)big);
    fill(io, (size_t)cal_pad / sizeof(float), 1.0f, &(uint64_t){7});
    if (scratch_write(&sc, "calib", io, cal_pad, cal_path, sizeof cal_path, e) != 0) goto out;
    sc.o_direct = probe_o_direct(cal_path, io);
    memset(io, 0, (size_t)kv_pad);
    size_t kw = (size_t)(N * s.hk * s.dh);
    for (int l = 0; l < K; l++) {
        memcpy(io + (size_t)l * 2 * kw, s.k, kw * sizeof(float));
        memcpy(io + (size_t)l * 2 * kw + kw, s.v, kw * sizeof(float));
    }
    if (scratch_write(&sc, "kv", io, kv_pad, kv_path, sizeof kv_path, e) != 0) goto out;
    for (int l = 0; l < K; l++) memcpy(hid + (size_t)l * tD, s.x0, tD * sizeof(float));
    if (scratch_write(&sc, "hidden", hid, h_pad, h_path, sizeof h_path, e) != 0) goto out;
    r->o_direct = sc.o_direct;
    snprintf(r->io_note, sizeof r->io_note, "%s reads in %s%s", sc.o_direct ? "O_DIRECT" : "buffered", sc.dir,
             sc.o_direct ? "" : " (O_DIRECT refused; page cache dropped with posix_fadvise before each read)");

    /* ---- calibration read */
    double cal[1001];
    for (int i = -1; i < reps; i++) {
        if (!sc.o_direct) drop_cache(cal_path);
        double t0 = now_ns();
        if (read_all(cal_path, io, cal_pad, sc.o_direct, e) != 0) goto out;
        double t1 = now_ns();
        if (i >= 0) cal[i] = t1 - t0;
    }
    double cal_ns = median(cal, reps);
    r->read_bytes_per_s = (double)cal_pad / (cal_ns * 1e-9);

    /* ---- b. KV load */
    for (int i = -1; i < reps; i++) {
        if (!sc.o_direct) drop_cache(kv_path);
        double t0 = now_ns();
        if (read_all(kv_path, io, kv_pad, sc.o_direct, e) != 0) goto out;
        double t1 = now_ns();
        if (i >= 0) samples[(size_t)VALIDATE_KV_LOAD * reps + i] = t1 - t0;
    }

    /* ---- c. hidden-state load + K/V projection + RoPE on K */
    const float *w_kv = s.w_qkv + (size_t)(s.hq * s.dh * s.D); /* the K and V rows of w_qkv */
    for (int i = -1; i < reps; i++) {
        if (!sc.o_direct) drop_cache(h_path);
        double t0 = now_ns();
        if (read_all(h_path, hid, h_pad, sc.o_direct, e) != 0) goto out;
        double t1 = now_ns();
        for (int l = 0; l < K; l++) {
            if (kcpu_gemm(hid + (size_t)l * tD, w_kv, s.kvp, (int)N, (int)s.kvN, (int)s.D, e) != 0) goto out;
            split_cols(s.kvp, N, s.kvN, s.k, 0, s.hk * s.dh);
            split_cols(s.kvp, N, s.kvN, s.v, s.hk * s.dh, s.hk * s.dh);
            if (s.rope && kcpu_rope(s.k, (int)N, (int)s.hk, (int)s.dh, 0, VAL_ROPE_THETA, e) != 0) goto out;
        }
        double t2 = now_ns();
        if (i >= 0) {
            samples[(size_t)VALIDATE_HIDDEN_LOAD * reps + i] = t2 - t0;
            samples[(size_t)VALIDATE_HIDDEN_READ * reps + i] = t1 - t0;
            samples[(size_t)VALIDATE_HIDDEN_PROJ * reps + i] = t2 - t1;
        }
    }
    for (int w = 0; w < VALIDATE_N_ROWS; w++) r->measured_ns[w] = median(samples + (size_t)w * reps, reps);

    /* ---- prediction */
    double rate = r->read_bytes_per_s;
    if (cost_has(cm, OP_SSD_READ)) {
        rate = 0;
        snprintf(r->read_source, sizeof r->read_source,
                 "reads predicted by the store's ssd_read curve at (bytes, qd 1, 1 drive)");
    } else {
        snprintf(r->read_source, sizeof r->read_source,
                 "reads predicted at %.3f GB/s, a %s read of %.0f MiB measured in this run (the store has no "
                 "ssd_read curve)",
                 rate / 1e9, sc.o_direct ? "O_DIRECT" : "buffered", (double)cal_pad / (1 << 20));
    }
    if (validate_predict(cm, m, K, N, rate, &r->pred, e) != 0) goto out;
    rc = 0;
out:
    scratch_close(&sc);
    free(io);
    free(hid);
    free(samples);
    free(op_samples);
    slice_free(&s);
    return rc;
}
