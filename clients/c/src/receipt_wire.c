/* receipt_wire.c: RECEIPT_QUERY and RECEIPT, the bytes (docs/protocol.md 17b; the
 * Python codec is melissa_trainer/wire/receipt.py): the query a closing client asks, the
 * parser of the reply, and whether a reply confirms the BYE; and whether the connection
 * to a follow socket asked is up (its monitor's events). The asking is receipt.c's. */
#include <errno.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "receipt_wire.h"

const char *mt_receipt_parse(const uint8_t *f, size_t len, uint64_t simulation_id,
                             uint64_t request_id, uint32_t rank, uint32_t world,
                             mt_receipt *out) {
    /* Strict on every field read (section 17b's table); tolerant, as mt_admission_parse,
     * of what a later revision could add without moving them: the flags, bytes after the
     * reason (the Python decoder rejects both). */
    if (len < RECEIPT_HEAD) return "truncated";
    if (memcmp(f, "MTRN", 4) != 0) return "bad_magic";
    if (f[4] != MT_PROTOCOL_VERSION) return "bad_version";
    if (f[5] != KIND_RECEIPT) return "bad_kind";
    if (mt_get_u64(f + 8) != simulation_id || mt_get_u64(f + 16) != request_id)
        return "bad_request_id"; /* (a reply to another query) */
    if (mt_get_u32(f + 24) != rank || mt_get_u32(f + 28) != world) return "bad_rank";
    int admission = f[32], bye = f[33];
    size_t size = (size_t)f[34] | (size_t)f[35] << 8;
    uint64_t steps = mt_get_u64(f + 36), bye_steps = mt_get_u64(f + 44);
    uint64_t nonfinite = mt_get_u64(f + 52);
    if (admission > MT_ADMISSION_REFUSED || bye > MT_RECEIPT_FINISHED) return "bad_request";
    if ((bye != MT_RECEIPT_BYE && bye_steps != 0) || nonfinite > steps) return "bad_request";
    if (size > MAX_REASON_BYTES || (admission == MT_ADMISSION_REFUSED) != (size > 0))
        return "bad_size";
    if (len < RECEIPT_HEAD + size) return "bad_size";
    if (!mt_utf8_valid((const char *)f + RECEIPT_HEAD, size)) return "bad_request";
    out->admission = admission;
    out->bye = bye;
    out->reason = (const char *)f + RECEIPT_HEAD;
    out->reason_len = size;
    out->steps = steps;
    out->bye_steps = bye_steps;
    out->nonfinite = nonfinite;
    return NULL;
}

int mt_receipt_decides(const mt_receipt *r, uint64_t expected) {
    if (r->admission == MT_ADMISSION_REFUSED) return -1;
    /* (a BYE of an earlier attempt with another count is not this one's) */
    if (r->bye == MT_RECEIPT_FINISHED || (r->bye == MT_RECEIPT_BYE && r->bye_steps == expected))
        return 1;
    return 0;
}

size_t mt_receipt_query(uint8_t *out, uint64_t simulation_id, uint64_t request_id,
                        uint64_t bye_steps, int rank, int ranks, const char *run_id) {
    size_t run = run_id != NULL ? strlen(run_id) : 0; /* (checked at start: <= 64) */
    if (run > MAX_RUN_ID) run = 0;
    mt_put_prefix(out, KIND_RECEIPT_QUERY, 0, simulation_id);
    mt_put_u64(out + 16, request_id);
    mt_put_u64(out + 24, bye_steps);
    mt_put_u16(out + 32, (uint16_t)rank);
    mt_put_u16(out + 34, (uint16_t)ranks);
    out[36] = (uint8_t)run;
    out[37] = 0;
    if (run) memcpy(out + QUERY_FIXED, run_id, run);
    return QUERY_FIXED + run;
}

bool mt_receipt_linked_now(void *monitor, bool linked) {
    for (;;) {
        uint8_t frame[6]; /* u16 event, u32 value; then a frame with the endpoint */
        int n = zmq_recv(monitor, frame, sizeof frame, ZMQ_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return linked;
        char address[256];
        while (zmq_recv(monitor, address, sizeof address, 0) < 0 && errno == EINTR)
            continue; /* (always follows) */
        uint16_t event = 0;
        if (n >= 2) memcpy(&event, frame, sizeof event);
        linked = event == ZMQ_EVENT_CONNECTED;
    }
}
