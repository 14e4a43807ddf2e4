/* User trial 41: trial32_solver.c with each line stamped with the wall clock,
 * "ASK t status version seconds @wallclock detail" (trial41_drive.py parses it). Built as
 * trial32_solver.c says (its folder holds both):
 *   cc trial41_solver.c $(pkg-config --cflags --libs melissa-trainer-client) -lm -Wl,-rpath,$MT_PREFIX/lib
 * Usage: ./a.out STEPS TIMEOUT_S [BAD], as trial32_solver.c's. */
#define TRIAL_STAMP 1
#include "trial32_solver.c"
