/* encode.h: the wire encoding of encode.c (the growing buffer, HELLO, DATA headers, BYE)
 * and send_held.c's marks. Not installed; internal.h, which every source includes,
 * includes it at its end, after the types it uses. */
#ifndef MT_ENCODE_H
#define MT_ENCODE_H

#include "internal.h"

/* encode.c */
typedef struct mt_buf {
    char *data;
    size_t len, cap;
    bool oom;
} mt_buf;
/* Each append leaves b->data NUL-terminated (not in b->len; b->oom: as the last one left it). */
void mt_buf_put(mt_buf *b, const void *p, size_t n);
void mt_buf_puts(mt_buf *b, const char *s);
void mt_buf_printf(mt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mt_buf_json_string(mt_buf *b, const char *s, size_t n);
mt_status mt_encode_hello(mt_client *c, mt_buf *out);
void mt_put_u16(uint8_t *p, uint16_t v);
void mt_put_u32(uint8_t *p, uint32_t v);
void mt_put_u64(uint8_t *p, uint64_t v);
/* The little-endian reads of the replies' fields (reply.c, admission.c, receipt.c). */
uint32_t mt_get_u32(const uint8_t *p);
uint64_t mt_get_u64(const uint8_t *p);
void mt_put_prefix(uint8_t *p, int kind, uint16_t flags, uint64_t simulation_id);
/* Whether `count` values of `dtype` at `data` are all finite (float dtypes only: false
 * for the others, which carry no FLAG_FINITE), by their exponent bits (exact). */
bool mt_all_finite(mt_dtype dtype, const void *data, uint64_t count);
mt_status mt_build_headers(mt_client *c);
void mt_encode_bye(uint8_t out[28], uint64_t simulation_id, int rank, int ranks, uint64_t steps);

/* Whether the next DATA sent alone with a copy is a mark (MT_MARK_EVERY's rule), and the
 * count after one of them, `bytes` long (header and payload), was sent (send_held.c). */
bool mt_mark_due(const mt_marks *m);
void mt_mark_sent(mt_marks *m, bool mark, size_t bytes);

#endif
