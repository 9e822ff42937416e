/* harness.c — test registry and runner; see harness.h. */
#include "tests/harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *name;
    TestFn fn;
    const char *file;
} TestEntry;

static TestEntry g_tests[1024];
static int g_ntests;

void harness_register(const char *name, TestFn fn, const char *file)
{
    if (g_ntests >= (int)(sizeof g_tests / sizeof g_tests[0])) {
        fprintf(stderr, "harness: too many tests\n");
        exit(2);
    }
    for (int i = 0; i < g_ntests; i++)
        if (strcmp(g_tests[i].name, name) == 0) {
            fprintf(stderr, "harness: duplicate test name %s (%s and %s)\n", name, file, g_tests[i].file);
            exit(2);
        }
    g_tests[g_ntests++] = (TestEntry){name, fn, file};
}

void harness_fail(TestCtx *t, const char *file, int line, const char *fmt, ...)
{
    t->failures++;
    if (t->failures > 20) return; /* keep the log readable */
    fprintf(stderr, "  FAIL %s (%s:%d): ", t->name, file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *test_path(const char *rel)
{
    static char buf[8][4096];
    static int k;
    const char *root = getenv("KVSIM_ROOT");
    char *b = buf[k++ & 7];
    snprintf(b, 4096, "%s/%s", root && *root ? root : ".", rel);
    return b;
}

static char g_tmp[4096];

const char *test_tmpdir(TestCtx *t)
{
    if (!g_tmp[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_tmp, sizeof g_tmp, "%s/kvtest.%ld.%s", base && *base ? base : "/tmp", (long)getpid(), t->name);
        mkdir(g_tmp, 0777);
    }
    return g_tmp;
}

const char *test_write_file(TestCtx *t, const char *name, const char *text)
{
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 4096, "%s/%s", test_tmpdir(t), name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        harness_fail(t, __FILE__, __LINE__, "cannot write %s", p);
        return p;
    }
    fputs(text, f);
    fclose(f);
    return p;
}

int test_long(void)
{
    const char *s = getenv("KVSIM_LONG");
    return s && *s && strcmp(s, "0") != 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const TestEntry *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv)
{
    qsort(g_tests, (size_t)g_ntests, sizeof g_tests[0], cmp_entry);
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < g_ntests; i++) {
        if (argc > 1) {
            int match = 0;
            for (int a = 1; a < argc; a++)
                if (strstr(g_tests[i].name, argv[a])) match = 1;
            if (!match) continue;
        }
        TestCtx t = {.name = g_tests[i].name};
        g_tmp[0] = '\0';
        g_tests[i].fn(&t);
        if (g_tmp[0]) {
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
            if (system(cmd) != 0) fprintf(stderr, "  (could not remove %s)\n", g_tmp);
        }
        if (t.failures) {
            failed++;
            fprintf(stderr, "FAIL  %s (%d checks failed)\n", t.name, t.failures);
        } else if (t.skipped) {
            skipped++;
            printf("skip  %s: %s\n", t.name, t.skip_reason);
        } else {
            passed++;
            printf("ok    %s\n", t.name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
