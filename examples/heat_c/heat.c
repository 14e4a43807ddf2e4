/*
 * heat.c: a 2-D explicit heat-equation solver, domain-decomposed with MPI, that streams
 * its temperature field to the melissa-trainer through the C client.
 *
 *     mpiexec -n 2 ./heat_c NX NY STEPS [R]
 *
 * du/dt = alpha (d2u/dx2 + d2u/dy2) on NX x NY interior grid points, with a uniform
 * initial temperature and a fixed temperature on each side (Dirichlet), advanced by the
 * explicit 5-point scheme u += R (u_W + u_E + u_S + u_N - 4 u), R = alpha dt / h^2 (stable
 * for R <= 1/4; default 0.2). Parameters (kelvin), from the launcher's
 * MELISSA_TRAINER_PARAMETERS: t_initial, t_left, t_right, t_bottom, t_top.
 *
 * Each rank owns a block of rows (y), exchanges one halo row with each neighbour per
 * step (MPI_Sendrecv), and sends its rows of the field "temperature" (float32, global
 * shape {NY, NX}: row = y from the bottom, column = x from the left) as time step k
 * after k + 1 steps. The arithmetic is in double, in a fixed order (parentheses, no
 * contraction into fused multiply-adds: CMakeLists.txt compiles with
 * -ffp-contract=off), so the field is bit for bit that of reference.py, whatever the
 * number of ranks.
 *
 * Test hook: with MELISSA_HEAT_KILL_AT_STEP=k in the environment, rank 0 kills itself
 * (SIGKILL) half a second after every rank sent step k, on the simulation's first
 * attempt (MELISSA_TRAINER_ATTEMPT=0), so that the launcher restarts it.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, raise's SIGKILL under -std=c11 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "melissa_trainer.h"
#include "melissa_trainer_mpi.h"

enum { N_PARAMETERS = 5 };
static const char *const PARAMETER_NAMES[N_PARAMETERS] = {"t_initial", "t_left", "t_right",
                                                          "t_bottom", "t_top"};

/* End every rank with `code`. MPI_Abort may return (MPICH's, while another rank aborts
 * too: a user trial saw a freed client used after it), so the process ends here anyway. */
static void die(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* Report a failed client call and end every rank (a partial field is worthless). */
static void check(mt_client *c, mt_status status, const char *what) {
    if (status == MT_OK)
        return;
    fprintf(stderr, "heat_c: %s: %s\n", what, c != NULL ? mt_client_error(c) : mt_strerror(status));
    mt_client_abort(c);
    die(1);
}

/* A positive integer argument, or exit with the usage. */
static long positive(const char *text, const char *name) {
    char *end = NULL;
    long value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 1000000) {
        fprintf(stderr, "heat_c: %s must be an integer in [1, 1000000], got '%s'\n", name, text);
        die(2);
    }
    return value;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || argc > 5) {
        if (rank == 0)
            fprintf(stderr, "usage: %s NX NY STEPS [R]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const long nx = positive(argv[1], "NX"), ny = positive(argv[2], "NY");
    const long steps = positive(argv[3], "STEPS");
    const double r = argc == 5 ? strtod(argv[4], NULL) : 0.2;
    if (!(r > 0.0 && r <= 0.25) || ny < size) {
        if (rank == 0)
            fprintf(stderr, "heat_c: need 0 < R <= 0.25 and NY >= ranks (%d)\n", size);
        die(2);
    }
    /* This rank's rows: ny split as evenly as can be, in rank order (rank 0 lowest y). */
    const long rows = ny / size + (rank < ny % size);

    mt_client *c = NULL;
    check(NULL, mt_client_create(&c), "mt_client_create");
    const uint64_t shape[2] = {(uint64_t)ny, (uint64_t)nx};
    check(c, mt_declare_field(c, "temperature", MT_FLOAT32, 2, shape), "mt_declare_field");
    check(c, mt_declare_part_count(c, "temperature", (uint64_t)(rows * nx)),
          "mt_declare_part_count");
    check(c, mt_client_start_mpi(c, MPI_COMM_WORLD), "mt_client_start_mpi");
    double p[N_PARAMETERS];
    for (int k = 0; k < N_PARAMETERS; ++k)
        check(c, mt_client_parameter(c, PARAMETER_NAMES[k], &p[k]), "mt_client_parameter");
    const double t_initial = p[0], t_left = p[1], t_right = p[2], t_bottom = p[3], t_top = p[4];

    /* u and next: rows + 2 rows (halos) of nx + 2 values (the side boundaries). */
    const long w = nx + 2;
    double *u = malloc(sizeof(double) * (size_t)((rows + 2) * w));
    double *next = malloc(sizeof(double) * (size_t)((rows + 2) * w));
    float *out = malloc(sizeof(float) * (size_t)(rows * nx));
    if (u == NULL || next == NULL || out == NULL) {
        fprintf(stderr, "heat_c: out of memory\n");
        mt_client_abort(c);
        die(1);
    }
    for (long j = 0; j < rows + 2; ++j) {
        for (long i = 0; i < w; ++i)
            u[j * w + i] = i == 0 ? t_left : i == w - 1 ? t_right : t_initial;
    }
    memcpy(next, u, sizeof(double) * (size_t)((rows + 2) * w));
    const int below = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    const int above = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    const char *kill_at = getenv("MELISSA_HEAT_KILL_AT_STEP");
    const char *attempt = getenv("MELISSA_TRAINER_ATTEMPT");
    const long kill_step = kill_at != NULL && attempt != NULL && strcmp(attempt, "0") == 0
                               ? strtol(kill_at, NULL, 10)
                               : -1;

    for (long step = 0; step < steps; ++step) {
        /* Halos: my first row to the rank below, its last row into my row 0; and up. */
        MPI_Sendrecv(&u[1 * w + 1], (int)nx, MPI_DOUBLE, below, 0, &u[(rows + 1) * w + 1],
                     (int)nx, MPI_DOUBLE, above, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[rows * w + 1], (int)nx, MPI_DOUBLE, above, 1, &u[0 * w + 1], (int)nx,
                     MPI_DOUBLE, below, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (below == MPI_PROC_NULL)
            for (long i = 1; i <= nx; ++i)
                u[i] = t_bottom;
        if (above == MPI_PROC_NULL)
            for (long i = 1; i <= nx; ++i)
                u[(rows + 1) * w + i] = t_top;
        for (long j = 1; j <= rows; ++j) {
            for (long i = 1; i <= nx; ++i) {
                const double *c0 = &u[j * w + i];
                const double lap = (((c0[-1] + c0[1]) + c0[-w]) + c0[w]) - 4.0 * c0[0];
                next[j * w + i] = c0[0] + r * lap;
            }
        }
        double *swap = u;
        u = next;
        next = swap;
        for (long j = 0; j < rows; ++j)
            for (long i = 0; i < nx; ++i)
                out[j * nx + i] = (float)u[(j + 1) * w + i + 1];
        check(c, mt_send(c, (uint64_t)step, "temperature", MT_FLOAT32, out, (uint64_t)(rows * nx)),
              "mt_send");
        if (step == kill_step) {
            /* Let steps 0..k reach the trainer first (batches sent, then time for
             * ZeroMQ's I/O threads), so that the restart's re-sends are duplicates. */
            check(c, mt_flush(c), "mt_flush");
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                const struct timespec pause = {0, 500000000L};
                nanosleep(&pause, NULL);
                raise(SIGKILL);
            }
        }
    }
    const mt_status closed = mt_client_close(c);
    if (closed != MT_OK) {
        fprintf(stderr, "heat_c: mt_client_close: %s\n", mt_strerror(closed));
        die(1);
    }
    free(u);
    free(next);
    free(out);
    MPI_Finalize();
    return 0;
}
