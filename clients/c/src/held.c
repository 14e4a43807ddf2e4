/* held.c: HELD_QUERY and HELD (docs/protocol.md, section 17): which of this simulation's
 * time steps the checkpoint a resumed trainer loaded holds, asked of each receiver on its
 * follow socket (melissa_trainer/client/follow.py Follower.held, wire/held.py). A
 * malformed reply is counted and ignored; no valid one within the timeout (30 s, as the
 * Python client's QUERY_TIMEOUT) is MT_ETIMEDOUT. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "follow.h"

#define KIND_HELD_QUERY 9
#define KIND_HELD 10
#define HELD_HEAD 44u /* the prefix, request id, rank, world, status, 0, 0 (u16), bits */
#define MAX_HELD_BITS ((uint64_t)1 << 30)

void mt_held_query(uint8_t out[24], uint64_t simulation_id, uint64_t request_id) {
    mt_put_prefix(out, KIND_HELD_QUERY, 0, simulation_id);
    mt_put_u64(out + 16, request_id);
}

const char *mt_held_parse(const uint8_t *f, size_t len, uint64_t simulation_id,
                          uint64_t request_id, uint32_t rank, uint32_t world, mt_held *out) {
    /* As strict as wire/held.py decode_held, and on the length: the bit array is exact. */
    if (len < MT_PREFIX_BYTES) return "truncated";
    if (memcmp(f, "MTRN", 4) != 0) return "bad_magic";
    if (f[4] != MT_PROTOCOL_VERSION) return "bad_version";
    if (f[5] != KIND_HELD) return "bad_kind";
    if (len < HELD_HEAD) return "truncated";
    if (mt_get_u64(f + 8) != simulation_id || mt_get_u64(f + 16) != request_id)
        return "bad_request_id"; /* (a reply to another query) */
    int status = f[32];
    uint64_t bits = mt_get_u64(f + 36);
    if (status > MT_HELD_ABANDONED || f[33] != 0 || f[34] != 0 || f[35] != 0) return "bad_request";
    uint32_t got_rank = mt_get_u32(f + 24), got_world = mt_get_u32(f + 28);
    if (got_rank >= got_world || got_rank != rank || got_world != world) return "bad_rank";
    if (bits > MAX_HELD_BITS || (status != MT_HELD_STEPS && bits != 0)) return "bad_size";
    size_t bytes = (size_t)((bits + 7) / 8);
    if (len != HELD_HEAD + bytes) return "bad_size";
    uint8_t *map = NULL;
    if (bytes > 0) {
        map = malloc(bytes);
        if (map == NULL) return "no_memory";
        memcpy(map, f + HELD_HEAD, bytes);
    }
    *out = (mt_held){status, got_rank, got_world, bits, map};
    return NULL;
}

bool mt_held_holds(const mt_held *h, uint64_t step, uint64_t simulation_id, bool routing) {
    if (h->status == MT_HELD_FINISHED) return true;
    if (h->status != MT_HELD_STEPS || h->world == 0) return false;
    if (mt_receiver_of(simulation_id, step, h->world, routing) != h->rank) return false;
    uint64_t i = step / h->world;
    return i < h->bits && ((h->map[i >> 3] >> (i & 7)) & 1u) != 0;
}

void mt_held_free(mt_held *h) {
    free(h->map);
    memset(h, 0, sizeof *h);
}

static void nap(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* One whole message on `s` (readable): its first frame in *msg (initialised here; the
 * caller closes it), its frames counted; 0 or the errno. */
static int receive(void *s, zmq_msg_t *msg, int *frames) {
    zmq_msg_init(msg);
    *frames = 0;
    for (;;) {
        zmq_msg_t part;
        zmq_msg_t *into = msg;
        if (*frames > 0) {
            zmq_msg_init(&part);
            into = &part;
        }
        int n;
        while ((n = zmq_msg_recv(into, s, 0)) < 0 && errno == EINTR) continue;
        int err = n < 0 ? errno : 0;
        int more = err ? 0 : zmq_msg_more(into); /* (read before the part is closed) */
        if (into == &part) zmq_msg_close(&part);
        if (err) return err;
        ++*frames;
        if (!more) return 0;
    }
}

#define LOOK_EVERY 0.1 /* s between two looks at the rendezvous (follow.py SUPERSEDE_INTERVAL) */

/* Whether a newer run than rv's was published (*newer filled); never without `newer`. */
static bool superseded(mt_client *c, const mt_rendezvous *rv, mt_rendezvous *newer) {
    return newer != NULL && mt_follow_newer(c, rv, newer);
}

/* Receiver r's HELD into *out: 1, 0 at the deadline (bad: malformed ones), or -1 when a
 * newer run than rv's superseded it (*newer filled). */
static int ask(mt_client *c, void *s, uint32_t r, const mt_rendezvous *rv, double deadline,
               unsigned *bad, const char **bad_last, mt_held *out, mt_rendezvous *newer) {
    uint32_t n = (uint32_t)rv->n;
    static uint64_t request_ids; /* (the client's thread; one query at a time) */
    uint8_t query[24];
    uint64_t id = ++request_ids;
    mt_held_query(query, c->simulation_id, id);
    double pause = 0.01;
    while (zmq_send(s, query, sizeof query, ZMQ_DONTWAIT) < 0) { /* (not connected yet) */
        if (mt_now() >= deadline) return 0;
        if (superseded(c, rv, newer)) return -1;
        nap(pause < deadline - mt_now() ? pause : deadline - mt_now());
        pause = pause * 2 < LOOK_EVERY ? pause * 2 : LOOK_EVERY;
    }
    for (;;) {
        double left = deadline - mt_now();
        zmq_pollitem_t item = {s, 0, ZMQ_POLLIN, 0};
        int ready = left > 0 ? zmq_poll(&item, 1, mt_ms(left < LOOK_EVERY ? left : LOOK_EVERY) + 1)
                             : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0 && left > 0) {
            if (superseded(c, rv, newer)) return -1;
            continue;
        }
        if (ready <= 0) return 0;
        zmq_msg_t msg;
        int frames = 0;
        int err = receive(s, &msg, &frames);
        const char *why = err ? "receive" : frames != 1 ? "unexpected_frame"
                          : mt_held_parse(zmq_msg_data(&msg), zmq_msg_size(&msg),
                                          c->simulation_id, id, r, n, out);
        zmq_msg_close(&msg);
        if (why == NULL) return 1;
        ++*bad; /* counted and ignored */
        *bad_last = why;
    }
}

mt_status mt_held_ask(mt_client *c, const mt_rendezvous *rv, double timeout, mt_held *held,
                      mt_rendezvous *newer) {
    for (size_t r = 0; r < rv->n; ++r)
        if (rv->follows[r] == NULL)
            return mt_fail(c, MT_ETIMEDOUT, "the restarted trainer's receiver %zu (%s) names no "
                                            "follow socket (a trainer without it cannot be "
                                            "followed)", r, rv->endpoints[r]);
    void *ctx = zmq_ctx_new();
    if (ctx == NULL) return mt_fail(c, MT_EZMQ, "zmq_ctx_new: %s", zmq_strerror(errno));
    mt_status st = MT_OK;
    unsigned bad = 0;
    const char *bad_last = "";
    for (size_t r = 0; r < rv->n && st == MT_OK; ++r) {
        void *s = mt_follow_dial(ctx, rv->follows[r], rv->keys[r], NULL, NULL,
                                 c->disconnected_timeout);
        if (s == NULL) {
            st = mt_fail(c, MT_EZMQ, "cannot ask the restarted trainer's receiver %zu (follow "
                                     "socket %s): %s", r, rv->follows[r], zmq_strerror(errno));
            break;
        }
        int got = ask(c, s, (uint32_t)r, rv, mt_now() + timeout, &bad, &bad_last, &held[r],
                      newer);
        if (got < 0) { /* (superseded: the answers so far were the dead run's) */
            for (size_t k = 0; k < r; ++k) mt_held_free(&held[k]);
            zmq_close(s);
            break;
        }
        if (got == 0) {
            char t[32], ignored[96] = "";
            mt_format_double(timeout, t);
            if (bad > 0)
                snprintf(ignored, sizeof ignored, "; malformed replies ignored: %u, the last %s",
                         bad, bad_last);
            st = mt_fail(c, MT_ETIMEDOUT, "the restarted trainer's receiver %zu did not say "
                                          "which steps it holds within %s s (%s%s)",
                         r, t, rv->follows[r], ignored);
        }
        zmq_close(s);
    }
    while (zmq_ctx_term(ctx) != 0 && errno == EINTR) continue;
    return st;
}
