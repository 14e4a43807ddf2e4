/* unit_send.c: the C unit tests (CTest) of the send path: a client streaming into a PULL
 * socket of this process (HELLO, DATA in one and two frames, BATCH sent by the flusher
 * thread, BYE), the order of steps after a pause (with the clock of the MT_TESTING build,
 * moved), the wait for the arrays ZeroMQ still holds (send_wait.c), and the timed waits
 * under that moved clock. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "internal.h"
#include "follow.h" /* (mt_init_sync) */
#include "unit_check.h"

static size_t recv_message(void *sock, unsigned char frames[][200000], size_t *sizes) {
    size_t n = 0;
    int more = 1;
    while (more && n < 8) {
        int got = zmq_recv(sock, frames[n], 200000, 0);
        if (got < 0) return 0;
        sizes[n++] = (size_t)got;
        size_t len = sizeof more;
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &len);
    }
    return n;
}

static void test_stream(void) {
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int timeout = 10000;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    CHECK(zmq_bind(pull, "tcp://127.0.0.1:*") == 0);
    char endpoint[256];
    size_t len = sizeof endpoint;
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &len);

    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    uint64_t small[1] = {4}, big[1] = {20000};
    CHECK(mt_set_simulation_id(c, 42) == MT_OK);
    CHECK(mt_set_endpoints(c, endpoint) == MT_OK);
    CHECK(mt_set_parameter(c, "a", 1.5) == MT_OK);
    CHECK(mt_set_batching(c, 65536, 0.001) == MT_OK); /* the flusher sends them */
    CHECK(mt_declare_field(c, "s", MT_INT32, 1, small) == MT_OK);
    CHECK(mt_declare_field(c, "b", MT_FLOAT64, 1, big) == MT_OK);
    CHECK(mt_client_start(c) == MT_OK);
    double missing;
    CHECK(mt_client_parameter(c, "k", &missing) == MT_EINVAL); /* some, not this one */
    CHECK(strcmp(mt_client_error(c), "no parameter 'k'; the known parameters are ['a']") == 0);
    int32_t s[4] = {1, 2, 3, 4};
    double *b = malloc(20000 * sizeof *b);
    CHECK(b != NULL);
    for (int i = 0; i < 20000; ++i) b[i] = i * 0.5;
    for (uint64_t t = 0; t < 3; ++t) {
        CHECK(mt_send(c, t, "s", MT_INT32, s, 4) == MT_OK);
        CHECK(mt_send(c, t, "b", MT_FLOAT64, b, 20000) == MT_OK);
        b[0] = -1; /* the array is ours again at once (MT_REUSE_IMMEDIATE) */
        b[0] = 0;
    }
    CHECK(mt_client_close(c) == MT_OK);
    free(b);

    static unsigned char frames[8][200000];
    size_t sizes[8];
    int kinds[6] = {0}, data_frames = 0, batch_records = 0, msgs = 0;
    for (; msgs < 20; ++msgs) {
        size_t n = recv_message(pull, frames, sizes);
        CHECK(n > 0);
        if (n == 0) break;
        int kind = frames[0][5];
        kinds[kind]++;
        CHECK(memcmp(frames[0], "MTRN\x02", 5) == 0);
        if (kind == MT_KIND_DATA && !(frames[0][6] & MT_FLAG_INLINE)) {
            /* 'b', float64 and finite: FINITE; the int32 's' never carries it */
            CHECK(frames[0][6] == MT_FLAG_FINITE);
            data_frames += (int)n;
            CHECK(n == 2 && sizes[1] == 160000);
            double first;
            memcpy(&first, frames[1] + 8, sizeof first);
            CHECK(first == 0.5);
        }
        if (kind == MT_KIND_DATA && (frames[0][6] & MT_FLAG_INLINE)) CHECK(frames[0][6] == 1);
        if (kind == MT_KIND_BATCH) {
            CHECK(frames[0][6] == 0); /* batches of 's' only */
            batch_records += frames[0][16];
        }
        if (kind == MT_KIND_BYE) {
            CHECK(sizes[0] == 28 && frames[0][20] == 3);
            break;
        }
    }
    CHECK(kinds[MT_KIND_HELLO] == 1 && kinds[MT_KIND_BYE] == 1 && data_frames == 6);
    /* step 0 goes as DATA (no earlier send); steps 1, 2 are batched or, if the machine
     * was slow (sends over 1 ms apart), DATA too: 3 records of 's' in all */
    CHECK(batch_records + kinds[MT_KIND_DATA] - 3 == 3);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

/* A send after a pause (longer than the batch delay) goes at once as DATA; steps batched
 * before it, which the flusher has not sent yet (a loaded machine: here, a batch delay
 * of 1000 s and a clock moved past it), must leave first: a receiver gets one client's
 * steps in the order sent (docs/protocol.md, section 11). Got 0, 2, 1 before the fix. */
static void test_send_after_a_pause_keeps_step_order(void) {
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int timeout = 10000;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    CHECK(zmq_bind(pull, "tcp://127.0.0.1:*") == 0);
    char endpoint[256];
    size_t len = sizeof endpoint;
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &len);
    mt_client *c;
    uint64_t shape[1] = {4};
    int32_t s[4] = {1, 2, 3, 4};
    CHECK(mt_client_create(&c) == MT_OK);
    CHECK(mt_set_simulation_id(c, 5) == MT_OK);
    CHECK(mt_set_endpoints(c, endpoint) == MT_OK);
    CHECK(mt_set_batching(c, 65536, 1000.0) == MT_OK); /* the flusher sends nothing here */
    CHECK(mt_declare_field(c, "s", MT_INT32, 1, shape) == MT_OK);
    CHECK(mt_client_start(c) == MT_OK);
    CHECK(mt_send(c, 0, "s", MT_INT32, s, 4) == MT_OK); /* DATA: no earlier send */
    CHECK(mt_send(c, 1, "s", MT_INT32, s, 4) == MT_OK); /* batched, held */
    mt_testing_advance_clock(2000.0);                   /* a pause longer than the delay */
    CHECK(mt_send(c, 2, "s", MT_INT32, s, 4) == MT_OK); /* DATA at once */
    CHECK(mt_client_close(c) == MT_OK);
    static unsigned char frames[8][200000];
    size_t sizes[8];
    uint64_t order[8];
    size_t steps = 0;
    for (int msgs = 0; msgs < 10; ++msgs) {
        size_t n = recv_message(pull, frames, sizes);
        CHECK(n > 0);
        if (n == 0) break;
        int kind = frames[0][5];
        if (kind == MT_KIND_BYE) break;
        if (kind == MT_KIND_DATA && steps < 8) memcpy(&order[steps++], frames[0] + 16, 8);
        if (kind == MT_KIND_BATCH) { /* the records' steps: one record of 's' here */
            CHECK(frames[0][16] == 1);
            if (steps < 8) memcpy(&order[steps++], frames[0] + sizes[0] - 16 - 8, 8);
        }
    }
    CHECK(steps == 3);
    if (steps == 3) {
        fprintf(stderr, "steps arrived: %llu %llu %llu\n", (unsigned long long)order[0],
                (unsigned long long)order[1], (unsigned long long)order[2]);
        CHECK(order[0] == 0 && order[1] == 1 && order[2] == 2);
    }
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

/* A send's wait for the arrays ZeroMQ holds (mt_wait_sent) first looks, without a
 * condition wait: the look used to be one, with a deadline passed (a futex call timing out
 * at once, then a wake-up by released()), which cost every 1 MB send still held at the
 * look a fifth of its thread's CPU time (benchmarks/c_client.py). An array held by hand
 * here, and the send timeout passed: the sliced wait's condition wait only (two before
 * the fix); nothing held: none, and no failure. */
static void test_held_wait_looks_first(void) {
    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    CHECK(mt_init_sync(c) == MT_OK);
    unsigned before = mt_testing_held_waits;
    CHECK(mt_wait_sent(c, -1.0, NULL) == MT_OK); /* nothing held */
    CHECK(mt_testing_held_waits == before);
    pthread_mutex_lock(&c->held_mu);
    c->pending = 1; /* (as send_data does before it hands ZeroMQ an array) */
    pthread_mutex_unlock(&c->held_mu);
    uint64_t step = 7;
    /* (a deadline long past in both clocks: the test above moved mt_now's) */
    CHECK(mt_wait_sent(c, 0.0, &step) == MT_ETIMEDOUT);
    fprintf(stderr, "condition waits: %u\n", mt_testing_held_waits - before);
    CHECK(mt_testing_held_waits - before == 1);
    CHECK(strstr(mt_client_error(c), "could not send time step 7 within") != NULL);
    c->pending = 0;
    mt_client_abort(c);
}

/* The timed waits honour the clock the tests move (mt_cond_wait_until): moved before a
 * wait on a deadline of mt_now()'s, and during one. Before, pthread_cond_timedwait was
 * given that deadline on the real clock, and waited out the time skipped: 1000 s here
 * (CTest's timeout ended it). */
typedef struct waiter {
    mt_client *c;
    double deadline;
    mt_status st;
} waiter;

static void *wait_held(void *arg) {
    waiter *w = arg;
    w->st = mt_wait_held(w->c, w->deadline);
    return NULL;
}

static void test_timed_waits_honour_the_moved_clock(void) {
    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    CHECK(mt_init_sync(c) == MT_OK);
    pthread_mutex_lock(&c->held_mu);
    c->pending = 1; /* (an array ZeroMQ holds, never released here) */
    pthread_mutex_unlock(&c->held_mu);
    mt_testing_advance_clock(1000.0); /* moved before the wait */
    CHECK(mt_wait_held(c, mt_now() + 0.05) == MT_ETIMEDOUT);
    /* moved during the wait: a deadline 1000 s away, the clock moved once it waits */
    unsigned before = mt_testing_held_waits;
    waiter w = {c, mt_now() + 1000.0, MT_OK};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_held, &w) == 0);
    while (mt_testing_held_waits == before) { /* (until it waits) */
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    mt_testing_advance_clock(2000.0);
    pthread_join(t, NULL);
    CHECK(w.st == MT_ETIMEDOUT);
    c->pending = 0;
    mt_client_abort(c);
}

int main(void) {
    test_stream();
    test_send_after_a_pause_keeps_step_order();
    test_held_wait_looks_first();
    test_timed_waits_honour_the_moved_clock();
    return unit_report("all send unit tests passed");
}
