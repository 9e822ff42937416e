/* test_hw.c — hw.c: the embedded catalog (every GPU, link, SSD, NIC and platform the project
 * relies on, spot values copied from shared/reference), lookups, and every refusal of a bad
 * catalog (malformed JSON, missing unit, bad reference, duplicates, unknown keys, relations). */
#include <stdlib.h>

#include "tests/harness.h"
#include "sim/catalog/hw.h"

/* ---- a small valid catalog, and variants of it with one thing broken ---- */

#define GPU_J(NAME, MEM)                                                                                  \
    "{\"name\": \"" NAME "\", \"full_name\": \"Test GPU\", \"fp16\": \"100 TFLOP/s\", \"fp32\": \"10 TFLOP/s\", " \
    "\"mem\": " MEM ", \"mem_bw\": \"2000 GB/s\", \"pcie\": \"PCIE4\", \"basis\": \"test\", \"source\": \"test\"}"
#define GPUS_OK GPU_J("G1", "\"40 GB\"") ", " GPU_J("G2", "\"80 GB\"")
#define LINK_J(EXTRA)                                                                                     \
    "{\"name\": \"pcie4\", \"theoretical\": \"31.5 GB/s\", \"h2d\": \"25.5 GB/s\", \"d2h\": \"26 GB/s\", "     \
    "\"h2d_bidir\": \"12.5 GB/s\", \"d2h_bidir\": \"24 GB/s\", \"pageable_factor\": 0.5, \"latency\": \"10 us\", " \
    "\"basis\": \"test\", \"source\": \"test\"" EXTRA "}"
#define SSD_J(EXTRA)                                                                                      \
    "{\"name\": \"S1\", \"read\": \"6.5 GB/s\", \"write\": \"3.5 GB/s\", \"read_latency\": \"80 us\", "         \
    "\"write_latency\": \"20 us\", \"capacity\": \"7.68 TB\", \"basis\": \"test\", \"source\": \"test\"" EXTRA "}"
#define NIC_J(EFFECTIVE)                                                                                  \
    "{\"name\": \"N1\", \"line\": \"10 Gbps\", \"effective\": " EFFECTIVE ", \"latency\": \"25 us\", "          \
    "\"basis\": \"test\", \"source\": \"test\"}"
#define PLAT_J(GPU, LINK, STORAGE, NIC)                                                                   \
    "{\"name\": \"P1\", \"description\": \"test box\", \"gpu\": \"" GPU "\", \"gpus_per_node\": 4, "           \
    "\"link\": \"" LINK "\", " STORAGE "\"dram\": \"256 GB\", " NIC "\"source\": \"test\"}"
#define STORAGE_OK "\"ssd\": \"S1\", \"n_ssd\": 4, \"stripe_chunk\": \"128 KiB\", "
#define NIC_OK "\"nic\": \"N1\", "

static char g_text[16384];

/* A catalog from the given section bodies (NULL: the valid default). */
static const char *catalog(const char *gpus, const char *links, const char *ssds, const char *nics, const char *plats)
{
    snprintf(g_text, sizeof g_text,
             "{\n \"gpus\": [%s],\n \"links\": [%s],\n \"ssds\": [%s],\n \"nics\": [%s],\n \"platforms\": [%s]\n}\n",
             gpus ? gpus : GPUS_OK, links ? links : LINK_J(""), ssds ? ssds : SSD_J(""),
             nics ? nics : NIC_J("\"1.17 GB/s\""), plats ? plats : PLAT_J("G1", "pcie4", STORAGE_OK, NIC_OK));
    return g_text;
}

/* Parse text that must fail; returns the message (static) and checks the catalog is left empty. */
static const char *parse_fails(TestCtx *t, const char *text)
{
    static KvErr e;
    HwCatalog c;
    memset(&e, 0, sizeof e);
    int rc = hw_catalog_parse(&c, text, "t.json", &e);
    CHECK_MSG(rc == -1, "expected failure, got success for: %s", text);
    CHECK(c.gpus == NULL && c.links == NULL && c.ssds == NULL && c.nics == NULL && c.platforms == NULL);
    CHECK(c.n_gpus == 0 && c.n_platforms == 0);
    if (rc == 0) hw_catalog_free(&c);
    return e.msg;
}

TEST(hw_minimal_catalog_parses)
{
    KvErr e = {{0}};
    HwCatalog c;
    CHECK_MSG(hw_catalog_parse(&c, catalog(NULL, NULL, NULL, NULL, NULL), "t.json", &e) == 0, "%s", e.msg);
    CHECK_EQ_I(c.n_gpus, 2);
    CHECK_EQ_I(c.n_links, 1);
    CHECK_EQ_I(c.n_ssds, 1);
    CHECK_EQ_I(c.n_nics, 1);
    CHECK_EQ_I(c.n_platforms, 1);
    CHECK_STR(c.origin, "t.json");
    if (c.n_gpus == 2 && c.n_platforms == 1) {
        CHECK_EQ_U(c.gpus[1].mem_bytes, 80000000000ull);
        CHECK_STR(c.gpus[0].pcie, "pcie4"); /* resolved to the link's own spelling */
        CHECK(c.gpus[0].fp8_flops == 0 && c.gpus[0].gpu_link_bytes_per_s == 0 && c.gpus[0].sm_count == 0);
        CHECK_STR(c.gpus[0].note, "");
        const PlatformSpec *p = &c.platforms[0];
        CHECK_EQ_I(p->gpu, 0);
        CHECK_EQ_I(p->link, 0);
        CHECK_EQ_I(p->ssd, 0);
        CHECK_EQ_I(p->nic, 0);
        CHECK_EQ_I(p->n_ssd, 4);
        CHECK_EQ_U(p->stripe_chunk_bytes, 131072);
        CHECK_EQ_U(p->dram_bytes, 256000000000ull);
        CHECK_EQ_U(p->remote_bytes, 0);
        CHECK(p->dram_bytes_per_s == 0);
        CHECK_NEAR(c.ssds[0].read_bytes_per_s, 6.5e9, 1e-12, 0);
        CHECK_EQ_I(c.ssds[0].read_latency_ns, 80000);
        CHECK_EQ_U(c.ssds[0].capacity_bytes, 7680000000000ull);
        CHECK_NEAR(c.nics[0].line_bytes_per_s, 1.25e9, 0, 0);
        CHECK_NEAR(c.links[0].pageable_factor, 0.5, 0, 0);
        CHECK_EQ_I(c.links[0].latency_ns, 10000);
    }
    hw_catalog_free(&c);
    CHECK(c.gpus == NULL && c.n_gpus == 0 && c.platforms == NULL);
    hw_catalog_free(&c); /* twice is harmless */
}

TEST(hw_platform_without_ssd_or_nic)
{
    KvErr e = {{0}};
    HwCatalog c;
    const char *text = catalog(NULL, NULL, NULL, NULL, PLAT_J("G2", "pcie4", "\"ssd\": null, ", ""));
    CHECK_MSG(hw_catalog_parse(&c, text, NULL, &e) == 0, "%s", e.msg);
    if (c.n_platforms == 1) {
        CHECK_EQ_I(c.platforms[0].gpu, 1);
        CHECK_EQ_I(c.platforms[0].ssd, -1);
        CHECK_EQ_I(c.platforms[0].n_ssd, 0);
        CHECK_EQ_U(c.platforms[0].stripe_chunk_bytes, 0);
        CHECK_EQ_I(c.platforms[0].nic, -1);
    }
    CHECK(c.origin[0] != '\0'); /* NULL origin gets a generic name */
    hw_catalog_free(&c);
}

TEST(hw_missing_unit_names_file_and_path)
{
    KvErr e = {{0}};
    HwCatalog c;
    const char *path = test_write_file(t, "hardware.json",
                                       catalog(GPUS_OK ", " GPU_J("G3", "\"80\""), NULL, NULL, NULL, NULL));
    CHECK(hw_catalog_load(&c, path, &e) == -1);
    char want[4300];
    snprintf(want, sizeof want, "%s: gpus[2].mem: expected a size with a unit such as \"80 GB\", got \"80\"", path);
    CHECK_CONTAINS(e.msg, want);
    CHECK_CONTAINS(e.msg, "GiB"); /* and lists the accepted units */
    CHECK(c.gpus == NULL && c.n_gpus == 0);

    /* a bare JSON number is refused the same way */
    const char *m = parse_fails(t, catalog(GPU_J("G1", "80"), NULL, NULL, NULL, NULL));
    CHECK_CONTAINS(m, "t.json: gpus[0].mem: expected a size with a unit such as \"80 GB\", got \"80\"");
    /* and a value of the wrong JSON type is shown as it was written */
    m = parse_fails(t, catalog(GPU_J("G1", "true"), NULL, NULL, NULL, NULL));
    CHECK_CONTAINS(m, "gpus[0].mem: expected a size with a unit such as \"80 GB\", got true");
    /* a rate unit where a size belongs */
    m = parse_fails(t, catalog(GPU_J("G1", "\"80 GB/s\""), NULL, NULL, NULL, NULL));
    CHECK_CONTAINS(m, "gpus[0].mem: expected a size");
    CHECK_CONTAINS(m, "unknown unit \"GB/s\"");
}

TEST(hw_bad_json_reports_line_and_column)
{
    const char *text = "{\n \"gpus\": [\n  {\"name\": \"x\",, }\n ]\n}\n";
    const char *m = parse_fails(t, text);
    CHECK_CONTAINS(m, "t.json:3:");
    CHECK_CONTAINS(m, "malformed JSON");
    /* truncated text: the position is the end */
    m = parse_fails(t, "{\n \"gpus\": [\n");
    CHECK_CONTAINS(m, "t.json:3:");
    CHECK_CONTAINS(m, "malformed JSON");
    /* trailing garbage after the object */
    m = parse_fails(t, "{}\n}");
    CHECK_CONTAINS(m, "t.json:2:");
    /* from a file, the message names the file */
    KvErr e = {{0}};
    HwCatalog c;
    const char *path = test_write_file(t, "bad.json", "{\"gpus\": [}");
    CHECK(hw_catalog_load(&c, path, &e) == -1);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, ":1:");
    m = parse_fails(t, "");
    CHECK_CONTAINS(m, "t.json:1:1: malformed JSON");
    KvErr e2 = {{0}};
    CHECK(hw_catalog_parse(&c, NULL, "t.json", &e2) == -1);
    CHECK_CONTAINS(e2.msg, "t.json");
}

TEST(hw_platform_bad_reference_lists_known_names)
{
    const char *m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("A100-90GB", "pcie4", STORAGE_OK, NIC_OK)));
    CHECK_CONTAINS(m, "t.json: platforms[0].gpu: platform \"P1\" refers to unknown GPU \"A100-90GB\"");
    CHECK_CONTAINS(m, "known GPUs: G1, G2");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie9", STORAGE_OK, NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].link: platform \"P1\" refers to unknown link \"pcie9\" (known links: pcie4)");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL,
                               PLAT_J("G1", "pcie4", "\"ssd\": \"S7\", \"n_ssd\": 1, \"stripe_chunk\": \"1 MiB\", ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].ssd: platform \"P1\" refers to unknown SSD \"S7\" (known SSDs: S1)");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", STORAGE_OK, "\"nic\": \"N9\", ")));
    CHECK_CONTAINS(m, "platforms[0].nic: platform \"P1\" refers to unknown NIC \"N9\" (known NICs: N1)");
    /* no SSDs at all */
    m = parse_fails(t, catalog(NULL, NULL, "", NULL, NULL));
    CHECK_CONTAINS(m, "unknown SSD \"S1\" (known SSDs: none)");
    /* a GPU's default host link must exist too */
    m = parse_fails(t, catalog(GPU_J("G1", "\"40 GB\""), "", NULL, NULL, ""));
    CHECK_CONTAINS(m, "gpus[0].pcie: GPU \"G1\" refers to unknown link \"PCIE4\"");
}

TEST(hw_platform_storage_consistency)
{
    const char *m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"n_ssd\": 2, ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].n_ssd: given, but platform \"P1\" has no \"ssd\"");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"stripe_chunk\": \"64 KiB\", ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].stripe_chunk: given, but platform \"P1\" has no \"ssd\"");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"ssd\": \"S1\", ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].n_ssd: missing");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"ssd\": \"S1\", \"n_ssd\": 2, ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].stripe_chunk: missing");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"ssd\": \"S1\", \"n_ssd\": 0, ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].n_ssd: expected an integer >= 1, got 0");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"ssd\": \"S1\", \"n_ssd\": 2.5, ", NIC_OK)));
    CHECK_CONTAINS(m, "platforms[0].n_ssd: expected an integer, got 2.5");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, PLAT_J("G1", "pcie4", "\"remote\": \"10 TB\", ", "")));
    CHECK_CONTAINS(m, "platforms[0].remote: given, but platform \"P1\" has no \"nic\"");
}

TEST(hw_duplicate_names_refused)
{
    const char *m = parse_fails(t, catalog(GPU_J("A100-40GB", "\"40 GB\"") ", " GPU_J("a100-40gb", "\"80 GB\""), NULL,
                                           NULL, NULL, PLAT_J("A100-40GB", "pcie4", STORAGE_OK, NIC_OK)));
    CHECK_CONTAINS(m, "t.json: gpus[1].name: duplicate GPU name \"a100-40gb\"");
    CHECK_CONTAINS(m, "gpus[0] \"A100-40GB\"");
    char plats[2048];
    snprintf(plats, sizeof plats, "%s, %s", PLAT_J("G1", "pcie4", STORAGE_OK, NIC_OK), PLAT_J("G2", "pcie4", "", ""));
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, plats));
    CHECK_CONTAINS(m, "platforms[1].name: duplicate platform name \"P1\"");
}

TEST(hw_unknown_and_repeated_keys_refused)
{
    const char *m = parse_fails(t, catalog(NULL, NULL, SSD_J(", \"capacty\": \"1 TB\""), NULL, NULL));
    CHECK_CONTAINS(m, "t.json: ssds[0]: unknown key \"capacty\" (known keys: name, full_name, read, write");
    m = parse_fails(t, catalog(NULL, NULL, SSD_J(", \"read\": \"7 GB/s\""), NULL, NULL));
    CHECK_CONTAINS(m, "ssds[0].read: key given twice");
    m = parse_fails(t, "{\"gpus\": [], \"gpu\": []}");
    CHECK_CONTAINS(m, "unknown top-level key \"gpu\"");
    m = parse_fails(t, "{\"gpus\": [], \"gpus\": []}");
    CHECK_CONTAINS(m, "gpus: key given twice");
}

TEST(hw_structure_errors)
{
    const char *m = parse_fails(t, "[]");
    CHECK_CONTAINS(m, "t.json: expected a JSON object with \"gpus\"");
    CHECK_CONTAINS(m, "got an array");
    m = parse_fails(t, "{\"gpus\": {}}");
    CHECK_CONTAINS(m, "t.json: gpus: expected an array of GPUs, got an object");
    m = parse_fails(t, "{\"nics\": [1]}");
    CHECK_CONTAINS(m, "t.json: nics[0]: expected an object, got 1");
    /* missing required field, and empty required string */
    m = parse_fails(t, catalog(NULL, NULL, NULL, "{\"name\": \"N1\", \"line\": \"10 Gbps\", \"latency\": \"1 us\", "
                                                 "\"basis\": \"b\", \"source\": \"s\"}", NULL));
    CHECK_CONTAINS(m, "nics[0].effective: missing (expected a rate with a unit such as \"25.5 GB/s\")");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, "{\"name\": \"\"}"));
    CHECK_CONTAINS(m, "platforms[0].name: must not be empty");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, "{\"name\": 7}"));
    CHECK_CONTAINS(m, "platforms[0].name: expected a string, got 7");
    /* wrong type for integers and numbers */
    m = parse_fails(t, catalog(NULL, LINK_J("") , NULL, NULL,
                               "{\"name\": \"P1\", \"description\": \"d\", \"gpu\": \"G1\", \"gpus_per_node\": \"4\"}"));
    CHECK_CONTAINS(m, "platforms[0].gpus_per_node: expected an integer, got \"4\"");
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL,
                               "{\"name\": \"P1\", \"description\": \"d\", \"gpu\": \"G1\", \"gpus_per_node\": -1}"));
    CHECK_CONTAINS(m, "platforms[0].gpus_per_node: expected an integer >= 1, got -1");
    /* too long for its field */
    char src[700], plat[1200];
    memset(src, 's', 600);
    src[600] = '\0';
    snprintf(plat, sizeof plat,
             "{\"name\": \"P1\", \"description\": \"d\", \"gpu\": \"G1\", \"gpus_per_node\": 1, \"link\": \"pcie4\", "
             "\"dram\": \"0 B\", \"source\": \"%s\"}", src);
    m = parse_fails(t, catalog(NULL, NULL, NULL, NULL, plat));
    CHECK_CONTAINS(m, "platforms[0].source: too long (600 characters; at most 511)");
}

TEST(hw_value_relations_checked)
{
    const char *m = parse_fails(t, catalog(NULL, NULL, NULL, NIC_J("\"2 GB/s\""), NULL));
    CHECK_CONTAINS(m, "nics[0].effective: 2.00 GB/s is more than line (1.25 GB/s)");
    m = parse_fails(t, catalog(NULL, "{\"name\": \"pcie4\", \"theoretical\": \"31.5 GB/s\", \"h2d\": \"25.5 GB/s\", "
                                     "\"d2h\": \"26 GB/s\", \"h2d_bidir\": \"30 GB/s\", \"d2h_bidir\": \"24 GB/s\", "
                                     "\"pageable_factor\": 0.5, \"latency\": \"10 us\", \"basis\": \"b\", \"source\": \"s\"}",
                               NULL, NULL, NULL));
    CHECK_CONTAINS(m, "links[0].h2d_bidir: 30.00 GB/s is more than h2d (25.50 GB/s)");
    m = parse_fails(t, catalog(NULL, "{\"name\": \"pcie4\", \"theoretical\": \"31.5 GB/s\", \"h2d\": \"25.5 Gbps\", "
                                     "\"d2h\": \"260 GB/s\", \"h2d_bidir\": \"1 GB/s\", \"d2h_bidir\": \"24 GB/s\", "
                                     "\"pageable_factor\": 0.5, \"latency\": \"10 us\", \"basis\": \"b\", \"source\": \"s\"}",
                               NULL, NULL, NULL));
    CHECK_CONTAINS(m, "links[0].d2h: 260.00 GB/s is more than theoretical (31.50 GB/s)");
    m = parse_fails(t, catalog(NULL, "{\"name\": \"pcie4\", \"theoretical\": \"31.5 GB/s\", \"h2d\": \"25.5 GB/s\", "
                                     "\"d2h\": \"26 GB/s\", \"h2d_bidir\": \"12 GB/s\", \"d2h_bidir\": \"24 GB/s\", "
                                     "\"pageable_factor\": 1.5, \"latency\": \"10 us\", \"basis\": \"b\", \"source\": \"s\"}",
                               NULL, NULL, NULL));
    CHECK_CONTAINS(m, "links[0].pageable_factor: expected a ratio in (0, 1]");
    m = parse_fails(t, catalog(NULL, LINK_J(", \"note\": 3"), NULL, NULL, NULL));
    CHECK_CONTAINS(m, "links[0].note: expected a string, got 3");
    m = parse_fails(t, catalog(NULL, NULL, SSD_J(", \"full_name\": \"x\", \"read_iops\": -5"), NULL, NULL));
    CHECK_CONTAINS(m, "ssds[0].read_iops: expected a number >= 0, got -5");
    /* a zero where a rate must be positive */
    m = parse_fails(t, catalog(NULL, NULL, SSD_J(", \"full_name\": \"x\"") , "{\"name\": \"N1\", \"line\": \"0 Gbps\", "
                               "\"effective\": \"0 GB/s\", \"latency\": \"1 us\", \"basis\": \"b\", \"source\": \"s\"}", NULL));
    CHECK_CONTAINS(m, "nics[0].line: must be greater than zero, got \"0 Gbps\"");
}

TEST(hw_load_missing_override_names_path)
{
    KvErr e = {{0}};
    HwCatalog c;
    CHECK(hw_catalog_load(&c, "/no/such/dir/hardware.json", &e) == -1);
    CHECK_CONTAINS(e.msg, "/no/such/dir/hardware.json");
    CHECK(c.gpus == NULL && c.n_gpus == 0);
}

/* ---- the shipped catalog ---- */

static const char *const WANT_GPUS[] = {"A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe",
                                        "H200",      "L40S",      "RTX4090",  "B200"};
static const char *const WANT_PLATFORMS[] = {
    "hcache-a100",        "cake-a100",          "cake-a100x2",        "cake-h100",
    "cacheflow-l40s-10g", "cacheflow-l40s-40g", "cacheflow-l40s-80g", "cacheflow-a100-10g",
    "cacheflow-a100-40g", "cacheflow-a100-80g", "cacheflow-h100-10g", "cacheflow-h100-40g",
    "cacheflow-h100-80g", "h200",               "rtx4090"};
static const char *const WANT_SSDS[] = {"PM9A3", "990Pro", "CM7", "CM6", "P5800X"};
static const char *const WANT_NICS[] = {"7Gbps",  "10GbE",  "25GbE", "32Gbps", "40GbE",
                                        "56Gbps", "80Gbps", "100G",  "200G",   "400G"};

static int load_shipped(TestCtx *t, HwCatalog *c)
{
    KvErr e = {{0}};
    int rc = hw_catalog_load(c, NULL, &e);
    CHECK_MSG(rc == 0, "embedded catalog: %s", e.msg);
    return rc;
}

TEST(hw_embedded_catalog_has_everything)
{
    HwCatalog c;
    if (load_shipped(t, &c) != 0) return;
    KvErr e = {{0}};
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_GPUS); i++)
        CHECK_MSG(hw_find_gpu(&c, WANT_GPUS[i], &e) != NULL, "%s", e.msg);
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_PLATFORMS); i++)
        CHECK_MSG(hw_find_platform(&c, WANT_PLATFORMS[i], &e) != NULL, "%s", e.msg);
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_SSDS); i++)
        CHECK_MSG(hw_find_ssd(&c, WANT_SSDS[i], &e) != NULL, "%s", e.msg);
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_NICS); i++)
        CHECK_MSG(hw_find_nic(&c, WANT_NICS[i], &e) != NULL, "%s", e.msg);
    CHECK(hw_find_link(&c, "pcie4", &e) != NULL);
    CHECK(hw_find_link(&c, "pcie5", &e) != NULL);
    hw_catalog_free(&c);
}

/* Every entry says where it comes from; every platform describes itself; the load invariants. */
TEST(hw_embedded_catalog_sources_and_invariants)
{
    HwCatalog c;
    if (load_shipped(t, &c) != 0) return;
    for (int i = 0; i < c.n_gpus; i++) {
        const GpuSpec *g = &c.gpus[i];
        CHECK_MSG(g->source[0] && g->basis[0] && g->full_name[0], "gpu %s", g->name);
        CHECK_MSG(g->fp16_flops > 0 && g->fp32_flops > 0 && g->mem_bytes > 0 && g->mem_bw_bytes_per_s > 0, "gpu %s", g->name);
        CHECK_MSG(g->fp16_flops > g->fp32_flops || strcmp(g->name, "RTX4090") == 0 || strcmp(g->name, "L40S") == 0,
                  "gpu %s: tensor fp16 below fp32", g->name);
    }
    for (int i = 0; i < c.n_links; i++)
        CHECK_MSG(c.links[i].source[0] && c.links[i].basis[0], "link %s", c.links[i].name);
    for (int i = 0; i < c.n_ssds; i++)
        CHECK_MSG(c.ssds[i].source[0] && c.ssds[i].basis[0] && c.ssds[i].capacity_bytes > 0, "ssd %s", c.ssds[i].name);
    for (int i = 0; i < c.n_nics; i++) {
        const NicSpec *n = &c.nics[i];
        CHECK_MSG(n->source[0] && n->basis[0], "nic %s", n->name);
        CHECK_MSG(n->bytes_per_s > 0.9 * n->line_bytes_per_s && n->bytes_per_s <= n->line_bytes_per_s,
                  "nic %s: goodput %.4g of line %.4g", n->name, n->bytes_per_s, n->line_bytes_per_s);
    }
    for (int i = 0; i < c.n_platforms; i++) {
        const PlatformSpec *p = &c.platforms[i];
        CHECK_MSG(p->source[0] && p->description[0], "platform %s", p->name);
        CHECK_MSG(p->gpu >= 0 && p->gpu < c.n_gpus && p->link >= 0 && p->link < c.n_links, "platform %s", p->name);
        CHECK_MSG(p->gpus_per_node >= 1, "platform %s", p->name);
        CHECK_MSG((p->ssd < 0) == (p->n_ssd == 0), "platform %s", p->name);
        CHECK_MSG(p->nic >= -1 && p->nic < c.n_nics, "platform %s", p->name);
    }
    hw_catalog_free(&c);
}

TEST(hw_embedded_catalog_spot_values)
{
    HwCatalog c;
    if (load_shipped(t, &c) != 0) return;
    KvErr e = {{0}};
    const GpuSpec *a100 = hw_find_gpu(&c, "A100-40GB", &e);
    const LinkSpec *pcie4 = hw_find_link(&c, "pcie4", &e);
    const LinkSpec *pcie5 = hw_find_link(&c, "pcie5", &e);
    const NicSpec *tengig = hw_find_nic(&c, "10GbE", &e);
    const NicSpec *cake32 = hw_find_nic(&c, "32Gbps", &e);
    const PlatformSpec *hc = hw_find_platform(&c, "hcache-a100", &e);
    const GpuSpec *rtx = hw_find_gpu(&c, "RTX4090", &e);
    const GpuSpec *h200 = hw_find_gpu(&c, "H200", &e);
    const GpuSpec *l40s = hw_find_gpu(&c, "L40S", &e);
    const SsdSpec *cm7 = hw_find_ssd(&c, "CM7", &e);
    const SsdSpec *pm = hw_find_ssd(&c, "PM9A3", &e);
    if (!a100 || !pcie4 || !pcie5 || !tengig || !cake32 || !hc || !rtx || !h200 || !l40s || !cm7 || !pm) {
        CHECK_MSG(0, "missing entries: %s", e.msg);
        hw_catalog_free(&c);
        return;
    }
    CHECK_NEAR(a100->fp16_flops, 312e12, 0, 0);
    CHECK_EQ_U(a100->mem_bytes, 40000000000ull);
    CHECK_NEAR(a100->mem_bw_bytes_per_s, 1555e9, 0, 0);
    CHECK_NEAR(a100->gpu_link_bytes_per_s, 300e9, 0, 0);
    CHECK_EQ_I(a100->sm_count, 108);
    CHECK_STR(a100->pcie, "pcie4");
    CHECK_NEAR(rtx->fp16_flops, 165.2e12, 1e-12, 0);
    CHECK(rtx->gpu_link_bytes_per_s == 0 && l40s->gpu_link_bytes_per_s == 0);
    CHECK_EQ_U(h200->mem_bytes, 141000000000ull);
    CHECK_NEAR(h200->mem_bw_bytes_per_s, 4800e9, 0, 0);
    CHECK_STR(h200->pcie, "pcie5");

    CHECK_NEAR(pcie4->theoretical_bytes_per_s, 31.5e9, 0, 0);
    CHECK_NEAR(pcie4->h2d_bytes_per_s, 25.5e9, 0, 0);
    CHECK_NEAR(pcie4->d2h_bytes_per_s, 26.0e9, 0, 0);
    CHECK_NEAR(pcie4->h2d_bidir_bytes_per_s, 12.5e9, 0, 0);
    CHECK_NEAR(pcie4->d2h_bidir_bytes_per_s, 24e9, 0, 0);
    CHECK_NEAR(pcie4->pageable_factor, 0.5, 0, 0);
    CHECK_EQ_I(pcie4->latency_ns, 10000);
    CHECK_NEAR(pcie5->h2d_bytes_per_s, 55.43e9, 1e-12, 0);
    CHECK_NEAR(pcie5->d2h_bytes_per_s, 55.06e9, 1e-12, 0);
    /* derived both-ways figures use the Gen4 ratios (to the 0.01 GB/s written in the file) */
    CHECK_NEAR(pcie5->h2d_bidir_bytes_per_s, 55.43e9 * 12.5 / 25.5, 0, 0.01e9);
    CHECK_NEAR(pcie5->d2h_bidir_bytes_per_s, 55.06e9 * 24.0 / 26.0, 0, 0.01e9);
    CHECK_CONTAINS(pcie5->basis, "derived");
    CHECK_CONTAINS(pcie4->basis, "estimate");

    CHECK_NEAR(tengig->line_bytes_per_s, 1.25e9, 0, 0);
    CHECK_NEAR(tengig->bytes_per_s, 1.17e9, 1e-12, 0);
    CHECK_NEAR(cake32->line_bytes_per_s, 4294967296.0, 0, 0); /* Cake's 32 Gbps = 4 GiB/s */

    CHECK_EQ_I(hc->n_ssd, 4);
    CHECK(hc->ssd >= 0 && strcmp(c.ssds[hc->ssd].name, "PM9A3") == 0);
    CHECK(strcmp(c.gpus[hc->gpu].name, "A100-40GB") == 0);
    CHECK_EQ_I(hc->gpus_per_node, 4);
    CHECK(strcmp(c.links[hc->link].name, "pcie4") == 0);
    CHECK_EQ_U(hc->dram_bytes, 256000000000ull);
    CHECK_EQ_U(hc->stripe_chunk_bytes, 131072);
    CHECK_EQ_I(hc->nic, -1);
    CHECK_NEAR(pm->read_bytes_per_s, 6.5e9, 0, 0);
    CHECK_NEAR(pm->write_bytes_per_s, 3.5e9, 0, 0);
    CHECK_EQ_U(pm->capacity_bytes, 7680000000000ull);
    CHECK_CONTAINS(pm->note, "6.9");
    CHECK_NEAR(cm7->read_bytes_per_s, 14e9, 0, 0);
    CHECK_EQ_I(cm7->read_latency_ns, 70000);

    e.msg[0] = '\0';
    const PlatformSpec *cake = hw_find_platform(&c, "cake-a100", &e);
    const PlatformSpec *cake2 = hw_find_platform(&c, "cake-a100x2", &e);
    const PlatformSpec *cfh = hw_find_platform(&c, "cacheflow-h100-80g", &e);
    const PlatformSpec *cfl = hw_find_platform(&c, "cacheflow-l40s-10g", &e);
    const PlatformSpec *big = hw_find_platform(&c, "h200", &e);
    const PlatformSpec *ws = hw_find_platform(&c, "rtx4090", &e);
    if (cake && cake2 && cfh && cfl && big && ws) {
        CHECK(strcmp(c.gpus[cake->gpu].name, "A100-80GB") == 0 && cake->gpus_per_node == 1);
        CHECK(cake->nic >= 0 && strcmp(c.nics[cake->nic].name, "32Gbps") == 0);
        CHECK_EQ_I(cake2->gpus_per_node, 2);
        CHECK(strcmp(c.gpus[cfh->gpu].name, "H100-SXM") == 0 && strcmp(c.nics[cfh->nic].name, "80Gbps") == 0);
        CHECK(strcmp(c.gpus[cfl->gpu].name, "L40S") == 0 && strcmp(c.nics[cfl->nic].name, "10GbE") == 0);
        CHECK_EQ_U(cfl->dram_bytes, 128000000000ull);
        CHECK(strcmp(c.gpus[big->gpu].name, "H200") == 0 && big->gpus_per_node == 8 && big->n_ssd == 8);
        CHECK(strcmp(c.ssds[big->ssd].name, "CM7") == 0 && strcmp(c.nics[big->nic].name, "400G") == 0);
        CHECK_EQ_U(big->dram_bytes, 2000000000000ull);
        CHECK(strcmp(c.ssds[ws->ssd].name, "990Pro") == 0 && ws->n_ssd == 1 && ws->dram_bytes == 64000000000ull);
    } else {
        CHECK_MSG(0, "missing platform: %s", e.msg);
    }
    hw_catalog_free(&c);
}

/* The file on disk and the copy compiled into the binary agree (the build embeds the file). */
TEST(hw_file_matches_embedded)
{
    HwCatalog a, b;
    KvErr e = {{0}};
    if (load_shipped(t, &a) != 0) return;
    int rc = hw_catalog_load(&b, test_path("configs/hardware.json"), &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc == 0) {
        CHECK_EQ_I(a.n_gpus, b.n_gpus);
        CHECK_EQ_I(a.n_links, b.n_links);
        CHECK_EQ_I(a.n_ssds, b.n_ssds);
        CHECK_EQ_I(a.n_nics, b.n_nics);
        CHECK_EQ_I(a.n_platforms, b.n_platforms);
        hw_catalog_free(&b);
    }
    hw_catalog_free(&a);
}

TEST(hw_lookup_case_insensitive)
{
    HwCatalog c;
    if (load_shipped(t, &c) != 0) return;
    KvErr e = {{0}};
    const GpuSpec *g = hw_find_gpu(&c, "a100-40gb", &e);
    CHECK(g && strcmp(g->name, "A100-40GB") == 0);
    const PlatformSpec *p = hw_find_platform(&c, "HCACHE-A100", &e);
    CHECK(p && strcmp(p->name, "hcache-a100") == 0);
    CHECK(hw_find_link(&c, "PCIe5", &e) != NULL);
    CHECK(hw_find_ssd(&c, "pm9a3", &e) != NULL);
    CHECK(hw_find_nic(&c, "10gbe", &e) != NULL);
    hw_catalog_free(&c);
}

TEST(hw_unknown_names_list_known_ones)
{
    HwCatalog c;
    if (load_shipped(t, &c) != 0) return;
    KvErr e = {{0}};
    CHECK(hw_find_platform(&c, "dgx-a100", &e) == NULL);
    CHECK_CONTAINS(e.msg, "unknown platform \"dgx-a100\"");
    CHECK_CONTAINS(e.msg, c.origin); /* names the catalog it searched */
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_PLATFORMS); i++) CHECK_CONTAINS(e.msg, WANT_PLATFORMS[i]);
    CHECK(hw_find_gpu(&c, "A100", &e) == NULL);
    CHECK_CONTAINS(e.msg, "unknown GPU \"A100\"");
    for (size_t i = 0; i < KV_ARRAY_LEN(WANT_GPUS); i++) CHECK_CONTAINS(e.msg, WANT_GPUS[i]);
    CHECK(hw_find_link(&c, "pcie6", &e) == NULL);
    CHECK_CONTAINS(e.msg, "known links: pcie4, pcie5");
    CHECK(hw_find_ssd(&c, "980Pro", &e) == NULL);
    CHECK_CONTAINS(e.msg, "known SSDs: PM9A3, 990Pro, CM7, CM6, P5800X");
    CHECK(hw_find_nic(&c, "800G", &e) == NULL);
    CHECK_CONTAINS(e.msg, "known NICs: 7Gbps, 10GbE");
    CHECK_CONTAINS(e.msg, "400G");
    CHECK(hw_find_gpu(&c, NULL, &e) == NULL);
    CHECK_CONTAINS(e.msg, "unknown GPU");
    hw_catalog_free(&c);
    /* an empty catalog says so */
    HwCatalog empty;
    KvErr e2 = {{0}};
    CHECK(hw_catalog_parse(&empty, "{}", "empty.json", &e2) == 0);
    CHECK(hw_find_platform(&empty, "h200", &e2) == NULL);
    CHECK_CONTAINS(e2.msg, "known platforms: none");
    hw_catalog_free(&empty);
}

/* catalog() with the first occurrence of `from` replaced by `to` (static buffer). */
static const char *catalog_sub(const char *from, const char *to)
{
    static char out[sizeof g_text + 256];
    const char *text = catalog(NULL, NULL, NULL, NULL, NULL);
    const char *p = strstr(text, from);
    if (!p) return "{}";
    snprintf(out, sizeof out, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    return out;
}

/* Reproducers (hardening issue): "1e-20 B/s" made every transfer instant (inf cast to INT64_MIN,
 * clamped to 0) and "1e-30 FLOP/s" overflowed the compute times. Every rate, capacity, count and
 * latency has a plausible range, and the message names the file, the key, the value and the range. */
TEST(hw_plausible_ranges_refuse_absurd_values)
{
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"\"h2d\": \"25.5 GB/s\"", "\"h2d\": \"1e-20 B/s\"",
         "t.json: links[0].h2d: \"1e-20 B/s\" = 0.00 B/s is out of the plausible range [10.00 MB/s, 10.00 TB/s]"},
        {"\"fp16\": \"100 TFLOP/s\"", "\"fp16\": \"1e-30 FLOP/s\"",
         "t.json: gpus[0].fp16: \"1e-30 FLOP/s\" = 0.0 FLOP/s is out of the plausible range [100.0 GFLOP/s, 100.0 PFLOP/s]"},
        {"\"fp32\": \"10 TFLOP/s\"", "\"fp32\": \"1e30 FLOP/s\"", "gpus[0].fp32: \"1e30 FLOP/s\""},
        {"\"mem\": \"40 GB\"", "\"mem\": \"40 B\"", "gpus[0].mem: \"40 B\" = 40 B is out of the plausible range"},
        {"\"mem_bw\": \"2000 GB/s\"", "\"mem_bw\": \"2000 B/s\"", "gpus[0].mem_bw: \"2000 B/s\""},
        {"\"d2h\": \"26 GB/s\"", "\"d2h\": \"26 kB/s\"", "links[0].d2h: \"26 kB/s\""},
        {"\"latency\": \"10 us\"", "\"latency\": \"3 h\"", "links[0].latency: \"3 h\" = "},
        {"\"read\": \"6.5 GB/s\"", "\"read\": \"6.5 B/s\"", "ssds[0].read: \"6.5 B/s\""},
        {"\"read_latency\": \"80 us\"", "\"read_latency\": \"80 s\"", "ssds[0].read_latency: \"80 s\""},
        {"\"capacity\": \"7.68 TB\"", "\"capacity\": \"7.68 EB\"", NULL /* unit refused or range */},
        {"\"capacity\": \"7.68 TB\"", "\"capacity\": \"7680 PB\"", "ssds[0].capacity: \"7680 PB\""},
        {"\"line\": \"10 Gbps\"", "\"line\": \"10 bps\"", "nics[0].line: \"10 bps\""},
        {"\"gpus_per_node\": 4", "\"gpus_per_node\": 100000", "platforms[0].gpus_per_node: 100000 is out of the plausible range [1, 4096]"},
        {"\"n_ssd\": 4", "\"n_ssd\": 5000", "platforms[0].n_ssd: 5000 is out of the plausible range [1, 4096]"},
        {"\"stripe_chunk\": \"128 KiB\"", "\"stripe_chunk\": \"1 B\"", "platforms[0].stripe_chunk: \"1 B\""},
        {"\"dram\": \"256 GB\"", "\"dram\": \"256 B\"", "platforms[0].dram: \"256 B\" = 256 B is out of the plausible range [1.00 MB, 10.00 PB] (or 0 for none)"},
        {"\"capacity\": \"7.68 TB\"", "\"capacity\": \"7.68 TB\", \"mixed_efficiency\": 1.2",
         "t.json: ssds[0].mixed_efficiency: 1.2 is out of the plausible range [0.05, 1]"},
        {"\"capacity\": \"7.68 TB\"", "\"capacity\": \"7.68 TB\", \"mixed_efficiency\": 0",
         "t.json: ssds[0].mixed_efficiency: 0 is out of the plausible range [0.05, 1]"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(bad); i++) {
        const char *m = parse_fails(t, catalog_sub(bad[i].from, bad[i].to));
        if (bad[i].msg) CHECK_CONTAINS(m, bad[i].msg);
    }
    /* zero stays "none" where it means none; the edges of a range are accepted */
    HwCatalog c;
    KvErr e = {{0}};
    CHECK_MSG(hw_catalog_parse(&c, catalog_sub("\"dram\": \"256 GB\"", "\"dram\": \"0 B\""), "t.json", &e) == 0, "%s", e.msg);
    hw_catalog_free(&c);
    CHECK_MSG(hw_catalog_parse(&c, catalog_sub("\"h2d_bidir\": \"12.5 GB/s\"", "\"h2d_bidir\": \"10 MB/s\""), "t.json", &e) == 0,
              "%s", e.msg);
    hw_catalog_free(&c);    /* an SSD's mixing share: absent is 0 (taking turns), given it is kept */
    CHECK_MSG(hw_catalog_parse(&c, catalog(NULL, NULL, NULL, NULL, NULL), "t.json", &e) == 0, "%s", e.msg);
    if (c.n_ssds == 1) CHECK(c.ssds[0].mixed_efficiency == 0);
    hw_catalog_free(&c);
    CHECK_MSG(hw_catalog_parse(&c, catalog(NULL, NULL, SSD_J(", \"mixed_efficiency\": 0.85"), NULL, NULL), "t.json", &e) == 0, "%s",
              e.msg);
    if (c.n_ssds == 1) CHECK_NEAR(c.ssds[0].mixed_efficiency, 0.85, 0, 0);
    hw_catalog_free(&c);
}

/* ---- catalogs of thousands of entries: the name index (duplicates, references, overlay merge) ---- */

#define MANY 3000

/* {"gpus": [G0000 .. G<n-1>, extra...], "links": [pcie4], "platforms": [P0000 on G0000, ...]} (caller frees) */
static char *many_catalog(int n_gpus, int n_plats, const char *extra_gpu)
{
    size_t cap = (size_t)(n_gpus + n_plats + 2) * 512 + 4096, used = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    used += (size_t)snprintf(s + used, cap - used, "{\"gpus\": [");
    for (int i = 0; i < n_gpus; i++) {
        char name[16];
        snprintf(name, sizeof name, "G%04d", i);
        used += (size_t)snprintf(s + used, cap - used, "%s{\"name\": \"%s\", \"full_name\": \"t\", \"fp16\": \"100 TFLOP/s\", "
                                 "\"fp32\": \"10 TFLOP/s\", \"mem\": \"40 GB\", \"mem_bw\": \"2000 GB/s\", \"pcie\": \"PCIE4\", "
                                 "\"basis\": \"test\", \"source\": \"test\"}", i ? ", " : "", name);
    }
    if (extra_gpu) used += (size_t)snprintf(s + used, cap - used, ", %s", extra_gpu);
    used += (size_t)snprintf(s + used, cap - used, "], \"links\": [%s], \"platforms\": [", LINK_J(""));
    for (int i = 0; i < n_plats; i++)
        used += (size_t)snprintf(s + used, cap - used, "%s{\"name\": \"P%04d\", \"description\": \"t\", \"gpu\": \"g%04d\", "
                                 "\"gpus_per_node\": 1, \"link\": \"pcie4\", \"dram\": \"256 GB\", \"source\": \"test\"}",
                                 i ? ", " : "", i, n_plats - 1 - i);
    snprintf(s + used, cap - used, "]}");
    return s;
}

TEST(hw_duplicate_among_thousands_found_and_named)
{
    char *text = many_catalog(MANY, 0, GPU_J("g1234", "\"80 GB\""));
    if (!text) return;
    const char *m = parse_fails(t, text);
    CHECK_CONTAINS(m, "t.json: gpus[3000].name: duplicate GPU name \"g1234\" (already used by gpus[1234] \"G1234\"");
    free(text);
}

TEST(hw_thousands_of_platforms_resolve_their_gpus)
{
    char *text = many_catalog(MANY, MANY, NULL);
    if (!text) return;
    HwCatalog c;
    KvErr e = {{0}};
    CHECK_MSG(hw_catalog_parse(&c, text, "t.json", &e) == 0, "%s", e.msg);
    free(text);
    if (c.n_platforms != MANY) {
        CHECK_EQ_I(c.n_platforms, MANY);
        hw_catalog_free(&c);
        return;
    }
    int wrong = 0;
    for (int i = 0; i < MANY; i++) wrong += c.platforms[i].gpu != MANY - 1 - i || c.platforms[i].link != 0;
    CHECK_EQ_I(wrong, 0);
    CHECK_STR(c.gpus[0].pcie, "pcie4"); /* (the link's own spelling) */
    /* an overlay of thousands over it: one replaces G0042 in place (another case), the rest are appended */
    size_t cap = (size_t)MANY * 400 + 1024, used = 0;
    char *ov = malloc(cap);
    if (ov) {
        used += (size_t)snprintf(ov + used, cap - used, "{\"gpus\": [");
        for (int i = 0; i < MANY; i++)
            used += (size_t)snprintf(ov + used, cap - used, "%s{\"name\": \"%s%04d\", \"full_name\": \"t\", \"fp16\": \"100 TFLOP/s\", "
                                     "\"fp32\": \"10 TFLOP/s\", \"mem\": \"%s\", \"mem_bw\": \"2000 GB/s\", \"pcie\": \"pcie4\", "
                                     "\"basis\": \"test\", \"source\": \"test\"}", i ? ", " : "", i == 7 ? "g" : "H",
                                     i == 7 ? 42 : i, i == 7 ? "48 GB" : "40 GB");
        snprintf(ov + used, cap - used, "]}");
        CHECK_MSG(hw_catalog_overlay(&c, ov, "ov.json", &e) == 0, "%s", e.msg);
        CHECK_EQ_I(c.n_gpus, 2 * MANY - 1);
        CHECK(c.gpus[42].mem_bytes == 48000000000ULL);
        CHECK_STR(c.gpus[42].name, "g0042");
        CHECK_STR(c.gpus[MANY].name, "H0000");
        free(ov);
    }
    hw_catalog_free(&c);
}
