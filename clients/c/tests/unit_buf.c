/* unit_buf.c: a buffer (encode.c mt_buf) is a NUL-terminated string after each append:
 * mt_buf_puts and mt_buf_put left it without its NUL (only mt_buf_printf put one), and
 * two callers read such a buffer as a string past its end (hmisc). The buffer is first
 * filled and cut back, so that the bytes after the cut are not zero: without the NUL,
 * strcmp reads them. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

/* A buffer holding "x" repeated 300 times, cut back to nothing (its bytes left there). */
static mt_buf dirty(void) {
    mt_buf b = {0};
    for (int i = 0; i < 300; ++i) mt_buf_printf(&b, "x");
    b.len = 0;
    return b;
}

int main(void) {
    mt_buf b = dirty();
    mt_buf_puts(&b, "ab");
    CHECK(!b.oom && b.len == 2 && strcmp(b.data, "ab") == 0);
    mt_buf_put(&b, "cd", 2); /* (bytes: a string after them too) */
    CHECK(!b.oom && b.len == 4 && strcmp(b.data, "abcd") == 0);
    mt_buf_printf(&b, "%d", 5);
    mt_buf_puts(&b, "; ");
    CHECK(!b.oom && b.len == 7 && strcmp(b.data, "abcd5; ") == 0);
    free(b.data);
    mt_buf e = {0}; /* (nothing appended: no data, no string yet) */
    mt_buf_puts(&e, "");
    CHECK(!e.oom && e.len == 0 && e.data != NULL && e.data[0] == '\0');
    free(e.data);
    return unit_report("all buffer tests passed");
}
