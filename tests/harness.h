/* harness.h — the test harness: TEST(name) defines and registers a test; CHECK* macros record
 * failures with file:line and keep going; SKIP() marks a test skipped (e.g. no GPU, trace file
 * absent). The runner prints one line per failure and ends with "N passed, N failed, N skipped";
 * its exit code is non-zero on any failure.
 *
 * Usage: build/kvtest [substring ...]  — run only the tests whose name contains a substring.
 * Environment: KVSIM_ROOT (repository root, for shared/ and configs/), KVSIM_LONG=1 (slow tests).
 */
#ifndef KV_HARNESS_H
#define KV_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct TestCtx {
    const char *name;
    int failures;
    int skipped;
    char skip_reason[256];
} TestCtx;

typedef void (*TestFn)(TestCtx *t);
void harness_register(const char *name, TestFn fn, const char *file);

#define TEST(name)                                                                       \
    static void test_##name(TestCtx *t);                                                 \
    __attribute__((constructor)) static void test_register_##name(void)                  \
    {                                                                                    \
        harness_register(#name, test_##name, __FILE__);                                  \
    }                                                                                    \
    static void test_##name(TestCtx *t)

void harness_fail(TestCtx *t, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) harness_fail(t, __FILE__, __LINE__, "CHECK(%s)", #cond);            \
    } while (0)
#define CHECK_MSG(cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond)) harness_fail(t, __FILE__, __LINE__, __VA_ARGS__);                   \
    } while (0)
#define CHECK_EQ_I(a, b)                                                                 \
    do {                                                                                 \
        long long va_ = (long long)(a), vb_ = (long long)(b);                            \
        if (va_ != vb_) harness_fail(t, __FILE__, __LINE__, "%s == %s: %lld != %lld",    \
                                     #a, #b, va_, vb_);                                  \
    } while (0)
#define CHECK_EQ_U(a, b)                                                                 \
    do {                                                                                 \
        unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b); \
        if (va_ != vb_) harness_fail(t, __FILE__, __LINE__, "%s == %s: %llu != %llu",    \
                                     #a, #b, va_, vb_);                                  \
    } while (0)
/* |a-b| <= atol + rtol*|b| */
#define CHECK_NEAR(a, b, rtol, atol)                                                     \
    do {                                                                                 \
        double va_ = (double)(a), vb_ = (double)(b);                                     \
        if (!(fabs(va_ - vb_) <= (atol) + (rtol) * fabs(vb_)))                           \
            harness_fail(t, __FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g (rtol %g atol %g)", \
                         #a, #b, va_, vb_, (double)(rtol), (double)(atol));             \
    } while (0)
#define CHECK_STR(a, b)                                                                  \
    do {                                                                                 \
        const char *sa_ = (a), *sb_ = (b);                                               \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                                       \
            harness_fail(t, __FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,    \
                         sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                    \
    } while (0)
/* substring check, typically on an error message */
#define CHECK_CONTAINS(hay, needle)                                                      \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (!h_ || !strstr(h_, n_))                                                      \
            harness_fail(t, __FILE__, __LINE__, "\"%s\" does not contain \"%s\"",        \
                         h_ ? h_ : "(null)", n_);                                        \
    } while (0)
#define SKIP(...)                                                                        \
    do {                                                                                 \
        t->skipped = 1;                                                                  \
        snprintf(t->skip_reason, sizeof t->skip_reason, __VA_ARGS__);                    \
        return;                                                                          \
    } while (0)

/* Paths relative to the repository root ($KVSIM_ROOT or "."); returns a static buffer. */
const char *test_path(const char *rel);
/* A fresh scratch directory for this test (under $TMPDIR); returns a static buffer. */
const char *test_tmpdir(TestCtx *t);
/* Write text to a file in the test's scratch dir; returns the path (static buffer rotation of 8). */
const char *test_write_file(TestCtx *t, const char *name, const char *text);
/* Whether slow tests are requested (KVSIM_LONG=1). */
int test_long(void);

#endif
