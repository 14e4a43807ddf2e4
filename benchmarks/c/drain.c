/*
 * drain.c: the reader of benchmarks/c/send_bench.c, in a process of its own, so that the
 * sender is never held back by a slow reader (a Python reader takes microseconds per
 * message, more than a C sender needs to send one).
 *
 * It binds three sockets on 127.0.0.1, ports chosen by the system, and prints their
 * endpoints as one JSON line on stdout:
 *     {"ours": "tcp://127.0.0.1:P1", "raw": "tcp://127.0.0.1:P2", "control": "..."}
 * "ours" and "raw" are PULL sockets (ZMQ_RCVHWM = argv[1]) that it reads as fast as it
 * can and discards, counting the protocol's records (docs/protocol.md): a DATA message is
 * one record, a BATCH frame R records, HELLO and BYE none. A frame that is not a protocol
 * message is an error (exit 1): the benchmark would measure something other than it says.
 * "control" is a REP socket: the request "ours K" (or "raw K") is answered "ok N" once
 * that socket has counted N >= K records in all, so that the sender can stop its clock
 * when what it sent has arrived, not merely been queued; "quit" is answered, then the
 * drainer exits 0.
 *
 *     drain RCVHWM
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

enum { OURS = 0, RAW = 1, DATA_SOCKETS = 2 };

static const char *const NAMES[DATA_SOCKETS] = {"ours", "raw"};

/* What the drainer holds: its sockets, the records counted, the request waiting. */
typedef struct drainer {
    void *data[DATA_SOCKETS];
    void *control;
    uint64_t records[DATA_SOCKETS];
    int waiting;      /* -1: no request waiting, else the socket it is about */
    uint64_t wanted;  /* the request's K */
} drainer;

static void die_zmq(const char *what) {
    fprintf(stderr, "drain: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static uint64_t load_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

/* The records of one protocol frame (not a two-frame DATA's payload); sets *payload_follows
 * when it is the header of a two-frame DATA. Exits on a frame that is not protocol. */
static uint64_t frame_records(const unsigned char *f, size_t size, int *payload_follows) {
    *payload_follows = 0;
    if (size < 16 || memcmp(f, "MTRN", 4) != 0 || f[4] != 2) {
        fprintf(stderr, "drain: a frame of %zu bytes is not a protocol v2 message\n", size);
        exit(1);
    }
    switch (f[5]) {
    case 2: /* DATA: bit 0 of the flags is INLINE */
        *payload_follows = !(f[6] & 1);
        return 1;
    case 5: /* BATCH: R at offset 16 */
        if (size < 24) {
            fprintf(stderr, "drain: a BATCH frame of %zu bytes\n", size);
            exit(1);
        }
        return load_u64(f + 16);
    default: /* HELLO, BYE */
        return 0;
    }
}

/* Read every message socket `which` holds now; returns when it would block. */
static void drain_socket(drainer *d, int which) {
    zmq_msg_t msg;
    if (zmq_msg_init(&msg) != 0) die_zmq("zmq_msg_init");
    int payload_follows = 0;
    for (;;) {
        /* wait for a payload frame: ZeroMQ delivers a message whole, so it is there */
        int flags = payload_follows ? 0 : ZMQ_DONTWAIT;
        if (zmq_msg_recv(&msg, d->data[which], flags) < 0) {
            if (zmq_errno() == EAGAIN) break;
            if (zmq_errno() == EINTR) continue;
            die_zmq("zmq_msg_recv");
        }
        int more = zmq_msg_more(&msg);
        if (payload_follows) {
            payload_follows = 0;
        } else {
            d->records[which] +=
                frame_records(zmq_msg_data(&msg), zmq_msg_size(&msg), &payload_follows);
            if (payload_follows && !more) {
                fprintf(stderr, "drain: a two-frame DATA without its payload frame\n");
                exit(1);
            }
        }
    }
    zmq_msg_close(&msg);
}

static void reply(void *control, const char *text) {
    if (zmq_send(control, text, strlen(text), 0) < 0) die_zmq("zmq_send(control)");
}

/* Read the control request; returns 0 on "quit" (answered), 1 otherwise. */
static int take_request(drainer *d) {
    char text[64];
    int n = zmq_recv(d->control, text, sizeof text - 1, 0);
    if (n < 0) die_zmq("zmq_recv(control)");
    text[n < (int)sizeof text - 1 ? n : (int)sizeof text - 1] = '\0';
    if (strcmp(text, "quit") == 0) {
        reply(d->control, "bye");
        return 0;
    }
    char name[8];
    uint64_t wanted;
    if (sscanf(text, "%7s %" SCNu64, name, &wanted) != 2) {
        fprintf(stderr, "drain: bad control request '%s'\n", text);
        exit(1);
    }
    d->waiting = strcmp(name, "ours") == 0 ? OURS : strcmp(name, "raw") == 0 ? RAW : -1;
    if (d->waiting < 0) {
        fprintf(stderr, "drain: bad control request '%s'\n", text);
        exit(1);
    }
    d->wanted = wanted;
    return 1;
}

static void *bound(void *ctx, int type, int rcvhwm, char *endpoint, size_t size) {
    void *s = zmq_socket(ctx, type);
    if (s == NULL) die_zmq("zmq_socket");
    int zero = 0;
    if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0) die_zmq("ZMQ_LINGER");
    if (rcvhwm > 0 && zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm) != 0)
        die_zmq("ZMQ_RCVHWM");
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0) die_zmq("zmq_bind");
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, endpoint, &size) != 0)
        die_zmq("ZMQ_LAST_ENDPOINT");
    return s;
}

int main(int argc, char **argv) {
    char *end = NULL;
    long rcvhwm = argc == 2 ? strtol(argv[1], &end, 10) : -1;
    if (argc != 2 || *end != '\0' || rcvhwm < 1 || rcvhwm > 1000000) {
        fprintf(stderr, "usage: drain RCVHWM (1 to 1000000)\n");
        return 2;
    }
    void *ctx = zmq_ctx_new();
    if (ctx == NULL) die_zmq("zmq_ctx_new");
    drainer d = {.waiting = -1};
    char endpoints[3][256];
    for (int i = 0; i < DATA_SOCKETS; ++i)
        d.data[i] = bound(ctx, ZMQ_PULL, (int)rcvhwm, endpoints[i], sizeof endpoints[i]);
    d.control = bound(ctx, ZMQ_REP, 0, endpoints[2], sizeof endpoints[2]);
    printf("{\"ours\": \"%s\", \"raw\": \"%s\", \"control\": \"%s\"}\n", endpoints[0],
           endpoints[1], endpoints[2]);
    fflush(stdout);

    zmq_pollitem_t items[3] = {
        {d.data[OURS], 0, ZMQ_POLLIN, 0},
        {d.data[RAW], 0, ZMQ_POLLIN, 0},
        {d.control, 0, ZMQ_POLLIN, 0},
    };
    for (;;) {
        if (zmq_poll(items, 3, -1) < 0) {
            if (zmq_errno() == EINTR) continue;
            die_zmq("zmq_poll");
        }
        for (int i = 0; i < DATA_SOCKETS; ++i)
            if (items[i].revents & ZMQ_POLLIN) drain_socket(&d, i);
        /* a REP socket takes no new request before the last one is answered */
        if (d.waiting < 0 && (items[2].revents & ZMQ_POLLIN) && !take_request(&d)) break;
        if (d.waiting >= 0 && d.records[d.waiting] >= d.wanted) {
            char text[64];
            snprintf(text, sizeof text, "ok %" PRIu64, d.records[d.waiting]);
            reply(d.control, text);
            d.waiting = -1;
        }
    }
    for (int i = 0; i < DATA_SOCKETS; ++i) {
        fprintf(stderr, "drain: %s: %" PRIu64 " records\n", NAMES[i], d.records[i]);
        zmq_close(d.data[i]);
    }
    zmq_close(d.control);
    zmq_ctx_term(ctx);
    return 0;
}
