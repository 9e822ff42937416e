/* sweepspec.c — a sweep's grid of settings: parsing, --set lists, enumeration; see sweepspec.h.
 *
 * How: the base is a cJSON object of strings; an axis owns copies of its value strings. A key is
 * either a base setting or an axis, never both (setting one removes the other). Enumeration
 * counts the points in a double first, so a product of axes that overflows int is refused.
 */
#include "sim/engine/sweepspec.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/engine/sim.h"

int sweep_spec_check_default(void *ctx, const char *key, const char *value, const char *where, KvErr *e)
{
    if (!strcmp(key, "policies")) {
        if (!strcmp(value, "all")) return 0;
        int n = 0;
        for (const char *tok = value;;) {
            size_t len = strcspn(tok, ",");
            char name[64];
            if (len == 0 || len >= sizeof name) return kv_err(e, "%s: policies: '%.*s' is not a policy name", where, (int)len, tok);
            snprintf(name, sizeof name, "%.*s", (int)len, tok);
            if (!policy_find(name, e)) return kv_err_prefix(e, "%s: policies: ", where);
            if (++n > 16) return kv_err(e, "%s: policies: at most 16 per point", where);
            if (!tok[len]) break;
            tok += len + 1;
        }
        return 0;
    }
    if (!strcmp(key, "scenario")) return value[0] ? 0 : kv_err(e, "%s: expected a scenario name", where);
    SimConfig c;
    sim_config_defaults(&c);
    if (sim_config_set(&c, key, value, e) != 0) return kv_err_prefix(e, "%s: ", where);
    return 0;
}

static int spec_check(const SweepSpec *s, const char *key, const char *value, const char *where, KvErr *e)
{
    return (s->check ? s->check : sweep_spec_check_default)(s->check_ctx, key, value, where, e);
}


void sweep_spec_init(SweepSpec *s)
{
    memset(s, 0, sizeof *s);
    s->base = cJSON_CreateObject();
    snprintf(s->origin, sizeof s->origin, "command line");
}

static void axis_free(SweepAxis *a)
{
    for (int i = 0; i < a->n; i++) free(a->values[i]);
    free(a->values);
    memset(a, 0, sizeof *a);
}

void sweep_spec_free(SweepSpec *s)
{
    for (int i = 0; i < s->n_axes; i++) axis_free(&s->axes[i]);
    free(s->axes);
    cJSON_Delete(s->base);
    memset(s, 0, sizeof *s);
}

/* A JSON scalar as the text --set takes: numbers in the shortest form that reads back exactly. */
int sweep_spec_scalar_text(const cJSON *it, char *val, size_t n)
{
    if (cJSON_IsString(it)) snprintf(val, n, "%s", it->valuestring);
    else if (cJSON_IsBool(it)) snprintf(val, n, "%s", cJSON_IsTrue(it) ? "true" : "false");
    else if (cJSON_IsNumber(it)) {
        snprintf(val, n, "%.15g", it->valuedouble);
        if (strtod(val, NULL) != it->valuedouble) snprintf(val, n, "%.17g", it->valuedouble);
    } else return -1;
    return 0;
}

typedef struct Ranked {
    const char *s;
    int i;
} Ranked;

static int ranked_cmp(const void *a, const void *b)
{
    const Ranked *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The lowest index k whose value v[k] appeared before (at *first, the earliest such index), -1 when
 * the n values are distinct, -2 when out of memory. O(n log n), so a long list costs no O(n²). */
static int first_repeat(char *const *v, int n, int *first)
{
    if (n < 2) return -1;
    Ranked *r = malloc((size_t)n * sizeof *r);
    if (!r) return -2;
    for (int i = 0; i < n; i++) r[i] = (Ranked){v[i], i};
    qsort(r, (size_t)n, sizeof *r, ranked_cmp);
    int k = -1;
    for (int i = 1; i < n; i++)
        if (!strcmp(r[i].s, r[i - 1].s) && (i < 2 || strcmp(r[i - 1].s, r[i - 2].s)) && (k < 0 || r[i].i < k)) {
            k = r[i].i; /* the second of a run of equal values: the first repeat of that value */
            *first = r[i - 1].i;
        }
    free(r);
    return k;
}

static int find_axis(const SweepSpec *s, const char *key)
{
    for (int i = 0; i < s->n_axes; i++)
        if (!strcmp(s->axes[i].key, key)) return i;
    return -1;
}

static void remove_axis(SweepSpec *s, int i)
{
    axis_free(&s->axes[i]);
    memmove(&s->axes[i], &s->axes[i + 1], (size_t)(s->n_axes - i - 1) * sizeof *s->axes);
    s->n_axes--;
}

int sweep_spec_set_base(SweepSpec *s, const char *key, const char *value, KvErr *e)
{
    cJSON *v = cJSON_CreateString(value);
    if (!v) return kv_err(e, "out of memory");
    if (cJSON_GetObjectItemCaseSensitive(s->base, key)) cJSON_ReplaceItemInObjectCaseSensitive(s->base, key, v);
    else cJSON_AddItemToObject(s->base, key, v);
    int a = find_axis(s, key);
    if (a >= 0) remove_axis(s, a);
    return 0;
}

/* A new (or replaced) axis with n values, copied. */
static int set_axis(SweepSpec *s, const char *key, char **values, int n, KvErr *e)
{
    if (strlen(key) >= sizeof s->axes[0].key) return kv_err(e, "%s: setting name too long", key);
    int a = find_axis(s, key);
    if (a < 0) {
        SweepAxis *ax = realloc(s->axes, (size_t)(s->n_axes + 1) * sizeof *ax);
        if (!ax) return kv_err(e, "out of memory");
        s->axes = ax;
        a = s->n_axes++;
        memset(&s->axes[a], 0, sizeof s->axes[a]);
    } else {
        axis_free(&s->axes[a]);
    }
    SweepAxis *ax = &s->axes[a];
    snprintf(ax->key, sizeof ax->key, "%s", key);
    ax->values = calloc((size_t)n, sizeof *ax->values);
    if (!ax->values) return kv_err(e, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!(ax->values[i] = strdup(values[i]))) return kv_err(e, "out of memory");
        ax->n = i + 1;
    }
    if (cJSON_GetObjectItemCaseSensitive(s->base, key)) cJSON_DeleteItemFromObjectCaseSensitive(s->base, key);
    return 0;
}

int sweep_spec_parse(SweepSpec *s, const char *text, const char *origin, KvErr *e)
{
    snprintf(s->origin, sizeof s->origin, "%s", origin);
    cJSON *root = cJSON_Parse(text);
    if (!cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        if (!root && at)
            for (const char *p = text; p < at && *p; p++) line += *p == '\n';
        cJSON_Delete(root);
        return kv_err(e, "%s: line %d: expected a JSON object {\"base\": {...}, \"axes\": {...}}", origin, line);
    }
    int rc = -1;
    char val[4200], where[700];
    for (const cJSON *it = root->child; it; it = it->next)
        if (strcmp(it->string, "base") && strcmp(it->string, "axes") && strcmp(it->string, "description")) {
            kv_err(e, "%s: unknown key \"%s\" (known: description, base, axes)", origin, it->string);
            goto done;
        }
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "base");
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(root, "axes");
    if (base && !cJSON_IsObject(base)) {
        kv_err(e, "%s: base: expected an object of settings", origin);
        goto done;
    }
    if (axes && !cJSON_IsObject(axes)) {
        kv_err(e, "%s: axes: expected an object of setting: [values]", origin);
        goto done;
    }
    for (const cJSON *it = base ? base->child : NULL; it; it = it->next) {
        snprintf(where, sizeof where, "%s: base.%s", origin, it->string);
        if (sweep_spec_scalar_text(it, val, sizeof val) != 0) {
            kv_err(e, "%s: expected a string, number or boolean", where);
            goto done;
        }
        if (spec_check(s, it->string, val, where, e) != 0 || sweep_spec_set_base(s, it->string, val, e) != 0) goto done;
    }
    for (const cJSON *it = axes ? axes->child : NULL; it; it = it->next) {
        int n = cJSON_GetArraySize(it);
        if (!cJSON_IsArray(it) || n == 0) {
            kv_err(e, "%s: axes.%s: expected a non-empty array of values", origin, it->string);
            goto done;
        }
        if (find_axis(s, it->string) >= 0) {
            kv_err(e, "%s: axes.%s: given twice", origin, it->string);
            goto done;
        }
        char **vals = calloc((size_t)n, sizeof *vals);
        if (!vals) {
            kv_err(e, "out of memory");
            goto done;
        }
        /* every value checked in order, then the first repeat among those before the first bad one:
         * the message is the one of the lowest index, as a check value by value would give */
        int k = 0, bad = 0, bad_at = n;
        KvErr be = {{0}};
        for (const cJSON *v = it->child; v && !bad; v = v->next, k++) {
            snprintf(where, sizeof where, "%s: axes.%s[%d]", origin, it->string, k);
            if (sweep_spec_scalar_text(v, val, sizeof val) != 0) bad = kv_err(&be, "%s: expected a string, number or boolean", where);
            else if (spec_check(s, it->string, val, where, &be) != 0) bad = -1;
            else if (!(vals[k] = strdup(val))) bad = kv_err(&be, "out of memory");
            if (bad) bad_at = k;
        }
        int first = 0, d = first_repeat(vals, bad_at, &first);
        if (d == -2) bad = kv_err(e, "out of memory");
        else if (d >= 0) {
            snprintf(where, sizeof where, "%s: axes.%s[%d]", origin, it->string, d);
            bad = kv_err(e, "%s: \"%s\" is already axes.%s[%d]", where, vals[d], it->string, first);
        } else if (bad) *e = be;
        if (!bad) bad = set_axis(s, it->string, vals, n, e);
        for (int j = 0; j < n; j++) free(vals[j]);
        free(vals);
        if (bad) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

int sweep_spec_set(SweepSpec *s, const char *kv, KvErr *e)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || !eq[1]) return kv_err(e, "--set %s: expected KEY=VALUE or KEY=V1,V2,...", kv);
    char key[64], where[200];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    snprintf(where, sizeof where, "--set %s", key);
    int n = 1;
    for (const char *p = eq + 1; *p; p++) n += *p == ',';
    char **vals = calloc((size_t)n, sizeof *vals);
    if (!vals) return kv_err(e, "out of memory");
    int rc = 0, k = 0, bad_at = n;
    KvErr be = {{0}};
    for (const char *tok = eq + 1; rc == 0 && k < n; k++) {
        size_t len = strcspn(tok, ",");
        if (len == 0) rc = kv_err(&be, "%s: empty value in the list '%s'", where, eq + 1);
        else if (!(vals[k] = strndup(tok, len))) rc = kv_err(&be, "out of memory");
        else if (spec_check(s, key, vals[k], where, &be) != 0) rc = -1;
        if (rc) bad_at = k;
        tok += len;
        if (*tok == ',') tok++;
    }
    int first = 0, d = first_repeat(vals, bad_at, &first);
    if (d == -2) rc = kv_err(e, "out of memory");
    else if (d >= 0) rc = kv_err(e, "%s: '%s' is listed twice", where, vals[d]);
    else if (rc) *e = be;
    if (rc == 0) rc = n == 1 ? sweep_spec_set_base(s, key, vals[0], e) : set_axis(s, key, vals, n, e);
    for (int j = 0; j < n; j++) free(vals[j]);
    free(vals);
    return rc;
}

void sweep_points_free(cJSON **points, int n)
{
    for (int i = 0; points && i < n; i++) cJSON_Delete(points[i]);
    free(points);
}

int sweep_points(const SweepSpec *s, cJSON ***out, int *n_out, KvErr *e)
{
    *out = NULL;
    *n_out = 0;
    double total = 1;
    for (int a = 0; a < s->n_axes; a++) total *= s->axes[a].n;
    if (s->n_axes > SWEEP_MAX_AXES) return kv_err(e, "%s: %d axes; at most %d", s->origin, s->n_axes, SWEEP_MAX_AXES);
    if (total > SWEEP_MAX_POINTS) return kv_err(e, "%s: %.0f points; at most %d per sweep", s->origin, total, SWEEP_MAX_POINTS);
    int n = (int)total;
    cJSON **pts = calloc((size_t)n, sizeof *pts);
    if (!pts) return kv_err(e, "out of memory");
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_Duplicate(s->base, 1);
        if (!o) {
            sweep_points_free(pts, i);
            return kv_err(e, "out of memory");
        }
        int rest = i;
        /* the last axis varies fastest */
        int idx[SWEEP_MAX_AXES] = {0};
        for (int a = s->n_axes - 1; a >= 0; a--) {
            idx[a] = rest % s->axes[a].n;
            rest /= s->axes[a].n;
        }
        for (int a = 0; a < s->n_axes; a++) cJSON_AddStringToObject(o, s->axes[a].key, s->axes[a].values[idx[a]]);
        pts[i] = o;
    }
    *out = pts;
    *n_out = n;
    return 0;
}
