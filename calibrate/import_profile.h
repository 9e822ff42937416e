/* import_profile.h — public per-op GPU profiles (Vidur's profiling CSVs, LLMServingSim's profile
 * bundles) read into the cost store as measured runs (docs/fidelity.md "Measured stores").
 *
 * Responsible for: the manifest that names a profile, its files and its source (profile.json next
 * to the CSVs); reading each format's CSVs, mapping their op names, shapes and units onto kvsim's
 * ops (ops.h); putting the points on the full grids the cost model reads (cost.h); and writing one
 * run with backend "measured" whose notes carry the source repository, commit, path and licence.
 * Ops a source does not measure (PCIe, SSD, NIC, HCache's K/V projection, ...) are not invented:
 * profile_import writes them as a second run with backend "spec" from the catalog, its notes saying
 * so, and the store's ranking (measured before spec, per op) makes kvsim read each op from the
 * right run.
 * Not responsible for: the store itself (sim/cost/store.c), the spec roofline (sim/cost/spec.c).
 *
 * Mapping (time units: Vidur milliseconds, LLMServingSim microseconds; stored as ns):
 *   Vidur mlp.csv            attn_pre_proj→gemm_qkv, attn_post_proj→gemm_o, mlp_up_proj→gemm_ffn_up,
 *                            mlp_down_proj→gemm_ffn_down, mlp_act→act, input_layernorm→norm,
 *                            attn_rope→rope; p1 = num_tokens; rows of other tensor-parallel degrees
 *                            than the manifest's are skipped.
 *   Vidur attention.csv      is_prefill True: attn_prefill(prefill_chunk_size, kv_cache_size);
 *                            False: attn_decode(batch_size, batch_size × kv_cache_size).
 *   LLMServingSim dense.csv  qkv_proj, o_proj, gate_up_proj, down_proj, act_fn, layernorm (→ norm),
 *                            rotary_emb (→ rope); embedding and final_layernorm are per-model, not
 *                            per-layer, and Qwen3's qk_norm has no op of its own in kvsim: skipped
 *                            (counted).
 *   LLMServingSim attention.csv  n_decode = 0: attn_prefill(prefill_chunk, kv_prefill);
 *                            prefill_chunk = 0: attn_decode(n_decode, n_decode × kv_decode);
 *                            mixed rows have no kvsim op and are skipped (counted).
 * Grids: decode is measured per (batch, context per request) and stored per (batch, total context):
 * each batch's row is resampled onto the union of the measured products batch × context, linearly
 * in the context per request (below the smallest measured context: its time; above the largest:
 * linear extrapolation from the last two; both counted in the notes). Prefill keeps the largest full
 * sub-grid (chunk × context) of the measured points; the points outside it are counted, not stored.
 * Several rows with one shape (Vidur repeats some) give their median.
 *
 * Errors name the file, the line, the column and the value ("FILE: line 12: column time_us: expected
 * a number > 0, got 'abc'"); a file that lacks a required column, has no data row for an op the
 * format must give, or whose model dimensions differ from the catalog's model is refused.
 */
#ifndef KV_IMPORT_PROFILE_H
#define KV_IMPORT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cost/store.h"

typedef enum ProfileFormat { PROFILE_VIDUR = 1, PROFILE_LLMSERVINGSIM = 2 } ProfileFormat;

#define PROFILE_MAX_FILES 4

/* profile.json: {"format": "vidur"|"llmservingsim", "device": GPU catalog name, "model": model
 * catalog name, "dtype", "tp", "repetitions": n behind each point as the source states it,
 * "source": {"repo", "commit" (40 hex), "path", "licence"}, "files": [CSV names relative to the
 * manifest's folder], "platform": optional catalog platform for the ops the source does not
 * measure (default: the GPU's own host link only), "measured_at": the source's date, UTC
 * "YYYY-MM-DDTHH:MM:SSZ" (the runs' started_at, so that importing twice gives the same dump)} */
typedef struct ProfileManifest {
    ProfileFormat format;
    char device[128];
    char model[64];
    char dtype[8];
    int tp;
    int repetitions;
    char repo[128];
    char commit[48];
    char path[256];
    char licence[32];
    char platform[64];
    char measured_at[24];               /* when the source measured (its profile or commit date) */
    char files[PROFILE_MAX_FILES][512]; /* resolved paths (folder of the manifest + name) */
    int n_files;
    char origin[512];                   /* the manifest's path, for messages */
} ProfileManifest;

const char *profile_format_name(ProfileFormat f);
/* Read and check a manifest (every field present, of its type, in range). */
int profile_manifest_read(const char *path, ProfileManifest *m, KvErr *e);

/* The points one profile gives, on kvsim's grids, and what was left out. */
typedef struct ProfilePoints {
    StorePoint *v;
    size_t n, cap;
    size_t rows;              /* data rows read */
    size_t skipped_rows;      /* rows of ops or shapes kvsim has no op for (named in skipped) */
    size_t off_grid;          /* prefill points outside the largest full grid */
    size_t decode_below;      /* resampled decode points below the smallest measured context */
    size_t decode_beyond;     /* ... beyond the largest (extrapolated) */
    char skipped[256];        /* names of the skipped row kinds, comma-separated */
} ProfilePoints;
void profile_points_free(ProfilePoints *pp);

/* Read one CSV (text of file `origin`) of the manifest's format into pp; the file's kind (mlp or
 * attention, dense or attention) is told by its header. model: the catalog's model, for checks. */
int profile_read_csv(const ProfileManifest *m, const ModelSpec *model, const char *text, const char *origin,
                     ProfilePoints *pp, KvErr *e);
/* After every file: fold duplicates, resample decode, cut prefill to its grid, sort. */
int profile_finish(const ProfileManifest *m, ProfilePoints *pp, KvErr *e);

/* What profile_import did. */
typedef struct ProfileImportStats {
    int64_t measured_run, spec_run; /* ids (spec_run 0 when every op was measured) */
    int64_t already;                /* > 0: the store held this profile's measured run already
                                     * (same source, shape and notes); nothing was written */
    size_t measured_points, spec_points;
    ProfilePoints pp;               /* the counts (v freed) */
} ProfileImportStats;

/* The manifest's model, GPU and dtype from the catalogs (an error names the manifest's key). */
int profile_resolve(const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw, const ModelSpec **model,
                    const GpuSpec **gpu, KvDtype *dt, KvErr *e);

/* Read the manifest's files and write the measured run and the run of unmeasured ops to st; a
 * profile imported before (its measured run found) is not written again.
 * hw may hold an overlay (a GPU the embedded catalog lacks). All or nothing per run. */
int profile_import(CostStore *st, const ProfileManifest *m, const ModelCatalog *mc, const HwCatalog *hw,
                   ProfileImportStats *out, KvErr *e);

#endif
