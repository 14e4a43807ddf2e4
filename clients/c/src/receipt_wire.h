/* receipt_wire.h: the sizes of RECEIPT_QUERY and RECEIPT (docs/protocol.md 17b), shared
 * by their codec (receipt_wire.c) and the close's questions (receipt.c), and the watch of
 * a follow socket's connection. Not installed; after internal.h. */
#ifndef MT_RECEIPT_WIRE_H
#define MT_RECEIPT_WIRE_H

#define KIND_RECEIPT_QUERY 13
#define KIND_RECEIPT 14
#define QUERY_FIXED 38u   /* the prefix, request id, BYE steps, rank, count, run id length, 0 */
#define RECEIPT_HEAD 60u  /* the prefix, request id, rank, world, admission, bye, reason
                           * length, steps, BYE steps, non-finite */
#define MAX_REASON_BYTES 4096u
#define MAX_RUN_ID 64u

/* Whether the monitored DEALER asked is connected now (`linked`: before), from the
 * events its monitor holds (read all, without waiting). */
bool mt_receipt_linked_now(void *monitor, bool linked);

#endif
