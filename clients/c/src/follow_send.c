/* follow_send.c: the new transport of a follow (follow.c decides what to send): the old
 * sockets dropped, new ones to the restarted trainer's receivers, HELLO with its run id,
 * and the steps its checkpoint lacks sent again from the replay window (replay.c).
 *
 * Every message waits as a send does (send_wait.c: in slices; MT_ETIMEDOUT for a receiver
 * disconnected for the disconnected timeout with no newer run within the follow timeout;
 * a newer run published meanwhile is followed from there, c->followed changes, and that
 * follow sent all that was left here). Before, these sends had no bound: a restarted
 * trainer that died during the follow hung the solver. Not thread-safe: the client's
 * thread. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "follow.h"
#include "follow_send.h"
#include "serve.h" /* (mt_specs_free: the serve inputs of the run left) */

/* One message sent again (a try of mt_send_sliced, c->mu held): field f of a step, from a
 * copy of its row's bytes (the row is overwritten by later steps). */
typedef struct again {
    const mt_field *f;
    const uint8_t *data;
    void *sock;
} again;

static int send_again(mt_client *c, void *arg) {
    (void)c;
    const again *a = arg;
    const mt_field *f = a->f;
    size_t head = f->inline_ ? f->header_len : 0;
    int rc;
    if (!f->inline_) { /* (the high-water mark counts messages: the payload follows at once) */
        while ((rc = zmq_send(a->sock, f->header, f->header_len, ZMQ_SNDMORE)) < 0 &&
               errno == EINTR)
            continue;
        if (rc < 0) return errno; /* (EAGAIN: nothing sent, tried again) */
    }
    zmq_msg_t msg;
    if (zmq_msg_init_size(&msg, head + (size_t)f->nbytes) != 0) return errno;
    if (head) memcpy(zmq_msg_data(&msg), f->header, head);
    memcpy((uint8_t *)zmq_msg_data(&msg) + head, a->data, (size_t)f->nbytes);
    while ((rc = zmq_msg_send(&msg, a->sock, 0)) < 0 && errno == EINTR) continue;
    if (rc < 0) {
        int err = errno;
        zmq_msg_close(&msg);
        return err;
    }
    return 0;
}

/* Send step t again from its row; `open`: the open step, its fields sent so far only. Each
 * message waits as a send does (send_wait.c: in slices, not for a receiver gone for the
 * disconnected timeout, a newer run followed): MT_OK (sent, or c->followed changed: a
 * newer run was followed meanwhile, which sent all this follow meant to), else the
 * client failed. */
static mt_status resend(mt_client *c, uint64_t t, const uint8_t *row, double deadline,
                        bool open) {
    size_t index = mt_receiver_of(c->simulation_id, t, c->n_endpoints, c->routing);
    unsigned followed = c->followed;
    for (size_t i = 0; i < c->n_fields; ++i) {
        mt_field *f = &c->fields[i];
        if (f->count == 0 || (open && !f->sent)) continue;
        const uint8_t *data = row + f->replay_at;
        mt_put_u64(f->header + MT_TIME_STEP_AT, t);
        bool finite = mt_all_finite(f->dtype, data, f->count);
        f->header[MT_FLAGS_AT] = (uint8_t)((f->inline_ ? MT_FLAG_INLINE : 0) |
                                           (finite ? MT_FLAG_FINITE : 0));
        again a = {f, data, c->sockets[index]};
        mt_status st = mt_send_sliced(c, index, deadline, send_again, &a, &t);
        if (st != MT_OK || c->followed != followed) return st;
    }
    return MT_OK;
}

/* The HELLO to socket *arg (a try of mt_send_sliced). */
typedef struct hello_try {
    const mt_buf *hello;
    size_t index;
} hello_try;

static int send_hello(mt_client *c, void *arg) {
    const hello_try *h = arg;
    int rc;
    while ((rc = zmq_send(c->sockets[h->index], h->hello->data, h->hello->len, 0)) < 0 &&
           errno == EINTR)
        continue;
    return rc < 0 ? errno : 0;
}

mt_status mt_follow_reconnect(mt_client *c, mt_rendezvous *rv, uint64_t **counts,
                              const uint64_t *needed, size_t n_needed,
                              const mt_replay_entry *sorted, size_t n_sorted) {
    mt_transport_release(c, 0); /* (what it had queued is dropped: the window has it) */
    c->closing = false, c->flusher_err = 0;
    for (size_t i = 0; i < c->n_endpoints; ++i)
        free(c->endpoints[i]), free(c->curve_keys[i]), free(c->follows[i]);
    free(c->endpoints), free(c->curve_keys), free(c->follows), free(c->run_id);
    free(c->steps_per_receiver);
    c->endpoints = rv->endpoints, c->curve_keys = rv->keys, c->follows = rv->follows;
    c->run_id = rv->run_id, c->n_endpoints = rv->n;
    /* the requests' backoff was for the run left (a request that found only the new
     * run's serve files, serve.c restarted): the next one asks the followed run at once */
    c->retry_at = c->backoff = 0;
    /* (and the inputs it published: the new run's are its serve file's, read before a
     * request is checked against them; Python's PredictLink.join) */
    mt_specs_free(c->serve_inputs, c->n_serve_inputs);
    c->serve_inputs = NULL, c->n_serve_inputs = 0;
    c->receipts = true;
    for (size_t r = 0; r < rv->n; ++r)
        c->receipts = c->receipts && rv->receipts[r] && rv->follows[r] != NULL;
    rv->endpoints = rv->keys = rv->follows = NULL, rv->run_id = NULL; /* (moved) */
    mt_rendezvous_free(rv); /* (the rest: "routed_t_mod_w" is read at start only) */
    c->steps_per_receiver = *counts; /* (moved) */
    *counts = NULL;
    mt_status st = mt_outbox_init(c);
    if (st == MT_OK) st = mt_connect_all(c);
    mt_buf hello = {0};
    if (st == MT_OK) st = mt_encode_hello(c, &hello);
    double deadline = c->send_timeout < 0 ? -1.0 : mt_now() + c->send_timeout;
    /* (each send waits in slices, send_wait.c: a new trainer that dies meanwhile fails it
     * after the disconnected timeout, or a newer run published is followed from there:
     * c->followed changes, and that follow did everything left here) */
    unsigned followed = c->followed;
    for (size_t i = 0; st == MT_OK && c->followed == followed && i < c->n_endpoints; ++i) {
        hello_try h = {&hello, i};
        st = mt_send_sliced(c, i, deadline, send_hello, &h, NULL);
    }
    free(hello.data);
    for (size_t k = 0; st == MT_OK && c->followed == followed && k < n_needed; ++k)
        st = resend(c, needed[k], mt_replay_find(&c->replay, sorted, n_sorted, needed[k]),
                    deadline, false);
    if (c->step_open && c->followed == followed) { /* (a send that waited followed) */
        c->step_receiver = mt_receiver_of(c->simulation_id, c->step, c->n_endpoints, c->routing);
        c->step_batched = false, c->step_appended = false; /* (the batches were dropped) */
        const mt_replay *w = &c->replay;
        if (st == MT_OK)
            st = resend(c, c->step, w->data + w->open_row * w->row_bytes, deadline, true);
    }
    if (st != MT_OK) c->failed = true;
    return st;
}
