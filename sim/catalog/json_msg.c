/* json_msg.c — the catalog readers' messages about refused JSON (format in json_msg.h). */
#include "sim/catalog/json_msg.h"

#include <stdio.h>
#include <string.h>

int kv_json_syntax_error(KvErr *e, const char *origin, const char *text, const char *at)
{
    if (!at || at < text) at = text;
    int line = 1, col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char near[32];
    size_t k = 0;
    for (const char *p = at; *p && *p != '\n' && *p != '\r' && k + 1 < sizeof near; p++) near[k++] = *p;
    near[k] = '\0';
    if (k == 0) return kv_err(e, "%s:%d:%d: malformed JSON (unexpected end of line or text)", origin, line, col);
    return kv_err(e, "%s:%d:%d: malformed JSON near \"%s\"", origin, line, col, near);
}

const char *kv_json_describe(const cJSON *v, char *buf, size_t n)
{
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (strlen(s) > 40) snprintf(buf, n, "\"%.40s...\"", s);
        else snprintf(buf, n, "\"%s\"", s);
    } else if (cJSON_IsNumber(v)) {
        snprintf(buf, n, "%.17g", v->valuedouble);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        snprintf(buf, n, "null");
    } else if (cJSON_IsArray(v)) {
        snprintf(buf, n, "an array");
    } else if (cJSON_IsObject(v)) {
        snprintf(buf, n, "an object");
    } else {
        snprintf(buf, n, "an invalid value");
    }
    return buf;
}
