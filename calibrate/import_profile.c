/* import_profile.c — public per-op GPU profiles into the cost store; see import_profile.h for the
 * formats, the mapping onto kvsim's ops and the grids. Library code: returns errors, never prints.
 */
#include "calibrate/import_profile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "sim/cost/spec.h"

#define PROFILE_MAX_COLS 128

const char *profile_format_name(ProfileFormat f)
{
    return f == PROFILE_VIDUR ? "vidur" : f == PROFILE_LLMSERVINGSIM ? "llmservingsim" : "?";
}

/* ---- manifest ---- */

static int man_str(const cJSON *o, const char *key, char *dst, size_t cap, int required, const char *origin, KvErr *e)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) {
        if (!required) return 0;
        return kv_err(e, "%s: key \"%s\": missing, expected a string", origin, key);
    }
    if (!cJSON_IsString(it) || !it->valuestring[0])
        return kv_err(e, "%s: key \"%s\": expected a non-empty string", origin, key);
    if (strlen(it->valuestring) >= cap)
        return kv_err(e, "%s: key \"%s\": '%.40s...' longer than %zu characters", origin, key, it->valuestring, cap - 1);
    snprintf(dst, cap, "%s", it->valuestring);
    return 0;
}

static int man_int(const cJSON *o, const char *key, int lo, int hi, int *out, const char *origin, KvErr *e)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) return kv_err(e, "%s: key \"%s\": missing, expected an integer in %d..%d", origin, key, lo, hi);
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!(v >= lo && v <= hi) || v != floor(v))
        return kv_err(e, "%s: key \"%s\": expected an integer in %d..%d", origin, key, lo, hi);
    *out = (int)v;
    return 0;
}

int profile_manifest_read(const char *path, ProfileManifest *m, KvErr *e)
{
    memset(m, 0, sizeof *m);
    snprintf(m->origin, sizeof m->origin, "%s", path);
    size_t len;
    char *text = kv_read_file(path, &len, e);
    if (!text) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    int rc = -1;
    if (!root || !cJSON_IsObject(root)) {
        kv_err(e, "%s: not a JSON object (a profile manifest: format, device, model, dtype, tp, repetitions, source, files)", path);
        goto out;
    }
    char fmt[32] = "";
    if (man_str(root, "format", fmt, sizeof fmt, 1, path, e)) goto out;
    if (!strcmp(fmt, "vidur"))
        m->format = PROFILE_VIDUR;
    else if (!strcmp(fmt, "llmservingsim"))
        m->format = PROFILE_LLMSERVINGSIM;
    else {
        kv_err(e, "%s: key \"format\": '%s', expected vidur or llmservingsim", path, fmt);
        goto out;
    }
    if (man_str(root, "device", m->device, sizeof m->device, 1, path, e) ||
        man_str(root, "model", m->model, sizeof m->model, 1, path, e) ||
        man_str(root, "dtype", m->dtype, sizeof m->dtype, 1, path, e) ||
        man_int(root, "tp", 1, 1024, &m->tp, path, e) || man_int(root, "repetitions", 1, 1000000, &m->repetitions, path, e) ||
        man_str(root, "platform", m->platform, sizeof m->platform, 0, path, e) ||
        man_str(root, "measured_at", m->measured_at, sizeof m->measured_at, 1, path, e))
        goto out;
    if (strlen(m->measured_at) != 20 || m->measured_at[4] != '-' || m->measured_at[10] != 'T' || m->measured_at[19] != 'Z') {
        kv_err(e, "%s: key \"measured_at\": '%s', expected YYYY-MM-DDTHH:MM:SSZ (UTC)", path, m->measured_at);
        goto out;
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    if (!cJSON_IsObject(src)) {
        kv_err(e, "%s: key \"source\": expected an object {repo, commit, path, licence}", path);
        goto out;
    }
    char where[600];
    snprintf(where, sizeof where, "%s: source", path);
    if (man_str(src, "repo", m->repo, sizeof m->repo, 1, where, e) ||
        man_str(src, "commit", m->commit, sizeof m->commit, 1, where, e) ||
        man_str(src, "path", m->path, sizeof m->path, 1, where, e) ||
        man_str(src, "licence", m->licence, sizeof m->licence, 1, where, e))
        goto out;
    size_t nc = strlen(m->commit);
    for (size_t i = 0; i < nc; i++)
        if (!isxdigit((unsigned char)m->commit[i])) nc = 0;
    if (nc != 40) {
        kv_err(e, "%s: key \"commit\": '%s', expected 40 hexadecimal digits", where, m->commit);
        goto out;
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    int nf = cJSON_IsArray(files) ? cJSON_GetArraySize(files) : -1;
    if (nf < 1 || nf > PROFILE_MAX_FILES) {
        kv_err(e, "%s: key \"files\": expected an array of 1..%d file names", path, PROFILE_MAX_FILES);
        goto out;
    }
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    for (int i = 0; i < nf; i++) {
        const cJSON *f = cJSON_GetArrayItem(files, i);
        if (!cJSON_IsString(f) || !f->valuestring[0]) {
            kv_err(e, "%s: files[%d]: expected a file name", path, i);
            goto out;
        }
        if ((size_t)snprintf(m->files[i], sizeof m->files[i], "%.*s%s", dirlen, path, f->valuestring) >= sizeof m->files[i]) {
            kv_err(e, "%s: files[%d]: path too long", path, i);
            goto out;
        }
    }
    m->n_files = nf;
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* ---- CSV ---- */

/* Split line (modified in place) at commas; no quoting (neither format quotes). Count or -1. */
static int split_fields(char *line, char **f, int cap)
{
    int n = 0;
    char *s = line;
    for (;;) {
        if (n == cap) return -1;
        f[n++] = s;
        char *c = strchr(s, ',');
        if (!c) break;
        *c = 0;
        s = c + 1;
    }
    return n;
}

typedef struct Csv {
    char *text;        /* owned copy, cut into lines */
    char *next;        /* the rest */
    const char *origin;
    int line;          /* of the current row */
    char *hdr[PROFILE_MAX_COLS];
    int nh;
    char *f[PROFILE_MAX_COLS];
    int nf;
} Csv;

static char *next_line(Csv *c)
{
    while (c->next && *c->next) {
        char *s = c->next;
        char *nl = strchr(s, '\n');
        if (nl) {
            *nl = 0;
            c->next = nl + 1;
        } else
            c->next = NULL;
        c->line++;
        size_t l = strlen(s);
        if (l && s[l - 1] == '\r') s[--l] = 0;
        if (l) return s;
    }
    return NULL;
}

static int csv_open(Csv *c, const char *text, const char *origin, KvErr *e)
{
    memset(c, 0, sizeof *c);
    c->origin = origin;
    c->text = strdup(text);
    if (!c->text) return kv_err(e, "%s: out of memory", origin);
    c->next = c->text;
    char *h = next_line(c);
    if (!h) return kv_err(e, "%s: empty file, expected a header row", origin);
    c->nh = split_fields(h, c->hdr, PROFILE_MAX_COLS);
    if (c->nh < 0) return kv_err(e, "%s: line %d: more than %d columns", origin, c->line, PROFILE_MAX_COLS);
    return 0;
}

/* The next data row: 1, 0 at the end, -1 on a row with the wrong field count. */
static int csv_row(Csv *c, KvErr *e)
{
    char *l = next_line(c);
    if (!l) return 0;
    c->nf = split_fields(l, c->f, PROFILE_MAX_COLS);
    if (c->nf != c->nh)
        return kv_err(e, "%s: line %d: %d fields, expected %d (as the header)", c->origin, c->line, c->nf < 0 ? PROFILE_MAX_COLS + 1 : c->nf,
                      c->nh);
    return 1;
}

static int csv_col(const Csv *c, const char *name, int required, KvErr *e)
{
    for (int i = 0; i < c->nh; i++)
        if (!strcmp(c->hdr[i], name)) return i;
    if (required) kv_err(e, "%s: line 1: column %s: missing from the header", c->origin, name);
    return -1;
}

static int csv_num(const Csv *c, int col, double lo, double *out, KvErr *e)
{
    const char *s = c->f[col];
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo)
        return kv_err(e, "%s: line %d: column %s: expected a number >= %g, got '%s'", c->origin, c->line, c->hdr[col], lo, s);
    *out = v;
    return 0;
}

static int csv_int(const Csv *c, int col, int64_t lo, int64_t *out, KvErr *e)
{
    const char *s = c->f[col];
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo)
        return kv_err(e, "%s: line %d: column %s: expected an integer >= %lld, got '%s'", c->origin, c->line, c->hdr[col], (long long)lo, s);
    *out = v;
    return 0;
}

static int csv_check_dim(const Csv *c, int col, int want, const char *what, const ModelSpec *m, KvErr *e)
{
    if (col < 0) return 0;
    int64_t v = 0;
    if (csv_int(c, col, 1, &v, e)) return -1;
    if (v != want)
        return kv_err(e, "%s: line %d: column %s: %lld, but %s has %s %d (the profile is of another model)", c->origin, c->line,
                      c->hdr[col], (long long)v, m->name, what, want);
    return 0;
}

/* ---- points ---- */

void profile_points_free(ProfilePoints *pp)
{
    free(pp->v);
    pp->v = NULL;
    pp->n = pp->cap = 0;
}

static int pp_add(ProfilePoints *pp, const ProfileManifest *m, CostOp op, int64_t p1, int64_t p2, double ns, KvErr *e)
{
    if (pp->n == pp->cap) {
        size_t nc = pp->cap ? pp->cap * 2 : 1024;
        StorePoint *v = realloc(pp->v, nc * sizeof *v);
        if (!v) return kv_err(e, "out of memory");
        pp->v = v;
        pp->cap = nc;
    }
    StorePoint *p = &pp->v[pp->n++];
    memset(p, 0, sizeof *p);
    p->op = op;
    snprintf(p->model, sizeof p->model, "%s", m->model);
    snprintf(p->dtype, sizeof p->dtype, "%s", m->dtype);
    p->tp = m->tp;
    p->p1 = p1;
    p->p2 = p2;
    p->n = m->repetitions;
    p->median_ns = p->p10_ns = p->p90_ns = ns;
    return 0;
}

static void pp_skip(ProfilePoints *pp, const char *what)
{
    pp->skipped_rows++;
    size_t wl = strlen(what);
    for (const char *s = pp->skipped; (s = strstr(s, what)) != NULL; s += wl)
        if ((s == pp->skipped || s[-1] == ' ') && (s[wl] == 0 || s[wl] == ',')) return;
    kv_catf(pp->skipped, sizeof pp->skipped, "%s%s", pp->skipped[0] ? ", " : "", what);
}

typedef struct NameOp {
    const char *name;
    CostOp op;
} NameOp;

/* Vidur's mlp.csv: time_stats.<name>.median per op, in ms. */
static int read_vidur_mlp(const ProfileManifest *m, const ModelSpec *model, Csv *c, ProfilePoints *pp, KvErr *e)
{
    static const NameOp ops[] = {{"attn_pre_proj", OP_GEMM_QKV},   {"attn_post_proj", OP_GEMM_O}, {"mlp_up_proj", OP_GEMM_FFN_UP},
                                 {"mlp_down_proj", OP_GEMM_FFN_DOWN}, {"mlp_act", OP_ACT},        {"input_layernorm", OP_NORM},
                                 {"attn_rope", OP_ROPE}};
    int col[KV_ARRAY_LEN(ops)];
    for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) {
        char name[96];
        snprintf(name, sizeof name, "time_stats.%s.median", ops[i].name);
        if ((col[i] = csv_col(c, name, 1, e)) < 0) return -1;
    }
    int ctok = csv_col(c, "num_tokens", 1, e), ctp = csv_col(c, "num_tensor_parallel_workers", 1, e);
    if (ctok < 0 || ctp < 0) return -1;
    int cemb = csv_col(c, "n_embd", 0, e), cexp = csv_col(c, "n_expanded_embd", 0, e), chead = csv_col(c, "n_head", 0, e),
        ckv = csv_col(c, "n_kv_head", 0, e);
    int r;
    while ((r = csv_row(c, e)) > 0) {
        pp->rows++;
        int64_t tok = 0, tp = 0;
        if (csv_int(c, ctok, 1, &tok, e) || csv_int(c, ctp, 1, &tp, e)) return -1;
        if (csv_check_dim(c, cemb, model->hidden, "hidden size", model, e) ||
            csv_check_dim(c, cexp, model->intermediate, "intermediate size", model, e) ||
            csv_check_dim(c, chead, model->heads, "attention heads", model, e) ||
            csv_check_dim(c, ckv, model->kv_heads, "KV heads", model, e))
            return -1;
        if (tp != m->tp) {
            pp_skip(pp, "other tensor-parallel degrees");
            continue;
        }
        for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++) {
            double ms = 0;
            if (csv_num(c, col[i], 1e-9, &ms, e)) return -1;
            if (pp_add(pp, m, ops[i].op, tok, 0, ms * 1e6, e)) return -1;
        }
    }
    return r;
}

/* Vidur's attention.csv: attn_prefill / attn_decode medians in ms, by is_prefill. Before
 * profile_finish an attn_decode point holds the context per request in p2. */
static int read_vidur_attention(const ProfileManifest *m, const ModelSpec *model, Csv *c, ProfilePoints *pp, KvErr *e)
{
    int cpre = csv_col(c, "time_stats.attn_prefill.median", 1, e), cdec = csv_col(c, "time_stats.attn_decode.median", 1, e),
        cb = csv_col(c, "batch_size", 1, e), cchunk = csv_col(c, "prefill_chunk_size", 1, e), ckv = csv_col(c, "kv_cache_size", 1, e),
        cis = csv_col(c, "is_prefill", 1, e), ctp = csv_col(c, "num_tensor_parallel_workers", 1, e);
    if (cpre < 0 || cdec < 0 || cb < 0 || cchunk < 0 || ckv < 0 || cis < 0 || ctp < 0) return -1;
    int cemb = csv_col(c, "n_embd", 0, e), chead = csv_col(c, "n_q_head", 0, e), ckvh = csv_col(c, "n_kv_head", 0, e);
    int r;
    while ((r = csv_row(c, e)) > 0) {
        pp->rows++;
        int64_t tp = 0, b = 0, chunk = 0, kv = 0;
        if (csv_int(c, ctp, 1, &tp, e) || csv_check_dim(c, cemb, model->hidden, "hidden size", model, e) ||
            csv_check_dim(c, chead, model->heads, "attention heads", model, e) ||
            csv_check_dim(c, ckvh, model->kv_heads, "KV heads", model, e))
            return -1;
        if (tp != m->tp) {
            pp_skip(pp, "other tensor-parallel degrees");
            continue;
        }
        const char *is = c->f[cis];
        int prefill = !strcmp(is, "True") ? 1 : !strcmp(is, "False") ? 0 : -1;
        if (prefill < 0)
            return kv_err(e, "%s: line %d: column is_prefill: expected True or False, got '%s'", c->origin, c->line, is);
        if (csv_int(c, cb, 1, &b, e) || csv_int(c, cchunk, 0, &chunk, e) || csv_int(c, ckv, 0, &kv, e)) return -1;
        double ms = 0;
        if (prefill) {
            if (b != 1) {
                pp_skip(pp, "prefill batches of several requests");
                continue;
            }
            if (chunk < 1)
                return kv_err(e, "%s: line %d: column prefill_chunk_size: expected >= 1 in a prefill row, got '%s'", c->origin, c->line,
                              c->f[cchunk]);
            if (csv_num(c, cpre, 1e-9, &ms, e) || pp_add(pp, m, OP_ATTN_PREFILL, chunk, kv, ms * 1e6, e)) return -1;
        } else {
            if (kv < 1)
                return kv_err(e, "%s: line %d: column kv_cache_size: expected >= 1 in a decode row, got '%s'", c->origin, c->line,
                              c->f[ckv]);
            if (csv_num(c, cdec, 1e-9, &ms, e) || pp_add(pp, m, OP_ATTN_DECODE, b, kv, ms * 1e6, e)) return -1;
        }
    }
    return r;
}

/* LLMServingSim's dense.csv: layer,tokens,time_us. */
static int read_lss_dense(const ProfileManifest *m, Csv *c, ProfilePoints *pp, KvErr *e)
{
    static const NameOp ops[] = {{"qkv_proj", OP_GEMM_QKV}, {"o_proj", OP_GEMM_O}, {"gate_up_proj", OP_GEMM_FFN_UP},
                                 {"down_proj", OP_GEMM_FFN_DOWN}, {"act_fn", OP_ACT}, {"layernorm", OP_NORM},
                                 {"rotary_emb", OP_ROPE}};
    int cl = csv_col(c, "layer", 1, e), ct = csv_col(c, "tokens", 1, e), cu = csv_col(c, "time_us", 1, e);
    if (cl < 0 || ct < 0 || cu < 0) return -1;
    int r;
    while ((r = csv_row(c, e)) > 0) {
        pp->rows++;
        const char *name = c->f[cl];
        int op = -1;
        for (size_t i = 0; i < KV_ARRAY_LEN(ops); i++)
            if (!strcmp(name, ops[i].name)) op = (int)ops[i].op;
        if (op < 0) {
            if (!strcmp(name, "embedding") || !strcmp(name, "final_layernorm") || !strcmp(name, "qk_norm")) {
                pp_skip(pp, name);
                continue;
            }
            return kv_err(e, "%s: line %d: column layer: unknown layer '%s' (expected qkv_proj, o_proj, gate_up_proj, down_proj, "
                             "act_fn, layernorm, rotary_emb, embedding, final_layernorm or qk_norm)",
                          c->origin, c->line, name);
        }
        int64_t tok = 0;
        double us = 0;
        if (csv_int(c, ct, 1, &tok, e) || csv_num(c, cu, 1e-6, &us, e) || pp_add(pp, m, (CostOp)op, tok, 0, us * 1e3, e)) return -1;
    }
    return r;
}

/* LLMServingSim's attention.csv: prefill_chunk,kv_prefill,n_decode,kv_decode,time_us. */
static int read_lss_attention(const ProfileManifest *m, Csv *c, ProfilePoints *pp, KvErr *e)
{
    int cpc = csv_col(c, "prefill_chunk", 1, e), ckp = csv_col(c, "kv_prefill", 1, e), cnd = csv_col(c, "n_decode", 1, e),
        ckd = csv_col(c, "kv_decode", 1, e), cu = csv_col(c, "time_us", 1, e);
    if (cpc < 0 || ckp < 0 || cnd < 0 || ckd < 0 || cu < 0) return -1;
    int r;
    while ((r = csv_row(c, e)) > 0) {
        pp->rows++;
        int64_t pc = 0, kp = 0, nd = 0, kd = 0;
        double us = 0;
        if (csv_int(c, cpc, 0, &pc, e) || csv_int(c, ckp, 0, &kp, e) || csv_int(c, cnd, 0, &nd, e) || csv_int(c, ckd, 0, &kd, e) ||
            csv_num(c, cu, 1e-6, &us, e))
            return -1;
        if (pc > 0 && nd > 0) {
            pp_skip(pp, "mixed prefill+decode batches");
            continue;
        }
        if (pc > 0) {
            if (pp_add(pp, m, OP_ATTN_PREFILL, pc, kp, us * 1e3, e)) return -1;
        } else if (nd > 0) {
            if (kd < 1)
                return kv_err(e, "%s: line %d: column kv_decode: expected >= 1 in a decode row, got '%s'", c->origin, c->line, c->f[ckd]);
            if (pp_add(pp, m, OP_ATTN_DECODE, nd, kd, us * 1e3, e)) return -1;
        } else
            return kv_err(e, "%s: line %d: columns prefill_chunk and n_decode: both 0, expected a prefill or decode batch", c->origin,
                          c->line);
    }
    return r;
}

int profile_read_csv(const ProfileManifest *m, const ModelSpec *model, const char *text, const char *origin, ProfilePoints *pp,
                     KvErr *e)
{
    Csv c;
    int rc = -1;
    if (csv_open(&c, text, origin, e)) goto out;
    size_t before = pp->rows;
    if (m->format == PROFILE_VIDUR) {
        if (csv_col(&c, "time_stats.attn_pre_proj.median", 0, e) >= 0)
            rc = read_vidur_mlp(m, model, &c, pp, e);
        else if (csv_col(&c, "time_stats.attn_decode.median", 0, e) >= 0)
            rc = read_vidur_attention(m, model, &c, pp, e);
        else
            kv_err(e, "%s: line 1: neither a Vidur mlp.csv (time_stats.attn_pre_proj.median) nor an attention.csv "
                      "(time_stats.attn_decode.median)",
                   origin);
    } else {
        if (csv_col(&c, "layer", 0, e) >= 0 && csv_col(&c, "tokens", 0, e) >= 0)
            rc = read_lss_dense(m, &c, pp, e);
        else if (csv_col(&c, "prefill_chunk", 0, e) >= 0)
            rc = read_lss_attention(m, &c, pp, e);
        else
            kv_err(e, "%s: line 1: neither an LLMServingSim dense.csv (layer,tokens,time_us) nor an attention.csv "
                      "(prefill_chunk,kv_prefill,n_decode,kv_decode,time_us)",
                   origin);
    }
    if (rc == 0 && pp->rows == before) rc = kv_err(e, "%s: no data rows after the header", origin);
out:
    free(c.text);
    return rc;
}

/* ---- grids ---- */

static int cmp_point(const void *a, const void *b)
{
    const StorePoint *x = a, *y = b;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    if (x->p1 != y->p1) return x->p1 < y->p1 ? -1 : 1;
    if (x->p2 != y->p2) return x->p2 < y->p2 ? -1 : 1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sort and fold equal shapes into one point (median of their values; n summed). */
static int fold_duplicates(ProfilePoints *pp, KvErr *e)
{
    qsort(pp->v, pp->n, sizeof *pp->v, cmp_point);
    size_t w = 0;
    double *vals = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < pp->n;) {
        size_t j = i;
        while (j < pp->n && cmp_point(&pp->v[i], &pp->v[j]) == 0) j++;
        StorePoint p = pp->v[i];
        if (j - i > 1) {
            if (j - i > cap) {
                cap = j - i;
                double *nv = realloc(vals, cap * sizeof *nv);
                if (!nv) {
                    free(vals);
                    return kv_err(e, "out of memory");
                }
                vals = nv;
            }
            for (size_t k = i; k < j; k++) vals[k - i] = pp->v[k].median_ns;
            qsort(vals, j - i, sizeof *vals, cmp_double);
            size_t h = (j - i) / 2;
            p.median_ns = (j - i) % 2 ? vals[h] : 0.5 * (vals[h - 1] + vals[h]);
            p.p10_ns = p.p90_ns = p.median_ns;
            p.n = (int)kv_min_i64((int64_t)p.n * (int64_t)(j - i), 1000000000);
        }
        pp->v[w++] = p;
        i = j;
    }
    free(vals);
    pp->n = w;
    return 0;
}

/* Unique sorted values of v[0..n) into out (caller's array of n); returns the count. */
static size_t uniq(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (!w || v[w - 1] != v[i]) v[w++] = v[i];
    return w;
}

/* The decode points (op sorted, p1 then p2 = context per request) [a, b) of pp->v resampled onto
 * total context; the result appended to out. */
static int resample_decode(const ProfilePoints *pp, size_t a, size_t b, ProfilePoints *out, const ProfileManifest *m, KvErr *e)
{
    size_t n = b - a;
    int64_t *tot = malloc((n ? n : 1) * sizeof *tot);
    if (!tot) return kv_err(e, "out of memory");
    for (size_t i = 0; i < n; i++) tot[i] = pp->v[a + i].p1 * pp->v[a + i].p2;
    size_t nt = uniq(tot, n);
    int rc = 0;
    for (size_t i = a; i < b && rc == 0;) {
        size_t j = i;
        while (j < b && pp->v[j].p1 == pp->v[i].p1) j++;
        const StorePoint *row = &pp->v[i];
        size_t nr = j - i;
        int64_t batch = row->p1;
        for (size_t t = 0; t < nt && rc == 0; t++) {
            double kv = (double)tot[t] / (double)batch, ns;
            if (kv <= (double)row[0].p2) {
                ns = row[0].median_ns;
                if (kv < (double)row[0].p2) out->decode_below++;
            } else if (kv >= (double)row[nr - 1].p2) {
                if (nr == 1)
                    ns = row[0].median_ns;
                else {
                    const StorePoint *x = &row[nr - 2], *y = &row[nr - 1];
                    ns = y->median_ns + (kv - (double)y->p2) * (y->median_ns - x->median_ns) / (double)(y->p2 - x->p2);
                    if (ns < y->median_ns) ns = y->median_ns;
                }
                if (kv > (double)row[nr - 1].p2) out->decode_beyond++;
            } else {
                size_t k = 1;
                while ((double)row[k].p2 < kv) k++;
                const StorePoint *x = &row[k - 1], *y = &row[k];
                ns = x->median_ns + (kv - (double)x->p2) * (y->median_ns - x->median_ns) / (double)(y->p2 - x->p2);
            }
            rc = pp_add(out, m, OP_ATTN_DECODE, batch, tot[t], ns, e);
            if (rc == 0) out->v[out->n - 1].n = row[0].n;
        }
        i = j;
    }
    free(tot);
    return rc;
}

/* The prefill points [a, b) (sorted by chunk, context) cut to their largest full grid: the context
 * set of one chunk, and every chunk that has all of it; the largest such product wins (the first
 * chunk on ties). */
static int prefill_grid(const ProfilePoints *pp, size_t a, size_t b, ProfilePoints *out, KvErr *e)
{
    size_t best_area = 0, best_i = a, best_len = 0;
    for (size_t i = a; i < b;) {
        size_t j = i;
        while (j < b && pp->v[j].p1 == pp->v[i].p1) j++;
        size_t rows = 0;
        for (size_t k = a; k < b;) {
            size_t l = k;
            while (l < b && pp->v[l].p1 == pp->v[k].p1) l++;
            size_t hit = 0;
            for (size_t x = i; x < j; x++)
                for (size_t y = k; y < l; y++)
                    if (pp->v[y].p2 == pp->v[x].p2) {
                        hit++;
                        break;
                    }
            if (hit == j - i) rows++;
            k = l;
        }
        if (rows * (j - i) > best_area) {
            best_area = rows * (j - i);
            best_i = i;
            best_len = j - i;
        }
        i = j;
    }
    for (size_t k = a; k < b;) {
        size_t l = k;
        while (l < b && pp->v[l].p1 == pp->v[k].p1) l++;
        size_t hit = 0;
        for (size_t x = best_i; x < best_i + best_len; x++)
            for (size_t y = k; y < l; y++)
                if (pp->v[y].p2 == pp->v[x].p2) {
                    hit++;
                    break;
                }
        for (size_t y = k; y < l; y++) {
            int in = 0;
            if (hit == best_len)
                for (size_t x = best_i; x < best_i + best_len; x++)
                    if (pp->v[y].p2 == pp->v[x].p2) in = 1;
            if (!in) {
                out->off_grid++;
                continue;
            }
            if (out->n == out->cap) {
                size_t nc = out->cap ? out->cap * 2 : 1024;
                StorePoint *v = realloc(out->v, nc * sizeof *v);
                if (!v) return kv_err(e, "out of memory");
                out->v = v;
                out->cap = nc;
            }
            out->v[out->n++] = pp->v[y];
        }
        k = l;
    }
    return 0;
}

int profile_finish(const ProfileManifest *m, ProfilePoints *pp, KvErr *e)
{
    if (fold_duplicates(pp, e)) return -1;
    ProfilePoints out = *pp;
    out.v = NULL;
    out.n = out.cap = 0;
    for (size_t i = 0; i < pp->n;) {
        size_t j = i;
        while (j < pp->n && pp->v[j].op == pp->v[i].op) j++;
        int rc = 0;
        if (pp->v[i].op == OP_ATTN_DECODE)
            rc = resample_decode(pp, i, j, &out, m, e);
        else if (pp->v[i].op == OP_ATTN_PREFILL)
            rc = prefill_grid(pp, i, j, &out, e);
        else
            for (size_t k = i; k < j && rc == 0; k++) {
                rc = pp_add(&out, m, pp->v[k].op, pp->v[k].p1, 0, pp->v[k].median_ns, e);
                if (rc == 0) out.v[out.n - 1] = pp->v[k];
            }
        if (rc) {
            profile_points_free(&out);
            return -1;
        }
        i = j;
    }
    profile_points_free(pp);
    *pp = out;
    qsort(pp->v, pp->n, sizeof *pp->v, cmp_point);
    return 0;
}

/* ---- writing ---- */

typedef struct SpecFill {
    CostStore *st;
    int64_t run;
    const unsigned char *measured; /* OP_COUNT flags */
    size_t n;
    unsigned char added[OP_COUNT];
} SpecFill;

static int spec_fill(void *ctx, const StorePoint *p, KvErr *e)
{
    SpecFill *f = ctx;
    if (f->measured[p->op] || p->op == OP_LAYER_PREFILL) return 0; /* layer_prefill: a sum of parts measured elsewhere */
    f->added[p->op] = 1;
    f->n++;
    return f->st ? store_add_point(f->st, f->run, p, e) : 0;
}

typedef struct SameRun {
    const StoreRunMeta *want;
    int64_t id;
} SameRun;

static int find_same_run(void *ctx, const StoreRunMeta *r)
{
    SameRun *s = ctx;
    const StoreRunMeta *w = s->want;
    if (r->complete && !strcmp(r->backend, w->backend) && !strcmp(r->device, w->device) && !strcmp(r->model, w->model) &&
        !strcmp(r->dtype, w->dtype) && r->tp == w->tp && !strcmp(r->started_at, w->started_at) && !strcmp(r->notes, w->notes)) {
        s->id = r->id;
        return 1;
    }
    return 0;
}

static void base_meta(StoreRunMeta *r, const ProfileManifest *m, const char *backend)
{
    memset(r, 0, sizeof *r);
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    snprintf(r->device, sizeof r->device, "%s", m->device);
    snprintf(r->host, sizeof r->host, "%s", m->repo);
    snprintf(r->git_rev, sizeof r->git_rev, "%.12s", m->commit);
    /* the source's own date, not the import's: importing twice gives the same dump */
    snprintf(r->started_at, sizeof r->started_at, "%s", m->measured_at);
    snprintf(r->finished_at, sizeof r->finished_at, "%s", m->measured_at);
    snprintf(r->model, sizeof r->model, "%s", m->model);
    snprintf(r->dtype, sizeof r->dtype, "%s", m->dtype);
    r->tp = m->tp;
}

int profile_resolve(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, const ModelSpec **model,
                    const GpuSpec **gpu, KvDtype *dt, KvErr *e)
{
    if (!(*model = model_find(mc, m->model, e))) return kv_err_prefix(e, "%s: key \"model\": ", m->origin);
    if (!(*gpu = hw_find_gpu(hw, m->device, e))) return kv_err_prefix(e, "%s: key \"device\": ", m->origin);
    if (kv_dtype_parse(m->dtype, dt, e) != 0) return kv_err_prefix(e, "%s: key \"dtype\": ", m->origin);
    return 0;
}

int profile_import(CostStore *st, const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, ProfileImportStats *out,
                   KvErr *e)
{
    memset(out, 0, sizeof *out);
    ProfilePoints *pp = &out->pp;
    const ModelSpec *model = NULL;
    const GpuSpec *gpu = NULL;
    KvDtype dt;
    if (profile_resolve(m, mc, hw, &model, &gpu, &dt, e) != 0) return -1;
    const PlatformSpec *plat = NULL;
    if (m->platform[0] && !(plat = hw_find_platform(hw, m->platform, e))) return kv_err_prefix(e, "%s: key \"platform\": ", m->origin);
    for (int i = 0; i < m->n_files; i++) {
        size_t len;
        char *text = kv_read_file(m->files[i], &len, e);
        if (!text) return kv_err_prefix(e, "%s: files[%d]: ", m->origin, i), profile_points_free(pp), -1;
        int rc = profile_read_csv(m, model, text, m->files[i], pp, e);
        free(text);
        if (rc) return profile_points_free(pp), -1;
    }
    if (profile_finish(m, pp, e)) return profile_points_free(pp), -1;
    unsigned char measured[OP_COUNT] = {0};
    for (size_t i = 0; i < pp->n; i++) measured[pp->v[i].op] = 1;

    StoreRunMeta r;
    base_meta(&r, m, "measured");
    snprintf(r.notes, sizeof r.notes,
             "measured by %s at %s, %s (licence %s), imported as %s; %zu rows, %zu skipped (%s); attn_prefill: %zu off the full grid; "
             "attn_decode resampled to total context: %zu below, %zu beyond the measured context",
             m->repo, m->commit, m->path, m->licence, profile_format_name(m->format), pp->rows, pp->skipped_rows,
             pp->skipped[0] ? pp->skipped : "none", pp->off_grid, pp->decode_below, pp->decode_beyond);
    SameRun same = {&r, 0};
    if (store_list_runs(st, find_same_run, &same, e)) return profile_points_free(pp), -1;
    if (same.id) { /* this very profile is there: importing it again adds nothing */
        out->already = same.id;
        out->measured_run = same.id;
        return profile_points_free(pp), 0;
    }
    if (store_begin_run(st, &r, e)) return profile_points_free(pp), -1;
    for (size_t i = 0; i < pp->n; i++)
        if (store_add_point(st, r.id, &pp->v[i], e)) {
            KvErr e2;
            store_end_run(st, r.id, 0, &e2);
            return profile_points_free(pp), -1;
        }
    if (store_end_run(st, r.id, 1, e)) return profile_points_free(pp), -1;
    out->measured_run = r.id;
    out->measured_points = pp->n;
    profile_points_free(pp);

    /* the ops the source does not measure, from the catalog */
    ModelLayout ly = {model, dt, m->tp, 1};
    if (model_layout_check(&ly, e) != 0) return -1;
    SpecInputs in;
    if (plat) {
        spec_inputs_from_platform(&in, hw, plat, &ly);
        in.gpu = gpu;
    } else {
        memset(&in, 0, sizeof in);
        in.ly = &ly;
        in.gpu = gpu;
        in.link = gpu->pcie[0] ? hw_find_link(hw, gpu->pcie, e) : NULL;
    }
    in.stack = spec_stack_resolve(gpu, SPEC_STACK_AUTO);
    /* a dry pass names the ops the run will hold, for its notes */
    SpecFill f = {NULL, 0, measured, 0, {0}};
    if (spec_generate(&in, spec_fill, &f, e) != 0) return -1;
    if (!f.n) return 0;
    char ops[320] = "";
    for (int op = 0; op < OP_COUNT; op++)
        if (f.added[op]) kv_catf(ops, sizeof ops, "%s%s", ops[0] ? " " : "", cost_op_name((CostOp)op));
    StoreRunMeta s;
    base_meta(&s, m, "spec");
    snprintf(s.host, sizeof s.host, "catalog");
    snprintf(s.notes, sizeof s.notes, "not measured by %s@%.12s: spec roofline from the catalog (%s%s) for %s", m->repo, m->commit,
             plat ? "platform " : "GPU host link ", plat ? plat->name : gpu->pcie, ops);
    if (store_begin_run(st, &s, e)) return -1;
    f = (SpecFill){st, s.id, measured, 0, {0}};
    if (spec_generate(&in, spec_fill, &f, e) != 0 || store_end_run(st, s.id, 1, e) != 0) {
        KvErr e2;
        store_end_run(st, s.id, 0, &e2);
        return -1;
    }
    out->spec_run = s.id;
    out->spec_points = f.n;
    return 0;
}
