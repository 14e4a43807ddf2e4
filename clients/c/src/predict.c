/* predict.c: mt_predict, a prediction asked of the trainer's current model
 * (docs/protocol.md, section 16; melissa_trainer/client/predict.py Predictor, whose
 * behaviour this follows: the same bytes, the same failures). PREDICT out on a DEALER
 * (ZMQ_IMMEDIATE: never queued for a trainer not connected), PREDICTION or REFUSED
 * back, matched by request id (a late answer to an earlier request is dropped); the
 * socket is closed after a failure, and the endpoint looked up again at the next call
 * (after a trainer found gone, once a backoff is over: predict_watch.c, which also makes
 * a request fall back at once when the connection says the trainer is gone). Every
 * reply is validated before a byte reaches the caller's buffers. The endpoints a solver
 * gives (mt_set_serve_endpoints): serve_given.c. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "predict_names.h"
#include "serve.h"
#include "stop_look.h"

/* why a request sent on a connection still up got no answer in time (its MT_ETIMEDOUT;
 * client/predict_errors.py UNANSWERED, word for word) */
#define UNANSWERED                                                                        \
    "its connection is still up: the trainer is busy, or its process is stopped (SIGSTOP, " \
    "a suspended job: it answers once continued), or its node is unreachable (a trainer "  \
    "whose process died closes the connection, which fails a request at once)"
#define KIND_PREDICT 6
#define PREDICT_FIXED 30u /* prefix + request id, timeout, count, run id length */

void mt_predict_release(mt_client *c) {
    mt_predict_forget(c); /* (what the trainer there described: asked again on the next) */
    mt_watch_stop(c);
    if (c->predict_socket != NULL) {
        int zero = 0;
        zmq_setsockopt(c->predict_socket, ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(c->predict_socket);
        c->predict_socket = NULL;
    }
}

void mt_predict_free(mt_client *c) {
    mt_predict_release(c);
    mt_specs_free(c->serve_inputs, c->n_serve_inputs);
    c->serve_inputs = NULL;
    c->n_serve_inputs = 0;
    free(c->serve_endpoints_arg);
    c->serve_endpoints_arg = NULL;
    free(c->looked_dir);
    c->looked_dir = NULL;
    free(c->first_stop);
    c->first_stop = NULL;
    mt_stop_glance_free(c->stop_glance);
    c->stop_glance = NULL;
}

mt_refusal mt_predict_refusal(const mt_client *c, double *retry_after_s) {
    if (retry_after_s != NULL) *retry_after_s = c == NULL ? 0.0 : c->refusal_retry;
    return c == NULL ? MT_REFUSAL_NONE : c->refusal;
}

/* The arguments' own rules (before any I/O). */
static mt_status check_arguments(mt_client *c, const mt_input *in, size_t n_in,
                                 const mt_output *out, size_t n_out, double timeout) {
    if (!c->started) return mt_fail(c, MT_ESTATE, "mt_predict: start the client first");
    if (!(timeout > 0) || isinf(timeout))
        return mt_fail(c, MT_EINVAL, "mt_predict: timeout must be > 0 seconds, not %g", timeout);
    if (n_in < 1 || n_in > 255 || in == NULL || n_out > 255 || (n_out > 0 && out == NULL))
        return mt_fail(c, MT_EINVAL, "mt_predict: 1 to 255 inputs, and at most 255 outputs");
    for (size_t i = 0; i < n_in; ++i) {
        const mt_input *a = &in[i];
        size_t len = a->name == NULL ? 0 : strlen(a->name);
        if (len < 1 || len > MT_MAX_NAME_BYTES || !mt_utf8_valid(a->name, len))
            return mt_fail(c, MT_EINVAL, "mt_predict: input %zu: a name of 1 to 255 UTF-8 bytes",
                           i);
        if (mt_itemsize(a->dtype) == 0)
            return mt_fail(c, MT_EDTYPE, "mt_predict: input '%s': dtype code %d (codes 1 to 12)",
                           a->name, (int)a->dtype);
        if (a->ndim < 0 || a->ndim > MT_MAX_NDIM || (a->ndim > 0 && a->shape == NULL) ||
            a->data == NULL)
            return mt_fail(c, MT_EINVAL, "mt_predict: input '%s': ndim 0 to 8, with a shape and "
                                         "data", a->name);
        if (mt_elements(a->ndim, a->shape) == 0)
            return mt_fail(c, MT_ESHAPE, "mt_predict: input '%s': dimensions must be >= 1",
                           a->name);
        for (size_t j = 0; j < i; ++j)
            if (strcmp(in[j].name, a->name) == 0)
                return mt_fail(c, MT_EFIELD, "mt_predict: input '%s' given twice", a->name);
    }
    for (size_t i = 0; i < n_out; ++i) {
        if (out[i].name == NULL || !*out[i].name || (out[i].data == NULL && out[i].capacity))
            return mt_fail(c, MT_EINVAL, "mt_predict: output %zu: a name and a buffer", i);
        for (size_t j = 0; j < i; ++j)
            if (strcmp(out[j].name, out[i].name) == 0)
                return mt_fail(c, MT_EFIELD, "mt_predict: output '%s' asked twice", out[i].name);
    }
    return MT_OK;
}

/* The socket to the serving rank (looked up and connected if there is none). */
static mt_status connect_serving(mt_client *c, double deadline, double timeout) {
    if (c->predict_socket != NULL) return MT_OK;
    mt_serve_entry e;
    mt_status st = mt_serve_resolve(c, deadline, timeout, &e);
    if (st != MT_OK) return st;
    void *s = zmq_socket(c->zctx, ZMQ_DEALER);
    /* (its TCP connect bounded by the data sockets' rule of the request's timeout, at
     * least 2 s: as the Python client's Predictor, which has no tuning; predict_dial.c
     * tells a connect so abandoned from one refused) */
    int zero = 0, one = 1, connect_ms = mt_connect_timeout_ms(timeout);
    if (s == NULL) {
        st = mt_fail(c, MT_EZMQ, "zmq_socket: %s", zmq_strerror(errno));
    } else if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
               zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof one) != 0 ||
               zmq_setsockopt(s, ZMQ_CONNECT_TIMEOUT, &connect_ms, sizeof connect_ms) != 0) {
        st = mt_fail(c, MT_EZMQ, "zmq_setsockopt: %s", zmq_strerror(errno));
    } else if (e.curve_key != NULL) {
        char public_key[41], secret_key[41];
        if (!zmq_has("curve"))
            st = mt_fail(c, MT_EZMQ, "the serving endpoint '%s' needs CURVE, which this libzmq "
                                     "was built without", e.endpoint);
        else if (strlen(e.curve_key) != 40 || zmq_curve_keypair(public_key, secret_key) != 0 ||
                 zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, e.curve_key, 40) != 0 ||
                 zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, public_key, 40) != 0 ||
                 zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_key, 40) != 0)
            st = mt_fail(c, MT_EZMQ, "CURVE keys for '%s': %s", e.endpoint, zmq_strerror(errno));
    }
    if (st == MT_OK) st = mt_watch_start(c, s); /* (before connecting: no event missed) */
    if (st == MT_OK && zmq_connect(s, e.endpoint) != 0) { /* (an unknown transport, ...) */
        char *shown = mt_py_repr(e.endpoint);
        st = mt_fail(c, MT_EINVAL, "cannot connect to serving endpoint %s: %s",
                     shown != NULL ? shown : e.endpoint, zmq_strerror(errno));
        free(shown);
    }
    c->predict_socket = s;
    if (st != MT_OK) {
        mt_predict_release(c); /* (its monitor too, if started) */
        mt_serve_entry_free(&e);
        return st;
    }
    snprintf(c->predict_endpoint, sizeof c->predict_endpoint, "%s", e.endpoint);
    c->predict_given = e.inputs == NULL;
    c->predict_rank = e.rank;
    /* (a serve file publishes its inputs; endpoints given directly, none) */
    c->predict_key = e.curve_key == NULL  ? MT_KEY_NONE
                     : e.inputs != NULL ? MT_KEY_SERVE_FILE
                                        : MT_KEY_GIVEN;
    if (e.inputs != NULL) { /* (endpoints given directly publish none: the trainer checks) */
        mt_specs_free(c->serve_inputs, c->n_serve_inputs);
        c->serve_inputs = e.inputs;
        c->n_serve_inputs = e.n_inputs;
        e.inputs = NULL;
    }
    mt_serve_entry_free(&e);
    return MT_OK;
}

/* Send the PREDICT: its header, then each input's bytes, on the live connection
 * mt_watch_connected waited for (none since: EAGAIN at once). 0 or the errno. */
static int send_request(mt_client *c, const mt_input *in, size_t n_in, double timeout) {
    mt_buf b = {0};
    uint8_t fixed[PREDICT_FIXED];
    size_t run_len = c->run_id != NULL ? strlen(c->run_id) : 0;
    /* rounded half up (timeout > 0), without libm's round(): a static link needs no -lm */
    double ms = timeout * 1000 + 0.5;
    mt_put_prefix(fixed, KIND_PREDICT, 0, c->simulation_id);
    mt_put_u64(fixed + 16, ++c->request_id);
    mt_put_u32(fixed + 24, ms < 1 ? 1u : ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
    fixed[28] = (uint8_t)n_in;
    fixed[29] = (uint8_t)run_len;
    mt_buf_put(&b, fixed, sizeof fixed);
    if (run_len) mt_buf_put(&b, c->run_id, run_len);
    for (size_t i = 0; i < n_in; ++i) {
        size_t len = strlen(in[i].name);
        uint8_t desc[4 + 8 * MT_MAX_NDIM];
        desc[0] = (uint8_t)in[i].dtype;
        desc[1] = (uint8_t)in[i].ndim;
        desc[2] = (uint8_t)len;
        desc[3] = 0;
        for (int d = 0; d < in[i].ndim; ++d) mt_put_u64(desc + 4 + 8 * d, in[i].shape[d]);
        mt_buf_put(&b, desc, 4 + 8 * (size_t)in[i].ndim);
        mt_buf_put(&b, in[i].name, len);
    }
    if (b.oom) {
        free(b.data);
        return ENOMEM;
    }
    int wait = 0;
    int err = 0;
    if (zmq_setsockopt(c->predict_socket, ZMQ_SNDTIMEO, &wait, sizeof wait) != 0) err = errno;
    /* the first frame needs a connection (ZMQ_IMMEDIATE); the rest go with it */
    for (size_t i = 0; err == 0 && i <= n_in; ++i) {
        const void *p = i == 0 ? (const void *)b.data : in[i - 1].data;
        size_t n = i == 0 ? b.len
                          : (size_t)(mt_elements(in[i - 1].ndim, in[i - 1].shape) *
                                     mt_itemsize(in[i - 1].dtype));
        int rc;
        while ((rc = zmq_send(c->predict_socket, p, n, i < n_in ? ZMQ_SNDMORE : 0)) < 0 &&
               errno == EINTR)
            continue;
        if (rc < 0) err = errno;
    }
    free(b.data);
    return err;
}

/* A request whose connection dropped once `sent` or just before (mt_gone). */
mt_status mt_predict_lost(mt_client *c, bool sent) {
    return mt_gone(c, "the connection to the trainer's serving endpoint %s was lost %s (the "
                      "trainer stopped or died)", c->predict_endpoint,
                   sent ? "while the request waited for its answer"
                        : "as the request was about to be sent");
}

/* No answer by the deadline on a connection still up (MT_ETIMEDOUT, UNANSWERED). */
mt_status mt_predict_unanswered(mt_client *c, const char *timeout) {
    mt_status st = mt_fail(c, MT_ETIMEDOUT, "no prediction from the trainer's serving endpoint "
                                            "%s within %s s: " UNANSWERED,
                           c->predict_endpoint, timeout);
    /* (the next requests' connections, up with no handshake: SILENT, whatever their age;
     * predict_watch.c mt_watch_connected) */
    snprintf(c->predict_silent_at, sizeof c->predict_silent_at, "%s", c->predict_endpoint);
    mt_predict_release(c);
    return st;
}

mt_status mt_predict(mt_client *c, const mt_input *inputs, size_t n_inputs,
                     mt_output *outputs, size_t n_outputs, double timeout_s,
                     uint64_t *version) {
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    c->refusal = MT_REFUSAL_NONE;
    c->refusal_retry = 0;
    if (c->watch.refused != NULL) /* (refused: asks nothing; admission_watch.c says why) */
        return mt_fail(c, MT_ESIMREFUSED, "%s", c->watch.refused);
    mt_status st = check_arguments(c, inputs, n_inputs, outputs, n_outputs, timeout_s);
    if (st != MT_OK) return st;
    mt_nonfinite_inputs_notice(c, inputs, n_inputs); /* (sent as they are: said once) */
    st = mt_backoff_check(c); /* (a trainer found gone lately: not dialled again yet) */
    double deadline = mt_now() + timeout_s;
    char t[32];
    mt_format_double(timeout_s, t);
    if (st == MT_OK) st = connect_serving(c, deadline, timeout_s);
    /* Inputs not those of the serve file read with the open socket, the directory changed
     * since: read it again (a trainer restarted with other inputs at the same endpoint, a
     * fixed bind: the socket reconnected to it by itself, and every request of its inputs
     * was refused for ever, checked against the old file's; client/predict.py _reread).
     * Nothing read while the inputs match. */
    if (st == MT_OK && c->serve_inputs != NULL && !c->predict_given &&
        mt_predict_check_inputs(c, inputs, n_inputs) != MT_OK && mt_serve_dir_changed(c)) {
        mt_predict_release(c);
        st = connect_serving(c, deadline, timeout_s);
    }
    /* No trainer to ask now (MT_ETIMEDOUT): inputs that are not those of the serve file
     * last read are a mistake all the same, while no trainer published since (the
     * directory unchanged since that lookup: a restarted trainer's file, which may
     * declare other inputs, ends the backoff and is read first); client/predict.py
     * _offline_check. Inputs a trainer described are known over its connection only. */
    if (st == MT_ETIMEDOUT && c->serve_inputs != NULL && !c->predict_given &&
        !mt_serve_dir_changed(c)) {
        mt_status mistake = mt_predict_check_inputs(c, inputs, n_inputs);
        if (mistake != MT_OK) return mistake;
    }
    if (st == MT_OK && c->serve_inputs != NULL) st = mt_predict_check_inputs(c, inputs, n_inputs);
    if (st == MT_OK) st = mt_watch_connected(c, deadline, t);
    if (st != MT_OK) return st;
    /* (the events of earlier connections: a drop from now on counts; one since the last
     * request may be a trainer restarted there, which is asked again) */
    bool last = false;
    if (mt_watch_lost(c, &last)) mt_predict_forget(c);
    if (last) return mt_predict_lost(c, false);
    if (c->predict_given && !c->predict_described) {
        /* (an endpoint given: the trainer says which inputs it serves, once per
         * connection; checked here as a serve file's, nothing sent if wrong) */
        st = mt_predict_describe(c, deadline, t);
        if (st == MT_OK && c->serve_inputs != NULL)
            st = mt_predict_check_inputs(c, inputs, n_inputs);
        if (st != MT_OK) return st;
    }
    int err = send_request(c, inputs, n_inputs, timeout_s);
    if (err != 0) {
        mt_predict_release(c);
        if (err == EAGAIN) /* (the connection went since the poll) */
            return mt_fail(c, MT_ETIMEDOUT, "the connection to the trainer's serving endpoint "
                                            "went");
        return mt_fail(c, err == ENOMEM ? MT_ENOMEM : MT_EZMQ, "sending the request: %s",
                       zmq_strerror(err));
    }
    mt_reply *r = malloc(sizeof *r);
    if (r == NULL) {
        mt_predict_release(c);
        return mt_fail(c, MT_ENOMEM, "out of memory");
    }
    for (;;) {
        double left = deadline - mt_now();
        zmq_pollitem_t items[2] = {{c->predict_socket, 0, ZMQ_POLLIN, 0},
                                   {c->predict_monitor, 0, ZMQ_POLLIN, 0}};
        int ready = 0;
        if (left > 0) {
            long ms = mt_ms(left); /* (capped: the loop looks at the deadline again) */
            while ((ready = zmq_poll(items, 2, ms < 1 ? 1 : ms)) < 0 && errno == EINTR) continue;
        }
        if (ready > 0 && !(items[0].revents & ZMQ_POLLIN)) {
            if (mt_watch_lost(c, NULL)) {
                /* The connection the request went on is gone: its answer cannot come (a
                 * new connection is another peer to the trainer's socket). */
                st = mt_predict_lost(c, true);
                break;
            }
            continue; /* (other events) */
        }
        if (ready < 0 || (err = ready > 0 ? mt_reply_receive(c->predict_socket, r) : EAGAIN) != 0) {
            if (ready < 0) err = errno;
            /* (at the deadline, what the monitor says: a drop, even one of the last
             * instant, is a trainer gone; else the connection is up: UNANSWERED) */
            if (err == EAGAIN && mt_watch_lost(c, NULL)) {
                st = mt_predict_lost(c, true);
                break;
            }
            if (err == EAGAIN) {
                st = mt_predict_unanswered(c, t);
                break;
            }
            st = mt_fail(c, MT_EZMQ, "receiving the reply: %s", zmq_strerror(err));
            mt_predict_release(c);
            break;
        }
        bool mine;
        st = mt_reply_take(c, r, outputs, n_outputs, version, &mine);
        if (mine && st != MT_EREPLY) { /* (a trainer answers there: silent no more) */
            c->backoff = 0;
            c->predict_silent_at[0] = '\0';
        }
        mt_reply_close(r);
        if (st == MT_EREPLY) mt_predict_release(c);
        if (st != MT_OK || mine) break;
    }
    free(r);
    return st;
}
