/* unit_close_cap.c: the C unit test (CTest) of the bound a close's waiting notice names
 * once the cap in all holds its deadline back (close_cap.c mt_close_cap_bound): the
 * Python client's words (delivery.py cap_bound; tests/client/test_close_cap_notice.py
 * pins the same text), with the C setter. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "close_wait.h"
#include "unit_check.h"

int main(void) {
    char out[128];
    mt_close_cap_bound(out, sizeof out, "mt_set_close_timeout", 2.0);
    CHECK(strcmp(out, "mt_set_close_timeout=2.0 s, 10 times it in all: the close's cap") == 0);
    if (strcmp(out, "mt_set_close_timeout=2.0 s, 10 times it in all: the close's cap") != 0)
        fprintf(stderr, "got: %s\n", out);
    return unit_report("unit_close_cap: ok");
}
