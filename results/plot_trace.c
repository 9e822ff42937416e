/* plot_trace.c — see plot_trace.h. A part holds one event per line (a JSON object) and a last
 * line "#dropped N"; the merge joins the lines with commas inside {"traceEvents": [...]}. */
#include "results/plot_trace.h"

#include <stdlib.h>
#include <string.h>

#include "sim/base/util.h"

static const char *const k_channels[] = {"h2d", "d2h", "ssd", "nic_in", "nic_out"};
#define N_CH 5

/* the thread of a track: 0 iterations, 1 + channel × 4 + stage (stages 0..3 get their own; later
 * ones share the last) */
static int tid_of(const char *channel, int stage)
{
    int k = 0;
    while (k < N_CH && strcmp(k_channels[k], channel)) k++;
    if (k == N_CH) k = N_CH - 1;
    if (stage > 3) stage = 3;
    if (stage < 0) stage = 0;
    return 1 + k * 4 + stage;
}

static int pid_of(const PlotTrace *t, int replica) { return t->run * PTRACE_MAX_REPLICAS + replica + 1; }

static int room(PlotTrace *t)
{
    if (t->failed) return 0;
    if (t->events >= t->max_events) {
        t->dropped++;
        return 0;
    }
    t->events++;
    return 1;
}

static void ts(FILE *f, const char *key, int64_t ns) { fprintf(f, ",\"%s\":%lld.%03lld", key, (long long)(ns / 1000), (long long)(ns % 1000)); }

static void on_span(void *ctx, const SimSpan *s)
{
    PlotTrace *t = ctx;
    int rep = s->replica >= 0 && s->replica < PTRACE_MAX_REPLICAS ? s->replica : PTRACE_MAX_REPLICAS - 1;
    if (!room(t)) return;
    FILE *f = t->f;
    int64_t dur = s->t1_ns - s->t0_ns;
    if (s->kind == SIM_SPAN_ITERATION) {
        t->used[rep] |= 1u;
        fputs("{\"name\":\"iteration\",\"cat\":\"iteration\",\"ph\":\"X\"", f);
        ts(f, "ts", s->t0_ns);
        ts(f, "dur", dur);
        fprintf(f, ",\"pid\":%d,\"tid\":0,\"args\":{\"items\":%d,\"tokens\":%lld,\"steps\":%d}}\n", pid_of(t, rep), s->items,
                (long long)s->tokens, s->steps);
        return;
    }
    int tid = tid_of(s->channel, s->stage);
    t->used[rep] |= 1u << tid;
    if (s->layer >= 0) fprintf(f, "{\"name\":\"%s L%d\"", s->unit, s->layer);
    else fprintf(f, "{\"name\":\"%s\"", s->unit);
    fputs(",\"cat\":\"transfer\",\"ph\":\"X\"", f);
    ts(f, "ts", s->t0_ns);
    ts(f, "dur", dur);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{\"request\":%llu,\"layer\":%d,\"bytes\":%.0f}}\n", pid_of(t, rep), tid,
            (unsigned long long)s->request, s->layer, s->bytes);
}

static void on_counter(void *ctx, int replica, const char *name, int64_t t_ns, double v)
{
    PlotTrace *t = ctx;
    int rep = replica >= 0 && replica < PTRACE_MAX_REPLICAS ? replica : PTRACE_MAX_REPLICAS - 1;
    if (!room(t)) return;
    fprintf(t->f, "{\"name\":\"%s\",\"ph\":\"C\"", name);
    ts(t->f, "ts", t_ns);
    fprintf(t->f, ",\"pid\":%d,\"args\":{\"value\":%.0f}}\n", pid_of(t, rep), v);
    t->used[rep] |= 1u << 31; /* the process exists even if nothing else ran on it */
}

int ptrace_open(PlotTrace *t, const char *part_path, int run, const char *label, uint64_t max_events, KvErr *e)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", part_path);
    snprintf(t->label, sizeof t->label, "%s", label);
    t->run = run;
    t->max_events = max_events;
    t->f = fopen(part_path, "w");
    if (!t->f) return kv_err(e, "%s: cannot create the trace part", part_path);
    return 0;
}

void ptrace_sink(PlotTrace *t, SimEventSink *sink)
{
    sink->ctx = t;
    sink->span = on_span;
    sink->counter = on_counter;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

int ptrace_close(PlotTrace *t, KvErr *e)
{
    FILE *f = t->f;
    for (int r = 0; r < PTRACE_MAX_REPLICAS; r++) {
        if (!t->used[r]) continue;
        char name[160];
        snprintf(name, sizeof name, "%s · replica %d", t->label, r);
        fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", pid_of(t, r));
        json_str(f, name);
        fputs("}}\n", f);
        fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}\n", pid_of(t, r), pid_of(t, r));
        for (int tid = 0; tid < 31; tid++) {
            if (!(t->used[r] & (1u << tid))) continue;
            char tn[64];
            if (tid == 0) snprintf(tn, sizeof tn, "iterations");
            else if ((tid - 1) / 4 >= 2) snprintf(tn, sizeof tn, "%s", k_channels[(tid - 1) / 4]);
            else snprintf(tn, sizeof tn, "%s stage %d", k_channels[(tid - 1) / 4], (tid - 1) % 4);
            fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}\n", pid_of(t, r), tid, tn);
            fprintf(f, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}\n", pid_of(t, r), tid, tid);
        }
    }
    fprintf(f, "#dropped %llu\n", (unsigned long long)t->dropped);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        t->f = NULL;
        return kv_err(e, "%s: write failed (disk full?)", t->path);
    }
    t->f = NULL;
    return 0;
}

void ptrace_abort(PlotTrace *t)
{
    if (t->f) fclose(t->f);
    t->f = NULL;
}

int ptrace_merge(const char *out, const char *const *parts, int n, uint64_t max_events, KvErr *e)
{
    KvAtomicFile af;
    if (kv_atomic_open(&af, out, e) != 0) return -1;
    FILE *f = af.f;
    fputs("{\"traceEvents\":[\n", f);
    int first = 1;
    unsigned long long dropped = 0;
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        FILE *in = fopen(parts[i], "r");
        if (!in) {
            free(line);
            kv_atomic_abort(&af);
            return kv_err(e, "%s: a trace part is missing", parts[i]);
        }
        ssize_t len;
        while ((len = getline(&line, &cap, in)) > 0) {
            if (line[0] == '#') {
                unsigned long long d = 0;
                if (sscanf(line, "#dropped %llu", &d) == 1) dropped += d;
                continue;
            }
            if (!first) fputs(",", f);
            first = 0;
            fwrite(line, 1, (size_t)len, f);
        }
        fclose(in);
    }
    free(line);
    fprintf(f, "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"generator\":\"kvsim\",\"time\":\"simulated\",\"max_events_per_run\":%llu,"
               "\"dropped_events\":%llu}}\n",
            (unsigned long long)max_events, dropped);
    return kv_atomic_commit(&af, e);
}
