/*
 * stream_client.c: a simulation that streams one float32 field through the C client, for
 * the end-to-end rows of benchmarks/c_client.py: the C counterpart of the Python client
 * process of benchmarks/ingest.py (CLIENT_CODE), step for step.
 *
 *     stream_client ENDPOINT SIMULATION_ID NBYTES STEPS HWM REUSE
 *
 * It declares field "u" (NBYTES / 4 float32 elements, filled with 1.0 and never written
 * again), starts a client to ENDPOINT (ZMQ_SNDHWM = HWM, batching and timeouts at their
 * defaults, mt_set_reuse(REUSE): "immediate" or "next_send"), prints "ready" and waits
 * for a line on stdin (the go signal), then sends time steps 0 .. STEPS - 1 and closes
 * the client (flush, BYE, delivery). Exits 0 when everything succeeded, else 1 with
 * the client's message on stderr.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "melissa_trainer.h"

static uint64_t parse_u64(const char *text, const char *name) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "stream_client: bad %s '%s'\n", name, text);
        exit(2);
    }
    return (uint64_t)v;
}

static void check(mt_client *c, mt_status status, const char *what) {
    if (status != MT_OK) {
        fprintf(stderr, "stream_client: %s: %s (%s)\n", what, mt_strerror(status),
                c != NULL ? mt_client_error(c) : "");
        mt_client_abort(c);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr,
                "usage: stream_client ENDPOINT SIMULATION_ID NBYTES STEPS HWM REUSE\n");
        return 2;
    }
    uint64_t sim = parse_u64(argv[2], "SIMULATION_ID");
    uint64_t nbytes = parse_u64(argv[3], "NBYTES");
    uint64_t steps = parse_u64(argv[4], "STEPS");
    uint64_t hwm = parse_u64(argv[5], "HWM");
    if (nbytes < 4 || nbytes % 4 != 0 || nbytes > (1u << 30) || hwm < 1 || hwm > 1000000) {
        fprintf(stderr, "stream_client: NBYTES must be a multiple of 4 in [4, 2^30], "
                        "HWM in [1, 1000000]\n");
        return 2;
    }
    mt_reuse reuse = MT_REUSE_IMMEDIATE;
    if (strcmp(argv[6], "next_send") == 0)
        reuse = MT_REUSE_NEXT_SEND;
    else if (strcmp(argv[6], "immediate") != 0) {
        fprintf(stderr, "stream_client: REUSE must be immediate or next_send\n");
        return 2;
    }
    uint64_t count = nbytes / 4;
    float *u = malloc(nbytes);
    if (u == NULL) {
        fprintf(stderr, "stream_client: out of memory\n");
        return 1;
    }
    /* filled: the pages are real memory, not the kernel's shared zero page */
    for (uint64_t i = 0; i < count; ++i) u[i] = 1.0f;

    mt_client *c = NULL;
    check(c, mt_client_create(&c), "mt_client_create");
    check(c, mt_set_simulation_id(c, sim), "mt_set_simulation_id");
    check(c, mt_set_endpoints(c, argv[1]), "mt_set_endpoints");
    check(c, mt_set_sndhwm(c, (int)hwm), "mt_set_sndhwm");
    check(c, mt_set_reuse(c, reuse), "mt_set_reuse");
    uint64_t shape[1] = {count};
    check(c, mt_declare_field(c, "u", MT_FLOAT32, 1, shape), "mt_declare_field");
    check(c, mt_client_start(c), "mt_client_start");
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) {
        fprintf(stderr, "stream_client: stdin closed before the go signal\n");
        mt_client_abort(c);
        return 1;
    }
    for (uint64_t t = 0; t < steps; ++t) check(c, mt_send(c, t, "u", MT_FLOAT32, u, count), "mt_send");
    mt_status status = mt_client_close(c); /* frees c in every case */
    free(u);
    if (status != MT_OK) {
        fprintf(stderr, "stream_client: mt_client_close: %s\n", mt_strerror(status));
        return 1;
    }
    return 0;
}
