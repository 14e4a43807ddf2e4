/* predict_describe.c: what mt_predict learns of the inputs a trainer serves when its
 * endpoint was given (mt_set_serve_endpoints, MELISSA_TRAINER_SERVE_ENDPOINTS: no serve
 * file, which publishes them): a DESCRIBE before the first request on a connection,
 * answered by a DESCRIPTION (docs/protocol.md, section 16;
 * melissa_trainer/client/predict_describe.py, whose rules this follows), kept in
 * serve_inputs, so that every request is checked before it is sent, as with a serve
 * file (MT_EDTYPE, MT_ESHAPE, MT_EFIELD, nothing sent). Without it a request more than
 * 1 MiB over the declared inputs (double for a large float input) was closed by the
 * trainer's ZeroMQ without a word: MT_ETIMEDOUT "... was lost" (user trial 32). A
 * trainer from before DESCRIBE refuses it (bad_request): the requests then go
 * unchecked, as before. Forgotten when the connection drops (a trainer restarted there
 * may serve other inputs) and when the socket is released. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "serve.h"

#define KIND_PREDICT 6
#define KIND_PREDICTION 7
#define KIND_REFUSED 8
#define FLAG_DESCRIBE 1
#define DESCRIBE_BYTES 30u     /* PREDICT's fixed part, no array, no run id */
#define DESCRIPTION_FIXED 34u /* prefix, request id, model version, count, reserved */
#define REFUSED_FIXED 40u

void mt_predict_forget(mt_client *c) {
    if (!c->predict_given) return; /* (a serve file's inputs are the file's) */
    mt_specs_free(c->serve_inputs, c->n_serve_inputs);
    c->serve_inputs = NULL;
    c->n_serve_inputs = 0;
    c->predict_described = false;
}

/* The inputs of a DESCRIPTION `h` of `size` bytes (the prefix and request id checked by
 * the caller): `why` says what is wrong (NULL: none), the specs in *out. */
static const char *parse_description(const uint8_t *h, size_t size, mt_spec **out,
                                     size_t *n_out, char *why, size_t cap) {
    if (size < DESCRIPTION_FIXED) return "a DESCRIPTION shorter than 34 bytes";
    size_t count = h[32], at = DESCRIPTION_FIXED;
    if (count < 1 || h[33] != 0) return "a DESCRIPTION of no input, or a reserved byte set";
    mt_spec *specs = calloc(count, sizeof *specs);
    if (specs == NULL) return "out of memory";
    size_t n = 0;
    const char *bad = NULL;
    for (; n < count && bad == NULL; ++n) {
        mt_spec *s = &specs[n];
        if (size < at + 4) {
            bad = "an input description cut";
            break;
        }
        s->dtype = (mt_dtype)h[at];
        s->ndim = h[at + 1];
        size_t len = h[at + 2];
        if (mt_itemsize(s->dtype) == 0 || s->ndim > MT_MAX_NDIM || len == 0 || h[at + 3]) {
            snprintf(why, cap, "an input description of dtype code %d, ndim %d, name length "
                               "%zu, reserved %d", (int)h[at], s->ndim, len, (int)h[at + 3]);
            bad = why;
            break;
        }
        at += 4;
        if (size < at + 8 * (size_t)s->ndim + len) {
            bad = "an input description cut";
            break;
        }
        for (int d = 0; d < s->ndim; ++d, at += 8) s->shape[d] = mt_get_u64(h + at);
        if (mt_elements(s->ndim, s->shape) == 0) bad = "an input of a dimension 0";
        else if (!mt_utf8_valid((const char *)h + at, len)) bad = "an input's name not UTF-8";
        else if ((s->name = strndup((const char *)h + at, len)) == NULL) bad = "out of memory";
        for (size_t j = 0; bad == NULL && j < n; ++j)
            if (strcmp(specs[j].name, s->name) == 0) bad = "an input described twice";
        at += len;
    }
    if (bad == NULL && at != size) bad = "bytes after the input descriptions";
    if (bad != NULL) {
        mt_specs_free(specs, count);
        return bad;
    }
    *out = specs;
    *n_out = count;
    return NULL;
}

/* Receive one message whole; its first frame in *first (to close), all of them counted. */
static int receive(void *s, zmq_msg_t *first, size_t *frames) {
    *frames = 0;
    int more = 1;
    zmq_msg_init(first);
    while (more) {
        zmq_msg_t tmp, *m = *frames == 0 ? first : &tmp;
        if (m == &tmp) zmq_msg_init(m);
        int rc;
        while ((rc = zmq_msg_recv(m, s, 0)) < 0 && errno == EINTR) continue;
        if (rc < 0) {
            int err = errno;
            if (m == &tmp) zmq_msg_close(m);
            return err;
        }
        more = zmq_msg_more(m);
        if (m == &tmp) zmq_msg_close(m);
        ++*frames;
    }
    return 0;
}

/* The answer `h` (`size` bytes, `frames` frames) to DESCRIBE `id`: MT_OK and *done when
 * it is (a DESCRIPTION kept, or a refusal: no description), MT_OK and not *done when it
 * answers another request (a late one, dropped), else MT_EREPLY naming the endpoint. */
static mt_status take(mt_client *c, const uint8_t *h, size_t size, size_t frames, uint64_t id,
                      bool *done) {
    *done = false;
    if (size < 24 || memcmp(h, "MTRN", 4) != 0 || h[4] != 2 ||
        (h[5] != KIND_PREDICTION && h[5] != KIND_REFUSED))
        return mt_fail(c, MT_EREPLY, "a malformed answer to DESCRIBE from the trainer's serving "
                                     "endpoint %s: not a DESCRIPTION", c->predict_endpoint);
    if (mt_get_u64(h + 16) != id) return MT_OK; /* (the late answer of an earlier request) */
    *done = true;
    if (h[5] == KIND_REFUSED) { /* (a trainer from before DESCRIBE: bad_request) */
        if (size < REFUSED_FIXED || frames != 1 ||
            size != REFUSED_FIXED + ((size_t)h[38] | (size_t)h[39] << 8))
            return mt_fail(c, MT_EREPLY, "a malformed answer to DESCRIBE from the trainer's "
                                         "serving endpoint %s: a REFUSED of %zu bytes",
                           c->predict_endpoint, size);
        c->predict_described = true;
        return MT_OK;
    }
    char why[160];
    const char *bad = (h[6] | h[7] << 8) != FLAG_DESCRIBE ? "a PREDICTION, not a DESCRIPTION"
                      : frames != 1                       ? "a DESCRIPTION has one frame"
                                                          : NULL;
    mt_spec *specs = NULL;
    size_t n = 0;
    if (bad == NULL) bad = parse_description(h, size, &specs, &n, why, sizeof why);
    if (bad != NULL)
        return mt_fail(c, strcmp(bad, "out of memory") == 0 ? MT_ENOMEM : MT_EREPLY,
                       "a malformed answer to DESCRIBE from the trainer's serving endpoint %s: "
                       "%s", c->predict_endpoint, bad);
    mt_specs_free(c->serve_inputs, c->n_serve_inputs);
    c->serve_inputs = specs;
    c->n_serve_inputs = n;
    c->predict_described = true;
    return MT_OK;
}

mt_status mt_predict_describe(mt_client *c, double deadline, const char *timeout) {
    uint8_t ask[DESCRIBE_BYTES] = {0};
    uint64_t id = ++c->request_id;
    mt_put_prefix(ask, KIND_PREDICT, FLAG_DESCRIBE, c->simulation_id);
    mt_put_u64(ask + 16, id); /* (timeout 0, no array, no run id) */
    int rc;
    while ((rc = zmq_send(c->predict_socket, ask, sizeof ask, ZMQ_DONTWAIT)) < 0 && errno == EINTR)
        continue;
    if (rc < 0) {
        int err = errno;
        mt_predict_release(c);
        if (err == EAGAIN) /* (the connection went since the poll) */
            return mt_fail(c, MT_ETIMEDOUT, "the connection to the trainer's serving endpoint "
                                            "went");
        return mt_fail(c, MT_EZMQ, "sending DESCRIBE: %s", zmq_strerror(err));
    }
    for (;;) {
        double left = deadline - mt_now();
        zmq_pollitem_t items[2] = {{c->predict_socket, 0, ZMQ_POLLIN, 0},
                                   {c->predict_monitor, 0, ZMQ_POLLIN, 0}};
        int ready = 0;
        if (left > 0) {
            long ms = mt_ms(left);
            while ((ready = zmq_poll(items, 2, ms < 1 ? 1 : ms)) < 0 && errno == EINTR) continue;
        }
        if (ready < 0) {
            mt_status st = mt_fail(c, MT_EZMQ, "zmq_poll: %s", zmq_strerror(errno));
            mt_predict_release(c);
            return st;
        }
        if (ready > 0 && !(items[0].revents & ZMQ_POLLIN)) {
            if (mt_watch_lost(c, NULL)) return mt_predict_lost(c, true);
            continue;
        }
        if (ready == 0 && deadline - mt_now() > 0) continue; /* (a capped poll) */
        if (ready == 0) /* (the deadline: as a PREDICT's, mt_predict) */
            return mt_watch_lost(c, NULL) ? mt_predict_lost(c, true)
                                          : mt_predict_unanswered(c, timeout);
        zmq_msg_t first;
        size_t frames;
        int err = receive(c->predict_socket, &first, &frames);
        if (err != 0) {
            zmq_msg_close(&first);
            mt_status st = mt_fail(c, MT_EZMQ, "receiving the reply: %s", zmq_strerror(err));
            mt_predict_release(c);
            return st;
        }
        bool done;
        mt_status st = take(c, zmq_msg_data(&first), zmq_msg_size(&first), frames, id, &done);
        zmq_msg_close(&first);
        if (st != MT_OK) {
            mt_predict_release(c);
            return st;
        }
        if (done) {
            c->backoff = 0; /* (a trainer answers there: silent no more) */
            c->predict_silent_at[0] = '\0';
            return MT_OK;
        }
    }
}
