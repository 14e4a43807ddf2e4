/* encode.c: the bytes of HELLO, DATA/BATCH headers and BYE (docs/protocol.md 5-8),
 * the HELLO body exactly as Python's json.dumps writes it (ensure_ascii, ", " and
 * ": " separators, floats as repr). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Room for n more bytes (false, b->oom set, if there is none). */
static bool reserve(mt_buf *b, size_t n) {
    if (b->oom) return false;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL) {
            b->oom = true;
            return false;
        }
        b->data = d;
        b->cap = cap;
    }
    return true;
}

void mt_buf_put(mt_buf *b, const void *p, size_t n) {
    if (!reserve(b, n + 1)) return; /* (room, and the NUL: as mt_buf_printf) */
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0'; /* (not counted: data is a string after any append) */
}

void mt_buf_puts(mt_buf *b, const char *s) { mt_buf_put(b, s, strlen(s)); }

void mt_buf_printf(mt_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) b->oom = true;
    if (n < 0 || !reserve(b, (size_t)n + 1)) return; /* (room, and the NUL) */
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n; /* (the NUL after it: data is a string) */
}

static void put_u_escape(mt_buf *b, unsigned v) {
    char e[8];
    snprintf(e, sizeof e, "\\u%04x", v & 0xFFFFu);
    mt_buf_put(b, e, 6);
}

/* A JSON string of valid UTF-8 `s`, escaped as json.dumps(ensure_ascii=True) does. */
void mt_buf_json_string(mt_buf *b, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    mt_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char ch = s[i];
        if (ch >= 0x20 && ch < 0x7F && ch != '"' && ch != '\\') {
            size_t j = i;
            while (j < n && s[j] >= 0x20 && s[j] < 0x7F && s[j] != '"' && s[j] != '\\') ++j;
            mt_buf_put(b, s + i, j - i);
            i = j;
            continue;
        }
        const char *short_esc = NULL;
        switch (ch) {
        case '"': short_esc = "\\\""; break;
        case '\\': short_esc = "\\\\"; break;
        case '\n': short_esc = "\\n"; break;
        case '\r': short_esc = "\\r"; break;
        case '\t': short_esc = "\\t"; break;
        case '\b': short_esc = "\\b"; break;
        case '\f': short_esc = "\\f"; break;
        default: break;
        }
        if (short_esc != NULL) {
            mt_buf_put(b, short_esc, 2);
            ++i;
            continue;
        }
        uint32_t cp;
        size_t len;
        if (ch < 0x80) {
            cp = ch;
            len = 1;
        } else if ((ch & 0xE0) == 0xC0) {
            cp = ch & 0x1Fu;
            len = 2;
        } else if ((ch & 0xF0) == 0xE0) {
            cp = ch & 0x0Fu;
            len = 3;
        } else {
            cp = ch & 0x07u;
            len = 4;
        }
        for (size_t k = 1; k < len && i + k < n; ++k) cp = (cp << 6) | (s[i + k] & 0x3Fu);
        i += len;
        if (cp >= 0x10000) { /* a surrogate pair, as Python writes it */
            cp -= 0x10000;
            put_u_escape(b, 0xD800 | (cp >> 10));
            put_u_escape(b, 0xDC00 | (cp & 0x3FF));
        } else {
            put_u_escape(b, cp);
        }
    }
    mt_buf_put(b, "\"", 1);
}

void mt_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
void mt_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
void mt_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t mt_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t mt_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; --k) v = v << 8 | p[k];
    return v;
}

bool mt_all_finite(mt_dtype dtype, const void *data, uint64_t count) {
    /* NaN and Inf are the values whose exponent bits are all ones (IEEE 754); memcpy
     * reads each value whatever the alignment (the compiler makes it a load). As the
     * Python client (melissa_trainer/stream/finite.py): checked before FLAG_FINITE. */
    const unsigned char *p = data;
    if (dtype == MT_FLOAT32) {
        for (uint64_t i = 0; i < count; ++i) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            if ((v & 0x7f800000u) == 0x7f800000u) return false;
        }
        return true;
    }
    if (dtype == MT_FLOAT64) {
        for (uint64_t i = 0; i < count; ++i) {
            uint64_t v;
            memcpy(&v, p + 8 * i, 8);
            if ((v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return false;
        }
        return true;
    }
    if (dtype == MT_FLOAT16) {
        for (uint64_t i = 0; i < count; ++i) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            if ((v & 0x7c00u) == 0x7c00u) return false;
        }
        return true;
    }
    return false;
}

void mt_put_prefix(uint8_t *p, int kind, uint16_t flags, uint64_t simulation_id) {
    memcpy(p, "MTRN", 4);
    p[4] = MT_PROTOCOL_VERSION;
    p[5] = (uint8_t)kind;
    mt_put_u16(p + 6, flags);
    mt_put_u64(p + 8, simulation_id);
}

/* The whole HELLO frame: prefix, rank, count, body length, body. */
mt_status mt_encode_hello(mt_client *c, mt_buf *out) {
    uint8_t fixed[24] = {0};
    mt_buf_put(out, fixed, sizeof fixed);
    mt_buf_puts(out, "{\"fields\": [");
    for (size_t i = 0; i < c->n_fields; ++i) {
        const mt_field *f = &c->fields[i];
        if (i) mt_buf_puts(out, ", ");
        mt_buf_puts(out, "{\"name\": ");
        mt_buf_json_string(out, f->name, f->name_len);
        mt_buf_puts(out, ", \"dtype\": \"");
        mt_buf_puts(out, mt_dtype_str(f->dtype));
        mt_buf_puts(out, "\", \"shape\": [");
        for (int d = 0; d < f->ndim; ++d) {
            char num[24];
            snprintf(num, sizeof num, d ? ", %llu" : "%llu", (unsigned long long)f->shape[d]);
            mt_buf_puts(out, num);
        }
        mt_buf_puts(out, "]}");
    }
    mt_buf_puts(out, "], \"parameters\": {");
    for (size_t i = 0; i < c->n_params; ++i) {
        char num[32];
        if (i) mt_buf_puts(out, ", ");
        mt_buf_json_string(out, c->params[i].name, strlen(c->params[i].name));
        mt_buf_puts(out, ": ");
        mt_format_double(c->params[i].value, num);
        mt_buf_puts(out, num);
    }
    mt_buf_puts(out, "}");
    if (c->run_id != NULL) { /* last, only when known: docs/protocol.md 5 */
        mt_buf_puts(out, ", \"run_id\": ");
        mt_buf_json_string(out, c->run_id, strlen(c->run_id));
    }
    /* which client sends: the launcher's advice for a slow start-up depends on it (worker
       mode is the Python client's); docs/protocol.md 6 */
    mt_buf_puts(out, ", \"client\": \"c\"");
    /* the routing its steps follow, when the rendezvous advertised it (docs/protocol.md 6) */
    if (c->routing) mt_buf_puts(out, ", \"routing\": \"simulation_step\"");
    mt_buf_puts(out, "}");
    if (out->oom) return mt_fail(c, MT_ENOMEM, "out of memory encoding the HELLO");
    size_t body = out->len - sizeof fixed;
    if (body > MT_MAX_HELLO_BODY)
        return mt_fail(c, MT_EINVAL, "the HELLO is %zu bytes: too many fields or parameters",
                       out->len);
    uint8_t *p = (uint8_t *)out->data;
    mt_put_prefix(p, MT_KIND_HELLO, 0, c->simulation_id);
    mt_put_u16(p + 16, (uint16_t)c->rank);
    mt_put_u16(p + 18, (uint16_t)c->ranks);
    mt_put_u32(p + 20, (uint32_t)body);
    return MT_OK;
}

/* Each field's DATA header (time step 0, patched at each send), once its part is known. */
mt_status mt_build_headers(mt_client *c) {
    for (size_t i = 0; i < c->n_fields; ++i) {
        mt_field *f = &c->fields[i];
        f->nbytes = f->count * f->itemsize;
        f->inline_ = f->nbytes <= MT_INLINE_MAX_BYTES;
        f->batchable = f->inline_ && c->batch_bytes > 0 && f->nbytes <= c->batch_bytes / 2;
        f->header_len = MT_DATA_FIXED_BYTES + 8u * (size_t)f->ndim + f->name_len;
        f->header = calloc(1, f->header_len);
        if (f->header == NULL) return mt_fail(c, MT_ENOMEM, "out of memory (DATA headers)");
        uint8_t *p = f->header;
        mt_put_prefix(p, MT_KIND_DATA, f->inline_ ? MT_FLAG_INLINE : 0, c->simulation_id);
        mt_put_u64(p + 16, 0);
        mt_put_u16(p + 24, (uint16_t)c->rank);
        mt_put_u16(p + 26, (uint16_t)c->ranks);
        p[28] = (uint8_t)f->dtype;
        p[29] = (uint8_t)f->ndim;
        p[30] = (uint8_t)f->name_len;
        p[31] = 0;
        mt_put_u64(p + 32, f->offset);
        mt_put_u64(p + 40, f->count);
        for (int d = 0; d < f->ndim; ++d) mt_put_u64(p + 48 + 8 * d, f->shape[d]);
        memcpy(p + 48 + 8 * (size_t)f->ndim, f->name, f->name_len);
    }
    return MT_OK;
}

void mt_encode_bye(uint8_t out[28], uint64_t simulation_id, int rank, int ranks, uint64_t steps) {
    mt_put_prefix(out, MT_KIND_BYE, 0, simulation_id);
    mt_put_u16(out + 16, (uint16_t)rank);
    mt_put_u16(out + 18, (uint16_t)ranks);
    mt_put_u64(out + 20, steps);
}
