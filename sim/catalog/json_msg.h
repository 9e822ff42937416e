/* json_msg.h — the messages both catalog readers (model.c, hw.c) give about JSON they refuse, in
 * one format:
 *   origin:LINE:COL: malformed JSON near "..."        text that does not parse
 *   ... got "abc" | got 4.5 | got true | got null | got an array | got an object
 *                                                     the value found where another was expected
 * The rest of a message (origin, JSON path of the key, the expectation) is the caller's.
 */
#ifndef KV_JSON_MSG_H
#define KV_JSON_MSG_H

#include <cJSON.h>
#include <stddef.h>

#include "sim/base/util.h"

/* "origin:LINE:COL: malformed JSON near \"...\"" into e, at the position `at` in text where the
 * parser stopped (NULL or outside text: the start); LINE and COL are 1-based. Returns -1. */
int kv_json_syntax_error(KvErr *e, const char *origin, const char *text, const char *at);

/* A short rendering of v for "got ...": a string quoted (cut after 40 characters), a number with
 * every significant digit, true, false, null, "an array", "an object". Returns buf. */
const char *kv_json_describe(const cJSON *v, char *buf, size_t n);

#endif
