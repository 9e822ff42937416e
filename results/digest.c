/* digest.c — SHA-256 through libcrypto's EVP interface; see digest.h. */
#include "results/digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

static void to_hex(const unsigned char *md, unsigned n, char hex[DIGEST_HEX_LEN])
{
    static const char d[] = "0123456789abcdef";
    for (unsigned i = 0; i < n && i < 32; i++) {
        hex[2 * i] = d[md[i] >> 4];
        hex[2 * i + 1] = d[md[i] & 15];
    }
    hex[64] = '\0';
}

int digest_sha256_hex(const void *data, size_t len, char hex[DIGEST_HEX_LEN], KvErr *e)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) return kv_err(e, "sha256: libcrypto failed");
    to_hex(md, n, hex);
    return 0;
}

int digest_sha256_file_hex(const char *path, char hex[DIGEST_HEX_LEN], KvErr *e)
{
    FILE *f = kv_fopen_regular(path, e); /* (a FIFO or a device would never end) */
    if (!f) return -1;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1;
    unsigned char buf[65536];
    size_t got;
    while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(c, buf, got) == 1;
    int rd_err = ferror(f);
    fclose(f);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (ok && !rd_err) ok = EVP_DigestFinal_ex(c, md, &n) == 1 && n == 32;
    EVP_MD_CTX_free(c);
    if (rd_err) return kv_err(e, "%s: read error while hashing", path);
    if (!ok) return kv_err(e, "%s: sha256: libcrypto failed", path);
    to_hex(md, n, hex);
    return 0;
}
