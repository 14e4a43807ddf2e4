/* outbox.c: small payloads coalesced into BATCH messages, as the Python client's
 * melissa_trainer/client/outbox.py: one batch per (receiver, field); the batches bound
 * for one receiver leave together, as the frames of one ZeroMQ message, when one holds
 * batch_bytes, when the oldest record is batch_delay old (checked when a step completes,
 * and by the flusher thread), or on mt_flush / close. Every use of the sockets and the
 * groups is under c->mu. Also the set of time steps sent (for BYE). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "finite_notice.h"

/* A batch's last frame let go of by ZeroMQ (written to the connection, or dropped). */
static void batch_released(void *data, void *hint) {
    free(data);
    mt_client *c = hint;
    pthread_mutex_lock(&c->held_mu);
    --c->batches_flying;
    pthread_mutex_unlock(&c->held_mu);
}

/* Send `len` bytes of `buf` as the last frame of a message, a copy ZeroMQ holds without
 * one more (zmq_send's copy costs the same), counted in c->batches_flying until ZeroMQ
 * lets go of it: what a close sees leave (close_wait.c `progress`; outbox.py
 * in_flight). -1 and errno as zmq_send. */
static int send_tracked(mt_client *c, void *sock, const uint8_t *buf, size_t len, int flags) {
    void *copy = c->held_init ? malloc(len ? len : 1) : NULL;
    if (copy == NULL) return zmq_send(sock, buf, len, flags); /* (untracked, not lost) */
    memcpy(copy, buf, len);
    pthread_mutex_lock(&c->held_mu);
    ++c->batches_flying;
    pthread_mutex_unlock(&c->held_mu);
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, copy, len, batch_released, c) != 0) {
        int err = errno;
        batch_released(copy, c);
        errno = err;
        return -1;
    }
    int rc = zmq_msg_send(&msg, sock, flags);
    if (rc < 0) {
        int err = errno;
        zmq_msg_close(&msg); /* (calls batch_released) */
        errno = err;
    }
    return rc;
}

mt_status mt_outbox_init(mt_client *c) {
    if (c->batch_bytes == 0) return MT_OK;
    c->groups = calloc(c->n_endpoints, sizeof *c->groups);
    if (c->groups == NULL) return mt_fail(c, MT_ENOMEM, "out of memory (batches)");
    for (size_t i = 0; i < c->n_endpoints; ++i) {
        c->groups[i].batches = calloc(c->n_fields, sizeof *c->groups[i].batches);
        if (c->groups[i].batches == NULL) return mt_fail(c, MT_ENOMEM, "out of memory (batches)");
    }
    return MT_OK;
}

void mt_outbox_free(mt_client *c) {
    for (size_t i = 0; c->groups != NULL && i < c->n_endpoints; ++i) {
        for (size_t k = 0; c->groups[i].batches != NULL && k < c->n_fields; ++k)
            free(c->groups[i].batches[k].buf);
        free(c->groups[i].batches);
    }
    free(c->groups);
    c->groups = NULL;
}

mt_status mt_outbox_append(mt_client *c, size_t field, const void *data) {
    mt_group *g = &c->groups[c->step_receiver];
    mt_batch *b = &g->batches[field];
    const mt_field *f = &c->fields[field];
    size_t need = 8 + (size_t)f->nbytes;
    if (b->buf == NULL || b->len + need > b->cap) {
        size_t cap = b->cap ? b->cap : f->header_len + c->batch_bytes + need;
        while (cap < (b->buf ? b->len : f->header_len) + need) cap *= 2;
        uint8_t *grown = realloc(b->buf, cap);
        if (grown == NULL) return mt_fail(c, MT_ENOMEM, "out of memory (batch of '%s')", f->name);
        if (b->buf == NULL) { /* the BATCH header: the DATA header, kind 5, flags 0 */
            memcpy(grown, f->header, f->header_len);
            grown[MT_KIND_AT] = MT_KIND_BATCH;
            mt_put_u16(grown + MT_FLAGS_AT, 0);
            b->len = b->header_len = f->header_len;
        }
        b->buf = grown;
        b->cap = cap;
    }
    /* the batch carries FLAG_FINITE if every record is finite (checked as it comes) */
    bool finite = mt_all_finite(f->dtype, data, f->count);
    if (!finite) mt_nonfinite_field_notice(c, f); /* (a float field: said once) */
    b->finite = (b->records == 0 || b->finite) && finite;
    mt_put_u64(b->buf + b->len, c->step);
    memcpy(b->buf + b->len + 8, data, f->nbytes);
    b->len += need;
    ++b->records;
    if (b->len >= c->batch_bytes) g->full = true;
    if (g->born == 0) g->born = c->step_now;
    return mt_outbox_start_flusher(c);
}

bool mt_outbox_due(const mt_client *c, size_t index, double now) {
    const mt_group *g = &c->groups[index];
    return g->full || (g->born != 0 && now - g->born >= c->batch_delay);
}

int mt_outbox_send(mt_client *c, size_t index, int flags) {
    if (c->groups == NULL) return 0;
    mt_group *g = &c->groups[index];
    size_t last = c->n_fields;
    for (size_t k = 0; k < c->n_fields; ++k)
        if (g->batches[k].records) last = k;
    if (last == c->n_fields) return 0;
    bool first = true;
    for (size_t k = 0; k <= last; ++k) {
        mt_batch *b = &g->batches[k];
        if (!b->records) continue;
        mt_put_u64(b->buf + MT_TIME_STEP_AT, b->records);
        b->buf[MT_FLAGS_AT] = b->finite ? MT_FLAG_FINITE : 0;
        int more = k < last ? ZMQ_SNDMORE : 0;
        int rc;
        /* Once the first frame is queued, the others are accepted at once (the
         * high-water mark counts whole messages), so EAGAIN can only mean nothing was sent. */
        while ((rc = more ? zmq_send(c->sockets[index], b->buf, b->len, flags | more)
                          : send_tracked(c, c->sockets[index], b->buf, b->len, flags)) < 0 &&
               errno == EINTR)
            continue;
        if (rc < 0) return first || errno != EAGAIN ? errno : EIO;
        first = false;
    }
    for (size_t k = 0; k < c->n_fields; ++k) {
        g->batches[k].len = g->batches[k].header_len;
        g->batches[k].records = 0;
    }
    g->born = 0;
    g->full = false;
    return 0;
}

/* The flusher thread: sends groups older than batch_delay, never blocking on a socket. */
static void *flusher(void *arg) {
    mt_client *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        double now = mt_now();
        for (size_t i = 0; i < c->n_endpoints; ++i) {
            /* (the open step's records leave with it, when it completes) */
            if (c->step_open && c->step_appended && c->step_receiver == i) continue;
            if (!mt_outbox_due(c, i, now)) continue;
            int err = mt_outbox_send(c, i, ZMQ_DONTWAIT);
            if (err != 0 && err != EAGAIN && c->flusher_err == 0) c->flusher_err = err;
        }
        mt_cond_wait_until(&c->wake, &c->mu, mt_now() + c->batch_delay / 2);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

mt_status mt_outbox_start_flusher(mt_client *c) {
    if (c->flusher_running) return MT_OK;
    int rc = pthread_create(&c->flusher, NULL, flusher, c);
    if (rc != 0) return mt_fail(c, MT_ENOMEM, "cannot start the batch flusher thread");
    c->flusher_running = true;
    return MT_OK;
}

void mt_outbox_stop_flusher(mt_client *c) {
    if (!c->flusher_running) return;
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->flusher, NULL);
    c->flusher_running = false;
}

/* -- the set of time steps sent -------------------------------------------------------- */

static size_t slot_of(uint64_t v, size_t cap) {
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    return (size_t)(v & (cap - 1));
}

static bool hash_contains(const mt_stepset *s, uint64_t v) {
    if (s->count == 0) return false;
    for (size_t j = slot_of(v, s->cap); s->used[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == v) return true;
    return false;
}

static int hash_add(mt_stepset *s, uint64_t v);

int mt_stepset_add(mt_stepset *s, uint64_t v) {
    if (s->run_count == 0) {
        s->first = s->last = v;
        s->stride = 0;
        s->run_count = 1;
        return 1;
    }
    if (v > s->last && (s->stride == 0 || v - s->last == s->stride)) { /* extends the run */
        if (hash_contains(s, v)) return 0;
        if (s->stride == 0) s->stride = v - s->last;
        s->last = v;
        ++s->run_count;
        return 1;
    }
    if (v >= s->first && v <= s->last && (v - s->first) % (s->stride ? s->stride : 1) == 0)
        return 0; /* in the run */
    return hash_add(s, v);
}

static int hash_add(mt_stepset *s, uint64_t v) {
    if (2 * (s->count + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *slots = malloc(cap * sizeof *slots);
        unsigned char *used = calloc(cap, 1);
        if (slots == NULL || used == NULL) {
            free(slots);
            free(used);
            return -1;
        }
        for (size_t i = 0; i < s->cap; ++i) {
            if (!s->used[i]) continue;
            size_t j = slot_of(s->slots[i], cap);
            while (used[j]) j = (j + 1) & (cap - 1);
            used[j] = 1;
            slots[j] = s->slots[i];
        }
        free(s->slots);
        free(s->used);
        s->slots = slots;
        s->used = used;
        s->cap = cap;
    }
    size_t j = slot_of(v, s->cap);
    while (s->used[j]) {
        if (s->slots[j] == v) return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->used[j] = 1;
    s->slots[j] = v;
    ++s->count;
    return 1;
}

void mt_stepset_free(mt_stepset *s) {
    free(s->slots);
    free(s->used);
    s->slots = NULL;
    s->used = NULL;
    s->cap = s->count = 0;
    s->run_count = 0;
}

static void span_add(uint64_t t, bool *any, uint64_t *first, uint64_t *last) {
    if (!*any || t < *first) *first = t;
    if (!*any || t > *last) *last = t;
    *any = true;
}

bool mt_stepset_span(const mt_stepset *s, uint64_t simulation_id, size_t rank, size_t world,
                     bool routing, uint64_t *first, uint64_t *last) {
    bool any = false;
    for (uint64_t k = 0; k < s->run_count; ++k) { /* (the run: its steps of `rank`) */
        uint64_t t = s->first + k * s->stride;
        if (world <= 1 || mt_receiver_of(simulation_id, t, world, routing) == rank)
            span_add(t, &any, first, last);
    }
    for (size_t i = 0; i < s->cap; ++i) /* (the steps off the run) */
        if (s->used[i] &&
            (world <= 1 || mt_receiver_of(simulation_id, s->slots[i], world, routing) == rank))
            span_add(s->slots[i], &any, first, last);
    return any;
}
