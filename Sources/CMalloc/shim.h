// glibc's malloc tuning (mallopt, M_ARENA_MAX), which the Glibc module does not export.
#include <malloc.h>
