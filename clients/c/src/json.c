/* json.c: a strict reader of one flat JSON object (RFC 8259), for
 * MELISSA_TRAINER_PARAMETERS and the rendezvous files: string keys; values that are
 * numbers, strings, or anything else (true, null, arrays, objects: kept as raw text);
 * the split of a JSON array into its items' texts, and a validity check. Like Python's
 * json.loads, it also reads NaN, Infinity and -Infinity as numbers (the callers reject
 * non-finite values with a message of their own). The scanner is json_scan.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"

void mt_json_free(mt_json_member *members, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        free(members[i].key);
        free(members[i].string);
    }
    free(members);
}

const mt_json_member *mt_json_find(const mt_json_member *m, size_t n, const char *key) {
    const mt_json_member *found = NULL;
    for (size_t k = 0; k < n; ++k)
        if (strcmp(m[k].key, key) == 0) found = &m[k];
    return found;
}

bool mt_json_object(const char *text, mt_json_member **members, size_t *count, char *err,
                    size_t err_size) {
    mt_json_parser p = {text, 0, err, err_size};
    mt_json_member *m = NULL;
    size_t n = 0, cap = 0;
    *members = NULL;
    *count = 0;
    mt_json_skip_ws(&p);
    if (text[p.i] != '{') { /* (Python's reason if it is no JSON at all, as json.loads) */
        return mt_json_check(text, err, err_size) ? mt_json_fail(&p, "not a JSON object")
                                                  : false;
    }
    ++p.i;
    mt_json_skip_ws(&p);
    bool ok = true;
    if (text[p.i] == '}') {
        ++p.i;
    } else {
        for (;;) {
            mt_json_skip_ws(&p);
            if (text[p.i] != '"') {
                ok = mt_json_fail(&p, MT_JSON_NO_KEY);
                break;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                mt_json_member *grown = realloc(m, cap * sizeof *m);
                if (grown == NULL) {
                    ok = mt_json_fail(&p, "out of memory");
                    break;
                }
                m = grown;
            }
            mt_json_member *e = &m[n];
            memset(e, 0, sizeof *e);
            if (!mt_json_string(&p, &e->key)) {
                ok = false;
                break;
            }
            ++n;
            mt_json_skip_ws(&p);
            if (text[p.i] != ':') {
                ok = mt_json_fail(&p, MT_JSON_NO_COLON);
                break;
            }
            ++p.i;
            mt_json_skip_ws(&p);
            char ch = text[p.i];
            size_t start = p.i;
            if (ch == '"') {
                e->kind = MT_JSON_STRING;
                if (!(ok = mt_json_string(&p, &e->string))) break;
            } else if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 'N' || ch == 'I') {
                e->kind = MT_JSON_NUMBER;
                if (!(ok = mt_json_number(&p, &e->number, &e->integer))) break;
                if (e->integer && ch != '-') { /* (the digits again, exactly) */
                    errno = 0;
                    char *end = NULL;
                    unsigned long long v = strtoull(text + start, &end, 10);
                    e->exact = errno == 0 && end == text + p.i;
                    e->u64 = (uint64_t)v;
                }
            } else {
                e->kind = MT_JSON_OTHER;
                if (!(ok = mt_json_skip_value(&p, 1))) break;
                size_t len = p.i - start;
                e->string = malloc(len + 1);
                if (e->string == NULL) {
                    ok = mt_json_fail(&p, "out of memory");
                    break;
                }
                memcpy(e->string, text + start, len);
                e->string[len] = '\0';
            }
            mt_json_skip_ws(&p);
            if (text[p.i] == ',') {
                if (!(ok = mt_json_comma(&p, '}'))) break;
                continue;
            }
            if (text[p.i] == '}') {
                ++p.i;
                break;
            }
            ok = mt_json_fail(&p, MT_JSON_NO_COMMA);
            break;
        }
    }
    if (ok) {
        mt_json_skip_ws(&p);
        if (text[p.i] != '\0') ok = mt_json_fail(&p, MT_JSON_EXTRA);
    }
    if (!ok) {
        mt_json_free(m, n);
        return false;
    }
    *members = m;
    *count = n;
    return true;
}

bool mt_json_check(const char *text, char *err, size_t err_size) {
    mt_json_parser p = {text, 0, err, err_size};
    if (!mt_json_skip_value(&p, 1)) return false;
    mt_json_skip_ws(&p);
    return text[p.i] == '\0' || mt_json_fail(&p, MT_JSON_EXTRA);
}

bool mt_json_valid(const char *text) {
    char err[80];
    return mt_json_check(text, err, sizeof err);
}

bool mt_json_array(const char *text, char ***items, size_t *count, char *err, size_t err_size) {
    mt_json_parser p = {text, 0, err, err_size};
    char **out = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    *items = NULL;
    *count = 0;
    mt_json_skip_ws(&p);
    if (text[p.i] != '[') return mt_json_fail(&p, "not a JSON array");
    ++p.i;
    mt_json_skip_ws(&p);
    if (text[p.i] == ']') {
        ++p.i;
    } else {
        for (;;) {
            mt_json_skip_ws(&p);
            size_t start = p.i;
            if (!(ok = mt_json_skip_value(&p, 2))) break;
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                char **grown = realloc(out, cap * sizeof *out);
                if (grown == NULL) {
                    ok = mt_json_fail(&p, "out of memory");
                    break;
                }
                out = grown;
            }
            out[n] = malloc(p.i - start + 1);
            if (out[n] == NULL) {
                ok = mt_json_fail(&p, "out of memory");
                break;
            }
            memcpy(out[n], text + start, p.i - start);
            out[n][p.i - start] = '\0';
            ++n;
            mt_json_skip_ws(&p);
            if (text[p.i] == ',') {
                if (!(ok = mt_json_comma(&p, ']'))) break;
                continue;
            }
            if (text[p.i] == ']') {
                ++p.i;
                break;
            }
            ok = mt_json_fail(&p, MT_JSON_NO_COMMA);
            break;
        }
    }
    if (ok) {
        mt_json_skip_ws(&p);
        if (text[p.i] != '\0') ok = mt_json_fail(&p, MT_JSON_EXTRA);
    }
    if (!ok) {
        mt_json_array_free(out, n);
        return false;
    }
    *items = out;
    *count = n;
    return true;
}

void mt_json_array_free(char **items, size_t n) {
    for (size_t i = 0; i < n; ++i) free(items[i]);
    free(items);
}
