/* Shell-style pattern matching with fnmatch(pattern, name, 0)'s rules, for
 * every platform (no <fnmatch.h>): '*' matches any run of characters, '?'
 * one character, "[...]" one character of a set ("[a-c]" ranges, "[!...]"
 * or "[^...]" the complement; a ']' first in the set is itself), '\' takes
 * the next character as itself (a trailing '\' matches nothing); anything
 * else matches itself. An unterminated '[' matches itself.
 *
 * C99 and C++, header only: the library (vkattn_tune's `cases`) and the
 * tools (vkattn-bench and vkattn-tune's --case, examples/common/
 * tool_args.h) share it. */
#ifndef VKATTN_CORE_GLOB_H
#define VKATTN_CORE_GLOB_H

/* Whether the set starting after '[' at *p holds c; *p moves past the set's
 * ']' (returns -1, *p unchanged, when the set is not terminated). */
static inline int vkattn_glob_set(const char** p, char c) {
  const char* s = *p;
  int negate = 0, hit = 0;
  if (*s == '!' || *s == '^') negate = 1, ++s;
  const char* first = s;
  for (;;) {
    char lo = *s;
    if (lo == '\0') return -1;
    if (lo == ']' && s != first) break;
    if (lo == '\\' && s[1]) lo = *++s;
    char hi = lo;
    if (s[1] == '-' && s[2] && s[2] != ']') {
      hi = s[2];
      s += 2;
      if (hi == '\\' && s[1]) hi = *++s;
    }
    if ((unsigned char)lo <= (unsigned char)c && (unsigned char)c <= (unsigned char)hi) hit = 1;
    ++s;
  }
  *p = s + 1;
  return hit != negate;
}

static inline int vkattn_glob_match(const char* pattern, const char* name) {
  const char *star = 0, *resume = 0;
  for (;;) {
    if (*pattern == '*') {
      while (*pattern == '*') ++pattern;
      star = pattern;
      resume = name;
      continue;
    }
    if (*name == '\0') return *pattern == '\0';
    const char* next = pattern;
    int ok = 0;
    if (*pattern == '?') {
      ok = 1, next = pattern + 1;
    } else if (*pattern == '[') {
      const char* s = pattern + 1;
      const int in = vkattn_glob_set(&s, *name);
      if (in < 0)
        ok = *name == '[', next = pattern + 1;
      else
        ok = in, next = s;
    } else if (*pattern == '\\') { /* a trailing '\' matches nothing, as in glibc */
      ok = pattern[1] != '\0' && pattern[1] == *name, next = pattern + 2;
    } else {
      ok = *pattern != '\0' && *pattern == *name, next = pattern + 1;
    }
    if (ok) {
      pattern = next, ++name;
    } else if (star) {
      pattern = star, name = ++resume;
    } else {
      return 0;
    }
  }
}

#endif /* VKATTN_CORE_GLOB_H */
