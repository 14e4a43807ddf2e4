/* mt_script: drives the C client from a script of one command per line, for the
 * Python tests (tests/c/test_c_client.py) and the CTest run. Prints one line per command:
 * "<line> <status> <message>" (status 0 = MT_OK). Payloads are generated: byte j of a
 * send with seed s is (s * 31 + j * 7) & 255 (bool: (s + j) & 1), the same in Python.
 *
 *   id N | endpoints E | rendezvous DIR TIMEOUT | param NAME VALUE | batching BYTES DELAY
 *   curve_key KEY (mt_set_curve_server_key; NULL: none)
 *   sndhwm N | reuse immediate|next | send_timeout S | close_timeout S | rank R SIZE
 *   disconnected_timeout S | follow_timeout S | replay_bytes N | failed_close_timeout S
 *   max_bytes N | field NAME DTYPE NDIM D0 .. | part NAME OFFSET COUNT
 *   partcount NAME COUNT | start | start_mpi (built with -DMT_SCRIPT_MPI)
 *   send T NAME DTYPE COUNT SEED | flush | close | abort | get NAME | info | sleep SECONDS
 *   fail REASON (mt_client_fail_message) | exit CODE (abort the client, exit with CODE)
 *
 * Predictions (mt_predict): "serve E" sets the serving endpoints; "input NAME DTYPE NDIM
 * D0 .. : V0 V1 .." stages an input (values read as doubles, stored as DTYPE: float32,
 * float64, int32, int64 or uint8); "output NAME DTYPE CAPACITY" stages an output buffer;
 * "predict TIMEOUT" asks with what is staged and prints, besides its status line, on
 * success "<line> version V" and per output "<line> out NAME NDIM D0 .. : V0 V1 ..", on
 * a refusal "<line> refusal CODE RETRY_AFTER"; "unstage" forgets what is staged.
 *
 * Built with -DMT_SCRIPT_MPI, "RANK" in the script's path is replaced by the MPI rank.
 *
 * After each mt_send returns, the array is overwritten (MT_REUSE_IMMEDIATE), or after
 * the next call returns (MT_REUSE_NEXT_SEND): a library that let ZeroMQ read it later
 * would put the garbage on the wire, which the byte-for-byte tests would see. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "melissa_trainer.h"
#ifdef MT_SCRIPT_MPI
#include "melissa_trainer_mpi.h"
#endif

#define MAX_STAGED 8

typedef struct staged {
    char name[256];
    int dtype, ndim;
    uint64_t shape[16], count;
    unsigned char *data;
} staged;

static void store(unsigned char *p, int dtype, double v) {
    switch (dtype) {
    case MT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case MT_FLOAT64: memcpy(p, &v, 8); break;
    case MT_INT32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    case MT_INT64: { int64_t i = (int64_t)v; memcpy(p, &i, 8); break; }
    default: *p = (unsigned char)v; break;
    }
}

static double load(const unsigned char *p, int dtype) {
    switch (dtype) {
    case MT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case MT_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case MT_INT32: { int32_t i; memcpy(&i, p, 4); return i; }
    case MT_INT64: { int64_t i; memcpy(&i, p, 8); return (double)i; }
    default: return *p;
    }
}

static size_t itemsize(int dtype) {
    static const size_t sizes[] = {0, 4, 8, 2, 1, 2, 4, 8, 1, 2, 4, 8, 1};
    return dtype >= 1 && dtype <= 12 ? sizes[dtype] : 1;
}

int main(int argc, char **argv) {
#ifdef MT_SCRIPT_MPI
    MPI_Init(&argc, &argv);
#endif
    char path[4096] = "";
    if (argc > 1) snprintf(path, sizeof path, "%s", argv[1]);
#ifdef MT_SCRIPT_MPI
    /* "script_RANK.txt": each rank reads its own script */
    char *mark = strstr(path, "RANK");
    if (argc > 1 && mark != NULL) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        char tail[4096];
        snprintf(tail, sizeof tail, "%s", mark + 4);
        snprintf(mark, sizeof path - (size_t)(mark - path), "%d%s", rank, tail);
    }
#endif
    FILE *in = argc > 1 ? fopen(path, "r") : stdin;
    if (in == NULL) {
        perror(path);
        return 2;
    }
    mt_client *c = NULL;
    if (mt_client_create(&c) != MT_OK) return 3;
    unsigned char *held = NULL; /* MT_REUSE_NEXT_SEND: the previous call's array */
    size_t held_bytes = 0;
    int next_send = 0, line_no = 0, exit_code = 0;
    staged ins[MAX_STAGED], outs[MAX_STAGED];
    size_t n_ins = 0, n_outs = 0;
    char line[4096];
    while (fgets(line, sizeof line, in) != NULL) {
        ++line_no;
        line[strcspn(line, "\r\n")] = '\0';
        char cmd[32] = "", a[1024] = "", b[1024] = "";
        if (sscanf(line, "%31s", cmd) != 1 || cmd[0] == '#') continue;
        const char *rest = line + strspn(line, " ") + strlen(cmd);
        rest += strspn(rest, " ");
        int st = MT_OK;
        static char closing_msg[16384]; /* (a close message may be longer than 1 KiB) */
        closing_msg[0] = '\0';
        if (strcmp(cmd, "id") == 0) {
            st = mt_set_simulation_id(c, strtoull(rest, NULL, 10));
        } else if (strcmp(cmd, "endpoints") == 0) {
            st = mt_set_endpoints(c, rest);
        } else if (strcmp(cmd, "curve_key") == 0) { /* (NULL: none) */
            st = mt_set_curve_server_key(c, strcmp(rest, "NULL") == 0 ? NULL : rest);
        } else if (strcmp(cmd, "rendezvous") == 0) {
            double t = 0;
            sscanf(rest, "%1023s %lf", a, &t);
            st = mt_set_rendezvous(c, a, t);
        } else if (strcmp(cmd, "param") == 0) {
            sscanf(rest, "%1023s %1023s", a, b);
            st = mt_set_parameter(c, a, strtod(b, NULL));
        } else if (strcmp(cmd, "batching") == 0) {
            unsigned long long bytes = 0;
            double delay = 0;
            sscanf(rest, "%llu %lf", &bytes, &delay);
            st = mt_set_batching(c, (size_t)bytes, delay);
        } else if (strcmp(cmd, "sndhwm") == 0) {
            st = mt_set_sndhwm(c, atoi(rest));
        } else if (strcmp(cmd, "reuse") == 0) {
            next_send = strcmp(rest, "next") == 0;
            st = mt_set_reuse(c, next_send ? MT_REUSE_NEXT_SEND : MT_REUSE_IMMEDIATE);
        } else if (strcmp(cmd, "send_timeout") == 0) {
            st = mt_set_send_timeout(c, strtod(rest, NULL));
        } else if (strcmp(cmd, "disconnected_timeout") == 0) {
            st = mt_set_disconnected_timeout(c, strtod(rest, NULL));
        } else if (strcmp(cmd, "follow_timeout") == 0) {
            st = mt_set_follow_timeout(c, strtod(rest, NULL));
        } else if (strcmp(cmd, "replay_bytes") == 0) {
            st = mt_set_replay_bytes(c, strtoull(rest, NULL, 10));
        } else if (strcmp(cmd, "close_timeout") == 0) {
            st = mt_set_close_timeout(c, strtod(rest, NULL));
        } else if (strcmp(cmd, "failed_close_timeout") == 0) {
            st = mt_set_failed_close_timeout(c, strtod(rest, NULL));
        } else if (strcmp(cmd, "max_bytes") == 0) {
            st = mt_set_max_message_bytes(c, strtoull(rest, NULL, 10));
        } else if (strcmp(cmd, "rank") == 0) {
            int r = 0, n = 0;
            sscanf(rest, "%d %d", &r, &n);
            st = mt_set_rank(c, r, n);
        } else if (strcmp(cmd, "field") == 0) {
            int dtype = 0, ndim = 0, used = 0;
            uint64_t shape[16] = {0};
            sscanf(rest, "%1023s %d %d%n", a, &dtype, &ndim, &used);
            const char *p = rest + used;
            for (int d = 0; d < ndim && d < 16; ++d) {
                char *end;
                shape[d] = strtoull(p, &end, 10);
                p = end;
            }
            st = mt_declare_field(c, a, (mt_dtype)dtype, ndim, shape);
        } else if (strcmp(cmd, "part") == 0) {
            unsigned long long off = 0, n = 0;
            sscanf(rest, "%1023s %llu %llu", a, &off, &n);
            st = mt_declare_part(c, a, off, n);
        } else if (strcmp(cmd, "partcount") == 0) {
            unsigned long long n = 0;
            sscanf(rest, "%1023s %llu", a, &n);
            st = mt_declare_part_count(c, a, n);
        } else if (strcmp(cmd, "start") == 0) {
            st = mt_client_start(c);
#ifdef MT_SCRIPT_MPI
        } else if (strcmp(cmd, "start_mpi") == 0) {
            st = mt_client_start_mpi(c, MPI_COMM_WORLD);
#endif
        } else if (strcmp(cmd, "send") == 0) {
            unsigned long long t = 0, count = 0;
            int dtype = 0, seed = 0;
            sscanf(rest, "%llu %1023s %d %llu %d", &t, a, &dtype, &count, &seed);
            size_t nbytes = (size_t)count * itemsize(dtype);
            unsigned char *data = malloc(nbytes ? nbytes : 1);
            if (data == NULL) return 4;
            for (size_t j = 0; j < nbytes; ++j)
                data[j] = dtype == MT_BOOL ? (unsigned char)((seed + (int)j) & 1)
                                           : (unsigned char)((seed * 31 + (int)(j * 7)) & 255);
            st = mt_send(c, t, a, (mt_dtype)dtype, data, count);
            if (held != NULL) { /* the previous call returned: its array is ours again */
                memset(held, 0xA5, held_bytes);
                free(held);
                held = NULL;
            }
            if (next_send && st == MT_OK) { /* untouched until the next call returns */
                held = data;
                held_bytes = nbytes;
            } else { /* overwritten at once: must not reach the wire */
                memset(data, 0x5A, nbytes);
                free(data);
            }
        } else if (strcmp(cmd, "serve") == 0) {
            st = mt_set_serve_endpoints(c, rest);
        } else if (strcmp(cmd, "input") == 0 || strcmp(cmd, "output") == 0) {
            int out = cmd[0] == 'o';
            staged *x = out ? &outs[n_outs] : &ins[n_ins];
            if ((out ? n_outs : n_ins) == MAX_STAGED) return 6;
            memset(x, 0, sizeof *x);
            int used = 0;
            unsigned long long cap = 0;
            if (out) {
                sscanf(rest, "%255s %d %llu", x->name, &x->dtype, &cap);
                x->count = cap;
            } else {
                sscanf(rest, "%255s %d %d%n", x->name, &x->dtype, &x->ndim, &used);
            }
            const char *p = rest + used;
            x->count = out ? x->count : 1;
            for (int d = 0; !out && d < x->ndim && d < 16; ++d) {
                char *end;
                x->shape[d] = strtoull(p, &end, 10);
                x->count *= x->shape[d];
                p = end;
            }
            x->data = calloc(x->count ? x->count : 1, itemsize(x->dtype));
            if (x->data == NULL) return 4;
            const char *colon = strchr(p, ':');
            for (uint64_t k = 0; !out && colon != NULL && k < x->count; ++k) {
                char *end;
                double v = strtod(colon + 1, &end);
                if (end == colon + 1) break;
                store(x->data + k * itemsize(x->dtype), x->dtype, v);
                colon = end - 1;
            }
            if (out) ++n_outs;
            else ++n_ins;
        } else if (strcmp(cmd, "unstage") == 0) {
            for (size_t k = 0; k < n_ins; ++k) free(ins[k].data);
            for (size_t k = 0; k < n_outs; ++k) free(outs[k].data);
            n_ins = n_outs = 0;
        } else if (strcmp(cmd, "predict") == 0) {
            mt_input in[MAX_STAGED];
            mt_output out[MAX_STAGED];
            for (size_t k = 0; k < n_ins; ++k) {
                mt_input i = {ins[k].name, ins[k].data, ins[k].shape, (mt_dtype)ins[k].dtype,
                              ins[k].ndim};
                in[k] = i;
            }
            memset(out, 0, sizeof out);
            for (size_t k = 0; k < n_outs; ++k) {
                out[k].name = outs[k].name;
                out[k].data = outs[k].data;
                out[k].capacity = outs[k].count;
                out[k].dtype = (mt_dtype)outs[k].dtype;
            }
            uint64_t version = 0;
            st = mt_predict(c, in, n_ins, out, n_outs, strtod(rest, NULL), &version);
            if (st == MT_OK) {
                printf("%d version %llu\n", line_no, (unsigned long long)version);
                for (size_t k = 0; k < n_outs; ++k) {
                    printf("%d out %s %d", line_no, out[k].name, out[k].ndim);
                    for (int d = 0; d < out[k].ndim; ++d)
                        printf(" %llu", (unsigned long long)out[k].shape[d]);
                    printf(" :");
                    for (uint64_t j = 0; j < out[k].count; ++j)
                        printf(" %.17g", load(outs[k].data + j * itemsize(outs[k].dtype),
                                              outs[k].dtype));
                    printf("\n");
                }
            } else if (st == MT_EREFUSED) {
                double retry = 0;
                int code = (int)mt_predict_refusal(c, &retry);
                printf("%d refusal %d %.17g\n", line_no, code, retry);
            }
        } else if (strcmp(cmd, "flush") == 0) {
            st = mt_flush(c);
        } else if (strcmp(cmd, "get") == 0) {
            double v = 0;
            st = mt_client_parameter(c, rest, &v);
            if (st == MT_OK) printf("%d value %.17g\n", line_no, v);
        } else if (strcmp(cmd, "info") == 0) {
            printf("%d info id=%llu receivers=%d\n", line_no,
                   (unsigned long long)mt_client_simulation_id(c), mt_client_receivers(c));
        } else if (strcmp(cmd, "exit") == 0) { /* a solver that exits on an error */
            exit_code = atoi(rest);
            break;
        } else if (strcmp(cmd, "sleep") == 0) {
            double s = strtod(rest, NULL);
            struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
            nanosleep(&ts, NULL);
        } else if (!strcmp(cmd, "close") || !strcmp(cmd, "abort") || !strcmp(cmd, "fail")) {
            if (strcmp(cmd, "close") == 0)
                st = mt_client_close_message(c, closing_msg, sizeof closing_msg);
            else if (strcmp(cmd, "fail") == 0) /* (the rest of the line: the reason) */
                st = mt_client_fail_message(c, rest, closing_msg, sizeof closing_msg);
            else
                mt_client_abort(c);
            c = NULL;
            free(held); /* freed after close: ZeroMQ is done with it */
            held = NULL;
            printf("%d %d %s\n", line_no, st, closing_msg);
            fflush(stdout);
            break;
        } else {
            fprintf(stderr, "line %d: unknown command %s\n", line_no, cmd);
            return 5;
        }
        printf("%d %d %s\n", line_no, st, st == MT_OK ? "" : mt_client_error(c));
        fflush(stdout);
    }
    if (c != NULL) mt_client_abort(c);
    for (size_t k = 0; k < n_ins; ++k) free(ins[k].data);
    for (size_t k = 0; k < n_outs; ++k) free(outs[k].data);
    free(held);
    if (in != stdin) fclose(in);
#ifdef MT_SCRIPT_MPI
    MPI_Finalize();
#endif
    return exit_code;
}
