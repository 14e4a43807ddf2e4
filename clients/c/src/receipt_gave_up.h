/* receipt_gave_up.h: the words of a close that gives up on its receipts
 * (receipt_gave_up.c). Not installed; after internal.h. Each sets c's message and
 * returns MT_ETIMEDOUT; `whose`: "simulation S rank R". */
#ifndef MT_RECEIPT_GAVE_UP_H
#define MT_RECEIPT_GAVE_UP_H

#include "internal.h"

/* The trainer was restarted (the rendezvous now names run `run`) before it confirmed
 * the BYE, and the client follows it only with a replay window. */
mt_status mt_receipt_restarted(mt_client *c, const char *whose, const char *run);
/* Receiver `r` (`endpoint`) neither answered nor was connected for
 * c->disconnected_timeout s. */
mt_status mt_receipt_silent(mt_client *c, const char *whose, size_t r, const char *endpoint);
/* c->close_timeout passed without progress (`capped`: the close's cap in all ended it):
 * the receivers `list` ("0, 2") not confirmed ingested `have` of the `sent` steps; `bad`
 * malformed replies were ignored, the last for `bad_last`. */
mt_status mt_receipt_unconfirmed(mt_client *c, const char *whose, const char *list,
                                 uint64_t have, uint64_t sent, unsigned bad,
                                 const char *bad_last, bool capped);

#endif
