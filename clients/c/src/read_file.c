/* read_file.c: a rendezvous file read whole (mt_read_file: a stopped one holds its stop
 * record, stop_record.c), as the rendezvous, the close and a predict's lookup read it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define MAX_FILE (4u << 20) /* bytes: a record is at most about 800 KiB (stop_record.py) */

char *mt_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    mt_buf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < MAX_FILE)
        mt_buf_put(&b, chunk, got);
    fclose(f);
    mt_buf_put(&b, "", 1);
    if (b.oom || b.len > MAX_FILE) {
        free(b.data);
        return NULL;
    }
    return b.data;
}
