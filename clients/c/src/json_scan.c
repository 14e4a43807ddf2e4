/* json_scan.c: the JSON scanner under json.c's readers (RFC 8259): white space, a
 * string decoded to UTF-8, a number (and, like Python's json.loads, NaN, Infinity and
 * -Infinity), any value skipped. Declared in json_scan.h. Its failures are Python's
 * json.loads's (JSONDecodeError's msg, a trailing " at" dropped, and pos), where Python
 * has one: a MELISSA_TRAINER_PARAMETERS refused reads the same in both clients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"

/* (the position in characters, as Python's JSONDecodeError.pos counts them: the UTF-8
 * bytes before `at` that begin one; a byte not UTF-8 is one, as surrogateescape reads it) */
bool mt_json_fail_at(mt_json_parser *p, const char *what, size_t at) {
    size_t chars = 0;
    for (size_t k = 0; k < at; ++k) chars += ((unsigned char)p->s[k] & 0xC0) != 0x80;
    snprintf(p->err, p->err_size, "%s at character %zu", what, chars);
    return false;
}

bool mt_json_fail(mt_json_parser *p, const char *what) {
    return mt_json_fail_at(p, what, p->i);
}

void mt_json_skip_ws(mt_json_parser *p) {
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
bool mt_json_string(mt_json_parser *p, char **out) {
    mt_buf b = {0};
    size_t opening = p->i++; /* (where Python's "Unterminated string starting at" points) */
    for (;;) {
        unsigned char ch = (unsigned char)p->s[p->i];
        if (ch == '"') break;
        if (ch == '\0') {
            free(b.data);
            return mt_json_fail_at(p, MT_JSON_UNTERMINATED, opening);
        }
        if (ch < 0x20) {
            free(b.data);
            return mt_json_fail(p, "Invalid control character");
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
        if (e == '\0') { /* (a backslash last: the string never ends) */
            free(b.data);
            return mt_json_fail_at(p, MT_JSON_UNTERMINATED, opening);
        }
        if (e != 'u') {
            free(b.data);
            return mt_json_fail(p, "Invalid \\escape");
        }
        int v = hex4(p->s + p->i + 2);
        if (v < 0) {
            free(b.data);
            return mt_json_fail_at(p, "Invalid \\uXXXX escape", p->i + 1);
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
        return mt_json_fail(p, "out of memory");
    }
    if (!mt_utf8_valid(b.data, b.len - 1)) {
        free(b.data);
        return mt_json_fail(p, "a string is not valid UTF-8");
    }
    *out = b.data;
    return true;
}

bool mt_json_number(mt_json_parser *p, double *out, bool *integer) {
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
    else return mt_json_fail(p, MT_JSON_NO_VALUE);
    /* (a fraction or an exponent without digits is not part of the number, as in
     * Python's NUMBER_RE: "1." is 1, then a '.' where a ',' was expected) */
    if (s[n] == '.' && s[n + 1] >= '0' && s[n + 1] <= '9') {
        *integer = false;
        ++n;
        while (s[n] >= '0' && s[n] <= '9') ++n;
    }
    if (s[n] == 'e' || s[n] == 'E') { /* (read past s[n] only when it is no NUL) */
        size_t sign = s[n + 1] == '+' || s[n + 1] == '-';
        if (s[n + 1 + sign] >= '0' && s[n + 1 + sign] <= '9') {
            *integer = false;
            n += 1 + sign;
            while (s[n] >= '0' && s[n] <= '9') ++n;
        }
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

bool mt_json_comma(mt_json_parser *p, char close) {
    size_t comma = p->i++;
    mt_json_skip_ws(p);
    if (p->s[p->i] != close) return true;
    return mt_json_fail_at(p, close == '}' ? MT_JSON_TRAILING_OBJECT : MT_JSON_TRAILING_ARRAY,
                           comma);
}

bool mt_json_no_lone_surrogate(const char *text, char *err, size_t err_size) {
    mt_json_parser p = {text, 0, err, err_size};
    bool in_string = false;
    while (text[p.i] != '\0') {
        char ch = text[p.i];
        if (ch == '"') {
            in_string = !in_string;
        } else if (in_string && ch == '\\') {
            if (text[p.i + 1] != 'u') { /* (read: the escaped character is there) */
                p.i += 2;
                continue;
            }
            int unit = hex4(text + p.i + 2);
            if (unit >= 0xD800 && unit < 0xDC00 && text[p.i + 6] == '\\' &&
                text[p.i + 7] == 'u') {
                int low = hex4(text + p.i + 8);
                if (low >= 0xDC00 && low < 0xE000) {
                    p.i += 12;
                    continue;
                }
            }
            if (unit >= 0xD800 && unit < 0xE000) {
                char escape[7];
                memcpy(escape, text + p.i, 6);
                escape[6] = '\0';
                return mt_json_fail(&p, escape);
            }
            p.i += 6;
            continue;
        }
        ++p.i;
    }
    return true;
}

/* Skip any value (nested arrays and objects too, at most 64 deep). */
bool mt_json_skip_value(mt_json_parser *p, int depth) {
    mt_json_skip_ws(p);
    char ch = p->s[p->i];
    if (depth > 64) return mt_json_fail(p, "nested too deep");
    if (ch == '"') {
        char *s;
        if (!mt_json_string(p, &s)) return false;
        free(s);
        return true;
    }
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        ++p->i;
        mt_json_skip_ws(p);
        if (p->s[p->i] == close) {
            ++p->i;
            return true;
        }
        for (;;) {
            if (ch == '{') {
                mt_json_skip_ws(p);
                if (p->s[p->i] != '"') return mt_json_fail(p, MT_JSON_NO_KEY);
                if (!mt_json_skip_value(p, depth + 1)) return false;
                mt_json_skip_ws(p);
                if (p->s[p->i] != ':') return mt_json_fail(p, MT_JSON_NO_COLON);
                ++p->i;
            }
            if (!mt_json_skip_value(p, depth + 1)) return false;
            mt_json_skip_ws(p);
            if (p->s[p->i] == ',') {
                if (!mt_json_comma(p, close)) return false;
                continue;
            }
            if (p->s[p->i] == close) {
                ++p->i;
                return true;
            }
            return mt_json_fail(p, MT_JSON_NO_COMMA);
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
    return mt_json_number(p, &d, &integer);
}

