/* Argument checks shared by the programs users run as tools (vkattn-bench,
 * vkattn-tune, vkattn-info) and the examples, which take no argument. C99
 * and C++; header only. Every argument is checked before any acts: the
 * tools parse all of them first, then create a context. */
#ifndef VKATTN_TOOL_ARGS_H
#define VKATTN_TOOL_ARGS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/glob.h"

/* A whole decimal number in [lo, hi] (no sign, no suffix, no spaces): 1
 * and *out set, or 0. */
static inline int tool_parse_u64(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t x = 0;
  const char* p = s;
  if (!s || !*s) return 0;
  for (; *p; ++p) {
    uint64_t d;
    if (*p < '0' || *p > '9') return 0;
    d = (uint64_t)(*p - '0');
    if (x > (UINT64_MAX - d) / 10) return 0;
    x = x * 10 + d;
  }
  if (x < lo || x > hi) return 0;
  *out = x;
  return 1;
}

/* A finite decimal number > lo and <= hi ("1.5", "30"): 1 and *out set, or 0. */
static inline int tool_parse_seconds(const char* s, double lo, double hi, double* out) {
  char* end = NULL;
  double x;
  if (!s || !*s || *s == ' ' || *s == '+' || *s == '-') return 0;
  x = strtod(s, &end);
  if (*end != '\0' || !(x > lo && x <= hi)) return 0;
  *out = x;
  return 1;
}

/* Shell-style glob, fnmatch(pattern, name, 0)'s rules (core/glob.h). */
static inline int tool_glob_match(const char* pattern, const char* name) {
  return vkattn_glob_match(pattern, name);
}

/* 1 when `path` can be written (created, or appended to): an existing file
 * is left as it was, a new one removed again. */
static inline int tool_writable(const char* path) {
  FILE* f = fopen(path, "rb");
  const int existed = f != NULL;
  if (f) fclose(f);
  f = fopen(path, "ab");
  if (!f) return 0;
  fclose(f);
  if (!existed) remove(path);
  return 1;
}

/* The examples take no argument: refuses any (usage line, exit 2). */
#define TOOL_NO_ARGUMENTS(argc, argv, name)                                       \
  do {                                                                            \
    if ((argc) > 1) {                                                             \
      fprintf(stderr, "usage: %s (no arguments; got \"%s\")\n", name, (argv)[1]); \
      return 2;                                                                   \
    }                                                                             \
  } while (0)

#endif /* VKATTN_TOOL_ARGS_H */
