// core/glob.h: the portable pattern match of vkattn_tune's `cases` and the
// tools' --case must give fnmatch(pattern, name, 0)'s answers. On a
// platform with <fnmatch.h> it is compared with it over random patterns
// and names of the characters that matter; everywhere, over fixed cases.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/glob.h"
#if __has_include(<fnmatch.h>)
#include <fnmatch.h>
#define VKATTN_TEST_HAS_FNMATCH 1
#endif

TEST(Glob, FixedCases) {
  struct Case {
    const char *pattern, *name;
    bool match;
  };
  const Case cases[] = {
      {"decode-*", "decode-16x2048", true},
      {"decode-*", "prefill-1k", false},
      {"*", "", true},
      {"?", "", false},
      {"*-int8", "decode-16x2048-int8", true},
      {"decode-1?x*", "decode-16x512", true},
      {"[dp]*", "prefill-1k", true},
      {"[!dp]*", "prefill-1k", false},
      {"[^dp]*", "mla-decode", true},
      {"decode-1[0-9]x*", "decode-16x512", true},
      {"[]]", "]", true},
      {"[a-]", "-", true},
      {"[", "[", true},
      {"[abc", "[abc", true},
      {"\\*", "*", true},
      {"\\*", "a", false},
      {"a*b*c", "aXbYc", true},
      {"a*b*c", "aXbY", false},
      {"**x", "yyx", true},
      {"", "", true},
  };
  for (const Case& c : cases)
    EXPECT_EQ(vkattn_glob_match(c.pattern, c.name) != 0, c.match) << c.pattern << " vs " << c.name;
}

#ifdef VKATTN_TEST_HAS_FNMATCH
TEST(Glob, AgreesWithFnmatch) {
  std::mt19937 rng(6);
  const std::string pat_chars = "ab-*?[]!^\\", name_chars = "ab-[]!^*?\\";
  auto draw = [&](const std::string& from, size_t max) {
    std::string s(rng() % (max + 1), ' ');
    for (char& c : s) c = from[rng() % from.size()];
    return s;
  };
  int compared = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::string p = draw(pat_chars, 7), n = draw(name_chars, 6);
    const int want = fnmatch(p.c_str(), n.c_str(), 0);
    if (want != 0 && want != FNM_NOMATCH) continue;  // (an error: not a verdict)
    ASSERT_EQ(vkattn_glob_match(p.c_str(), n.c_str()) != 0, want == 0)
        << "pattern \"" << p << "\" name \"" << n << "\"";
    ++compared;
  }
  EXPECT_GT(compared, 100000);
}
#endif
