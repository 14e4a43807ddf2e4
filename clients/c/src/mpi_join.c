/* mpi_join.c: what melissa_trainer_mpi.h (and the Fortran mt_start_mpi) need to bound
 * their first collective: the bound, a pause between two polls, and the words of a rank
 * whose peers never joined it.
 *
 * Why: the MPI start runs its collectives before any HELLO. A simulation whose ranks
 * disagree on their communicator (rank 0 on mt_client_start_mpi, rank 1 on the plain
 * mt_client_start) left rank 0 in MPI_Allreduce for ever, unheard: rank 1 said HELLO as
 * rank 0 of 1 and streamed alone, and the job ran until the launcher killed it (600 s by
 * default), its slot held, the next simulation queued behind it (hcmpi, 2026-12-06). Now
 * the first collective is nonblocking (MPI_Iallreduce), polled until this bound, and the
 * rank that waited fails with words naming the two ways to start right. A correct
 * program, whose every rank calls the MPI start, passes it as soon as the last rank
 * arrives; one that starts on one rank only (the plain start) never enters it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <time.h>

#include "internal.h"

/* The shortest bound, in seconds: a rendezvous timeout of 0 ("look once") must not fail
 * a rank whose peers arrive a moment later. */
#define MT_MPI_JOIN_FLOOR_S 10.0

double mt_mpi_join_timeout(const mt_client *c) {
    /* The rendezvous timeout (mt_set_rendezvous; default 60 s) is this client's bound on
     * waiting, at its start, for the study to be ready; a rank's peers are part of it. */
    double bound = c == NULL ? 60.0 : c->rendezvous_timeout;
    return isnan(bound) || bound < MT_MPI_JOIN_FLOOR_S ? MT_MPI_JOIN_FLOOR_S : bound;
}

void mt_mpi_join_pause(void) {
    /* 1 ms: a rank that waits must not take the core of the rank it waits for (ranks
     * oversubscribe a node's cores in tests and small runs); MPI_Test between two pauses
     * makes MPI's progress. */
    struct timespec pause = {0, 1000000L};
    nanosleep(&pause, NULL);
}

mt_status mt_mpi_never_joined(mt_client *c, int rank, int ranks, double waited_s, int fortran) {
    if (c == NULL) return MT_EINVAL;
    const char *mpi = fortran ? "mt_start_mpi" : "mt_client_start_mpi";
    const char *plain = fortran ? "mt_start" : "mt_client_start";
    return mt_fail(c, MT_EMPI,
                   "%s: this rank (%d of %d) waited %.0f s for the other %d rank(s) of the "
                   "communicator to call %s too, and not all of them did (a rank that starts "
                   "with the plain %s, or not at all, never joins). Every rank of the "
                   "communicator must call %s on it; or, where one rank streams the whole "
                   "fields alone, call the plain %s on that rank only and %s on none. The "
                   "bound is the rendezvous timeout (mt_set_rendezvous; default 60 s, at "
                   "least 10 s): raise it if a rank of yours starts that much later",
                   mpi, rank, ranks, waited_s, ranks - 1, mpi, plain, mpi, plain, mpi);
}
