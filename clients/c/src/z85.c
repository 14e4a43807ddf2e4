/* z85.c: a CURVE key checked as a Z85 one (mt_z85_fault), in the Python client's words
 * (melissa_trainer/client/server_key.py z85_fault), Python's repr of a string
 * (mt_py_repr) for the messages that quote a key as that client does: the argument's
 * (client.c mt_set_curve_server_key), the variables' (env.c, serve.c), a serve file's
 * (serve.c), and Python's str.strip (mt_py_strip) for a key read from a variable.
 * Characters are counted and named as Python's str holds them (UTF-8 code points), not
 * bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The characters of a Z85 key, in the order of their values (ZeroMQ's RFC 32). */
static const char Z85[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/* The next character of `s` (at `*i`, advanced past it) as Python reads a str from
 * UTF-8: its code point, or, for a byte that does not start a valid UTF-8 sequence,
 * 0xDC00 + the byte (os.environ's surrogateescape): lengths and the characters named
 * are then Python's. */
static unsigned long next_char(const unsigned char *s, size_t *i) {
    unsigned char b = s[*i];
    size_t n = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3
             : (b & 0xF8) == 0xF0 ? 4 : 0;
    unsigned long cp = n == 1 ? b : n == 2 ? b & 0x1Fu : n == 3 ? b & 0x0Fu : b & 0x07u;
    for (size_t k = 1; k < n; ++k) {
        if ((s[*i + k] & 0xC0) != 0x80) n = 0; /* (a NUL stops here too) */
        if (n == 0) break;
        cp = cp << 6 | (s[*i + k] & 0x3Fu);
    }
    static const unsigned long least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (n == 0 || cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        ++*i; /* (overlong, a surrogate, past Unicode: one byte escaped) */
        return 0xDC00 + b;
    }
    *i += n;
    return cp;
}

/* Append code point `cp` to `out` (at `*at`) as UTF-8. */
static void put_utf8(char *out, size_t *at, unsigned long cp) {
    if (cp < 0x80) {
        out[(*at)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*at)++] = (char)(0xC0 | cp >> 6);
        out[(*at)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*at)++] = (char)(0xE0 | cp >> 12);
        out[(*at)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[(*at)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*at)++] = (char)(0xF0 | cp >> 18);
        out[(*at)++] = (char)(0x80 | (cp >> 12 & 0x3F));
        out[(*at)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[(*at)++] = (char)(0x80 | (cp & 0x3F));
    }
}

char *mt_py_repr(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    char *out = malloc(n * 10 + 3); /* (at most \UXXXXXXXX per byte, the quotes) */
    if (out == NULL) return NULL;
    char quote = strchr(s, '\'') != NULL && strchr(s, '"') == NULL ? '"' : '\'';
    size_t at = 0;
    out[at++] = quote;
    for (size_t i = 0; i < n;) {
        unsigned long cp = next_char(u, &i);
        const char *esc = cp == '\\' ? "\\\\" : cp == '\n' ? "\\n" : cp == '\r' ? "\\r"
                        : cp == '\t' ? "\\t" : NULL;
        if (esc != NULL) {
            memcpy(out + at, esc, 2), at += 2;
        } else if (cp == (unsigned long)quote) {
            out[at++] = '\\', out[at++] = quote;
        } else if (!mt_py_printable(cp)) { /* (py_printable.c: Python's str.isprintable) */
            at += (size_t)sprintf(out + at, cp < 0x100      ? "\\x%02lx"
                                            : cp < 0x10000 ? "\\u%04lx"
                                                           : "\\U%08lx", cp);
        } else {
            put_utf8(out, &at, cp);
        }
    }
    out[at++] = quote;
    out[at] = '\0';
    return out;
}

/* Whether Python's str.isspace says `cp` is white space (what str.strip takes off). */
static bool py_space(unsigned long cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
           cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

char *mt_py_strip(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), start = n, end = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        if (py_space(next_char(u, &i))) continue;
        if (start == n) start = at;
        end = i;
    }
    if (start == n) start = end = 0; /* (all white space: empty) */
    char *out = malloc(end - start + 1);
    if (out != NULL) {
        memcpy(out, s + start, end - start);
        out[end - start] = '\0';
    }
    return out;
}

bool mt_z85_fault(const char *key, char *out, size_t size) {
    const unsigned char *u = (const unsigned char *)key;
    size_t n = 0, len = strlen(key);
    for (size_t i = 0; i < len; ++n) next_char(u, &i); /* (characters, as Python's len) */
    if (n != 40) {
        snprintf(out, size, "40 characters, not %zu", n);
        return true;
    }
    /* each character outside Z85 once, in the order of their code points (Python's
     * sorted set); 40 characters at most */
    unsigned long wrong[40];
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        unsigned long cp = next_char(u, &i);
        bool known = cp < 128 && cp != 0 && strchr(Z85, (int)cp) != NULL;
        for (size_t k = 0; k < w && !known; ++k) known = wrong[k] == cp;
        if (known) continue;
        size_t k = w++;
        for (; k > 0 && wrong[k - 1] > cp; --k) wrong[k] = wrong[k - 1];
        wrong[k] = cp;
    }
    if (w > 0) {
        char chars[40 * 4 + 1];
        size_t at = 0;
        for (size_t k = 0; k < w; ++k) /* (an escaped byte as itself: repr escapes it) */
            if (wrong[k] >= 0xDC80 && wrong[k] <= 0xDCFF) chars[at++] = (char)(wrong[k] - 0xDC00);
            else put_utf8(chars, &at, wrong[k]);
        chars[at] = '\0';
        char *shown = mt_py_repr(chars);
        snprintf(out, size, "Z85 characters only, not %s", shown != NULL ? shown : chars);
        free(shown);
        return true;
    }
    for (size_t i = 0; i < 40; i += 5) {
        unsigned long long word = 0; /* (5 digits base 85: at most 85^5 - 1 < 2^33) */
        for (size_t j = i; j < i + 5; ++j) word = word * 85 + (size_t)(strchr(Z85, key[j]) - Z85);
        if (word >= 1ULL << 32) {
            snprintf(out, size, "Z85 (each 5 characters encode a 32-bit word)");
            return true;
        }
    }
    return false;
}
