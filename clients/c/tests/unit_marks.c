/* unit_marks.c: the C unit tests (CTest) of which DATA sent alone with a copy are marks
 * (mt_mark_due, mt_mark_sent; send_held.c): tiny ones one in MT_MARK_MOST, those of at least
 * MT_MARK_BYTES / MT_MARK_EVERY one in MT_MARK_EVERY, those between one per
 * MT_MARK_BYTES; a client's first is a mark. The cases of the Python client's
 * tests/client/test_marks_rule.py, whose rule this is. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

/* The marks among `n` DATA of `sizes` (cycled, `n_sizes` of them) from a client's start,
 * their indices into `out` (at most `most`); how many there were. */
static size_t marks_of(const size_t *sizes, size_t n_sizes, size_t n, size_t *out,
                       size_t most) {
    mt_client *c = NULL;
    CHECK(mt_client_create(&c) == MT_OK);
    if (c == NULL) return 0;
    size_t found = 0;
    for (size_t i = 0; i < n; ++i) {
        bool mark = mt_mark_due(&c->marks);
        if (mark && found < most) out[found] = i;
        found += mark;
        mt_mark_sent(&c->marks, mark, sizes[i % n_sizes]);
    }
    mt_client_abort(c);
    return found;
}

static void test_one_size(size_t size, size_t every) {
    size_t got[8];
    size_t n = marks_of(&size, 1, 3 * every + 1, got, 8);
    CHECK(n == 4);
    for (size_t k = 0; k < 4 && k < n; ++k)
        if (got[k] != k * every) {
            fprintf(stderr, "size %zu: mark %zu at %zu, want %zu\n", size, k, got[k],
                    k * every);
            ++failures;
        }
}

static void test_mixed(void) {
    /* a mark, 15 tiny, then 64 KiB ones: the 5th of these is a mark (before it, 4 x 64
     * KiB and the tiny ones: MT_MARK_BYTES passed, the count past MT_MARK_EVERY) */
    size_t sizes[37], got[8];
    for (size_t i = 0; i < 37; ++i) sizes[i] = i < 16 ? 40 : 65536;
    size_t n = marks_of(sizes, 37, 37, got, 8);
    CHECK(n == 3 && got[0] == 0 && got[1] == 20 && got[2] == 36);
    /* many bytes, too few messages: MT_MARK_EVERY first */
    size_t big_then_tiny[21];
    for (size_t i = 0; i < 21; ++i) big_then_tiny[i] = i == 0 ? (size_t)1 << 20 : 40;
    n = marks_of(big_then_tiny, 21, 21, got, 8);
    CHECK(n == 2 && got[0] == 0 && got[1] == MT_MARK_EVERY);
}

int main(void) {
    CHECK(MT_MARK_EVERY == 16 && MT_MARK_BYTES == 262144 && MT_MARK_MOST == 1024);
    CHECK(MT_MARK_BYTES / MT_MARK_EVERY == 16384); /* (the size marked one in 16) */
    test_one_size(40, MT_MARK_MOST); /* tiny: MT_MARK_MOST bounds them */
    test_one_size(200, MT_MARK_MOST);
    test_one_size(1024, 256); /* one per MT_MARK_BYTES */
    test_one_size(4000, 66);  /* ceil(262144 / 4000) */
    test_one_size(16384, MT_MARK_EVERY);
    test_one_size(56000, MT_MARK_EVERY); /* the close tests' steps */
    test_one_size(65536, MT_MARK_EVERY);
    test_mixed();
    return unit_report("unit_marks: ok");
}
