/* lifecycle.c: mt_client_start (checks, configuration, sockets, HELLO) and the release of
 * what it acquires (the close and the abort: close.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "follow.h"
#include "close_wait.h"

/* Checks that need no I/O: fields declared, parts, sizes. */
static mt_status check_fields(mt_client *c) {
    if (c->n_fields == 0) return mt_fail(c, MT_EFIELD, "declare at least one field");
    for (size_t i = 0; i < c->n_fields; ++i) {
        mt_field *f = &c->fields[i];
        if (f->size > c->max_message_bytes / f->itemsize)
            return mt_fail(c, MT_EINVAL, "field '%s' is %llu elements of %zu bytes, more than "
                                         "max_message_bytes=%llu; raise it here "
                                         "(mt_set_max_message_bytes) and the receiver's bound",
                           f->name, (unsigned long long)f->size, f->itemsize,
                           (unsigned long long)c->max_message_bytes);
        if (f->part == PART_WHOLE) {
            if (c->ranks > 1)
                return mt_fail(c, MT_EFIELD, "field '%s': rank %d of %d must declare its part "
                                             "(mt_declare_part, or mt_declare_part_count with "
                                             "mt_client_start_mpi)", f->name, c->rank, c->ranks);
            f->offset = 0;
            f->count = f->size;
        } else if (f->part == PART_COUNT && !f->offset_known) {
            if (c->ranks > 1)
                return mt_fail(c, MT_EFIELD, "field '%s': the offset of this rank's part is "
                                             "unknown: start with mt_client_start_mpi, or declare "
                                             "the part with mt_declare_part", f->name);
            f->offset = 0;
        }
        if (c->ranks == 1 && (f->offset != 0 || f->count != f->size))
            return mt_fail(c, MT_EINVAL, "field '%s': a single rank sends the whole field, "
                                         "[0, %llu), not [%llu, %llu)", f->name,
                           (unsigned long long)f->size, (unsigned long long)f->offset,
                           (unsigned long long)(f->offset + f->count));
    }
    return MT_OK;
}

/* The sockets, their context and the batches (follow.c replaces them). */
void mt_transport_release(mt_client *c, int linger_ms) {
    mt_outbox_stop_flusher(c);
    mt_handshake_release(c); /* (its sockets would hold zmq_ctx_term forever) */
    mt_admission_watch_release(c); /* (so would its socket; follow.c starts it again) */
    for (size_t i = 0; c->sockets != NULL && i < c->n_endpoints; ++i) {
        if (c->sockets[i] == NULL) continue;
        zmq_setsockopt(c->sockets[i], ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(c->sockets[i]);
    }
    free(c->sockets);
    c->sockets = NULL;
    mt_predict_release(c); /* (a socket left open would hold zmq_ctx_term forever) */
    if (c->zctx != NULL) {
        while (zmq_ctx_term(c->zctx) != 0 && errno == EINTR) continue;
        c->zctx = NULL; /* every zero-copy message has been freed by now */
    }
    mt_outbox_free(c);
}

/* Everything mt_client_start acquires, released (linger_ms for the sockets). */
void mt_release_runtime(mt_client *c, int linger_ms) {
    mt_transport_release(c, linger_ms);
    for (size_t i = 0; c->endpoints != NULL && i < c->n_endpoints; ++i) free(c->endpoints[i]);
    for (size_t i = 0; c->curve_keys != NULL && i < c->n_endpoints; ++i) free(c->curve_keys[i]);
    for (size_t i = 0; c->follows != NULL && i < c->n_endpoints; ++i) free(c->follows[i]);
    free(c->endpoints);
    free(c->curve_keys);
    free(c->follows);
    c->endpoints = NULL;
    c->curve_keys = NULL;
    c->follows = NULL;
    c->receipts = false;
    c->n_endpoints = 0;
    free(c->steps_per_receiver);
    c->steps_per_receiver = NULL;
    for (size_t i = 0; i < c->n_fields; ++i) {
        free(c->fields[i].header);
        c->fields[i].header = NULL;
    }
    if (c->mu_init) {
        pthread_cond_destroy(&c->wake);
        pthread_mutex_destroy(&c->mu);
        c->mu_init = false;
    }
    if (c->held_init) {
        pthread_cond_destroy(&c->held_cv);
        pthread_mutex_destroy(&c->held_mu);
        c->held_init = false;
    }
    c->started = false;
}

mt_status mt_init_sync(mt_client *c) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return mt_fail(c, MT_ENOMEM, "pthread_condattr_init");
    /* (the timed waits' deadlines are CLOCK_MONOTONIC's: on the realtime clock they would
     * end at once, or days late) */
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0) {
        pthread_condattr_destroy(&attr);
        return mt_fail(c, MT_ENOMEM, "pthread_condattr_setclock(CLOCK_MONOTONIC)");
    }
    bool ok = pthread_mutex_init(&c->mu, NULL) == 0;
    if (ok && pthread_cond_init(&c->wake, &attr) != 0) {
        pthread_mutex_destroy(&c->mu);
        ok = false;
    }
    c->mu_init = ok;
    bool held = ok && pthread_mutex_init(&c->held_mu, NULL) == 0;
    if (held && pthread_cond_init(&c->held_cv, &attr) != 0) {
        pthread_mutex_destroy(&c->held_mu);
        held = false;
    }
    c->held_init = held;
    pthread_condattr_destroy(&attr);
    return ok && held ? MT_OK : mt_fail(c, MT_ENOMEM, "cannot create the client's locks");
}

mt_status mt_connect_all(mt_client *c) {
    c->zctx = zmq_ctx_new();
    if (c->zctx == NULL) return mt_fail(c, MT_EZMQ, "zmq_ctx_new: %s", zmq_strerror(errno));
    c->sockets = calloc(c->n_endpoints, sizeof *c->sockets);
    if (c->sockets == NULL) return mt_fail(c, MT_ENOMEM, "out of memory");
    int minus1 = -1, connect_ms = mt_connect_timeout_ms(c->disconnected_timeout);
    char public_key[41], secret_key[41]; /* the client's own pair, one for all sockets */
    bool curve = false;
    for (size_t i = 0; i < c->n_endpoints; ++i) curve = curve || c->curve_keys[i] != NULL;
    if (curve) {
        if (!zmq_has("curve"))
            return mt_fail(c, MT_EZMQ, "the receivers need CURVE (MELISSA_TRAINER_KEY is set, "
                                       "or the rendezvous published a key), which this libzmq "
                                       "was built without");
        if (zmq_curve_keypair(public_key, secret_key) != 0)
            return mt_fail(c, MT_EZMQ, "zmq_curve_keypair: %s", zmq_strerror(errno));
    }
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        void *s = c->sockets[i] = zmq_socket(c->zctx, ZMQ_PUSH);
        if (s == NULL) return mt_fail(c, MT_EZMQ, "zmq_socket: %s", zmq_strerror(errno));
        if (zmq_setsockopt(s, ZMQ_SNDHWM, &c->sndhwm, sizeof c->sndhwm) != 0 ||
            zmq_setsockopt(s, ZMQ_LINGER, &minus1, sizeof minus1) != 0 ||
            zmq_setsockopt(s, ZMQ_SNDTIMEO, &minus1, sizeof minus1) != 0 ||
            zmq_setsockopt(s, ZMQ_CONNECT_TIMEOUT, &connect_ms, sizeof connect_ms) != 0)
            return mt_fail(c, MT_EZMQ, "zmq_setsockopt: %s", zmq_strerror(errno));
        if (c->curve_keys[i] != NULL &&
            (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, c->curve_keys[i], 40) != 0 ||
             zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, public_key, 40) != 0 ||
             zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, secret_key, 40) != 0))
            return mt_fail(c, MT_EZMQ, "CURVE keys for '%s': %s", c->endpoints[i],
                           zmq_strerror(errno));
        mt_status st = mt_handshake_watch(c, i); /* (a refused key is silent otherwise) */
        if (st != MT_OK) return st;
        if (zmq_connect(s, c->endpoints[i]) != 0) { /* (an unknown transport: its form is
                                                     * checked, mt_endpoint_fault) */
            const char *why = zmq_strerror(errno);
            char *shown = mt_py_repr(c->endpoints[i]); /* (as Python's client quotes it) */
            st = shown == NULL ? mt_fail(c, MT_ENOMEM, "out of memory")
               : mt_fail(c, MT_EZMQ, "cannot connect to endpoint %s: %s", shown, why);
            free(shown);
            return st;
        }
    }
    return MT_OK;
}

mt_status mt_client_start(mt_client *c) {
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    if (c->started) return mt_fail(c, MT_ESTATE, "mt_client_start: the client is started already");
    free(c->rendezvous_used); /* (set again if the endpoints come from a rendezvous) */
    c->rendezvous_used = NULL;
    mt_env_warn_unknown(c); /* (a misspelt MELISSA_TRAINER_* name: once, on stderr) */
    mt_status st = check_fields(c);
    if (st == MT_OK) st = mt_resolve_config(c);
    mt_buf hello = {0};
    if (st == MT_OK) st = mt_encode_hello(c, &hello);
    if (st == MT_OK) st = mt_build_headers(c);
    if (st == MT_OK) st = mt_follow_setup(c);
    if (st == MT_OK) st = mt_init_sync(c);
    if (st == MT_OK) {
        c->steps_per_receiver = calloc(c->n_endpoints, sizeof *c->steps_per_receiver);
        if (c->steps_per_receiver == NULL) st = mt_fail(c, MT_ENOMEM, "out of memory");
    }
    if (st == MT_OK) st = mt_outbox_init(c);
    if (st == MT_OK) st = mt_connect_all(c);
    if (st == MT_OK) {
        c->started = true;
        double deadline = c->send_timeout < 0 ? -1.0 : mt_now() + c->send_timeout;
        for (size_t i = 0; i < c->n_endpoints && st == MT_OK; ++i) {
            st = mt_arm(c, c->sockets[i], deadline);
            while (st == MT_OK && zmq_send(c->sockets[i], hello.data, hello.len, 0) < 0) {
                if (errno == EINTR) continue;
                st = mt_send_fail(c, errno, "the HELLO");
            }
        }
    }
    free(hello.data);
    c->opened = mt_now(); /* (rerun.c: a rerun's first sign of life is due from here) */
    if (st == MT_OK) mt_admission_watch_start(c); /* (the HELLO left: asked while it runs) */
    if (st != MT_OK) {
        char *keep = c->error; /* (taken: mt_release_runtime may fail again) */
        c->error = NULL;
        mt_release_runtime(c, 0);
        mt_clear_error(c);
        c->error = keep;
        c->failed = false;
    }
    return st;
}
