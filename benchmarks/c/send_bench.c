/*
 * send_bench.c: the CPU time of one send through the C client (mt_send) against a plain
 * libzmq zmq_send of the same bytes, in one process, interleaved in rounds.
 *
 *     send_bench OURS RAW CONTROL NBYTES SENDS ROUNDS HWM BATCH_BYTES REUSE
 *
 * OURS, RAW, CONTROL: the endpoints benchmarks/c/drain.c prints. NBYTES: the payload
 * (a 1-d float32 field "u" of NBYTES / 4 elements). SENDS: sends per arm and round.
 * HWM: ZMQ_SNDHWM of both arms. BATCH_BYTES: mt_set_batching's bytes (0: no batching;
 * the delay stays the default 0.02 s). REUSE: "immediate" or "next_send"
 * (mt_set_reuse; it matters above 64 KiB only).
 *
 * Each round runs two arms, ours then raw (A B A B ...), after one warm-up round of each:
 * - ours: SENDS calls of mt_send(c, t, "u", MT_FLOAT32, u, NBYTES / 4), t = 0, 1, 2 ...
 *   over the whole run (a client with one receiver: HELLO went at start), then mt_flush;
 * - raw: SENDS calls of zmq_send(push, message, H + NBYTES, 0) on a PUSH socket of its
 *   own context, with the client's options (ZMQ_SNDHWM = HWM, ZMQ_LINGER), `message`
 *   being the one-frame DATA message of that field (docs/protocol.md, section 7): the
 *   bytes the client sends for one step when it sends one DATA, one frame.
 * An arm ends when the drainer has counted all its records (a control request), so
 * that the work of libzmq's I/O thread on them falls inside the arm that made it.
 *
 * What is measured, for each arm: the process CPU time (CLOCK_PROCESS_CPUTIME_ID, all
 * threads: the calling thread, the client's flusher thread, each context's libzmq I/O
 * thread, which writes the bytes to the kernel), the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) and the wall time. The process CPU time is "the client's own
 * CPU time": the C client delegates work to its flusher thread and to libzmq's I/O
 * thread, as plain zmq_send delegates to the I/O thread, so only the sum over the
 * process compares like with like (the other context's I/O thread sleeps meanwhile).
 * The calling thread's time is what the simulation's own thread pays.
 *
 * Output: one JSON line per arm and round (warm-up excluded), then {"done": true}:
 *   {"arm": "ours", "round": 0, "sends": 200000, "process_cpu_s": 0.41,
 *    "thread_cpu_s": 0.30, "wall_s": 0.52}
 * Exits 1 with a message on stderr when anything fails, the drainer's answer not coming
 * within 120 s included.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "melissa_trainer.h"

/* The run's settings (argv), its sockets and its client. */
typedef struct bench {
    const char *ours_endpoint, *raw_endpoint, *control_endpoint;
    uint64_t nbytes, sends, rounds;
    int hwm;
    size_t batch_bytes;
    mt_reuse reuse;
    mt_client *client;
    void *raw_ctx, *raw;
    void *control_ctx, *control;
    float *field;            /* the payload of ours */
    unsigned char *message;  /* the DATA message of raw: header, then the same payload */
    size_t message_bytes;
    uint64_t step;           /* ours: the next time step */
    uint64_t ours_records, raw_records; /* sent so far, what the drainer should count */
} bench;

typedef struct stamp {
    double process, thread, wall;
} stamp;

static void fail(const char *what, const char *why) {
    fprintf(stderr, "send_bench: %s: %s\n", what, why);
    exit(1);
}

static void check_mt(bench *b, mt_status status, const char *what) {
    if (status != MT_OK) {
        const char *message = b->client != NULL ? mt_client_error(b->client) : "";
        fprintf(stderr, "send_bench: %s: %s (%s)\n", what, mt_strerror(status), message);
        exit(1);
    }
}

static double seconds(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) fail("clock_gettime", strerror(errno));
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static stamp now(void) {
    stamp s = {seconds(CLOCK_PROCESS_CPUTIME_ID), seconds(CLOCK_THREAD_CPUTIME_ID),
               seconds(CLOCK_MONOTONIC)};
    return s;
}

static uint64_t parse_u64(const char *text, const char *name) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') fail(name, text);
    return (uint64_t)v;
}

static void store_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

/* The one-frame (INLINE) DATA message of step 0 of field "u" (docs/protocol.md 7). */
static void encode_message(bench *b) {
    const size_t header = 48 + 8 + 1; /* ndim 1, name "u" */
    b->message_bytes = header + b->nbytes;
    b->message = malloc(b->message_bytes);
    if (b->message == NULL) fail("malloc", "out of memory");
    unsigned char *m = b->message;
    memset(m, 0, header);
    memcpy(m, "MTRN", 4);
    m[4] = 2;              /* version */
    m[5] = 2;              /* kind DATA */
    m[6] = 1;              /* flags: INLINE */
    store_u64(m + 8, 2);   /* simulation id (ours is 1) */
    m[26] = 1;             /* client count 1 (u16), rank 0 */
    m[28] = MT_FLOAT32;
    m[29] = 1;             /* ndim */
    m[30] = 1;             /* name length */
    store_u64(m + 40, b->nbytes / 4);   /* count */
    store_u64(m + 48, b->nbytes / 4);   /* shape[0] */
    m[56] = 'u';
    memcpy(m + header, b->field, b->nbytes);
}

static void setup(bench *b) {
    b->field = malloc(b->nbytes);
    if (b->field == NULL) fail("malloc", "out of memory");
    /* filled: the pages are real memory, not the kernel's shared zero page */
    for (uint64_t i = 0; i < b->nbytes / 4; ++i) b->field[i] = 1.0f;
    encode_message(b);

    uint64_t shape[1] = {b->nbytes / 4};
    check_mt(b, mt_client_create(&b->client), "mt_client_create");
    check_mt(b, mt_set_simulation_id(b->client, 1), "mt_set_simulation_id");
    check_mt(b, mt_set_endpoints(b->client, b->ours_endpoint), "mt_set_endpoints");
    check_mt(b, mt_set_sndhwm(b->client, b->hwm), "mt_set_sndhwm");
    check_mt(b, mt_set_batching(b->client, b->batch_bytes, 0.02), "mt_set_batching");
    check_mt(b, mt_set_reuse(b->client, b->reuse), "mt_set_reuse");
    check_mt(b, mt_declare_field(b->client, "u", MT_FLOAT32, 1, shape), "mt_declare_field");
    check_mt(b, mt_client_start(b->client), "mt_client_start");

    int linger = 60000; /* the client's default close timeout, 60 s */
    b->raw_ctx = zmq_ctx_new();
    b->control_ctx = zmq_ctx_new();
    if (b->raw_ctx == NULL || b->control_ctx == NULL) fail("zmq_ctx_new", zmq_strerror(zmq_errno()));
    b->raw = zmq_socket(b->raw_ctx, ZMQ_PUSH);
    b->control = zmq_socket(b->control_ctx, ZMQ_REQ);
    if (b->raw == NULL || b->control == NULL) fail("zmq_socket", zmq_strerror(zmq_errno()));
    if (zmq_setsockopt(b->raw, ZMQ_SNDHWM, &b->hwm, sizeof b->hwm) != 0 ||
        zmq_setsockopt(b->raw, ZMQ_LINGER, &linger, sizeof linger) != 0)
        fail("zmq_setsockopt", zmq_strerror(zmq_errno()));
    /* a drainer that died must not leave this process waiting for its answer forever */
    int answer_ms = 120000;
    if (zmq_setsockopt(b->control, ZMQ_RCVTIMEO, &answer_ms, sizeof answer_ms) != 0)
        fail("zmq_setsockopt", zmq_strerror(zmq_errno()));
    if (zmq_connect(b->raw, b->raw_endpoint) != 0 ||
        zmq_connect(b->control, b->control_endpoint) != 0)
        fail("zmq_connect", zmq_strerror(zmq_errno()));
}

/* Ask the drainer to answer once `which` has counted `records` in all. */
static void await_drained(bench *b, const char *which, uint64_t records) {
    char text[64];
    int n = snprintf(text, sizeof text, "%s %" PRIu64, which, records);
    if (zmq_send(b->control, text, (size_t)n, 0) < 0 ||
        zmq_recv(b->control, text, sizeof text - 1, 0) < 0)
        fail("the drainer's answer (none within 120 s: did it die?)", zmq_strerror(zmq_errno()));
}

static stamp run_ours(bench *b) {
    stamp t0 = now();
    for (uint64_t i = 0; i < b->sends; ++i, ++b->step)
        check_mt(b, mt_send(b->client, b->step, "u", MT_FLOAT32, b->field, b->nbytes / 4),
                 "mt_send");
    check_mt(b, mt_flush(b->client), "mt_flush");
    b->ours_records += b->sends;
    await_drained(b, "ours", b->ours_records);
    return t0;
}

static stamp run_raw(bench *b) {
    stamp t0 = now();
    for (uint64_t i = 0; i < b->sends; ++i)
        while (zmq_send(b->raw, b->message, b->message_bytes, 0) < 0)
            if (zmq_errno() != EINTR) fail("zmq_send", zmq_strerror(zmq_errno()));
    b->raw_records += b->sends;
    await_drained(b, "raw", b->raw_records);
    return t0;
}

static void report(const bench *b, const char *arm, uint64_t round, stamp t0) {
    stamp t1 = now();
    printf("{\"arm\": \"%s\", \"round\": %" PRIu64 ", \"sends\": %" PRIu64
           ", \"process_cpu_s\": %.9f, \"thread_cpu_s\": %.9f, \"wall_s\": %.9f}\n",
           arm, round, b->sends, t1.process - t0.process, t1.thread - t0.thread,
           t1.wall - t0.wall);
    fflush(stdout);
}

static void teardown(bench *b) {
    check_mt(b, mt_client_close(b->client), "mt_client_close");
    b->client = NULL;
    if (zmq_close(b->raw) != 0 || zmq_ctx_term(b->raw_ctx) != 0)
        fail("closing the raw socket", zmq_strerror(zmq_errno()));
    char text[16];
    if (zmq_send(b->control, "quit", 4, 0) < 0 || zmq_recv(b->control, text, sizeof text, 0) < 0)
        fail("control", zmq_strerror(zmq_errno()));
    zmq_close(b->control);
    zmq_ctx_term(b->control_ctx);
    free(b->field);
    free(b->message);
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: send_bench OURS RAW CONTROL NBYTES SENDS ROUNDS HWM "
                        "BATCH_BYTES immediate|next_send\n");
        return 2;
    }
    bench b = {.ours_endpoint = argv[1], .raw_endpoint = argv[2], .control_endpoint = argv[3]};
    b.nbytes = parse_u64(argv[4], "NBYTES");
    b.sends = parse_u64(argv[5], "SENDS");
    b.rounds = parse_u64(argv[6], "ROUNDS");
    uint64_t hwm = parse_u64(argv[7], "HWM");
    b.batch_bytes = (size_t)parse_u64(argv[8], "BATCH_BYTES");
    if (b.nbytes < 4 || b.nbytes % 4 != 0 || b.nbytes > (1u << 30))
        fail("NBYTES", "must be a multiple of 4 in [4, 2^30]");
    if (b.sends < 1 || b.rounds < 1) fail("SENDS, ROUNDS", "must be >= 1");
    if (hwm < 1 || hwm > 1000000) fail("HWM", "must be in [1, 1000000]");
    b.hwm = (int)hwm;
    if (strcmp(argv[9], "immediate") == 0)
        b.reuse = MT_REUSE_IMMEDIATE;
    else if (strcmp(argv[9], "next_send") == 0)
        b.reuse = MT_REUSE_NEXT_SEND;
    else
        fail("REUSE", "must be immediate or next_send");

    setup(&b);
    run_ours(&b); /* warm-up: connections, first allocations, caches */
    run_raw(&b);
    for (uint64_t r = 0; r < b.rounds; ++r) {
        report(&b, "ours", r, run_ours(&b));
        report(&b, "raw", r, run_raw(&b));
    }
    teardown(&b);
    printf("{\"done\": true}\n");
    return 0;
}
