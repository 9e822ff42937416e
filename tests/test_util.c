/* test_util.c — util.c: atomic writes, file reading, number parsing, catalog text lookup. */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness.h"
#include "sim/base/nameidx.h"
#include "sim/base/util.h"

TEST(util_atomic_write_replaces_whole_file)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/out.txt", test_tmpdir(t));
    CHECK(kv_write_atomic(path, "first", 5, &e) == 0);
    CHECK(kv_write_atomic(path, "second!", 7, &e) == 0);
    size_t n = 0;
    char *s = kv_read_file(path, &n, &e);
    CHECK(s != NULL);
    CHECK_EQ_U(n, 7);
    CHECK_STR(s, "second!");
    free(s);
}

TEST(util_atomic_abort_keeps_old_file)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/keep.txt", test_tmpdir(t));
    CHECK(kv_write_atomic(path, "good", 4, &e) == 0);
    KvAtomicFile af;
    CHECK(kv_atomic_open(&af, path, &e) == 0);
    fputs("half", af.f);
    kv_atomic_abort(&af);
    char *s = kv_read_file(path, NULL, &e);
    CHECK_STR(s, "good");
    free(s);
    CHECK(access(af.tmp, F_OK) != 0);
}

TEST(util_atomic_write_unwritable_dir_fails_cleanly)
{
    KvErr e = {{0}};
    CHECK(kv_write_atomic("/nonexistent-dir/x.json", "x", 1, &e) == -1);
    CHECK_CONTAINS(e.msg, "/nonexistent-dir/x.json");
}

TEST(util_read_missing_file_names_it)
{
    KvErr e = {{0}};
    CHECK(kv_read_file("/no/such/file.csv", NULL, &e) == NULL);
    CHECK_CONTAINS(e.msg, "/no/such/file.csv");
}

/* only regular files are read: a directory, a FIFO without a writer (once a hang in fopen) and a
 * device (/dev/zero once grew the buffer to gigabytes) are refused at once, naming the file and
 * what it is */
TEST(util_read_refuses_special_files)
{
    KvErr e = {{0}};
    CHECK(kv_read_file(test_tmpdir(t), NULL, &e) == NULL);
    CHECK_CONTAINS(e.msg, "not a regular file (a directory)");
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo", test_tmpdir(t));
    CHECK(mkfifo(fifo, 0600) == 0);
    const char *paths[] = {fifo, "/dev/zero"}, *kinds[] = {"not a regular file (a FIFO or pipe)", "not a regular file (a device)"};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork(); /* in a child under an alarm: a hang or an endless read fails the test, not the run */
        CHECK(pid >= 0);
        if (pid == 0) {
            alarm(5);
            KvErr ce = {{0}};
            char *text = kv_read_file(paths[i], NULL, &ce);
            _exit(!text && strstr(ce.msg, paths[i]) && strstr(ce.msg, kinds[i]) ? 0 : 1);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: kv_read_file %s", paths[i],
                  WIFSIGNALED(status) ? "did not return (killed by its alarm)" : "did not refuse it by name and kind");
    }
}

TEST(util_parse_i64)
{
    KvErr e;
    int64_t v;
    CHECK(kv_parse_i64("42", &v, &e) == 0 && v == 42);
    CHECK(kv_parse_i64("10M", &v, &e) == 0 && v == 10000000);
    CHECK(kv_parse_i64("64Ki", &v, &e) == 0 && v == 65536);
    CHECK(kv_parse_i64("2GiB", &v, &e) == 0 && v == 2147483648LL);
    CHECK(kv_parse_i64("1.5K", &v, &e) == 0 && v == 1500);
    CHECK(kv_parse_i64("1.5", &v, &e) == -1);
    CHECK(kv_parse_i64("12x", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "12x");
    CHECK(kv_parse_i64("", &v, &e) == -1);
}

TEST(util_mkdirs)
{
    KvErr e;
    char path[4200];
    snprintf(path, sizeof path, "%s/a/b/c", test_tmpdir(t));
    CHECK(kv_mkdirs(path, &e) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(kv_mkdirs(path, &e) == 0);
}

/* the catalogs' name index: names equal without case find one value, the first added; it grows
 * past the size it was made for and keeps every name */
TEST(util_nameidx_case_insensitive_first_value_kept)
{
    KvNameIdx x;
    CHECK(kv_nameidx_init(&x, 1) == 0);
    static char names[5000][16];
    for (int i = 0; i < 5000; i++) {
        snprintf(names[i], sizeof names[i], "Name-%d", i);
        CHECK(kv_nameidx_add(&x, names[i], i) == 0);
    }
    CHECK(kv_nameidx_add(&x, "NAME-17", 99999) == 0); /* already there: keeps 17 */
    int wrong = 0;
    for (int i = 0; i < 5000; i++) {
        char other[16];
        snprintf(other, sizeof other, "nAME-%d", i);
        wrong += kv_nameidx_find(&x, other) != i;
    }
    CHECK_EQ_I(wrong, 0);
    CHECK_EQ_I(kv_nameidx_find(&x, "NAME-17"), 17);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-5000"), -1);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-1 "), -1);
    CHECK_EQ_I(kv_nameidx_find(&x, NULL), -1);
    CHECK(x.n == 5000 && 2 * x.n <= x.cap);
    kv_nameidx_free(&x);
    CHECK_EQ_I(kv_nameidx_find(&x, "Name-1"), -1);
}
