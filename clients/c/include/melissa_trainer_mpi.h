/*
 * melissa_trainer_mpi.h: the MPI entry point of the C client, header-only.
 *
 * The functions here are static inline and call MPI, so that the library itself never
 * links MPI: they are compiled with the user's MPI (any implementation, any version
 * >= 2.2 for MPI_UINT64_T and MPI_Exscan). Include <mpi.h> is done here.
 *
 *     mt_declare_field(c, "u", MT_FLOAT64, 2, global_shape);
 *     mt_declare_part_count(c, "u", my_count);      // this rank's contiguous part
 *     if (mt_client_start_mpi(c, MPI_COMM_WORLD) != MT_OK) ...
 *
 * mt_client_start_mpi is collective over `comm` (every rank must call it). It sets
 * this rank and the size from `comm` (mt_set_rank), computes each field's part offset
 * by an exclusive scan (MPI_Exscan, rank order: rank 0 first) of the counts declared
 * with mt_declare_part_count (a part declared with mt_declare_part keeps its offset
 * and takes part in the check), and checks with MPI_Allreduce that the parts add up to
 * each field's global size. If any rank's declaration is wrong, every rank returns the
 * same MT_EMPI, with a message naming the field (and the rank at fault returns its
 * own message). Ranks that declared different fields (names, order, dtypes, global
 * shapes, or a different number of fields: their count and 62 bits of a hash of them,
 * mt_fields_mark, compared in a first MPI_Allreduce of 4 numbers, before the scans;
 * two different declarations of as many fields pass only if their hashes agree, a
 * chance of about 2e-19) all return MT_EMPI, each naming its own declaration
 * (mt_fields_differ). It then calls mt_client_start (not collective: a rank may fail
 * alone there, e.g. on a rendezvous timeout). Blocks as MPI's collectives do, but for
 * its first one (MPI >= 3): a rank whose peers have not all called mt_client_start_mpi
 * within the rendezvous timeout (mt_set_rendezvous; default 60 s, at least 10 s) returns
 * MT_EMPI, its words naming the two right ways (every rank on the MPI start; or the
 * plain mt_client_start on the one rank that streams alone), where it waited for ever.
 */
#ifndef MELISSA_TRAINER_MPI_H
#define MELISSA_TRAINER_MPI_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "melissa_trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline mt_status mt_mpi_fail_(mt_client *c, const char *message) {
    return mt_client_set_error(c, MT_EMPI, message);
}

/* The first collective of the start: extremes = the MPI_MAX of every rank's counts.
 * With MPI >= 3 it is an MPI_Iallreduce polled (MPI_Test, a 1 ms pause between two)
 * until mt_mpi_join_timeout: a rank whose peers never call mt_client_start_mpi (one
 * started with the plain mt_client_start, as a rank whose program disagrees on the
 * communicator does) then fails with mt_mpi_never_joined's words instead of waiting for
 * ever (a collective cannot be cancelled: its request stays pending, and its buffers
 * allocated, since a rank that joins later would still write them). A correct program's
 * ranks all arrive: the reduction completes as a blocking one would. Before MPI 3
 * (no nonblocking collective) it blocks, as before. Returns MT_OK or the status set. */
static inline int mt_mpi_join_(mt_client *c, MPI_Comm comm, const long long counts[4],
                               long long extremes[4], int rank, int size) {
#if MPI_VERSION >= 3
    long long *buf = (long long *)malloc(8 * sizeof *buf);
    if (buf == NULL) return mt_client_set_error(c, MT_ENOMEM, "out of memory");
    for (int i = 0; i < 4; ++i) buf[i] = counts[i];
    MPI_Request request;
    if (MPI_Iallreduce(buf, buf + 4, 4, MPI_LONG_LONG, MPI_MAX, comm, &request) != MPI_SUCCESS) {
        free(buf);
        return mt_mpi_fail_(c, "mt_client_start_mpi: MPI_Iallreduce failed");
    }
    double start = MPI_Wtime(), bound = mt_mpi_join_timeout(c);
    for (;;) {
        int done = 0;
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return mt_mpi_fail_(c, "mt_client_start_mpi: MPI_Test failed"); /* (buf: kept) */
        if (done) break;
        double waited = MPI_Wtime() - start;
        if (waited > bound) return mt_mpi_never_joined(c, rank, size, waited, 0);
        mt_mpi_join_pause();
    }
    for (int i = 0; i < 4; ++i) extremes[i] = buf[4 + i];
    free(buf);
    return MT_OK;
#else
    (void)rank;
    (void)size;
    if (MPI_Allreduce((void *)counts, extremes, 4, MPI_LONG_LONG, MPI_MAX, comm) != MPI_SUCCESS)
        return mt_mpi_fail_(c, "mt_client_start_mpi: MPI_Allreduce failed");
    return MT_OK;
#endif
}

static inline mt_status mt_client_start_mpi(mt_client *c, MPI_Comm comm) {
    int rank, size;
    char msg[1024];
    if (c == NULL) return MT_EINVAL;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return mt_mpi_fail_(c, "mt_client_start_mpi: MPI_Comm_rank/MPI_Comm_size failed");
    /* Every rank must declare the same fields (a hash of their names, order, dtypes and
     * global shapes: equal largest and smallest), or each rank's HELLO would differ and
     * the receiver keep one rank's; and as many, or the scans below would pass buffers of
     * different lengths (MPI aborts the job). The count is compared besides the hash
     * (which covers it) so that no collision of hashes reaches those scans; either
     * differing gets the same words, which list each rank's fields (so their number). */
    size_t n = mt_field_count(c);
    long long mark = (long long)mt_fields_mark(c);
    long long counts[4] = {(long long)n, -(long long)n, mark, -mark}, extremes[4];
    int joined = mt_mpi_join_(c, comm, counts, extremes, rank, size);
    if (joined != MT_OK) return (mt_status)joined;
    if (extremes[0] != -extremes[1] || extremes[2] != -extremes[3])
        return mt_fields_differ(c, rank, size);
    /* local[i]: this rank's count of field i; local[n]: 1 if this rank is at fault. */
    uint64_t *local = (uint64_t *)calloc(3 * (n + 1), sizeof(uint64_t));
    if (local == NULL) return mt_client_set_error(c, MT_ENOMEM, "out of memory");
    uint64_t *offsets = local + (n + 1), *totals = local + 2 * (n + 1);
    mt_status own = mt_set_rank(c, rank, size);
    char own_msg[1024] = "";
    if (own != MT_OK) snprintf(own_msg, sizeof own_msg, "%s", mt_client_error(c));
    for (size_t i = 0; i < n && own == MT_OK; ++i) {
        uint64_t count = 0;
        if (mt_field_part_count(c, i, &count) <= 0) {
            snprintf(own_msg, sizeof own_msg, "field '%s': rank %d declares no part "
                     "(mt_declare_part_count before mt_client_start_mpi)", mt_field_name(c, i),
                     rank);
            own = MT_EMPI;
        }
        local[i] = count;
    }
    local[n] = own != MT_OK;
    int rc = MPI_Exscan(local, offsets, (int)(n + 1), MPI_UINT64_T, MPI_SUM, comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(local, totals, (int)(n + 1), MPI_UINT64_T, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) {
        free(local);
        return mt_mpi_fail_(c, "mt_client_start_mpi: MPI_Exscan/MPI_Allreduce failed");
    }
    if (rank == 0)
        for (size_t i = 0; i <= n; ++i) offsets[i] = 0; /* MPI leaves rank 0's undefined */
    mt_status st = MT_OK;
    if (own != MT_OK) {
        st = mt_client_set_error(c, own == MT_EMPI ? MT_EMPI : own, own_msg);
    } else if (totals[n]) {
        snprintf(msg, sizeof msg, "mt_client_start_mpi failed its checks on %llu other "
                 "rank(s); see the error there", (unsigned long long)totals[n]);
        st = mt_mpi_fail_(c, msg);
    } else {
        size_t used = (size_t)snprintf(msg, sizeof msg,
                                       "the ranks' parts do not add up to the global fields: ");
        int wrong = 0;
        for (size_t i = 0; i < n; ++i) {
            if (totals[i] == mt_field_size(c, i)) continue;
            if (used < sizeof msg)
                used += (size_t)snprintf(msg + used, sizeof msg - used,
                                         "%s'%s' has %llu elements, expected %llu",
                                         wrong ? ", " : "", mt_field_name(c, i),
                                         (unsigned long long)totals[i],
                                         (unsigned long long)mt_field_size(c, i));
            ++wrong;
        }
        /* which number is which, and where each comes from (a user trial read "has 64,
           expected 65" without knowing whether the counts or the shape were wrong) */
        if (wrong && used < sizeof msg)
            snprintf(msg + used, sizeof msg - used,
                     " (has: the sum of the ranks' mt_declare_part_count; expected: the "
                     "size of the global shape given mt_declare_field): fix the counts, "
                     "or the shape");
        if (wrong) st = mt_mpi_fail_(c, msg);
    }
    for (size_t i = 0; i < n && st == MT_OK; ++i) {
        uint64_t count = 0;
        if (mt_field_part_count(c, i, &count) == 1) st = mt_set_part_offset(c, i, offsets[i]);
    }
    free(local);
    if (st != MT_OK) return st;
    return mt_client_start(c);
}

#ifdef __cplusplus
}
#endif

#endif /* MELISSA_TRAINER_MPI_H */
