/* digest.h — SHA-256 of the inputs a result was made from (summary.json "inputs.sha256"), so a
 * result names the exact bytes of its trace file, catalogs and cost store.
 *
 * Responsible for: the SHA-256 of a buffer or of a whole file (streamed; FIPS 180-4, computed in
 * digest.c) as 64 lower-case hex digits.
 * Not responsible for: deciding which inputs are hashed (report.c) or reading catalogs.
 * Invariants: deterministic; a file that cannot be read is an error naming it, never a hash of
 * nothing.
 * Complexity: O(bytes), 64 KiB of buffer.
 */
#ifndef KV_DIGEST_H
#define KV_DIGEST_H

#include <stddef.h>

#include "sim/base/util.h"

#define DIGEST_HEX_LEN 65 /* 64 hex digits + NUL */

int digest_sha256_hex(const void *data, size_t len, char hex[DIGEST_HEX_LEN], KvErr *e);
int digest_sha256_file_hex(const char *path, char hex[DIGEST_HEX_LEN], KvErr *e);

#endif
