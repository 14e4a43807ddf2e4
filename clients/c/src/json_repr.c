/* json_repr.c: a JSON value as Python shows it once json.loads has read it (its repr:
 * True, None, 1.5, inf, [1, 'a'], {'k': None}) and the name of its Python type, for the
 * messages that quote a value of a file as the Python client does (serve.c: a serve
 * file's curve_public_key that is not a string). Declared in json.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"

/* An object's members so far: each key once (Python's dict: a key repeated keeps its
 * first place and takes its last value), with its value's repr. */
typedef struct members {
    char **keys, **values;
    size_t n, cap;
} members;

static void members_free(members *m) {
    for (size_t i = 0; i < m->n; ++i) {
        free(m->keys[i]);
        free(m->values[i]);
    }
    free(m->keys);
    free(m->values);
}

static bool value_repr(mt_json_parser *p, mt_buf *out, int depth, const char **type);

/* The repr of the value at p->i, as a new string, and its type (NULL: a failure, said in
 * p->err). */
static char *repr_alone(mt_json_parser *p, int depth, const char **type) {
    mt_buf b = {0};
    bool ok = value_repr(p, &b, depth, type);
    mt_buf_put(&b, "", 1);
    if (ok && b.oom) ok = mt_json_fail(p, "out of memory");
    if (!ok) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

/* Add member `key` (taken) with the repr `value` (taken) to `m`; false: no memory (both
 * freed). */
static bool put_member(members *m, char *key, char *value) {
    size_t k = 0;
    while (k < m->n && strcmp(m->keys[k], key) != 0) ++k;
    if (k < m->n) { /* (repeated: the last value, at the first place) */
        free(m->values[k]);
        free(key);
        m->values[k] = value;
        return true;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 8;
        char **keys = realloc(m->keys, cap * sizeof *keys);
        if (keys != NULL) m->keys = keys; /* (bigger: harmless if values cannot follow) */
        char **values = keys != NULL ? realloc(m->values, cap * sizeof *values) : NULL;
        if (values == NULL) {
            free(key);
            free(value);
            return false;
        }
        m->values = values;
        m->cap = cap;
    }
    m->keys[m->n] = key;
    m->values[m->n++] = value;
    return true;
}

/* The object at p->i (its '{'): its members into `m`. */
static bool object_members(mt_json_parser *p, members *m, int depth) {
    ++p->i;
    for (mt_json_skip_ws(p); p->s[p->i] != '}';) {
        char *key = NULL, *value = NULL;
        const char *type;
        mt_json_skip_ws(p);
        bool ok = p->s[p->i] == '"' && mt_json_string(p, &key);
        if (ok) mt_json_skip_ws(p);
        if (ok && p->s[p->i] != ':') ok = mt_json_fail(p, MT_JSON_NO_COLON);
        if (ok) ++p->i;
        if (ok) ok = (value = repr_alone(p, depth + 1, &type)) != NULL;
        if (!ok) {
            free(key);
            return false;
        }
        if (!put_member(m, key, value)) return mt_json_fail(p, "out of memory");
        mt_json_skip_ws(p);
        if (p->s[p->i] == ',') ++p->i;
        else if (p->s[p->i] != '}') return mt_json_fail(p, MT_JSON_NO_COMMA);
    }
    ++p->i;
    return true;
}

/* A number's text (JSON's grammar, or NaN, Infinity, -Infinity) as Python's int or float
 * repr: an integer's digits as written (Python's int is exact; -0 is 0), else the float's
 * shortest round trip (mt_format_double; inf, -inf, nan). */
static bool number_repr(mt_json_parser *p, mt_buf *out, const char **type) {
    size_t start = p->i;
    double v;
    bool integer;
    if (!mt_json_number(p, &v, &integer)) return false;
    *type = integer ? "int" : "float";
    if (integer) {
        const char *digits = p->s + start;
        size_t n = p->i - start;
        bool minus_zero = n == 2 && strncmp(digits, "-0", 2) == 0; /* (Python's int: 0) */
        mt_buf_put(out, minus_zero ? "0" : digits, minus_zero ? 1 : n);
        return true;
    }
    char text[32];
    mt_format_double(v, text);
    mt_buf_puts(out, strcmp(text, "NaN") == 0        ? "nan"
                     : strcmp(text, "Infinity") == 0  ? "inf"
                     : strcmp(text, "-Infinity") == 0 ? "-inf"
                                                      : text);
    return true;
}

static bool value_repr(mt_json_parser *p, mt_buf *out, int depth, const char **type) {
    mt_json_skip_ws(p);
    char ch = p->s[p->i];
    if (depth > 64) return mt_json_fail(p, "nested too deep"); /* (as mt_json_skip_value) */
    if (ch == '"') {
        char *s = NULL, *shown;
        if (!mt_json_string(p, &s)) return false;
        shown = mt_py_repr(s);
        free(s);
        if (shown == NULL) return mt_json_fail(p, "out of memory");
        mt_buf_puts(out, shown);
        free(shown);
        *type = "str";
        return true;
    }
    if (ch == '[') {
        *type = "list";
        mt_buf_puts(out, "[");
        ++p->i;
        for (mt_json_skip_ws(p); p->s[p->i] != ']';) {
            const char *item;
            if (!value_repr(p, out, depth + 1, &item)) return false;
            mt_json_skip_ws(p);
            if (p->s[p->i] == ',') {
                ++p->i;
                mt_buf_puts(out, ", ");
            } else if (p->s[p->i] != ']') {
                return mt_json_fail(p, MT_JSON_NO_COMMA);
            }
        }
        ++p->i;
        mt_buf_puts(out, "]");
        return true;
    }
    if (ch == '{') {
        members m = {0};
        bool ok = object_members(p, &m, depth);
        mt_buf_puts(out, "{");
        for (size_t k = 0; ok && k < m.n; ++k) {
            char *key = mt_py_repr(m.keys[k]);
            if (key == NULL) ok = mt_json_fail(p, "out of memory");
            else mt_buf_printf(out, "%s%s: %s", k > 0 ? ", " : "", key, m.values[k]);
            free(key);
        }
        mt_buf_puts(out, "}");
        members_free(&m);
        *type = "dict";
        return ok;
    }
    static const char *const words[][3] = {
        {"true", "True", "bool"}, {"false", "False", "bool"}, {"null", "None", "NoneType"}};
    for (size_t k = 0; k < 3; ++k) {
        size_t len = strlen(words[k][0]);
        if (strncmp(p->s + p->i, words[k][0], len) == 0) {
            p->i += len;
            mt_buf_puts(out, words[k][1]);
            *type = words[k][2];
            return true;
        }
    }
    return number_repr(p, out, type);
}

char *mt_json_member_repr(const char *object, const char *name, const char **type) {
    char err[80];
    mt_json_parser p = {object, 0, err, sizeof err};
    mt_json_skip_ws(&p);
    if (object[p.i] != '{') return NULL;
    ++p.i;
    char *found = NULL;
    for (mt_json_skip_ws(&p); object[p.i] != '}' && object[p.i] != '\0';) {
        char *key = NULL;
        mt_json_skip_ws(&p);
        if (object[p.i] != '"' || !mt_json_string(&p, &key)) break;
        mt_json_skip_ws(&p);
        bool ok = object[p.i] == ':';
        if (ok && strcmp(key, name) == 0) { /* (the last one: Python's dict keeps it) */
            ++p.i;
            free(found);
            ok = (found = repr_alone(&p, 1, type)) != NULL;
        } else if (ok) {
            ++p.i;
            ok = mt_json_skip_value(&p, 1);
        }
        free(key);
        if (!ok) break;
        mt_json_skip_ws(&p);
        if (object[p.i] != ',') break;
        ++p.i;
    }
    return found;
}

size_t mt_utf8_prefix(const char *s, size_t n, size_t chars) {
    size_t k = 0;
    for (size_t seen = 0; k < n; ++k) {
        if (((unsigned char)s[k] & 0xC0) != 0x80 && seen++ == chars) break;
    }
    return k;
}

size_t mt_reason_line(const char *message) {
    return mt_utf8_prefix(message, strcspn(message, "\r\n"), MT_REASON_CHARS);
}
