/* User trial 32: a C simulation that streams (u, u_next) and asks the trainer for u_next
 * before each step with mt_predict (external mode: MELISSA_TRAINER_SIMULATION_ID and
 * MELISSA_TRAINER_RENDEZVOUS in the environment). Built with the documented command, and
 * -lm for its own sin():
 *   cc trial32_solver.c $(pkg-config --cflags --libs melissa-trainer-client) -lm -Wl,-rpath,$MT_PREFIX/lib
 * Usage: ./a.out STEPS TIMEOUT_S [BAD]; BAD=1 sends a float64 input, BAD=2 a (15,) one.
 * Prints "ASK t status version seconds detail" per request; compiled with TRIAL_STAMP
 * defined (trial41_solver.c), "ASK t status version seconds @wallclock detail". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "melissa_trainer.h"

#define N 16

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 100;
    double timeout = argc > 2 ? atof(argv[2]) : 0.5;
    int bad = argc > 3 ? atoi(argv[3]) : 0;
    mt_client *c;
    uint64_t shape[1] = {N};
    if (mt_client_create(&c) != MT_OK) return 1;
    mt_declare_field(c, "u", MT_FLOAT32, 1, shape);
    mt_declare_field(c, "u_next", MT_FLOAT32, 1, shape);
    if (mt_client_start(c) != MT_OK) {
        fprintf(stderr, "start: %s\n", mt_client_error(c));
        mt_client_abort(c);
        return 1;
    }
    float u[N], un[N], guess[N];
    double u64[N];
    for (int i = 0; i < N; ++i) u[i] = (float)sin(i + 1.0);
    for (int t = 0; t < steps; ++t) {
        uint64_t n = bad == 2 ? N - 1 : N, version = 0;
        for (int i = 0; i < N; ++i) u64[i] = u[i];
        mt_input in = {"u", bad == 1 ? (const void *)u64 : (const void *)u, &n,
                       bad == 1 ? MT_FLOAT64 : MT_FLOAT32, 1};
        mt_output out = {"u_next", guess, N, MT_FLOAT32};
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        mt_status st = mt_predict(c, &in, 1, &out, 1, timeout, &version);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
#ifdef TRIAL_STAMP
        struct timespec w;
        clock_gettime(CLOCK_REALTIME, &w);
        double now = (double)w.tv_sec + 1e-9 * (double)w.tv_nsec;
        printf("ASK %d %d %llu %.4f @%.3f %s\n", t, (int)st, (unsigned long long)version, dt, now,
               st == MT_OK ? "" : mt_client_error(c));
#else
        printf("ASK %d %d %llu %.4f %s\n", t, (int)st, (unsigned long long)version, dt,
               st == MT_OK ? "" : mt_client_error(c));
#endif
        fflush(stdout);
        for (int i = 0; i < N; ++i) un[i] = 0.4f * u[i] + 0.5f * u[(i + 1) % N];
        if (mt_send(c, (uint64_t)t, "u", MT_FLOAT32, u, N) != MT_OK ||
            mt_send(c, (uint64_t)t, "u_next", MT_FLOAT32, un, N) != MT_OK) {
            fprintf(stderr, "send: %s\n", mt_client_error(c));
            mt_client_abort(c);
            return 1;
        }
        memcpy(u, un, sizeof u);
        if (fabsf(u[0]) < 1e-3f)
            for (int i = 0; i < N; ++i) u[i] = (float)sin(t + i + 1.0);
        usleep(10000);
    }
    mt_status st = mt_client_close(c);
    printf("DONE %d\n", (int)st);
    return st == MT_OK ? 0 : 1;
}
