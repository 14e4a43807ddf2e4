/* json.c: a strict reader of one flat JSON object (RFC 8259), for
 * MELISSA_TRAINER_PARAMETERS and the rendezvous files: string keys; values that are
 * numbers, strings, or anything else (true, null, arrays, objects: kept as raw text).
 * Like Python's json.loads, it also reads NaN, Infinity and -Infinity as numbers
 * (the callers reject non-finite values with a message of their own). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    const char *s;
    size_t i;
    char *err;
    size_t err_size;
} parser;

static bool fail(parser *p, const char *what) {
    snprintf(p->err, p->err_size, "%s at character %zu", what, p->i);
    return false;
}

static void skip_ws(parser *p) {
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
        ++p->i;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; ++k) {
        char ch = s[k];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
        else return -1;
    }
    return v;
}

static void put_utf8(mt_buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    mt_buf_put(b, u, n);
}

/* A string at p->i (the opening quote), decoded into a new NUL-terminated UTF-8 string. */
static bool parse_string(parser *p, char **out) {
    mt_buf b = {0};
    ++p->i;
    for (;;) {
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch == '"') break;
        if (ch == '\0') {
            free(b.data);
            return fail(p, "unterminated string");
        }
        if (ch < 0x20) {
            free(b.data);
            return fail(p, "control character in a string");
        }
        if (ch != '\\') {
            mt_buf_put(&b, &p->s[p->i++], 1);
            continue;
        }
        char e = p->s[p->i + 1], decoded = 0;
        switch (e) {
        case '"': decoded = '"'; break;
        case '\\': decoded = '\\'; break;
        case '/': decoded = '/'; break;
        case 'b': decoded = '\b'; break;
        case 'f': decoded = '\f'; break;
        case 'n': decoded = '\n'; break;
        case 'r': decoded = '\r'; break;
        case 't': decoded = '\t'; break;
        default: break;
        }
        if (decoded != 0) {
            mt_buf_put(&b, &decoded, 1);
            p->i += 2;
            continue;
        }
        if (e != 'u') {
            free(b.data);
            return fail(p, "invalid escape");
        }
        int v = hex4(p->s + p->i + 2);
        if (v < 0) {
            free(b.data);
            return fail(p, "invalid \\u escape");
        }
        p->i += 6;
        uint32_t cp = (uint32_t)v;
        if (cp >= 0xD800 && cp < 0xDC00 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
            int lo = hex4(p->s + p->i + 2);
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                p->i += 6;
            }
        }
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate: not UTF-8 */
        put_utf8(&b, cp);
    }
    ++p->i;
    mt_buf_put(&b, "", 1);
    if (b.oom) {
        free(b.data);
        return fail(p, "out of memory");
    }
    if (!mt_utf8_valid(b.data, b.len - 1)) {
        free(b.data);
        return fail(p, "a string is not valid UTF-8");
    }
    *out = b.data;
    return true;
}

static bool parse_number(parser *p, double *out, bool *integer) {
    const char *s = p->s + p->i;
    size_t n = 0;
    static const struct {
        const char *text;
        double value;
    } special[] = {{"NaN", NAN}, {"Infinity", INFINITY}, {"-Infinity", -INFINITY}};
    for (size_t k = 0; k < 3; ++k) {
        size_t len = strlen(special[k].text);
        if (strncmp(s, special[k].text, len) == 0) {
            p->i += len;
            *out = special[k].value;
            *integer = false;
            return true;
        }
    }
    *integer = true;
    if (s[n] == '-') ++n;
    if (s[n] == '0') ++n;
    else if (s[n] >= '1' && s[n] <= '9') while (s[n] >= '0' && s[n] <= '9') ++n;
    else return fail(p, "invalid value");
    if (s[n] == '.') {
        *integer = false;
        ++n;
        if (!(s[n] >= '0' && s[n] <= '9')) return fail(p, "invalid number");
        while (s[n] >= '0' && s[n] <= '9') ++n;
    }
    if (s[n] == 'e' || s[n] == 'E') {
        *integer = false;
        ++n;
        if (s[n] == '+' || s[n] == '-') ++n;
        if (!(s[n] >= '0' && s[n] <= '9')) return fail(p, "invalid number");
        while (s[n] >= '0' && s[n] <= '9') ++n;
    }
    char tmp[64];
    if (n >= sizeof tmp) { /* a long literal: strtod reads it in place */
        *out = strtod(s, NULL);
    } else {
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        *out = strtod(tmp, NULL);
    }
    p->i += n;
    return true;
}

/* Skip any value (nested arrays and objects too, at most 64 deep). */
static bool skip_value(parser *p, int depth) {
    skip_ws(p);
    char ch = p->s[p->i];
    if (depth > 64) return fail(p, "nested too deep");
    if (ch == '"') {
        char *s;
        if (!parse_string(p, &s)) return false;
        free(s);
        return true;
    }
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        ++p->i;
        skip_ws(p);
        if (p->s[p->i] == close) {
            ++p->i;
            return true;
        }
        for (;;) {
            if (ch == '{') {
                skip_ws(p);
                if (p->s[p->i] != '"') return fail(p, "expected a string key");
                if (!skip_value(p, depth + 1)) return false;
                skip_ws(p);
                if (p->s[p->i] != ':') return fail(p, "expected ':'");
                ++p->i;
            }
            if (!skip_value(p, depth + 1)) return false;
            skip_ws(p);
            if (p->s[p->i] == ',') {
                ++p->i;
                continue;
            }
            if (p->s[p->i] == close) {
                ++p->i;
                return true;
            }
            return fail(p, "expected ',' or a closing bracket");
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (size_t k = 0; k < 3; ++k) {
        size_t len = strlen(words[k]);
        if (strncmp(p->s + p->i, words[k], len) == 0) {
            p->i += len;
            return true;
        }
    }
    double d;
    bool integer;
    return parse_number(p, &d, &integer);
}

void mt_json_free(mt_json_member *members, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        free(members[i].key);
        free(members[i].string);
    }
    free(members);
}

bool mt_json_object(const char *text, mt_json_member **members, size_t *count, char *err,
                    size_t err_size) {
    parser p = {text, 0, err, err_size};
    mt_json_member *m = NULL;
    size_t n = 0, cap = 0;
    *members = NULL;
    *count = 0;
    skip_ws(&p);
    if (text[p.i] != '{') return fail(&p, "not a JSON object");
    ++p.i;
    skip_ws(&p);
    bool ok = true;
    if (text[p.i] == '}') {
        ++p.i;
    } else {
        for (;;) {
            skip_ws(&p);
            if (text[p.i] != '"') {
                ok = fail(&p, "expected a string key");
                break;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                mt_json_member *grown = realloc(m, cap * sizeof *m);
                if (grown == NULL) {
                    ok = fail(&p, "out of memory");
                    break;
                }
                m = grown;
            }
            mt_json_member *e = &m[n];
            memset(e, 0, sizeof *e);
            if (!parse_string(&p, &e->key)) {
                ok = false;
                break;
            }
            ++n;
            skip_ws(&p);
            if (text[p.i] != ':') {
                ok = fail(&p, "expected ':'");
                break;
            }
            ++p.i;
            skip_ws(&p);
            char ch = text[p.i];
            size_t start = p.i;
            if (ch == '"') {
                e->kind = MT_JSON_STRING;
                if (!(ok = parse_string(&p, &e->string))) break;
            } else if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 'N' || ch == 'I') {
                e->kind = MT_JSON_NUMBER;
                if (!(ok = parse_number(&p, &e->number, &e->integer))) break;
            } else {
                e->kind = MT_JSON_OTHER;
                if (!(ok = skip_value(&p, 1))) break;
                size_t len = p.i - start;
                e->string = malloc(len + 1);
                if (e->string == NULL) {
                    ok = fail(&p, "out of memory");
                    break;
                }
                memcpy(e->string, text + start, len);
                e->string[len] = '\0';
            }
            skip_ws(&p);
            if (text[p.i] == ',') {
                ++p.i;
                continue;
            }
            if (text[p.i] == '}') {
                ++p.i;
                break;
            }
            ok = fail(&p, "expected ',' or '}'");
            break;
        }
    }
    if (ok) {
        skip_ws(&p);
        if (text[p.i] != '\0') ok = fail(&p, "extra data after the object");
    }
    if (!ok) {
        mt_json_free(m, n);
        return false;
    }
    *members = m;
    *count = n;
    return true;
}

bool mt_json_valid(const char *text) {
    char err[80];
    parser p = {text, 0, err, sizeof err};
    if (!skip_value(&p, 1)) return false;
    skip_ws(&p);
    return text[p.i] == '\0';
}

bool mt_json_array(const char *text, char ***items, size_t *count, char *err, size_t err_size) {
    parser p = {text, 0, err, err_size};
    char **out = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    *items = NULL;
    *count = 0;
    skip_ws(&p);
    if (text[p.i] != '[') return fail(&p, "not a JSON array");
    ++p.i;
    skip_ws(&p);
    if (text[p.i] == ']') {
        ++p.i;
    } else {
        for (;;) {
            skip_ws(&p);
            size_t start = p.i;
            if (!(ok = skip_value(&p, 2))) break;
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                char **grown = realloc(out, cap * sizeof *out);
                if (grown == NULL) {
                    ok = fail(&p, "out of memory");
                    break;
                }
                out = grown;
            }
            out[n] = malloc(p.i - start + 1);
            if (out[n] == NULL) {
                ok = fail(&p, "out of memory");
                break;
            }
            memcpy(out[n], text + start, p.i - start);
            out[n][p.i - start] = '\0';
            ++n;
            skip_ws(&p);
            if (text[p.i] == ',') {
                ++p.i;
                continue;
            }
            if (text[p.i] == ']') {
                ++p.i;
                break;
            }
            ok = fail(&p, "expected ',' or ']'");
            break;
        }
    }
    if (ok) {
        skip_ws(&p);
        if (text[p.i] != '\0') ok = fail(&p, "extra data after the array");
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
