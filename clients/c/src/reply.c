/* reply.c: a reply of the serving channel (docs/protocol.md, section 16) received
 * whole, validated by the rules of melissa_trainer/wire/predict.py decode_reply (in its
 * order), and delivered: a PREDICTION's arrays into the caller's buffers (checked by name,
 * dtype and capacity before a byte is written), a REFUSED as MT_EREFUSED with its reason.
 * For predict.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "serve.h"

#define KIND_PREDICTION 7
#define KIND_REFUSED 8
#define PREDICTION_FIXED 34u /* prefix + request id, version, count, reserved */
#define REFUSED_FIXED 40u    /* prefix + request id, version, reason, reserved, retry, D */
#define MAX_REPLY_BYTES ((uint64_t)1 << 30)

static const char *const reasons[] = {"", "busy", "not_serving", "wrong_run", "bad_request",
                                      "failed"};

uint64_t mt_elements(int ndim, const uint64_t *shape) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n = shape[d] != 0 && n > UINT64_MAX / shape[d] ? 0 : n * shape[d];
    return n;
}

void mt_shape_text(int ndim, const uint64_t *shape, char *out, size_t size) {
    size_t used = (size_t)snprintf(out, size, "(");
    for (int d = 0; d < ndim && used < size; ++d)
        used += (size_t)snprintf(out + used, size - used, "%s%llu", d ? ", " : "",
                                 (unsigned long long)shape[d]);
    if (used < size) snprintf(out + used, size - used, ndim == 1 ? ",)" : ")");
}

void mt_reply_close(mt_reply *r) {
    for (size_t i = 0; i < r->n; ++i) zmq_msg_close(&r->frames[i]);
    r->n = r->all = 0;
}

/* Receive one whole message. 0 or the errno. */
int mt_reply_receive(void *s, mt_reply *r) {
    r->n = r->all = 0;
    int more = 1;
    while (more) {
        zmq_msg_t tmp, *m = r->n < MT_REPLY_FRAMES ? &r->frames[r->n] : &tmp;
        zmq_msg_init(m);
        int rc;
        while ((rc = zmq_msg_recv(m, s, 0)) < 0 && errno == EINTR) continue;
        if (rc < 0) {
            int err = errno;
            zmq_msg_close(m);
            mt_reply_close(r);
            return err;
        }
        more = zmq_msg_more(m);
        ++r->all;
        if (m == &tmp) zmq_msg_close(m);
        else ++r->n;
    }
    return 0;
}

/* A PREDICTION's arrays checked (decode_reply's rules, in its order) and matched to the
 * caller's outputs; nothing is written unless everything holds. */
static mt_status take_prediction(mt_client *c, mt_reply *r, mt_output *out, size_t n_out) {
    const uint8_t *h = zmq_msg_data(&r->frames[0]);
    size_t size = zmq_msg_size(&r->frames[0]), at = PREDICTION_FIXED;
    size_t count = h[32];
    struct { size_t name_at, name_len; int dtype, ndim; uint64_t shape[MT_MAX_NDIM]; } a[255];
    uint64_t total = 0;
    if (count == 0) return mt_fail(c, MT_EREPLY, "a PREDICTION carries at least one array");
    for (size_t i = 0; i < count; ++i) {
        if (size < at + 4) return mt_fail(c, MT_EREPLY, "array description cut at byte %zu", size);
        a[i].dtype = h[at];
        a[i].ndim = h[at + 1];
        a[i].name_len = h[at + 2];
        at += 4;
        if (mt_itemsize((mt_dtype)a[i].dtype) == 0)
            return mt_fail(c, MT_EREPLY, "dtype code %d is not in the allow-list", a[i].dtype);
        if (a[i].ndim > MT_MAX_NDIM)
            return mt_fail(c, MT_EREPLY, "%d dimensions, at most %d", a[i].ndim, MT_MAX_NDIM);
        size_t end = at + 8 * (size_t)a[i].ndim + a[i].name_len;
        if (size < end) return mt_fail(c, MT_EREPLY, "array description needs %zu bytes", end);
        for (int d = 0; d < a[i].ndim; ++d) a[i].shape[d] = mt_get_u64(h + at + 8 * d);
        uint64_t n = mt_elements(a[i].ndim, a[i].shape);
        a[i].name_at = at + 8 * (size_t)a[i].ndim;
        if (n == 0) return mt_fail(c, MT_EREPLY, "an array's dimensions must be >= 1");
        if (a[i].name_len == 0 || !mt_utf8_valid((const char *)h + a[i].name_at, a[i].name_len))
            return mt_fail(c, MT_EREPLY, "an array name is empty or not UTF-8");
        for (size_t j = 0; j < i; ++j)
            if (a[j].name_len == a[i].name_len &&
                memcmp(h + a[j].name_at, h + a[i].name_at, a[i].name_len) == 0)
                return mt_fail(c, MT_EREPLY, "an array given twice");
        uint64_t bytes = n > MAX_REPLY_BYTES ? MAX_REPLY_BYTES + 1 : n * mt_itemsize(a[i].dtype);
        total += bytes;
        if (total > MAX_REPLY_BYTES)
            return mt_fail(c, MT_EREPLY, "arrays of more than %llu bytes",
                           (unsigned long long)MAX_REPLY_BYTES);
        at = end;
    }
    if (at != size) return mt_fail(c, MT_EREPLY, "%zu bytes after the array descriptions",
                                   size - at);
    if (r->all - 1 != count)
        return mt_fail(c, MT_EREPLY, "%zu arrays, %zu payload frames", count, r->all - 1);
    for (size_t i = 0; i < count; ++i) {
        uint64_t want = mt_elements(a[i].ndim, a[i].shape) * mt_itemsize(a[i].dtype);
        if (zmq_msg_size(&r->frames[i + 1]) != want)
            return mt_fail(c, MT_EREPLY, "array %zu: %zu bytes, expected %llu", i,
                           zmq_msg_size(&r->frames[i + 1]), (unsigned long long)want);
    }
    /* the reply is valid: now the caller's outputs against it */
    size_t match[256];
    for (size_t o = 0; o < n_out; ++o) {
        size_t len = strlen(out[o].name);
        match[o] = count;
        for (size_t i = 0; i < count && match[o] == count; ++i)
            if (a[i].name_len == len && memcmp(h + a[i].name_at, out[o].name, len) == 0)
                match[o] = i;
        if (match[o] == count) {
            char names[600] = "";
            size_t u = 0;
            for (size_t i = 0; i < count && u < sizeof names; ++i)
                u += (size_t)snprintf(names + u, sizeof names - u, "%s'%.*s'", i ? ", " : "",
                                      (int)a[i].name_len, (const char *)h + a[i].name_at);
            return mt_fail(c, MT_EFIELD, "mt_predict: output '%s' is not in the prediction, "
                                         "whose outputs are [%s]", out[o].name, names);
        }
        size_t i = match[o];
        uint64_t n = mt_elements(a[i].ndim, a[i].shape);
        char shape[200];
        mt_shape_text(a[i].ndim, a[i].shape, shape, sizeof shape);
        if ((int)out[o].dtype != a[i].dtype)
            return mt_fail(c, MT_EDTYPE, "mt_predict: output '%s' is %s %s, the buffer is for %s "
                                         "(give a %s buffer, dtype %s)", out[o].name,
                           mt_dtype_name((mt_dtype)a[i].dtype), shape,
                           mt_dtype_name(out[o].dtype), mt_dtype_name((mt_dtype)a[i].dtype),
                           mt_dtype_constant((mt_dtype)a[i].dtype));
        if (n > out[o].capacity)
            return mt_fail(c, MT_ESHAPE, "mt_predict: output '%s' is %s %s: %llu elements, the "
                                         "buffer holds %llu", out[o].name,
                           mt_dtype_name((mt_dtype)a[i].dtype), shape, (unsigned long long)n,
                           (unsigned long long)out[o].capacity);
    }
    for (size_t o = 0; o < n_out; ++o) {
        size_t i = match[o];
        memcpy(out[o].data, zmq_msg_data(&r->frames[i + 1]), zmq_msg_size(&r->frames[i + 1]));
        out[o].ndim = a[i].ndim;
        memset(out[o].shape, 0, sizeof out[o].shape);
        memcpy(out[o].shape, a[i].shape, sizeof(uint64_t) * (size_t)a[i].ndim);
        out[o].count = mt_elements(a[i].ndim, a[i].shape);
    }
    return MT_OK;
}

/* A reply to this request: MT_OK (a prediction, outputs written), MT_EREFUSED, an
 * output mismatch, or MT_EREPLY. *mine: whether it answers this request. */
mt_status mt_reply_take(mt_client *c, mt_reply *r, mt_output *out, size_t n_out,
                        uint64_t *version, bool *mine) {
    const uint8_t *h = zmq_msg_data(&r->frames[0]);
    size_t size = zmq_msg_size(&r->frames[0]);
    *mine = true;
    if (size < MT_PREFIX_BYTES) return mt_fail(c, MT_EREPLY, "a reply of %zu bytes", size);
    if (memcmp(h, "MTRN", 4) != 0) return mt_fail(c, MT_EREPLY, "a reply without the magic");
    if (h[4] != MT_PROTOCOL_VERSION)
        return mt_fail(c, MT_EREPLY, "a reply of protocol version %d, this side speaks %d", h[4],
                       MT_PROTOCOL_VERSION);
    int kind = h[MT_KIND_AT];
    if (kind != KIND_PREDICTION && kind != KIND_REFUSED)
        return mt_fail(c, MT_EREPLY, "message kind %d on the serving channel", kind);
    size_t fixed = kind == KIND_REFUSED ? REFUSED_FIXED : PREDICTION_FIXED;
    if (size < fixed) return mt_fail(c, MT_EREPLY, "a reply of %zu bytes", size);
    if (mt_get_u64(h + 16) != c->request_id) {
        *mine = false; /* the late answer of an earlier request */
        return MT_OK;
    }
    if (version != NULL) *version = mt_get_u64(h + 24);
    if (kind == KIND_PREDICTION) return take_prediction(c, r, out, n_out);
    size_t length = (size_t)h[38] | (size_t)h[39] << 8;
    if (size != REFUSED_FIXED + length)
        return mt_fail(c, MT_EREPLY, "REFUSED of %zu bytes, detail of %zu", size, length);
    if (r->all > 1) return mt_fail(c, MT_EREPLY, "REFUSED has one frame");
    if (h[32] < 1 || h[32] > 5) return mt_fail(c, MT_EREPLY, "unknown refusal code %d", h[32]);
    uint32_t retry = (uint32_t)h[34] | (uint32_t)h[35] << 8 | (uint32_t)h[36] << 16 |
                     (uint32_t)h[37] << 24;
    c->refusal = (mt_refusal)h[32];
    c->refusal_retry = retry / 1000.0;
    char detail[1100];
    size_t n = length < sizeof detail - 1 ? length : sizeof detail - 1;
    memcpy(detail, h + REFUSED_FIXED, n);
    detail[n] = '\0';
    /* Inputs that are not the trainer's, which a serve file would have let us check
     * before sending (endpoints given directly publish none): a mistake to fix, as the
     * Python client's ValueError, not MT_EREFUSED, which a simulation falls back from,
     * silently, on every request. */
    if (c->refusal == MT_REFUSAL_BAD_REQUEST &&
        (strncmp(detail, "bad_inputs:", 11) == 0 || strncmp(detail, "too_large:", 10) == 0))
        return mt_fail(c, MT_EINVAL, "mt_predict: the trainer refused the inputs: %s", detail);
    return mt_fail(c, MT_EREFUSED, "the trainer refused the prediction (%s): %s",
                   reasons[h[32]], detail);
}

