/* plan_cost.c — the prices file and the cost of a plan's points; see plan_cost.h for the rules.
 *
 * How: a part is described once per kind (its key in the file, its word in the report, whether it
 * belongs to the store); units and unit prices come from the resolved PlanPoint, so the report, the
 * JSON and the cost all read the same numbers.
 */
#include "sim/cli/plan_cost.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/units.h"

typedef struct PartDesc {
    const char *key;      /* in plan.json's parts */
    const char *word;     /* in the report */
    int store;            /* 1: a part of the store (priced where the store uses it; never left out) */
    const char *expected; /* what the file should hold */
} PartDesc;

static const PartDesc k_parts[PLAN_N_PARTS] = {
    [PLAN_PART_GPU] = {"gpu", "GPU", 0, "\"gpu\": {\"NAME\": PRICE per GPU, ...} with every GPU of the space"},
    [PLAN_PART_SSD] = {"ssd", "SSD", 1, "\"ssd\": {\"NAME\": PRICE per drive, ...}"},
    [PLAN_PART_DRAM] = {"dram", "DRAM", 1, "\"dram_per_gb\": PRICE per 10^9 bytes"},
    [PLAN_PART_NIC] = {"nic", "NIC", 1, "\"nic\": {\"NAME\": PRICE per NIC, ...}"},
    [PLAN_PART_REMOTE] = {"remote_store", "remote store", 1,
                          "\"remote_store\": PRICE per replica (the share of the remote KV store one node uses)"},
    [PLAN_PART_LINK] = {"host_link", "host link", 0, "\"host_link\": {\"NAME\": PRICE, ...}"},
    [PLAN_PART_PLATFORM] = {"platform", "platform", 0, "\"platform\": {\"NAME\": PRICE per node, ...}"},
};

/* ---------------------------------------------------------------- the file */

static int price_section(PlanPrices *pr, const char *key, const cJSON **out, KvErr *e)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(pr->root, key);
    *out = NULL;
    if (!o) return 0;
    if (!cJSON_IsObject(o)) return kv_err(e, "%s: \"%s\": expected an object of name: price", pr->path, key);
    for (const cJSON *it = o->child; it; it = it->next)
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0)
            return kv_err(e, "%s: \"%s\".\"%s\": expected a price >= 0 (a number), got %s", pr->path, key, it->string,
                          cJSON_IsNumber(it) ? "a negative or non-finite number" : "another JSON value");
    *out = o;
    return 0;
}

static int price_number(PlanPrices *pr, const char *key, const char *what, double *out, KvErr *e)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(pr->root, key);
    *out = NAN;
    if (!d) return 0;
    if (!cJSON_IsNumber(d) || !isfinite(d->valuedouble) || d->valuedouble < 0)
        return kv_err(e, "%s: \"%s\": expected a price %s >= 0 (a number)", pr->path, key, what);
    *out = d->valuedouble;
    return 0;
}

int plan_prices_load(PlanPrices *pr, const char *path, KvErr *e)
{
    memset(pr, 0, sizeof *pr);
    pr->dram_per_gb = pr->remote_store = NAN;
    snprintf(pr->path, sizeof pr->path, "%s", path);
    snprintf(pr->currency, sizeof pr->currency, "USD");
    char *text = kv_read_file(path, NULL, e);
    if (!text) return -1;
    pr->root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(pr->root))
        return kv_err(e, "%s: expected a JSON object of prices {\"gpu\": {\"H100-SXM\": 30000, ...}, \"ssd\": {...}, "
                         "\"dram_per_gb\": 4, ...} (docs/formats.md)", path);
    static const char *const known[] = {"currency", "gpu", "ssd", "nic", "host_link", "platform", "dram_per_gb", "remote_store"};
    for (const cJSON *it = pr->root->child; it; it = it->next) {
        int ok = it->string[0] == '_'; /* "_sources", "_note": comments */
        for (size_t i = 0; i < KV_ARRAY_LEN(known) && !ok; i++) ok = !strcmp(it->string, known[i]);
        if (!ok)
            return kv_err(e, "%s: unknown key \"%s\" (known: currency, gpu, ssd, nic, host_link, platform, dram_per_gb, "
                             "remote_store; keys starting with '_' are comments)", path, it->string);
    }
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(pr->root, "currency");
    if (cur && (!cJSON_IsString(cur) || strlen(cur->valuestring) >= sizeof pr->currency))
        return kv_err(e, "%s: \"currency\": expected a short string such as \"USD\"", path);
    if (cur) snprintf(pr->currency, sizeof pr->currency, "%s", cur->valuestring);
    if (price_number(pr, "dram_per_gb", "per GB (10^9 bytes)", &pr->dram_per_gb, e) ||
        price_number(pr, "remote_store", "per replica", &pr->remote_store, e) || price_section(pr, "gpu", &pr->gpu, e) ||
        price_section(pr, "ssd", &pr->ssd, e) || price_section(pr, "nic", &pr->nic, e) ||
        price_section(pr, "host_link", &pr->link, e) || price_section(pr, "platform", &pr->platform, e))
        return -1;
    return 0;
}

void plan_prices_free(PlanPrices *pr)
{
    cJSON_Delete(pr->root);
    pr->root = NULL;
}

/* ---------------------------------------------------------------- parts */

/* a resolved store is a chain of tier names joined by '+' (sim_store_name) */
static int store_has(const PlanPoint *p, const char *tier)
{
    size_t n = strlen(tier);
    for (const char *s = p->store; (s = strstr(s, tier)); s += n)
        if ((s == p->store || s[-1] == '+') && (s[n] == '\0' || s[n] == '+')) return 1;
    return 0;
}
int plan_store_uses_dram(const PlanPoint *p) { return store_has(p, "dram"); }
int plan_store_uses_ssd(const PlanPoint *p) { return store_has(p, "ssd"); }
int plan_store_uses_remote(const PlanPoint *p) { return store_has(p, "remote"); }

double plan_part_units(const PlanPoint *p, PlanPart k)
{
    switch (k) {
    case PLAN_PART_GPU: return p->n_gpus;
    case PLAN_PART_SSD: return plan_store_uses_ssd(p) ? p->n_ssd : 0;
    case PLAN_PART_DRAM: return plan_store_uses_dram(p) ? (double)p->dram_bytes / 1e9 : 0;
    case PLAN_PART_NIC: return plan_store_uses_remote(p) ? p->n_nics : 0;
    case PLAN_PART_REMOTE: return plan_store_uses_remote(p) ? 1 : 0;
    default: return 1;
    }
}

static double price_of(const cJSON *sec, const char *name)
{
    const cJSON *it = sec ? cJSON_GetObjectItemCaseSensitive(sec, name) : NULL;
    return it ? it->valuedouble : NAN;
}

double plan_part_price(const PlanPrices *pr, const PlanPoint *p, PlanPart k)
{
    switch (k) {
    case PLAN_PART_GPU: return price_of(pr->gpu, p->gpu);
    case PLAN_PART_SSD: return price_of(pr->ssd, p->ssd);
    case PLAN_PART_DRAM: return pr->dram_per_gb;
    case PLAN_PART_NIC: return price_of(pr->nic, p->nic);
    case PLAN_PART_REMOTE: return pr->remote_store;
    case PLAN_PART_LINK: return price_of(pr->link, p->link);
    default: return price_of(pr->platform, p->platform);
    }
}

/* the part's name at a point ("A100-40GB", "16 GB", "the remote store"), for the report and errors */
static void part_name(const PlanPoint *p, PlanPart k, char *buf, size_t n)
{
    switch (k) {
    case PLAN_PART_GPU: snprintf(buf, n, "%s", p->gpu); break;
    case PLAN_PART_SSD: snprintf(buf, n, "%s", p->ssd[0] ? p->ssd : "-"); break;
    case PLAN_PART_DRAM: {
        char s[48];
        kv_fmt_size(s, sizeof s, (double)p->dram_bytes);
        snprintf(buf, n, "%s", s);
        break;
    }
    case PLAN_PART_NIC: snprintf(buf, n, "%s", p->nic); break;
    case PLAN_PART_REMOTE: buf[0] = '\0'; break;
    case PLAN_PART_LINK: snprintf(buf, n, "%s", p->link); break;
    default: snprintf(buf, n, "%s", p->platform); break;
    }
}

/* the part's identity at a point, to tell whether it is the same everywhere */
static void part_id(const PlanPoint *p, PlanPart k, char *buf, size_t n)
{
    char name[80];
    part_name(p, k, name, sizeof name);
    snprintf(buf, n, "%g× %s", plan_part_units(p, k), name);
}

/* "gpu 'H100-SXM'", "the remote store": a missing price's subject */
static void part_subject(const PlanPoint *p, PlanPart k, char *buf, size_t n)
{
    char name[80];
    part_name(p, k, name, sizeof name);
    if (k == PLAN_PART_DRAM) snprintf(buf, n, "DRAM (dram_per_gb)");
    else if (k == PLAN_PART_REMOTE) snprintf(buf, n, "the remote store (remote_store)");
    else snprintf(buf, n, "%s '%s'", k_parts[k].key, name);
}

int plan_price_points(const PlanPrices *pr, const PlanPoint *pt, int n, const char *const *labels, double *cost, PlanCosting *pc,
                      KvErr *e)
{
    memset(pc, 0, sizeof *pc);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (!pt[i].invalid[0]) first = i;
    for (int k = 0; k < PLAN_N_PARTS; k++) {
        pc->counted[k] = 1;
        if (first < 0) continue;
        char id0[160], id[160], subject[128];
        part_id(&pt[first], (PlanPart)k, id0, sizeof id0);
        int varies = 0, missing = -1;
        for (int i = first; i < n; i++) {
            if (pt[i].invalid[0]) continue;
            part_id(&pt[i], (PlanPart)k, id, sizeof id);
            varies |= strcmp(id, id0) != 0;
            if (missing < 0 && plan_part_units(&pt[i], (PlanPart)k) > 0 && isnan(plan_part_price(pr, &pt[i], (PlanPart)k))) missing = i;
        }
        if (missing < 0) continue;
        part_subject(&pt[missing], (PlanPart)k, subject, sizeof subject);
        if (k_parts[k].store) {
            char lab[32];
            snprintf(lab, sizeof lab, "point %d", missing + 1);
            return kv_err(e, "%s: no price for %s, which %s uses (its store is %s); expected %s", pr->path, subject,
                          labels && labels[missing] ? labels[missing] : lab, pt[missing].store, k_parts[k].expected);
        }
        if (varies)
            return kv_err(e, "%s: no price for %s, which varies across the space; expected %s", pr->path, subject, k_parts[k].expected);
        pc->counted[k] = 0;
        kv_catf(pc->excluded, sizeof pc->excluded, "%s%s", pc->excluded[0] ? ", " : "", subject);
    }
    for (int i = 0; i < n; i++) {
        if (pt[i].invalid[0]) {
            cost[i] = NAN;
            continue;
        }
        double node = 0;
        for (int k = 0; k < PLAN_N_PARTS; k++) {
            double u = plan_part_units(&pt[i], (PlanPart)k);
            if (pc->counted[k] && u > 0) node += plan_part_price(pr, &pt[i], (PlanPart)k) * u;
        }
        cost[i] = node * pt[i].replicas;
    }
    return 0;
}

/* ---------------------------------------------------------------- the report's forms */

void plan_fmt_money(char *buf, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(buf, n, "–");
        return;
    }
    char d[64];
    snprintf(d, sizeof d, "%.0f", v);
    size_t len = strlen(d), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        buf[o++] = d[i];
        size_t left = len - i - 1;
        if (left > 0 && left % 3 == 0 && d[i] != '-') buf[o++] = ',';
    }
    buf[o] = '\0';
}

/* "1× " before a counted part, nothing for a size or a single part */
static void units_text(const PlanPoint *p, PlanPart k, char *buf, size_t n)
{
    if (k == PLAN_PART_GPU || k == PLAN_PART_SSD || k == PLAN_PART_NIC) snprintf(buf, n, "%g× ", plan_part_units(p, k));
    else buf[0] = '\0';
}

/* the parts a point has that its store does not use: "NIC 100G, 4× SSD PM9A3" */
static void unused_text(const PlanPoint *p, char *buf, size_t n)
{
    buf[0] = '\0';
    if (p->n_ssd > 0 && !plan_store_uses_ssd(p)) kv_catf(buf, n, "%s%d× SSD %s", buf[0] ? ", " : "", p->n_ssd, p->ssd);
    if (p->dram_bytes > 0 && !plan_store_uses_dram(p)) {
        char s[48];
        kv_fmt_size(s, sizeof s, (double)p->dram_bytes);
        kv_catf(buf, n, "%sDRAM %s", buf[0] ? ", " : "", s);
    }
    if (p->n_nics > 0 && !plan_store_uses_remote(p)) kv_catf(buf, n, "%s%d× NIC %s", buf[0] ? ", " : "", p->n_nics, p->nic);
}

void plan_parts_text(const PlanPrices *pr, const PlanCosting *pc, const PlanPoint *p, char *buf, size_t n)
{
    buf[0] = '\0';
    char left_out[512] = "";
    for (int k = 0; k < PLAN_N_PARTS; k++) {
        double u = plan_part_units(p, (PlanPart)k);
        if (!(u > 0)) continue;
        char name[80], un[32], money[48];
        part_name(p, (PlanPart)k, name, sizeof name);
        units_text(p, (PlanPart)k, un, sizeof un);
        if (!pc->counted[k]) {
            kv_catf(left_out, sizeof left_out, "%s%s %s%s", left_out[0] ? ", " : "", k_parts[k].word, un, name);
            continue;
        }
        plan_fmt_money(money, sizeof money, plan_part_price(pr, p, (PlanPart)k) * u);
        kv_catf(buf, n, "%s%s %s%s%s%s", buf[0] ? " + " : "", k_parts[k].word, un, name, name[0] ? " " : "", money);
    }
    if (!buf[0]) kv_catf(buf, n, "nothing priced");
    if (p->replicas > 1) kv_catf(buf, n, " (× %d replicas)", p->replicas);
    char unused[300];
    unused_text(p, unused, sizeof unused);
    if (unused[0]) kv_catf(buf, n, "; not used by the store %s, not priced: %s", p->store, unused);
    if (left_out[0]) kv_catf(buf, n, "; left out (no price, the same in every point): %s", left_out);
}

cJSON *plan_parts_json(const PlanPrices *pr, const PlanCosting *pc, const PlanPoint *p)
{
    cJSON *arr = cJSON_CreateArray();
    for (int k = 0; arr && k < PLAN_N_PARTS; k++) {
        double u = plan_part_units(p, (PlanPart)k);
        if (!(u > 0)) continue;
        char name[80];
        part_name(p, (PlanPart)k, name, sizeof name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "part", k_parts[k].key);
        if (name[0] && k != PLAN_PART_DRAM) cJSON_AddStringToObject(o, "name", name);
        cJSON_AddNumberToObject(o, "units", u);
        if (pc->counted[k]) {
            double price = plan_part_price(pr, p, (PlanPart)k);
            cJSON_AddNumberToObject(o, "unit_price", price);
            cJSON_AddNumberToObject(o, "cost", price * u);
        } else {
            cJSON_AddNullToObject(o, "unit_price");
            cJSON_AddNullToObject(o, "cost");
        }
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

cJSON *plan_unused_json(const PlanPoint *p)
{
    cJSON *arr = cJSON_CreateArray();
    char s[160];
    if (p->n_ssd > 0 && !plan_store_uses_ssd(p)) {
        snprintf(s, sizeof s, "%d× SSD %s", p->n_ssd, p->ssd);
        cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    }
    if (p->dram_bytes > 0 && !plan_store_uses_dram(p)) {
        char z[48];
        kv_fmt_size(z, sizeof z, (double)p->dram_bytes);
        snprintf(s, sizeof s, "DRAM %s", z);
        cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    }
    if (p->n_nics > 0 && !plan_store_uses_remote(p)) {
        snprintf(s, sizeof s, "%d× NIC %s", p->n_nics, p->nic);
        cJSON_AddItemToArray(arr, cJSON_CreateString(s));
    }
    return arr;
}
