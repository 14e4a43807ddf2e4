/* close_cap.c: the close's cap in all (melissa_trainer/client/delivery.py CLOSE_CAP_FACTOR,
 * capped_deadline and capped_words, whose rule and words these are). Both phases of
 * mt_client_close, the delivery of what is queued and the BYE (close_wait.c) and the
 * trainer's receipts (receipt.c), wait c->close_timeout without progress, and at most
 * MT_CLOSE_CAP_FACTOR close timeouts in all from the close's start (c->close_began): one
 * budget for the whole close, as a user reads "10 x close_timeout in all" (per phase, a
 * close would last twice that). A receiver that takes a message, or ingests a step, now
 * and then (a trickle) does not hold the solver's exit for ever. A restarted trainer
 * followed starts the budget again (close.c: its replay is delivered anew). */
#include <stdio.h>

#include "internal.h"
#include "close_wait.h"

double mt_close_cap(const mt_client *c) {
    if (c->close_timeout < 0) return -1.0;
    return c->close_began + MT_CLOSE_CAP_FACTOR * c->close_timeout;
}

double mt_close_capped(double deadline, double until, double cap, bool *capped) {
    *capped = cap >= 0 && until > cap;
    if (*capped) until = cap;
    return until > deadline ? until : deadline;
}

void mt_close_capped_words(char *out, size_t size, uint64_t simulation_id) {
    snprintf(out, size, "the receivers took some of them, too slowly to take all (a close "
             "waits close_timeout without progress, and %d times it in all: a receiver that "
             "takes a message now and then does not hold the exit for ever). A trainer alive "
             "but this slow: raise the close timeout (mt_set_close_timeout; it moves both "
             "bounds); then, or for a trainer stuck, run this simulation again with the same "
             "simulation id (MELISSA_TRAINER_SIMULATION_ID=%llu)",
             MT_CLOSE_CAP_FACTOR, (unsigned long long)simulation_id);
}

void mt_close_cap_bound(char *out, size_t size, const char *setter, double timeout) {
    char t[32];
    mt_format_double(timeout, t);
    snprintf(out, size, "%s=%s s, %d times it in all: the close's cap", setter, t,
             MT_CLOSE_CAP_FACTOR);
}
