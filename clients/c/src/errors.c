/* errors.c: status texts, per-client error messages, dtype tables, float formatting. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

const char *mt_strerror(int status) {
    switch (status) {
    case MT_OK: return "MT_OK: success";
    case MT_EINVAL: return "MT_EINVAL: invalid argument";
    case MT_EFIELD: return "MT_EFIELD: field not declared, declared twice, or missing from a step";
    case MT_EDTYPE: return "MT_EDTYPE: wrong dtype";
    case MT_ESHAPE: return "MT_ESHAPE: wrong element count";
    case MT_ESTATE: return "MT_ESTATE: called in the wrong state";
    case MT_EENV: /* (not the environment's only: an endpoint or a key given, a serve file's) */
        return "MT_EENV: configuration to fix: a MELISSA_TRAINER_* variable, an endpoint or a "
               "CURVE key missing, malformed or refused";
    case MT_ERENDEZVOUS: return "MT_ERENDEZVOUS: rendezvous directory incomplete in time";
    case MT_ETIMEDOUT: return "MT_ETIMEDOUT: timed out";
    case MT_EZMQ: return "MT_EZMQ: ZeroMQ call failed";
    case MT_ENOMEM: return "MT_ENOMEM: out of memory";
    case MT_EMPI: return "MT_EMPI: MPI call failed or ranks disagree";
    case MT_EREFUSED: return "MT_EREFUSED: the trainer refused the prediction";
    case MT_EREPLY: return "MT_EREPLY: malformed reply from the trainer";
    case MT_ESIMREFUSED: return "MT_ESIMREFUSED: the trainer refused this simulation";
    case MT_EUNREACHABLE:
        return "MT_EUNREACHABLE: the rendezvous publishes a loopback endpoint of another "
               "machine or network namespace";
    default: return "unknown melissa_trainer status";
    }
}

const char *mt_client_error(const mt_client *c) {
    return c == NULL || c->error == NULL ? "" : c->error;
}

const char *mt_version(void) {
#define MT_STR2(x) #x
#define MT_STR(x) MT_STR2(x)
    return MT_STR(MT_VERSION_MAJOR) "." MT_STR(MT_VERSION_MINOR) "." MT_STR(MT_VERSION_PATCH);
}

/* The message is as long as it needs (a rendezvous of many stopped ranks names each:
 * Python's message does), on the heap; out of memory, cut into the client's spare. A new
 * buffer each time: an argument may point into the old message. */
static void set_error(mt_client *c, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    /* (Never null: said so for GCC, whose -fsanitize=undefined check of vsnprintf's
     * nonnull format left a null-format path that -Wformat-truncation failed at -O2.) */
    if (fmt == NULL) fmt = "";
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) vsnprintf(text, (size_t)n + 1, fmt, again);
    else vsnprintf(c->error_spare, sizeof c->error_spare, fmt, again);
    va_end(again);
    mt_clear_error(c);
    c->error = text != NULL ? text : c->error_spare;
}

mt_status mt_fail(mt_client *c, mt_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(c, fmt, ap);
    va_end(ap);
    return status;
}

void mt_clear_error(mt_client *c) {
    if (c->error != c->error_spare) free(c->error);
    c->error = NULL;
}

mt_status mt_client_set_error(mt_client *c, mt_status status, const char *message) {
    if (c == NULL) return MT_EINVAL;
    return mt_fail(c, status, "%s", message == NULL ? "" : message);
}

static const struct {
    size_t itemsize;
    const char *name, *str, *constant;
} dtypes[] = {
    {0, "", "", ""},
    {4, "float32", "<f4", "MT_FLOAT32"}, {8, "float64", "<f8", "MT_FLOAT64"},
    {2, "float16", "<f2", "MT_FLOAT16"}, {1, "int8", "|i1", "MT_INT8"},
    {2, "int16", "<i2", "MT_INT16"},     {4, "int32", "<i4", "MT_INT32"},
    {8, "int64", "<i8", "MT_INT64"},     {1, "uint8", "|u1", "MT_UINT8"},
    {2, "uint16", "<u2", "MT_UINT16"},   {4, "uint32", "<u4", "MT_UINT32"},
    {8, "uint64", "<u8", "MT_UINT64"},   {1, "bool", "|b1", "MT_BOOL"},
};

size_t mt_itemsize(mt_dtype dtype) {
    return (int)dtype >= 1 && (int)dtype <= 12 ? dtypes[dtype].itemsize : 0;
}
const char *mt_dtype_name(mt_dtype dtype) {
    return mt_itemsize(dtype) ? dtypes[dtype].name : "unknown dtype";
}
const char *mt_dtype_str(mt_dtype dtype) { return mt_itemsize(dtype) ? dtypes[dtype].str : "?"; }
const char *mt_dtype_constant(mt_dtype dtype) {
    return mt_itemsize(dtype) ? dtypes[dtype].constant : "?";
}

#ifdef MT_TESTING
/* Tests only (the library the unit tests link, never installed): seconds added to the
 * clock, to make a pause without waiting for it. */
static _Atomic long long clock_offset_ns = 0; /* (an integer: lock-free, no libatomic) */
void mt_testing_advance_clock(double seconds) { clock_offset_ns += (long long)(seconds * 1e9); }
#endif

double mt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
#ifdef MT_TESTING
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (double)clock_offset_ns * 1e-9;
#else
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
#endif
}

/* A CLOCK_MONOTONIC time in seconds as a timespec. */
static struct timespec at(double t) {
    struct timespec ts;
    double whole = floor(t);
    ts.tv_sec = (time_t)whole;
    ts.tv_nsec = (long)((t - whole) * 1e9);
    return ts;
}

int mt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline) {
#ifdef MT_TESTING
    /* mt_now() is the real clock plus an offset a test may move, before or during the
     * wait: waited for in real slices of TEST_SLICE s, each ended against the moved clock
     * (an end before the deadline returns 0, as a spurious wake-up: the caller looks
     * again). The real clock alone would wait out the time the test skipped. */
    const double TEST_SLICE = 0.01;
    double now = mt_now();
    if (now >= deadline) return ETIMEDOUT;
    double offset = (double)clock_offset_ns * 1e-9, real_now = now - offset;
    double left = deadline - now;
    struct timespec ts = at(real_now + (left < TEST_SLICE ? left : TEST_SLICE));
    int rc = pthread_cond_timedwait(cv, mu, &ts);
    return rc == ETIMEDOUT && mt_now() < deadline ? 0 : rc;
#else
    struct timespec ts = at(deadline); /* (mt_now() is CLOCK_MONOTONIC, as cv's clock) */
    return pthread_cond_timedwait(cv, mu, &ts);
#endif
}

void mt_format_double(double v, char out[32]) {
    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    /* The shortest digits that read back as v, the closest to v among them (Python's
     * repr, dtoa mode 0). %.*e rounds correctly, but the correctly rounded p digits may
     * miss v's rounding interval while their neighbour on v's other side is in it (v a
     * power of two, whose interval is lopsided): both are tried at each length. */
    bool neg = signbit(v) != 0;
    double a = fabs(v);
    char buf[40], digits[24];
    int exp10 = 0;
    size_t nd = 0;
    for (int p = 1; p <= 17 && nd == 0; ++p) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, a);
        uint64_t m = 0;
        const char *q = buf;
        for (; *q && *q != 'e'; ++q)
            if (*q >= '0' && *q <= '9') m = m * 10 + (uint64_t)(*q - '0');
        int e = atoi(q + 1);
        for (int attempt = 0; attempt < 2 && nd == 0; ++attempt) {
            if (attempt == 1) { /* the neighbour on v's other side */
                double r = strtod(buf, NULL);
                if (r > a && m > 0) --m;
                else ++m;
                char md[24];
                int len = snprintf(md, sizeof md, "%llu", (unsigned long long)m);
                if (len > p) e += 1; /* 99..9 + 1 */
                if (len < p && m > 0) e -= 1;
                snprintf(buf, sizeof buf, "%c.%se%d", md[0], md + 1, e);
            }
            if (strtod(buf, NULL) == a) {
                nd = 0;
                for (q = buf; *q && *q != 'e'; ++q)
                    if (*q >= '0' && *q <= '9') digits[nd++] = *q;
                exp10 = e;
            }
        }
    }
    while (nd > 1 && digits[nd - 1] == '0') --nd;
    digits[nd] = '\0';
    int decpt = digits[0] == '0' ? 1 : exp10 + 1; /* value = 0.DIGITS x 10^decpt */
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt <= -4 || decpt > 16) { /* Python's repr switches to an exponent here */
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, nd - 1);
            o += nd - 1;
        }
        snprintf(o, 13, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1) % 1000);
        return;
    }
    if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; ++i) *o++ = '0';
        memcpy(o, digits, nd);
        o += nd;
    } else if ((size_t)decpt >= nd) {
        memcpy(o, digits, nd);
        o += nd;
        for (size_t i = nd; i < (size_t)decpt; ++i) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, nd - (size_t)decpt);
        o += nd - (size_t)decpt;
    }
    *o = '\0';
}

bool mt_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t len;
        uint32_t cp;
        if (b < 0x80) {
            ++i;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            len = 2;
            cp = b & 0x1F;
        } else if ((b & 0xF0) == 0xE0) {
            len = 3;
            cp = b & 0x0F;
        } else if ((b & 0xF8) == 0xF0) {
            len = 4;
            cp = b & 0x07;
        } else {
            return false;
        }
        if (i + len > n) return false;
        for (size_t k = 1; k < len; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}
