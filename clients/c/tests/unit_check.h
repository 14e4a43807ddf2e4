/* unit_check.h: what the C unit tests (unit*.c, one program each) share: CHECK, which
 * names a condition that failed (file, line, its text) on stderr, counts it in
 * `failures` and goes on; and unit_report, main's end: the count on stderr, else the
 * program's line of success on stdout (none if NULL), and the exit status (1 on any
 * failure). Included once per program, after its feature macros (_POSIX_C_SOURCE). */
#ifndef MT_UNIT_CHECK_H
#define MT_UNIT_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)

static int unit_report(const char *passed) {
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else if (passed) printf("%s\n", passed);
    return failures ? 1 : 0;
}

#endif
