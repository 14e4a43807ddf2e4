/* receipt_gave_up.c: the words of a close that gives up on its receipts (receipt.c;
 * receipts.py's `unconfirmed` and confirm.py's, whose messages these are): the trainer
 * restarted before it confirmed the BYE, a receiver silent and not connected for the
 * disconnected timeout, or the close timeout passed without progress (or the close's cap
 * in all: close_cap.c). Each says what may be lost and how to run the simulation again. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "internal.h"
#include "close_wait.h"
#include "receipt_gave_up.h"

mt_status mt_receipt_restarted(mt_client *c, const char *whose, const char *run) {
    return mt_fail(c, MT_ETIMEDOUT,
                   "%s: its BYE was not confirmed: the trainer was restarted (the "
                   "rendezvous %s now names run %s) before it confirmed it, and a C "
                   "client without a replay window does not follow it. What it sent "
                   "after the trainer's last checkpoint may be lost: run it again, with "
                   "the same simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu): the "
                   "resumed trainer keeps the steps it holds and takes the others, each "
                   "once",
                   whose, c->rendezvous_used, run,
                   (unsigned long long)c->simulation_id);
}

mt_status mt_receipt_silent(mt_client *c, const char *whose, size_t r, const char *endpoint) {
    char t[32];
    mt_format_double(c->disconnected_timeout, t);
    return mt_fail(c, MT_ETIMEDOUT,
                   "%s: its BYE was not confirmed: the trainer's receiver %zu (%s) has "
                   "not answered, nor been connected, for %s s "
                   "(mt_set_disconnected_timeout): the trainer stopped before it read "
                   "this BYE, or died. What it sent after the trainer's last "
                   "checkpoint may be lost: once a trainer runs there again (a "
                   "preempted one: --resume_from_checkpoint latest), run it again with "
                   "the same simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu): the "
                   "trainer takes the steps it lacks, each once",
                   whose, r, endpoint, t,
                   (unsigned long long)c->simulation_id);
}

mt_status mt_receipt_unconfirmed(mt_client *c, const char *whose, const char *list,
                                 uint64_t have, uint64_t sent, unsigned bad,
                                 const char *bad_last, bool capped) {
    char t[32], ignored[96] = "";
    mt_format_double(c->close_timeout, t);
    if (bad > 0)
        snprintf(ignored, sizeof ignored, "; malformed replies ignored: %u, the last %s",
                 bad, bad_last);
    if (capped) { /* (receipts.py unconfirmed, capped: close_cap.c's words) */
        char words[600];
        mt_close_capped_words(words, sizeof words, c->simulation_id);
        return mt_fail(c, MT_ETIMEDOUT, "%s: the trainer did not confirm this "
                       "simulation's BYE within %d x close_timeout=%s s in all: its "
                       "receivers [%s] ingested %llu of the %llu steps this rank sent "
                       "them: %s", whose, MT_CLOSE_CAP_FACTOR, t, list,
                       (unsigned long long)have, (unsigned long long)sent, words);
    }
    return mt_fail(c, MT_ETIMEDOUT,
                   "%s: the trainer did not confirm this simulation's BYE: its "
                   "receivers [%s] ingested none of its steps for close_timeout=%s s "
                   "(no progress; %llu of the %llu steps this rank sent them not "
                   "confirmed%s). Exiting now loses those still queued here. A trainer "
                   "alive but slower than that (loaded, a high sample-to-insert "
                   "ratio): raise the close timeout (mt_set_close_timeout; it bounds a "
                   "wait without progress); a trainer paused or stuck: once it runs "
                   "again, run this simulation again with the same simulation id "
                   "(MELISSA_TRAINER_SIMULATION_ID=%llu) if the trainer does not name "
                   "it finished",
                   whose, list, t, (unsigned long long)(sent - have),
                   (unsigned long long)sent, ignored,
                   (unsigned long long)c->simulation_id);
}
