/* send.c: mt_send and mt_flush: the checks, the step rule, DATA (one frame, or two with
 * the payload sent without a copy) and the waits for the arrays ZeroMQ still reads; a
 * blocked send waits in slices (send_wait.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "finite_notice.h"
#include "follow.h"

/* Seconds between two reads of the sockets' handshake monitors by mt_send. */
#define HANDSHAKE_CHECK_S 0.05

/* ZeroMQ's I/O thread is done with a payload sent without a copy. */
static void released(void *data, void *hint) {
    (void)data;
    mt_client *c = hint;
    pthread_mutex_lock(&c->held_mu);
    if (--c->pending == 0) pthread_cond_broadcast(&c->held_cv);
    pthread_mutex_unlock(&c->held_mu);
}

/* ZeroMQ's I/O thread let go of a marked DATA (written to the connection, or dropped). */
static void mark_released(void *data, void *hint) {
    free(data);
    mt_client *c = hint;
    pthread_mutex_lock(&c->held_mu);
    --c->marks_flying;
    pthread_mutex_unlock(&c->held_mu);
}

static void shape_text(const mt_field *f, char *out, size_t size) {
    size_t used = (size_t)snprintf(out, size, "(");
    for (int d = 0; d < f->ndim && used < size; ++d)
        used += (size_t)snprintf(out + used, size - used, "%s%llu", d ? ", " : "",
                                 (unsigned long long)f->shape[d]);
    if (used < size) snprintf(out + used, size - used, f->ndim == 1 ? ",)" : ")");
}

static void missing_text(const mt_client *c, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < c->n_fields && used < size; ++i)
        if (!c->fields[i].sent && c->fields[i].count > 0)
            used += (size_t)snprintf(out + used, size - used, "%s'%s'", used ? ", " : "",
                                     c->fields[i].name);
}

static mt_status check_usable(mt_client *c, const char *fn) {
    if (!c->started) return mt_fail(c, MT_ESTATE, "%s before mt_client_start", fn);
    if (c->failed)
        return mt_fail(c, MT_ESTATE, "%s: the client failed earlier (a send timed out or ZeroMQ "
                                     "failed): only mt_client_abort may follow", fn);
    pthread_mutex_lock(&c->mu);
    int err = c->flusher_err;
    pthread_mutex_unlock(&c->mu);
    if (err != 0) return mt_send_fail(c, err, "a batch (from the flusher thread)");
    return MT_OK;
}

static int send_frame(void *sock, const void *p, size_t n, int flags) {
    int rc;
    while ((rc = zmq_send(sock, p, n, flags)) < 0 && errno == EINTR) continue;
    return rc < 0 ? errno : 0;
}

/* One DATA of field f (mu held). */
static int send_data(mt_client *c, mt_field *f, void *sock, const void *data) {
    mt_put_u64(f->header + MT_TIME_STEP_AT, c->step);
    /* FLAG_FINITE on a float part without NaN or Inf: the trainer need not check it */
    bool finite = mt_all_finite(f->dtype, data, f->count);
    if (!finite) mt_nonfinite_field_notice(c, f); /* (a float field: said once) */
    f->header[MT_FLAGS_AT] = (uint8_t)((f->inline_ ? MT_FLAG_INLINE : 0) |
                                       (finite ? MT_FLAG_FINITE : 0));
    if (f->inline_) {
        /* (the marks tracked, MT_MARK_EVERY's rule: a close's sign that the trainer takes
         * them, as the Python client's marks.py; the others ZeroMQ's own copies) */
        size_t len = f->header_len + f->nbytes;
        uint8_t *mark = c->held_init && mt_mark_due(&c->marks) ? malloc(len) : NULL;
        zmq_msg_t msg;
        if (mark != NULL) {
            pthread_mutex_lock(&c->held_mu);
            ++c->marks_flying;
            pthread_mutex_unlock(&c->held_mu);
            if (zmq_msg_init_data(&msg, mark, len, mark_released, c) != 0) {
                int err = errno;
                mark_released(mark, c);
                return err;
            }
        } else if (zmq_msg_init_size(&msg, len) != 0)
            return errno;
        memcpy(zmq_msg_data(&msg), f->header, f->header_len);
        memcpy((char *)zmq_msg_data(&msg) + f->header_len, data, f->nbytes);
        int rc;
        while ((rc = zmq_msg_send(&msg, sock, 0)) < 0 && errno == EINTR) continue;
        if (rc < 0) {
            int err = errno;
            zmq_msg_close(&msg); /* (a mark: calls mark_released) */
            return err;
        }
        /* (after the send: a retry after EAGAIN is a mark again) */
        mt_mark_sent(&c->marks, mark != NULL, len);
        return 0;
    }
    int err = send_frame(sock, f->header, f->header_len, ZMQ_SNDMORE);
    if (err) return err;
    /* The high-water mark counts whole messages: the payload frame is accepted at once. */
    zmq_msg_t msg;
    pthread_mutex_lock(&c->held_mu);
    ++c->pending;
    pthread_mutex_unlock(&c->held_mu);
    if (zmq_msg_init_data(&msg, (void *)(uintptr_t)data, f->nbytes, released, c) != 0) {
        err = errno;
        released(NULL, c);
        return err;
    }
    int rc;
    while ((rc = zmq_msg_send(&msg, sock, 0)) < 0 && errno == EINTR) continue;
    if (rc < 0) {
        err = errno;
        zmq_msg_close(&msg); /* calls released() */
        return err;
    }
    return 0;
}

/* One try of a batch: socket *arg's group (mt_send_sliced). */
static int send_group(mt_client *c, void *arg) {
    return mt_outbox_send(c, *(const size_t *)arg, 0);
}

/* One try of a field sent alone: the batches bound for its receiver first (a step after
 * a pause goes at once, unbatched, and records of earlier steps the flusher has not sent
 * yet, a busy machine, leave first: a socket's messages arrive in order, and so, then, do
 * this client's steps; the batch used to follow: 0, 2, 1 at the receiver). A try repeated
 * after the batches left finds none. */
typedef struct direct {
    mt_field *f;
    const void *data;
} direct;

static int send_direct(mt_client *c, void *arg) {
    const direct *d = arg;
    int err = 0;
    if (!c->step_batched && c->groups != NULL) err = mt_outbox_send(c, c->step_receiver, 0);
    return err ? err : send_data(c, d->f, c->sockets[c->step_receiver], d->data);
}

/* The open step has every field: count the step, send its receiver's batches if due.
 * Counted first: a restarted trainer followed while the batches wait sends the step
 * again from the window, with the others sent (follow.c). */
static mt_status complete_step(mt_client *c, double deadline) {
    pthread_mutex_lock(&c->mu);
    c->step_open = false;
    bool due = c->step_batched && mt_outbox_due(c, c->step_receiver, c->step_now);
    pthread_mutex_unlock(&c->mu);
    int added = mt_stepset_add(&c->steps, c->step);
    if (added < 0) return mt_fail(c, MT_ENOMEM, "out of memory (the set of time steps sent)");
    c->steps_per_receiver[c->step_receiver] += (uint64_t)added;
    if (!due) return MT_OK;
    size_t index = c->step_receiver;
    uint64_t step = c->step;
    return mt_send_sliced(c, index, deadline, send_group, &index, &step);
}

mt_status mt_send(mt_client *c, uint64_t time_step, const char *field, mt_dtype dtype,
                  const void *data, uint64_t count) {
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    mt_status st = check_usable(c, "mt_send");
    if (st != MT_OK) return st;
    if (c->watch.refused != NULL) /* (a receiver refused it: admission_watch.c) */
        return mt_fail(c, MT_ESIMREFUSED, "%s", c->watch.refused);
    mt_field *f = NULL;
    for (size_t i = 0; field != NULL && i < c->n_fields; ++i)
        if (strcmp(c->fields[i].name, field) == 0) f = &c->fields[i];
    if (f == NULL) {
        char names[512];
        size_t used = 0;
        names[0] = '\0';
        for (size_t i = 0; i < c->n_fields && used < sizeof names; ++i)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'", i ? ", " : "",
                                     c->fields[i].name);
        return mt_fail(c, MT_EFIELD, "field '%s' is not declared; the declared fields are [%s]",
                       field == NULL ? "(null)" : field, names);
    }
    if (dtype != f->dtype)
        return mt_fail(c, MT_EDTYPE, "field '%s' is declared %s, mt_send was given %s (convert "
                                     "the data to %s, dtype %s)", f->name,
                       mt_dtype_name(f->dtype), mt_dtype_name(dtype), mt_dtype_name(f->dtype),
                       mt_dtype_constant(f->dtype));
    if (count != f->count) {
        char shape[200];
        shape_text(f, shape, sizeof shape);
        return mt_fail(c, MT_ESHAPE, "field '%s': mt_send was given %llu elements, this rank's "
                                     "part has %llu (global shape %s)", f->name,
                       (unsigned long long)count, (unsigned long long)f->count, shape);
    }
    if (data == NULL && count > 0)
        return mt_fail(c, MT_EINVAL, "field '%s': data is NULL", f->name);
    if (c->step_open) {
        char missing[512];
        if (time_step != c->step) {
            missing_text(c, missing, sizeof missing);
            return mt_fail(c, MT_EFIELD, "time step %llu sent before time step %llu was "
                                         "complete: field(s) %s missing",
                           (unsigned long long)time_step, (unsigned long long)c->step, missing);
        }
        if (f->sent) {
            missing_text(c, missing, sizeof missing);
            return mt_fail(c, MT_EFIELD, "field '%s' sent twice for time step %llu, before "
                                         "field(s) %s", f->name, (unsigned long long)time_step,
                           missing);
        }
    }
    if (count == 0 && !c->step_open) {
        /* An empty part alone does not open a step (it would wait for the other fields
         * after this step's last one was sent), unless every part of this rank is empty:
         * the step is then complete at once, and counted for BYE, as the Python client. */
        bool any = false;
        for (size_t i = 0; i < c->n_fields; ++i) any = any || c->fields[i].count > 0;
        if (any) return MT_OK;
    }
    /* MT_REUSE_NEXT_SEND: the previous call's arrays are the caller's again now. */
    double deadline = c->send_timeout < 0 ? -1.0 : mt_now() + c->send_timeout;
    st = mt_wait_sent(c, deadline, &time_step);
    if (st != MT_OK) return st;
    if (!c->step_open) {
        /* a launched rerun: its receivers asked at the first send which steps they hold
         * (rerun.c); a step held is taken, not sent, and nothing else is done for it */
        if (!c->rerun_asked) mt_rerun_ask(c);
        double now = mt_now();
        bool skipped = c->rerun_held != NULL && mt_rerun_skips(c, time_step, now);
        /* a trainer restarted (a new run in the rendezvous): followed before this step
         * (follow.c; a clock read unless a second has passed) */
        if (!skipped && c->replay.max_bytes > 0 && now >= c->follow_due) {
            st = mt_follow_poll(c, false);
            if (st != MT_OK) return st;
        }
        /* A receiver that refused the handshake gets nothing: say so now, not after a run
         * queued into the void (or blocked for ever once its queue is full). Its monitor
         * is read at most every HANDSHAKE_CHECK_S (a read per step doubled the CPU time
         * of a 1 KB send: benchmarks/c_client.py). */
        if (!skipped && now - c->handshake_checked >= HANDSHAKE_CHECK_S) {
            c->handshake_checked = now;
            for (size_t i = 0; i < c->n_endpoints; ++i)
                if (mt_handshake_check(c, i) != MT_OK) {
                    c->failed = true;
                    return MT_EENV;
                }
        }
        /* a trainer that stopped for good: said now, not once the queue is full (its
         * stop record, while a receiver is down, once a slice at most: send_wait.c) */
        if (!skipped && now >= c->stop_look_due &&
            (st = mt_send_stop_look(c, &time_step, now)) != MT_OK)
            return st;
        /* was it taken: one non-blocking step of the question, when due */
        if (!skipped && c->watch.active && now >= c->watch.due &&
            (st = mt_admission_watch_poll(c, now)) != MT_OK)
            return st;
        c->step = time_step;
        c->step_missing = 0;
        for (size_t i = 0; i < c->n_fields; ++i) {
            c->fields[i].sent = false;
            c->step_missing += c->fields[i].count > 0;
        }
        /* As the Python client: sends further apart than batch_delay are not batched. */
        c->step_batched = !skipped && c->batch_bytes > 0 && now - c->last_send < c->batch_delay;
        c->step_skipped = skipped;
        c->step_now = now;
        if (!skipped) c->last_send = now;
        pthread_mutex_lock(&c->mu); /* (the flusher reads these three) */
        c->step_open = true;
        c->step_receiver = mt_receiver_of(c->simulation_id, time_step, c->n_endpoints, c->routing);
        c->step_appended = false;
        pthread_mutex_unlock(&c->mu);
    }
    f->sent = true;
    if (count > 0 && c->step_skipped) {
        --c->step_missing; /* (held by its receiver: not sent, nor kept for a follow) */
    } else if (count > 0) {
        /* (a copy, for a trainer restarted: follow.c; before the send, so that a follow
         * while it waits sends this part again) */
        if (c->replay.max_bytes > 0)
            mt_replay_put(&c->replay, time_step, f->replay_at, data, (size_t)f->nbytes);
        if (c->step_batched && f->batchable) {
            pthread_mutex_lock(&c->mu);
            st = mt_outbox_append(c, (size_t)(f - c->fields), data);
            c->step_appended = true;
            pthread_mutex_unlock(&c->mu);
            if (st != MT_OK) {
                c->failed = true;
                return st;
            }
        } else {
            direct d = {f, data};
            st = mt_send_sliced(c, c->step_receiver, deadline, send_direct, &d, &time_step);
            if (st != MT_OK) return st;
        }
        --c->step_missing;
        if (c->reuse == MT_REUSE_IMMEDIATE && !f->inline_) {
            st = mt_wait_sent(c, deadline, &time_step);
            if (st != MT_OK) return st;
        }
    }
    if (c->step_missing == 0) return complete_step(c, deadline);
    return MT_OK;
}

mt_status mt_flush(mt_client *c) {
    if (c == NULL) return MT_EINVAL;
    mt_clear_error(c);
    mt_status st = check_usable(c, "mt_flush");
    if (st != MT_OK) return st;
    /* the stop records first, as a send that opens a step (send_wait.c): each flush (a
     * solver's last call may be a flush into a queue with room after its trainer ended
     * for good; Python's Transport.flush looks too), "any messages still queued at this
     * flush" its words */
    double now = mt_now();
    if (c->stop_look_due > now) c->stop_look_due = now;
    if ((st = mt_send_stop_look(c, NULL, now)) != MT_OK) return st;
    double deadline = c->send_timeout < 0 ? -1.0 : now + c->send_timeout;
    unsigned followed = c->followed;
    for (size_t i = 0; i < c->n_endpoints && st == MT_OK; ++i) {
        st = mt_send_sliced(c, i, deadline, send_group, &i, NULL);
        if (c->followed != followed) break; /* (the follow sent it all again) */
    }
    if (st == MT_OK) st = mt_wait_sent(c, deadline, NULL);
    return st;
}
