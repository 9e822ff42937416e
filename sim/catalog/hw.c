/* hw.c — reading and querying the hardware catalog (see hw.h for the file format).
 *
 * Responsible for: turning configs/hardware.json (or an override) into a validated HwCatalog,
 * with error messages that name the origin and the JSON path of the offending value, and
 * case-insensitive lookups by name whose failures list every known name.
 * Not responsible for: what the numbers mean to the simulation (spec.c, sim/cluster), or where
 * catalog text comes from (kv_catalog_text in util.c).
 *
 * How: each section has a table of field descriptors (key, kind, where it goes, required or
 * not, whether zero is allowed). A generic reader walks an entry, refuses unknown and repeated
 * keys, converts every value through units.c, then a per-section check enforces the relations
 * between fields (h2d <= theoretical, effective <= line, ...). References (a GPU's default link,
 * a platform's gpu/link/ssd/nic) are resolved after every section is read, so sections may come
 * in any order. Cost: O(entries * keys^2) for the repeated-key check; the duplicate-name checks,
 * the overlay's merge and the references go through a name index (sim/base/nameidx.h), O(1)
 * expected per name, so an overlay of tens of thousands of entries loads in linear time. Messages
 * about refused JSON (malformed text, the value found) come from json_msg.h, as model.c's do.
 * Invariants: on failure the catalog is left empty (all pointers NULL, counts 0) and the KvErr
 * holds the message; on success hw.h's invariants hold.
 */
#include "sim/catalog/hw.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/base/nameidx.h"
#include "sim/base/units.h"
#include "sim/catalog/json_msg.h"

/* ---- field descriptors ---- */

typedef enum FieldKind {
    F_STR,      /* char array of `cap` bytes */
    F_FLOPS,    /* double, "312 TFLOP/s" */
    F_RATE,     /* double, "25.5 GB/s" */
    F_SIZE,     /* uint64_t, "80 GB" */
    F_DURATION, /* int64_t, "5 us" */
    F_INT,      /* int, JSON integer >= 0 (>= 1 when zero is not allowed) */
    F_REAL,     /* double, JSON number >= 0 */
} FieldKind;

enum { REQ = 1, ZERO_OK = 2, AUX = 4 /* stored in the side record, not the spec */ };

typedef struct FieldDef {
    const char *key;
    FieldKind kind;
    size_t off;
    size_t cap; /* F_STR only */
    int flags;
    double lo, hi; /* numbers: the plausible range (in bytes, B/s, FLOP/s, ns); 0 passes when ZERO_OK */
} FieldDef;

/* Names a platform (or a GPU's host link) refers to, held until every section is read. */
typedef struct PlatformRefs {
    char gpu[64];
    char link[64];
    char ssd[64];
    char nic[64];
    char memdev[KV_MEMDEVS][64];
} PlatformRefs;

#define STR_FIELD(T, k, member, fl) {k, F_STR, offsetof(T, member), sizeof(((T *)0)->member), fl, 0, 0}
#define NUM_FIELD_(T, k, kind, member, fl, lo, hi) {k, kind, offsetof(T, member), 0, fl, lo, hi}
#define NUM_FIELD(T, k, kind, member, fl, range) NUM_FIELD_(T, k, kind, member, fl, range) /* range: R_* below */
#define REF_FIELD(k, member, fl) {k, F_STR, offsetof(PlatformRefs, member), sizeof(((PlatformRefs *)0)->member), (fl) | AUX, 0, 0}

/* Plausibility ranges, wide enough for any real part of the last two decades and the next one, narrow
 * enough that a slip of units (a rate in B/s meant as GB/s, "1e-20 B/s") or an absurd value is refused
 * at load instead of turning into an instant or endless transfer. With these bounds every product the
 * simulator forms from the catalog (capacities × counts, bytes / rate in ns) stays far inside 64 bits. */
#define R_FLOPS 1e11, 1e17       /* 100 GFLOP/s .. 100 PFLOP/s */
#define R_FLOPS32 1e10, 1e17     /* 10 GFLOP/s .. 100 PFLOP/s */
#define R_HBM 1e8, 1e14          /* 100 MB .. 100 TB */
#define R_HBM_BW 1e9, 1e15       /* 1 GB/s .. 1 PB/s */
#define R_GPU_LINK 1e8, 1e14     /* 100 MB/s .. 100 TB/s */
#define R_SM 1, 1e5
#define R_HOST_LINK 1e7, 1e13    /* 10 MB/s .. 10 TB/s */
#define R_LATENCY 0, 1e9         /* 0 .. 1 s, in ns */
#define R_SSD_BW 1e6, 1e12       /* 1 MB/s .. 1 TB/s per drive */
#define R_SSD_CAP 1e6, 1e15      /* 1 MB .. 1 PB per drive */
#define R_IOPS 1, 1e10
#define R_DWPD 0.01, 1000        /* drive writes per day */
#define R_YEARS 0.1, 30
#define R_MIXED 0.05, 1          /* share of the taking-turns throughput kept while reads and writes mix */
#define R_NIC 1e5, 1e13          /* 0.8 Mbit/s .. 10 TB/s */
#define R_COUNT 1, 4096          /* GPUs per node, SSDs per node */
#define R_CHUNK 512, 1073741824  /* 512 B .. 1 GiB */
#define R_DRAM 1e6, 1e16         /* 1 MB .. 10 PB */
#define R_DRAM_BW 1e8, 1e14      /* 100 MB/s .. 100 TB/s */
#define R_REMOTE 1e6, 1e18       /* 1 MB .. 1 EB */
#define R_RATIO 0, 0            /* (0, 1]: checked with its own message in check_link */

static const FieldDef GPU_FIELDS[] = {
    STR_FIELD(GpuSpec, "name", name, REQ),
    STR_FIELD(GpuSpec, "full_name", full_name, REQ),
    NUM_FIELD(GpuSpec, "fp16", F_FLOPS, fp16_flops, REQ, R_FLOPS),
    NUM_FIELD(GpuSpec, "fp8", F_FLOPS, fp8_flops, ZERO_OK, R_FLOPS),
    NUM_FIELD(GpuSpec, "fp32", F_FLOPS, fp32_flops, REQ, R_FLOPS32),
    NUM_FIELD(GpuSpec, "mem", F_SIZE, mem_bytes, REQ, R_HBM),
    NUM_FIELD(GpuSpec, "mem_bw", F_RATE, mem_bw_bytes_per_s, REQ, R_HBM_BW),
    NUM_FIELD(GpuSpec, "gpu_link", F_RATE, gpu_link_bytes_per_s, ZERO_OK, R_GPU_LINK),
    NUM_FIELD(GpuSpec, "sm_count", F_INT, sm_count, ZERO_OK, R_SM),
    STR_FIELD(GpuSpec, "pcie", pcie, REQ),
    STR_FIELD(GpuSpec, "basis", basis, REQ),
    STR_FIELD(GpuSpec, "source", source, REQ),
    STR_FIELD(GpuSpec, "note", note, 0),
};

static const FieldDef LINK_FIELDS[] = {
    STR_FIELD(LinkSpec, "name", name, REQ),
    NUM_FIELD(LinkSpec, "theoretical", F_RATE, theoretical_bytes_per_s, REQ, R_HOST_LINK),
    NUM_FIELD(LinkSpec, "h2d", F_RATE, h2d_bytes_per_s, REQ, R_HOST_LINK),
    NUM_FIELD(LinkSpec, "d2h", F_RATE, d2h_bytes_per_s, REQ, R_HOST_LINK),
    NUM_FIELD(LinkSpec, "h2d_bidir", F_RATE, h2d_bidir_bytes_per_s, REQ, R_HOST_LINK),
    NUM_FIELD(LinkSpec, "d2h_bidir", F_RATE, d2h_bidir_bytes_per_s, REQ, R_HOST_LINK),
    NUM_FIELD(LinkSpec, "pageable_factor", F_REAL, pageable_factor, REQ, R_RATIO),
    NUM_FIELD(LinkSpec, "latency", F_DURATION, latency_ns, REQ | ZERO_OK, R_LATENCY),
    STR_FIELD(LinkSpec, "basis", basis, REQ),
    STR_FIELD(LinkSpec, "source", source, REQ),
    STR_FIELD(LinkSpec, "note", note, 0),
};

static const FieldDef SSD_FIELDS[] = {
    STR_FIELD(SsdSpec, "name", name, REQ),
    STR_FIELD(SsdSpec, "full_name", full_name, 0),
    NUM_FIELD(SsdSpec, "read", F_RATE, read_bytes_per_s, REQ, R_SSD_BW),
    NUM_FIELD(SsdSpec, "write", F_RATE, write_bytes_per_s, REQ, R_SSD_BW),
    NUM_FIELD(SsdSpec, "read_latency", F_DURATION, read_latency_ns, REQ | ZERO_OK, R_LATENCY),
    NUM_FIELD(SsdSpec, "write_latency", F_DURATION, write_latency_ns, REQ | ZERO_OK, R_LATENCY),
    NUM_FIELD(SsdSpec, "capacity", F_SIZE, capacity_bytes, REQ, R_SSD_CAP),
    NUM_FIELD(SsdSpec, "read_iops", F_REAL, read_iops, ZERO_OK, R_IOPS),
    NUM_FIELD(SsdSpec, "dwpd", F_REAL, dwpd, ZERO_OK, R_DWPD),
    NUM_FIELD(SsdSpec, "warranty_years", F_REAL, warranty_years, ZERO_OK, R_YEARS),
    NUM_FIELD(SsdSpec, "mixed_efficiency", F_REAL, mixed_efficiency, 0, R_MIXED),
    STR_FIELD(SsdSpec, "basis", basis, REQ),
    STR_FIELD(SsdSpec, "source", source, REQ),
    STR_FIELD(SsdSpec, "note", note, 0),
};

static const FieldDef NIC_FIELDS[] = {
    STR_FIELD(NicSpec, "name", name, REQ),
    NUM_FIELD(NicSpec, "line", F_RATE, line_bytes_per_s, REQ, R_NIC),
    NUM_FIELD(NicSpec, "effective", F_RATE, bytes_per_s, REQ, R_NIC),
    NUM_FIELD(NicSpec, "latency", F_DURATION, latency_ns, REQ | ZERO_OK, R_LATENCY),
    STR_FIELD(NicSpec, "basis", basis, REQ),
    STR_FIELD(NicSpec, "source", source, REQ),
    STR_FIELD(NicSpec, "note", note, 0),
};

#define R_MEMDEV_BW 1e8, 1e12     /* 100 MB/s .. 1 TB/s per module */
#define R_MEMDEV_CAP 1e8, 1e14    /* 100 MB .. 100 TB per module */
static const FieldDef MEMDEV_FIELDS[] = {
    STR_FIELD(MemdevSpec, "name", name, REQ),
    STR_FIELD(MemdevSpec, "full_name", full_name, 0),
    NUM_FIELD(MemdevSpec, "read", F_RATE, read_bytes_per_s, REQ, R_MEMDEV_BW),
    NUM_FIELD(MemdevSpec, "write", F_RATE, write_bytes_per_s, REQ, R_MEMDEV_BW),
    NUM_FIELD(MemdevSpec, "latency", F_DURATION, latency_ns, REQ | ZERO_OK, R_LATENCY),
    NUM_FIELD(MemdevSpec, "capacity", F_SIZE, capacity_bytes, REQ, R_MEMDEV_CAP),
    STR_FIELD(MemdevSpec, "basis", basis, REQ),
    STR_FIELD(MemdevSpec, "source", source, REQ),
    STR_FIELD(MemdevSpec, "note", note, 0),
};

static const FieldDef PLATFORM_FIELDS[] = {
    STR_FIELD(PlatformSpec, "name", name, REQ),
    STR_FIELD(PlatformSpec, "description", description, REQ),
    REF_FIELD("gpu", gpu, REQ),
    NUM_FIELD(PlatformSpec, "gpus_per_node", F_INT, gpus_per_node, REQ, R_COUNT),
    REF_FIELD("link", link, REQ),
    REF_FIELD("ssd", ssd, 0),
    NUM_FIELD(PlatformSpec, "n_ssd", F_INT, n_ssd, 0, R_COUNT),
    NUM_FIELD(PlatformSpec, "stripe_chunk", F_SIZE, stripe_chunk_bytes, 0, R_CHUNK),
    NUM_FIELD(PlatformSpec, "dram", F_SIZE, dram_bytes, REQ | ZERO_OK, R_DRAM),
    NUM_FIELD(PlatformSpec, "dram_bw", F_RATE, dram_bytes_per_s, ZERO_OK, R_DRAM_BW),
    REF_FIELD("nic", nic, 0),
    NUM_FIELD(PlatformSpec, "remote", F_SIZE, remote_bytes, ZERO_OK, R_REMOTE),
#define PLATFORM_MEMDEV_FIELDS_(ID, KEY, WHAT, WHATS)                                                                   \
    REF_FIELD(KEY, memdev[MEMDEV_##ID], 0), NUM_FIELD(PlatformSpec, "n_" KEY, F_INT, n_memdev[MEMDEV_##ID], 0, R_COUNT),
    KV_MEMDEV_ROWS(PLATFORM_MEMDEV_FIELDS_)
    STR_FIELD(PlatformSpec, "source", source, REQ),
    STR_FIELD(PlatformSpec, "note", note, 0),
};

/* What a value of each kind looks like, for messages. */
static const char *kind_expect(FieldKind k)
{
    switch (k) {
    case F_STR: return "a string";
    case F_FLOPS: return "a compute rate with a unit such as \"312 TFLOP/s\"";
    case F_RATE: return "a rate with a unit such as \"25.5 GB/s\"";
    case F_SIZE: return "a size with a unit such as \"80 GB\"";
    case F_DURATION: return "a duration with a unit such as \"5 us\"";
    case F_INT: return "an integer";
    case F_REAL: return "a number";
    }
    return "a value";
}

/* A section of the catalog: its JSON key, what one entry is called, its fields and storage. */
typedef struct Section {
    const char *key;   /* "gpus" */
    const char *what;  /* "GPU" */
    const char *whats; /* "GPUs" */
    const FieldDef *fields;
    int n_fields;
    size_t stride;     /* sizeof the spec struct; the name is its first member */
} Section;

static const Section SEC_GPUS = {"gpus", "GPU", "GPUs", GPU_FIELDS, (int)KV_ARRAY_LEN(GPU_FIELDS), sizeof(GpuSpec)};
static const Section SEC_LINKS = {"links", "link", "links", LINK_FIELDS, (int)KV_ARRAY_LEN(LINK_FIELDS), sizeof(LinkSpec)};
static const Section SEC_SSDS = {"ssds", "SSD", "SSDs", SSD_FIELDS, (int)KV_ARRAY_LEN(SSD_FIELDS), sizeof(SsdSpec)};
static const Section SEC_NICS = {"nics", "NIC", "NICs", NIC_FIELDS, (int)KV_ARRAY_LEN(NIC_FIELDS), sizeof(NicSpec)};
#define SEC_MEMDEV_(ID, KEY, WHAT, WHATS) [MEMDEV_##ID] = {KEY, WHAT, WHATS, MEMDEV_FIELDS, (int)KV_ARRAY_LEN(MEMDEV_FIELDS), sizeof(MemdevSpec)},
static const Section SEC_MEMDEVS[KV_MEMDEVS] = {KV_MEMDEV_ROWS(SEC_MEMDEV_)};
static const Section SEC_PLATFORMS = {"platforms", "platform", "platforms", PLATFORM_FIELDS,
                                      (int)KV_ARRAY_LEN(PLATFORM_FIELDS), sizeof(PlatformSpec)};

_Static_assert(offsetof(GpuSpec, name) == 0 && offsetof(LinkSpec, name) == 0 && offsetof(SsdSpec, name) == 0 &&
                   offsetof(NicSpec, name) == 0 && offsetof(MemdevSpec, name) == 0 && offsetof(PlatformSpec, name) == 0,
               "every spec struct starts with its name");

/* Comma-separated names of n entries (name at the start of each stride-sized record); shortened
 * with "..." when it would not fit. */
static void join_names(char *buf, size_t cap, const void *base, int n, size_t stride)
{
    size_t used = 0;
    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, cap, "none");
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *name = (const char *)base + (size_t)i * stride;
        size_t need = strlen(name) + (i ? 2 : 0);
        if (used + need + 4 >= cap) {
            snprintf(buf + used, cap - used, "%s...", i ? ", " : "");
            return;
        }
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", name);
    }
}

/* Index of the entry named `name` (case-insensitive), or -1. */
static int find_index(const void *base, int n, size_t stride, const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < n; i++)
        if (strcasecmp((const char *)base + (size_t)i * stride, name) == 0) return i;
    return -1;
}

/* ---- reading one entry ---- */

typedef struct Ctx {
    const char *origin;
    KvErr *e;
} Ctx;

/* A value in the units of its kind, for messages ("25.50 GB/s", "1.07 GB", "10 us", "312.0 TFLOP/s"). */
static void fmt_kind(char *buf, int len, FieldKind k, double v)
{
    switch (k) {
    case F_FLOPS: kv_fmt_flops(buf, len, v); break;
    case F_RATE: kv_fmt_rate(buf, len, v); break;
    case F_SIZE: kv_fmt_size(buf, len, v); break;
    case F_DURATION: kv_fmt_duration(buf, len, v); break;
    default: snprintf(buf, (size_t)len, "%.15g", v); break;
    }
}

/* The value just stored at dst against the field's plausible range (0 passes where ZERO_OK). */
static int check_range(const Ctx *cx, const Section *s, int idx, const FieldDef *f, const void *dst, const char *text)
{
    if (f->lo == 0 && f->hi == 0) return 0;
    double v;
    switch (f->kind) {
    case F_SIZE: v = (double)*(const uint64_t *)dst; break;
    case F_DURATION: v = (double)*(const int64_t *)dst; break;
    case F_INT: v = (double)*(const int *)dst; break;
    default: v = *(const double *)dst; break;
    }
    if (v == 0 && (f->flags & ZERO_OK)) return 0;
    if (v >= f->lo && v <= f->hi) return 0;
    char got[48], lo[48], hi[48];
    fmt_kind(got, sizeof got, f->kind, v);
    fmt_kind(lo, sizeof lo, f->kind, f->lo);
    fmt_kind(hi, sizeof hi, f->kind, f->hi);
    return kv_err(cx->e, "%s: %s[%d].%s: %s%s%s%s is out of the plausible range [%s, %s]%s; check the value and its unit",
                  cx->origin, s->key, idx, f->key, text ? "\"" : "", text ? text : "", text ? "\" = " : "", got, lo, hi,
                  (f->flags & ZERO_OK) ? " (or 0 for none)" : "");
}

static int read_field(const Ctx *cx, const Section *s, int idx, const FieldDef *f, const cJSON *it, void *dst)
{
    char got[64]; /* the refused value, for messages */
    KvErr ue;
    if (f->kind == F_STR) {
        if (!cJSON_IsString(it))
            return kv_err(cx->e, "%s: %s[%d].%s: expected a string, got %s", cx->origin, s->key, idx, f->key,
                          kv_json_describe(it, got, sizeof got));
        size_t len = strlen(it->valuestring);
        if (len >= f->cap)
            return kv_err(cx->e, "%s: %s[%d].%s: too long (%zu characters; at most %zu)", cx->origin, s->key, idx,
                          f->key, len, f->cap - 1);
        if ((f->flags & REQ) && len == 0)
            return kv_err(cx->e, "%s: %s[%d].%s: must not be empty", cx->origin, s->key, idx, f->key);
        memcpy(dst, it->valuestring, len + 1);
        return 0;
    }
    if (f->kind == F_INT || f->kind == F_REAL) {
        if (!cJSON_IsNumber(it))
            return kv_err(cx->e, "%s: %s[%d].%s: expected %s, got %s", cx->origin, s->key, idx, f->key,
                          kind_expect(f->kind), kv_json_describe(it, got, sizeof got));
        double v = it->valuedouble;
        if (!isfinite(v) || v < 0 || (v == 0 && !(f->flags & ZERO_OK) && f->kind == F_INT))
            return kv_err(cx->e, "%s: %s[%d].%s: expected %s %s, got %.15g", cx->origin, s->key, idx, f->key,
                          kind_expect(f->kind), (f->flags & ZERO_OK) || f->kind == F_REAL ? ">= 0" : ">= 1", v);
        if (f->kind == F_INT) {
            if (v != floor(v) || v > INT_MAX)
                return kv_err(cx->e, "%s: %s[%d].%s: expected an integer, got %.15g", cx->origin, s->key, idx,
                              f->key, v);
            *(int *)dst = (int)v;
        } else {
            *(double *)dst = v;
        }
        return check_range(cx, s, idx, f, dst, NULL);
    }
    /* Quantities with units: strings. A bare JSON number goes through the same parser so the
     * message is the same as for "80" (it has no unit). */
    char numtext[64];
    const char *text;
    if (cJSON_IsString(it)) {
        text = it->valuestring;
    } else if (cJSON_IsNumber(it)) {
        snprintf(numtext, sizeof numtext, "%.15g", it->valuedouble);
        text = numtext;
    } else {
        return kv_err(cx->e, "%s: %s[%d].%s: expected %s, got %s", cx->origin, s->key, idx, f->key,
                      kind_expect(f->kind), kv_json_describe(it, got, sizeof got));
    }
    int rc = 0, zero = 0;
    switch (f->kind) {
    case F_FLOPS: rc = kv_parse_flops(text, (double *)dst, &ue); zero = rc == 0 && *(double *)dst == 0; break;
    case F_RATE: rc = kv_parse_rate(text, (double *)dst, &ue); zero = rc == 0 && *(double *)dst == 0; break;
    case F_SIZE: rc = kv_parse_size(text, (uint64_t *)dst, &ue); zero = rc == 0 && *(uint64_t *)dst == 0; break;
    case F_DURATION: rc = kv_parse_duration(text, (int64_t *)dst, &ue); zero = rc == 0 && *(int64_t *)dst == 0; break;
    default: break;
    }
    if (rc != 0) return kv_err(cx->e, "%s: %s[%d].%s: %s", cx->origin, s->key, idx, f->key, ue.msg);
    if (zero && !(f->flags & ZERO_OK))
        return kv_err(cx->e, "%s: %s[%d].%s: must be greater than zero, got \"%s\"", cx->origin, s->key, idx,
                      f->key, text);
    return check_range(cx, s, idx, f, dst, text);
}

/* Read one entry object into spec (and aux, for AUX fields). */
static int read_entry(const Ctx *cx, const Section *s, int idx, const cJSON *obj, void *spec, void *aux)
{
    char got[64]; /* the refused value, for messages */
    if (!cJSON_IsObject(obj))
        return kv_err(cx->e, "%s: %s[%d]: expected an object, got %s", cx->origin, s->key, idx,
                      kv_json_describe(obj, got, sizeof got));
    for (const cJSON *it = obj->child; it; it = it->next) {
        const FieldDef *f = NULL;
        for (int i = 0; i < s->n_fields; i++)
            if (strcmp(s->fields[i].key, it->string) == 0) f = &s->fields[i];
        if (!f) {
            char keys[512];
            size_t used = 0;
            for (int i = 0; i < s->n_fields && used < sizeof keys; i++)
                used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", i ? ", " : "", s->fields[i].key);
            return kv_err(cx->e, "%s: %s[%d]: unknown key \"%s\" (known keys: %s)", cx->origin, s->key, idx,
                          it->string, keys);
        }
        for (const cJSON *prev = obj->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0)
                return kv_err(cx->e, "%s: %s[%d].%s: key given twice", cx->origin, s->key, idx, it->string);
    }
    for (int i = 0; i < s->n_fields; i++) {
        const FieldDef *f = &s->fields[i];
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, f->key);
        if (!it || cJSON_IsNull(it)) {
            if (f->flags & REQ)
                return kv_err(cx->e, "%s: %s[%d].%s: missing (expected %s)", cx->origin, s->key, idx, f->key,
                              kind_expect(f->kind));
            continue;
        }
        void *dst = (char *)((f->flags & AUX) ? aux : spec) + f->off;
        if (read_field(cx, s, idx, f, it, dst) != 0) return -1;
    }
    return 0;
}

/* Relations between the fields of one entry. */
static int check_rate_le(const Ctx *cx, const Section *s, int idx, const char *key, double v, const char *other_key,
                         double other)
{
    if (v <= other) return 0;
    char a[32], b[32];
    kv_fmt_rate(a, sizeof a, v);
    kv_fmt_rate(b, sizeof b, other);
    return kv_err(cx->e, "%s: %s[%d].%s: %s is more than %s (%s); check the units", cx->origin, s->key, idx, key, a,
                  other_key, b);
}

static int check_link(const Ctx *cx, int i, const LinkSpec *l)
{
    const Section *s = &SEC_LINKS;
    if (check_rate_le(cx, s, i, "h2d", l->h2d_bytes_per_s, "theoretical", l->theoretical_bytes_per_s) ||
        check_rate_le(cx, s, i, "d2h", l->d2h_bytes_per_s, "theoretical", l->theoretical_bytes_per_s) ||
        check_rate_le(cx, s, i, "h2d_bidir", l->h2d_bidir_bytes_per_s, "h2d", l->h2d_bytes_per_s) ||
        check_rate_le(cx, s, i, "d2h_bidir", l->d2h_bidir_bytes_per_s, "d2h", l->d2h_bytes_per_s))
        return -1;
    if (!(l->pageable_factor > 0 && l->pageable_factor <= 1))
        return kv_err(cx->e, "%s: links[%d].pageable_factor: expected a ratio in (0, 1] (pageable / pinned), got %g",
                      cx->origin, i, l->pageable_factor);
    return 0;
}

static int check_nic(const Ctx *cx, int i, const NicSpec *n)
{
    return check_rate_le(cx, &SEC_NICS, i, "effective", n->bytes_per_s, "line", n->line_bytes_per_s);
}

/* Resolve one platform reference; -1 with a message naming the platform and the known names. */
static int resolve_ref(const Ctx *cx, int pi, const char *pname, const char *key, const char *ref, const Section *target,
                       const void *base, int n, const KvNameIdx *ix, int *out)
{
    int k = kv_nameidx_find(ix, ref);
    if (k >= 0) {
        *out = k;
        return 0;
    }
    char names[700];
    join_names(names, sizeof names, base, n, target->stride);
    return kv_err(cx->e, "%s: platforms[%d].%s: platform \"%s\" refers to unknown %s \"%s\" (known %s: %s)", cx->origin,
                  pi, key, pname, target->what, ref, target->whats, names);
}

/* the merged catalog's names per section a platform refers to (parse_layer) */
typedef struct RefIdx {
    KvNameIdx gpus, links, ssds, nics, memdevs[KV_MEMDEVS];
} RefIdx;

static int check_platform(const Ctx *cx, const HwCatalog *c, const RefIdx *ix, int i, PlatformSpec *p,
                          const PlatformRefs *r, const cJSON *obj)
{
    if (resolve_ref(cx, i, p->name, "gpu", r->gpu, &SEC_GPUS, c->gpus, c->n_gpus, &ix->gpus, &p->gpu) ||
        resolve_ref(cx, i, p->name, "link", r->link, &SEC_LINKS, c->links, c->n_links, &ix->links, &p->link))
        return -1;
    const cJSON *n_ssd = cJSON_GetObjectItemCaseSensitive(obj, "n_ssd");
    const cJSON *chunk = cJSON_GetObjectItemCaseSensitive(obj, "stripe_chunk");
    int has_n_ssd = n_ssd && !cJSON_IsNull(n_ssd);
    int has_chunk = chunk && !cJSON_IsNull(chunk);
    if (r->ssd[0]) {
        if (resolve_ref(cx, i, p->name, "ssd", r->ssd, &SEC_SSDS, c->ssds, c->n_ssds, &ix->ssds, &p->ssd)) return -1;
        if (!has_n_ssd)
            return kv_err(cx->e,
                          "%s: platforms[%d].n_ssd: missing (platform \"%s\" has an ssd; expected the number of drives)",
                          cx->origin, i, p->name);
        if (!has_chunk)
            return kv_err(cx->e, "%s: platforms[%d].stripe_chunk: missing (platform \"%s\" has an ssd; expected %s)",
                          cx->origin, i, p->name, kind_expect(F_SIZE));
    } else {
        p->ssd = -1;
        if (has_n_ssd || has_chunk)
            return kv_err(cx->e, "%s: platforms[%d].%s: given, but platform \"%s\" has no \"ssd\"", cx->origin, i,
                          has_n_ssd ? "n_ssd" : "stripe_chunk", p->name);
    }
    for (int m = 0; m < KV_MEMDEVS; m++) {
        const char *key = kv_memdev_row(m)->key;
        char n_key[80];
        snprintf(n_key, sizeof n_key, "n_%s", key);
        const cJSON *n_md = cJSON_GetObjectItemCaseSensitive(obj, n_key);
        int has_n = n_md && !cJSON_IsNull(n_md);
        if (r->memdev[m][0]) {
            if (resolve_ref(cx, i, p->name, key, r->memdev[m], &SEC_MEMDEVS[m], c->memdevs[m], c->n_memdevs[m], &ix->memdevs[m],
                            &p->memdev[m]))
                return -1;
            if (!has_n)
                return kv_err(cx->e, "%s: platforms[%d].%s: missing (platform \"%s\" has %s memory; expected the number of modules)",
                              cx->origin, i, n_key, p->name, key);
        } else {
            p->memdev[m] = -1;
            if (has_n)
                return kv_err(cx->e, "%s: platforms[%d].%s: given, but platform \"%s\" has no \"%s\"", cx->origin, i, n_key, p->name,
                              key);
        }
    }
    if (r->nic[0]) {
        if (resolve_ref(cx, i, p->name, "nic", r->nic, &SEC_NICS, c->nics, c->n_nics, &ix->nics, &p->nic)) return -1;
    } else {
        p->nic = -1;
        if (p->remote_bytes)
            return kv_err(cx->e, "%s: platforms[%d].remote: given, but platform \"%s\" has no \"nic\"", cx->origin, i,
                          p->name);
    }
    return 0;
}

/* ---- whole catalog ---- */

/* a section's names into a fresh index (names unique: every section was checked) */
static int names_index(KvNameIdx *x, const void *base, int n, size_t stride)
{
    if (kv_nameidx_init(x, (size_t)n) != 0) return -1;
    for (int i = 0; i < n; i++)
        if (kv_nameidx_add(x, (const char *)base + (size_t)i * stride, i) != 0) return -1;
    return 0;
}

static int ref_idx_build(RefIdx *ix, const HwCatalog *c)
{
    if (names_index(&ix->gpus, c->gpus, c->n_gpus, sizeof(GpuSpec)) ||
        names_index(&ix->links, c->links, c->n_links, sizeof(LinkSpec)) ||
        names_index(&ix->ssds, c->ssds, c->n_ssds, sizeof(SsdSpec)) || names_index(&ix->nics, c->nics, c->n_nics, sizeof(NicSpec)))
        return -1;
    for (int m = 0; m < KV_MEMDEVS; m++)
        if (names_index(&ix->memdevs[m], c->memdevs[m], c->n_memdevs[m], sizeof(MemdevSpec))) return -1;
    return 0;
}

/* the catalog's top-level keys, in the order messages list them */
static int top_key_list(const char **keys)
{
    int n = 0;
    static const char *const fixed[] = {"about", "gpus", "links", "ssds", "nics"};
    for (size_t i = 0; i < KV_ARRAY_LEN(fixed); i++) keys[n++] = fixed[i];
    for (int m = 0; m < KV_MEMDEVS; m++) keys[n++] = kv_memdev_row(m)->key;
    keys[n++] = "platforms";
    return n;
}

static int read_section(const Ctx *cx, const cJSON *root, const Section *s, void **out, int *n_out,
                        PlatformRefs **refs_out)
{
    char got[64]; /* the refused value, for messages */
    *out = NULL;
    *n_out = 0;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, s->key);
    if (!arr || cJSON_IsNull(arr)) return 0;
    if (!cJSON_IsArray(arr))
        return kv_err(cx->e, "%s: %s: expected an array of %s, got %s", cx->origin, s->key, s->whats,
                      kv_json_describe(arr, got, sizeof got));
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return 0;
    char *base = calloc((size_t)n, s->stride);
    PlatformRefs *refs = refs_out ? calloc((size_t)n, sizeof *refs) : NULL;
    if (!base || (refs_out && !refs)) {
        free(base);
        free(refs);
        return kv_err(cx->e, "%s: %s: out of memory", cx->origin, s->key);
    }
    KvNameIdx names; /* the entries read so far (an entry's name is the first field of its spec) */
    if (kv_nameidx_init(&names, (size_t)n) != 0) {
        free(base);
        free(refs);
        return kv_err(cx->e, "%s: %s: out of memory", cx->origin, s->key);
    }
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char *spec = base + (size_t)i * s->stride;
        if (read_entry(cx, s, i, it, spec, refs ? &refs[i] : NULL) != 0) goto fail;
        int dup = kv_nameidx_find(&names, spec);
        if (dup >= 0) {
            kv_err(cx->e,
                   "%s: %s[%d].name: duplicate %s name \"%s\" (already used by %s[%d] \"%s\"; "
                   "names are compared without case)",
                   cx->origin, s->key, i, s->what, spec, s->key, dup, base + (size_t)dup * s->stride);
            goto fail;
        }
        if (kv_nameidx_add(&names, spec, i) != 0) {
            kv_err(cx->e, "%s: %s: out of memory", cx->origin, s->key);
            goto fail;
        }
    }
    kv_nameidx_free(&names);
    *out = base;
    *n_out = n;
    if (refs_out) *refs_out = refs;
    return 0;
fail:
    kv_nameidx_free(&names);
    free(base);
    free(refs);
    return -1;
}

/* Entries of an overlay section laid over a base section (by name, without case): an entry that
 * names a base entry replaces it in place (so indices into the base stay valid), the others are
 * appended in the overlay's order. map[i]: where overlay entry i went. NULL when out of memory. */
static void *merge_section(const void *base, int nb, const void *ov, int no, size_t stride, int *n_out, int *map)
{
    KvNameIdx names; /* the base's names (unique: the base was checked) */
    if (kv_nameidx_init(&names, (size_t)nb) != 0) return NULL;
    for (int j = 0; j < nb; j++)
        if (kv_nameidx_add(&names, (const char *)base + (size_t)j * stride, j) != 0) {
            kv_nameidx_free(&names);
            return NULL;
        }
    char *out = calloc((size_t)(nb + no) + 1, stride);
    if (!out) {
        kv_nameidx_free(&names);
        return NULL;
    }
    if (nb) memcpy(out, base, (size_t)nb * stride);
    int n = nb;
    for (int i = 0; i < no; i++) {
        const char *spec = (const char *)ov + (size_t)i * stride;
        int k = kv_nameidx_find(&names, spec);
        if (k < 0) k = n++;
        memcpy(out + (size_t)k * stride, spec, stride);
        map[i] = k;
    }
    kv_nameidx_free(&names);
    *n_out = n;
    return out;
}

/* Parse json_text (a whole catalog, or an overlay when base is given) into c. With a base, every
 * entry of the text is validated on its own (messages name origin and the text's own index), then
 * laid over a copy of the base (merge_section) and its references resolved against the merged
 * catalog; base itself is not changed. */
static int parse_layer(HwCatalog *c, const char *json_text, const char *origin, const HwCatalog *base, KvErr *e)
{
    char got[64]; /* the refused value, for messages */
    memset(c, 0, sizeof *c);
    Ctx cx = {origin && *origin ? origin : "hardware catalog", e};
    if (base) snprintf(c->origin, sizeof c->origin, "%s + %s", base->origin, cx.origin);
    else snprintf(c->origin, sizeof c->origin, "%s", cx.origin);
    if (!json_text) return kv_err(e, "%s: no text to parse", cx.origin);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json_text, &end, 1);
    if (!root) return kv_json_syntax_error(e, cx.origin, json_text, end ? end : cJSON_GetErrorPtr());
    const char *top_keys[8 + KV_MEMDEVS];
    const int n_top = top_key_list(top_keys);
    char key_list[256] = "", arrays[256] = ""; /* "about, gpus, ...", "\"gpus\", ... and \"platforms\"" */
    for (int i = 0, ka = 0, kb = 0; i < n_top; i++) {
        ka += snprintf(key_list + ka, sizeof key_list - (size_t)ka, "%s%s", i ? ", " : "", top_keys[i]);
        if (i) kb += snprintf(arrays + kb, sizeof arrays - (size_t)kb, "%s\"%s\"", i == 1 ? "" : i + 1 == n_top ? " and " : ", ", top_keys[i]);
    }
    if (!cJSON_IsObject(root)) {
        kv_err(e, "%s: expected a JSON object with %s arrays, got %s", cx.origin, arrays, kv_json_describe(root, got, sizeof got));
        cJSON_Delete(root);
        return -1;
    }
    for (const cJSON *it = root->child; it; it = it->next) {
        int known = 0;
        for (int i = 0; i < n_top; i++) known |= strcmp(top_keys[i], it->string) == 0;
        if (!known) {
            kv_err(e, "%s: unknown top-level key \"%s\" (known keys: %s)", cx.origin, it->string, key_list);
            cJSON_Delete(root);
            return -1;
        }
        for (const cJSON *prev = root->child; prev != it; prev = prev->next)
            if (strcmp(prev->string, it->string) == 0) {
                kv_err(e, "%s: %s: key given twice", cx.origin, it->string);
                cJSON_Delete(root);
                return -1;
            }
    }

    PlatformRefs *refs = NULL;
    void *gpus = NULL, *links = NULL, *ssds = NULL, *nics = NULL, *mds[KV_MEMDEVS] = {0}, *plats = NULL;
    int ng = 0, nl = 0, ns = 0, nn = 0, nmd[KV_MEMDEVS] = {0}, np = 0;
    int *map = NULL; /* per section: overlay index -> merged index (identity without a base) */
    RefIdx ix;       /* the merged sections' names, for the references */
    memset(&ix, 0, sizeof ix);
    int rc = -1;
    if (read_section(&cx, root, &SEC_GPUS, &gpus, &ng, NULL) || read_section(&cx, root, &SEC_LINKS, &links, &nl, NULL) ||
        read_section(&cx, root, &SEC_SSDS, &ssds, &ns, NULL) || read_section(&cx, root, &SEC_NICS, &nics, &nn, NULL))
        goto done;
    for (int m = 0; m < KV_MEMDEVS; m++)
        if (read_section(&cx, root, &SEC_MEMDEVS[m], &mds[m], &nmd[m], NULL)) goto done;
    if (read_section(&cx, root, &SEC_PLATFORMS, &plats, &np, &refs)) goto done;
    for (int i = 0; i < nl; i++)
        if (check_link(&cx, i, &((LinkSpec *)links)[i])) goto done;
    for (int i = 0; i < nn; i++)
        if (check_nic(&cx, i, &((NicSpec *)nics)[i])) goto done;
    int nmax = ng;
    const int counts[] = {nl, ns, nn, np};
    for (size_t i = 0; i < KV_ARRAY_LEN(counts); i++)
        if (counts[i] > nmax) nmax = counts[i];
    for (int m = 0; m < KV_MEMDEVS; m++)
        if (nmd[m] > nmax) nmax = nmd[m];
    map = calloc((size_t)nmax + 1, sizeof *map);
    if (!map) {
        kv_err(e, "%s: out of memory", cx.origin);
        goto done;
    }
    if (base) { /* lay every section over a copy of the base (links, SSDs, NICs need no map) */
        c->links = merge_section(base->links, base->n_links, links, nl, sizeof(LinkSpec), &c->n_links, map);
        c->ssds = merge_section(base->ssds, base->n_ssds, ssds, ns, sizeof(SsdSpec), &c->n_ssds, map);
        c->nics = merge_section(base->nics, base->n_nics, nics, nn, sizeof(NicSpec), &c->n_nics, map);
        int md_ok = 1;
        for (int m = 0; m < KV_MEMDEVS; m++) {
            c->memdevs[m] = merge_section(base->memdevs[m], base->n_memdevs[m], mds[m], nmd[m], sizeof(MemdevSpec), &c->n_memdevs[m], map);
            md_ok &= c->memdevs[m] != NULL;
        }
        c->gpus = merge_section(base->gpus, base->n_gpus, gpus, ng, sizeof(GpuSpec), &c->n_gpus, map);
        if (!c->links || !c->ssds || !c->nics || !md_ok || !c->gpus) {
            kv_err(e, "%s: out of memory", cx.origin);
            goto done;
        }
    } else {
        c->gpus = gpus;
        c->links = links;
        c->ssds = ssds;
        c->nics = nics;
        for (int m = 0; m < KV_MEMDEVS; m++) {
            c->memdevs[m] = mds[m];
            c->n_memdevs[m] = nmd[m];
            mds[m] = NULL;
        }
        c->n_gpus = ng;
        c->n_links = nl;
        c->n_ssds = ns;
        c->n_nics = nn;
        gpus = links = ssds = nics = NULL;
        for (int i = 0; i < ng; i++) map[i] = i;
    }
    if (ref_idx_build(&ix, c) != 0) {
        kv_err(e, "%s: out of memory", cx.origin);
        goto done;
    }
    for (int i = 0; i < ng; i++) {
        GpuSpec *g = &c->gpus[map[i]];
        int k = kv_nameidx_find(&ix.links, g->pcie);
        if (k < 0) {
            char names[700];
            join_names(names, sizeof names, c->links, c->n_links, sizeof(LinkSpec));
            kv_err(e, "%s: gpus[%d].pcie: GPU \"%s\" refers to unknown link \"%s\" (known links: %s)", cx.origin, i,
                   g->name, g->pcie, names);
            goto done;
        }
        snprintf(g->pcie, sizeof g->pcie, "%s", c->links[k].name); /* canonical spelling */
    }
    if (base) {
        /* base platforms keep their (still valid) indices; the overlay's are resolved below */
        c->platforms = merge_section(base->platforms, base->n_platforms, plats, np, sizeof(PlatformSpec),
                                     &c->n_platforms, map);
        if (!c->platforms) {
            kv_err(e, "%s: out of memory", cx.origin);
            goto done;
        }
    } else {
        c->platforms = plats;
        c->n_platforms = np;
        plats = NULL;
        for (int i = 0; i < np; i++) map[i] = i;
    }
    const cJSON *parr = cJSON_GetObjectItemCaseSensitive(root, "platforms");
    const cJSON *pobj = parr ? parr->child : NULL;
    for (int i = 0; i < np; i++, pobj = pobj->next)
        if (check_platform(&cx, c, &ix, i, &c->platforms[map[i]], &refs[i], pobj)) goto done;
    rc = 0;
done:
    kv_nameidx_free(&ix.gpus);
    kv_nameidx_free(&ix.links);
    kv_nameidx_free(&ix.ssds);
    kv_nameidx_free(&ix.nics);
    for (int m = 0; m < KV_MEMDEVS; m++) {
        kv_nameidx_free(&ix.memdevs[m]);
        free(mds[m]);
    }
    free(map);
    free(refs);
    free(gpus);
    free(links);
    free(ssds);
    free(nics);
    free(plats);
    cJSON_Delete(root);
    if (rc != 0) hw_catalog_free(c);
    return rc;
}

int hw_catalog_parse(HwCatalog *c, const char *json_text, const char *origin, KvErr *e)
{
    return parse_layer(c, json_text, origin, NULL, e);
}

int hw_catalog_overlay(HwCatalog *c, const char *json_text, const char *origin, KvErr *e)
{
    HwCatalog merged;
    if (parse_layer(&merged, json_text, origin, c, e) != 0) return -1;
    hw_catalog_free(c);
    *c = merged;
    return 0;
}

int hw_catalog_overlay_file(HwCatalog *c, const char *path, KvErr *e)
{
    char *text = kv_read_file(path, NULL, e);
    if (!text) return kv_err_prefix(e, "hardware overlay: ");
    int rc = hw_catalog_overlay(c, text, path, e);
    free(text);
    return rc;
}

int hw_catalog_load(HwCatalog *c, const char *override_path, KvErr *e)
{
    memset(c, 0, sizeof *c);
    char origin[512];
    char *text = kv_catalog_text("configs/hardware.json", override_path, origin, sizeof origin, e);
    if (!text) return -1;
    int rc = hw_catalog_parse(c, text, origin, e);
    free(text);
    return rc;
}

void hw_catalog_free(HwCatalog *c)
{
    if (!c) return;
    free(c->gpus);
    free(c->links);
    free(c->ssds);
    free(c->nics);
    for (int m = 0; m < KV_MEMDEVS; m++) free(c->memdevs[m]);
    free(c->platforms);
    char origin[sizeof c->origin];
    memcpy(origin, c->origin, sizeof origin);
    memset(c, 0, sizeof *c);
    memcpy(c->origin, origin, sizeof origin);
}

/* ---- lookups ---- */

static const void *find_or_fail(const HwCatalog *c, const void *base, int n, const Section *s, const char *name, KvErr *e)
{
    int k = find_index(base, n, s->stride, name);
    if (k >= 0) return (const char *)base + (size_t)k * s->stride;
    char names[800];
    join_names(names, sizeof names, base, n, s->stride);
    kv_err(e, "%s: unknown %s \"%s\"; known %s: %s", c->origin[0] ? c->origin : "hardware catalog", s->what,
           name ? name : "(none)", s->whats, names);
    return NULL;
}

const GpuSpec *hw_find_gpu(const HwCatalog *c, const char *name, KvErr *e)
{
    return find_or_fail(c, c->gpus, c->n_gpus, &SEC_GPUS, name, e);
}

const LinkSpec *hw_find_link(const HwCatalog *c, const char *name, KvErr *e)
{
    return find_or_fail(c, c->links, c->n_links, &SEC_LINKS, name, e);
}

const SsdSpec *hw_find_ssd(const HwCatalog *c, const char *name, KvErr *e)
{
    return find_or_fail(c, c->ssds, c->n_ssds, &SEC_SSDS, name, e);
}

/* the one NIC whose line rate `v` gives ("100GbE", "100G", "100Gbps"), else -1 (none, several, or
 * not a line rate) */
static int nic_by_line_rate(const HwCatalog *c, const char *v)
{
    char *end;
    double g = v ? strtod(v, &end) : 0;
    if (!v || end == v || !(g > 0) || (strcmp(end, "GbE") && strcmp(end, "G") && strcmp(end, "Gbps"))) return -1;
    int found = -1;
    for (int i = 0; i < c->n_nics; i++)
        if (fabs(c->nics[i].line_bytes_per_s * 8 / 1e9 - g) < 1e-6 * g) {
            if (found >= 0) return -1;
            found = i;
        }
    return found;
}

const NicSpec *hw_find_nic(const HwCatalog *c, const char *name, KvErr *e)
{
    if (find_index(c->nics, c->n_nics, sizeof(NicSpec), name) < 0) {
        int k = nic_by_line_rate(c, name);
        if (k >= 0) return &c->nics[k];
    }
    return find_or_fail(c, c->nics, c->n_nics, &SEC_NICS, name, e);
}

const MemdevSpec *hw_find_memdev(const HwCatalog *c, int m, const char *name, KvErr *e)
{
    return find_or_fail(c, c->memdevs[m], c->n_memdevs[m], &SEC_MEMDEVS[m], name, e);
}

const PlatformSpec *hw_find_platform(const HwCatalog *c, const char *name, KvErr *e)
{
    return find_or_fail(c, c->platforms, c->n_platforms, &SEC_PLATFORMS, name, e);
}
