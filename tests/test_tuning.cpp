// Tuning on the device (src/ops/attention/tune.h, src/core/tuning_file.h):
// vkattn_tune measures candidates within a budget and records a winner per
// class that a later context uses before the device table (kernel log
// source=tuned); damaged, foreign or stale tuning files are ignored with a
// logged line and right answers; VKATTN_TUNING=0 and forced options win
// over the file; a candidate that fails its self-check is never chosen;
// two tuners at once leave a valid file. Every test keeps its files in a
// folder of its own (VKATTN_PIPELINE_CACHE_DIR), so nothing a developer
// tuned changes what is tested.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache_folder.h"
#include "reference/attention_ref.h"
#include "reference/dtype_util.h"
#include "test_util.h"

using namespace vkattn_test;

namespace {

std::string tuning_file(const std::string& dir) {
  return file_named(dir, "tuning-");
}

// The entries of a valid tuning file (false if it is not one).
bool valid_tuning(const std::string& text, size_t* entries, size_t* sections = nullptr) {
  auto entry_ok = [](const std::string& line) {
    std::istringstream l(line);
    std::string key, opts;
    double ms, table_ms;
    return (l >> key >> opts >> ms >> table_ms) && key.find('/') != std::string::npos;
  };
  return valid_device_file(text, "tuning", entry_ok, entries, sections);
}

struct Event {
  std::string name, candidate;
  double ms;
  double at;  // seconds since the tuning started
};

struct Events {
  std::vector<Event> list;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

void record_event(void* user, const char* name, const char* candidate, double ms) {
  auto* e = static_cast<Events*>(user);
  const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - e->t0).count();
  e->list.push_back({name, candidate, ms, at});
}

vkattn_status tune(vkattn_context* ctx, double seconds, const char* pattern, Events* ev) {
  vkattn_tune_desc d;
  vkattn_tune_desc_init(&d);
  d.seconds = seconds;
  const char* cases[1] = {pattern};
  d.num_cases = pattern ? 1 : 0;
  d.cases = pattern ? cases : nullptr;
  d.progress = &record_event;
  d.user = ev;
  ev->t0 = std::chrono::steady_clock::now();
  return vkattn_tune(ctx, &d);
}

// A decode-16x512 call (16 sequences of one token over 512 keys in caller
// pools of 16-token pages, 32/8 heads, d 128, f16): max error against the
// reference, and the kernel log.
struct CallResult {
  vkattn_status status = VKATTN_SUCCESS;
  double max_err = 0;
};

CallResult decode_call(vkattn_context* ctx) {
  const int B = 16, H = 32, Hkv = 8, d = 128, u = 512, ps = 16, per = u / ps, np = B * per;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  // Random f16 values (bits), and the f32 they stand for in *host.
  auto f16 = [&](size_t n, std::vector<float>* host) {
    host->resize(n);
    std::vector<uint16_t> bits(n);
    for (size_t i = 0; i < n; ++i) {
      bits[i] = vkattn_ref::f32_to_f16(uni(rng));
      (*host)[i] = vkattn_ref::f16_to_f32(bits[i]);
    }
    return bits;
  };
  std::vector<float> hq, hk, hv;
  const auto bq = f16(size_t(B) * H * d, &hq);
  const auto bk = f16(size_t(np) * ps * Hkv * d, &hk);
  const auto bv = f16(size_t(np) * ps * Hkv * d, &hv);
  auto make = [&](std::vector<int64_t> shape, const std::vector<uint16_t>* data) {
    vkattn_tensor* t = nullptr;
    EXPECT_EQ(vkattn_tensor_create(ctx, VKATTN_F16, uint32_t(shape.size()), shape.data(), &t),
              VKATTN_SUCCESS);
    if (data) EXPECT_EQ(vkattn_tensor_write(t, data->data(), data->size() * 2), VKATTN_SUCCESS);
    return t;
  };
  vkattn_tensor* q = make({B, H, d}, &bq);
  vkattn_tensor* kp = make({np, ps, Hkv, d}, &bk);
  vkattn_tensor* vp = make({np, ps, Hkv, d}, &bv);
  vkattn_tensor* out = make({B, H, d}, nullptr);
  std::vector<int32_t> cu_q(B + 1), lens(B, u), indptr(B + 1), pages(np);
  for (int b = 0; b <= B; ++b) cu_q[b] = b, indptr[b] = b * per;
  for (int i = 0; i < np; ++i) pages[i] = (i * 37 + 11) % np;  // a permutation (gcd(37, 512) = 1)
  vkattn_attention_desc ad;
  vkattn_attention_desc_init(&ad);
  ad.num_heads = H, ad.num_kv_heads = Hkv, ad.head_dim = d;
  CallResult r;
  r.status = vkattn_attention_paged(ctx, &ad, B, cu_q.data(), lens.data(), indptr.data(),
                                    pages.data(), ps, q, kp, vp, out);
  if (r.status == VKATTN_SUCCESS) {
    std::vector<uint16_t> ob(size_t(B) * H * d);
    EXPECT_EQ(vkattn_tensor_read(out, ob.data(), ob.size() * 2), VKATTN_SUCCESS);
    std::vector<float> kk(size_t(u) * Hkv * d), vv(size_t(u) * Hkv * d), want(size_t(H) * d),
        lse(H);
    vkattn::ref::AttentionParams p;
    p.num_heads = H, p.num_kv_heads = Hkv, p.head_dim = d;
    for (int b = 0; b < B; b += 5) {
      for (int j = 0; j < u; ++j) {
        const size_t page = pages[b * per + j / ps], slot = j % ps;
        std::copy_n(&hk[(page * ps + slot) * Hkv * d], Hkv * d, &kk[size_t(j) * Hkv * d]);
        std::copy_n(&hv[(page * ps + slot) * Hkv * d], Hkv * d, &vv[size_t(j) * Hkv * d]);
      }
      const int32_t cq[2] = {0, 1}, ck[2] = {0, u};
      vkattn::ref::attention_varlen(p, 1, cq, ck, &hq[size_t(b) * H * d], kk.data(), vv.data(),
                                    want.data(), lse.data());
      for (int e = 0; e < H * d; ++e) {
        const float got = vkattn_ref::f16_to_f32(ob[size_t(b) * H * d + e]);
        r.max_err = std::max(r.max_err, std::fabs(double(got) - want[e]));
      }
    }
  }
  for (vkattn_tensor* t : {q, kp, vp, out}) vkattn_tensor_destroy(t);
  return r;
}

const char* kClass = "decode/d128/dv128/g4/q=f16/kv=f16/paged/k512";

}  // namespace

// A tuning run records a winner for the class of decode-16x512; a later
// context's call of that class says source=tuned and is right.
TEST(Tuning, WinnerIsUsedByALaterContext) {
  TempDir dir(/*with_pipelines=*/true);
  Events ev;
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    ASSERT_EQ(tune(ctx, 8, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  ASSERT_FALSE(ev.list.empty());
  EXPECT_EQ(ev.list.front().candidate, "-");  // the device table's choice first
  EXPECT_EQ(ev.list.back().candidate.rfind("winner: ", 0), 0u);
  size_t n = 0;
  const std::string text = slurp(tuning_file(dir.path));
  ASSERT_TRUE(valid_tuning(text, &n)) << text;
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(contains(text, kClass)) << text;
  const std::string log =
      with_context(dir.path, {{"VKATTN_LOG", "kernels"}}, [&](vkattn_context* ctx) {
        const CallResult r = decode_call(ctx);
        ASSERT_EQ(r.status, VKATTN_SUCCESS) << vkattn_last_error();
        EXPECT_LT(r.max_err, 2e-3);
      });
  EXPECT_TRUE(contains(log, "source=tuned")) << log;
  EXPECT_FALSE(contains(log, "source=table")) << log;
}

// A file naming another configuration (tiled) for the class: the call runs
// it; VKATTN_TUNING=0 and a forced family win over the file.
TEST(Tuning, FileEntriesChooseTheKernel) {
  TempDir dir(/*with_pipelines=*/true);
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    Events ev;
    ASSERT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  const std::string path = tuning_file(dir.path);
  std::string text = slurp(path);
  const size_t at = text.find(kClass);
  ASSERT_NE(at, std::string::npos) << text;
  const size_t opt = at + std::strlen(kClass) + 1;
  text.replace(opt, text.find(' ', opt) - opt, "kernel=tiled,lanes_per_row=8");
  spit(path, text);
  auto run = [&](ScopedEnv::Vars env) {
    env.emplace_back("VKATTN_LOG", "kernels");
    return with_context(dir.path, env, [&](vkattn_context* ctx) {
      const CallResult r = decode_call(ctx);
      ASSERT_EQ(r.status, VKATTN_SUCCESS) << vkattn_last_error();
      EXPECT_LT(r.max_err, 2e-3);
    });
  };
  const std::string tuned = run({});
  EXPECT_TRUE(contains(tuned, "family=tiled") && contains(tuned, "source=tuned")) << tuned;
  const std::string off = run({{"VKATTN_TUNING", "0"}});
  EXPECT_TRUE(contains(off, "source=table") && !contains(off, "family=tiled")) << off;
  const std::string env = run({{"VKATTN_ATTN_KERNEL", "lanes"}});
  EXPECT_TRUE(contains(env, "family=lanes") && contains(env, "source=env")) << env;
}

// Damaged files, and files holding only other devices', drivers' or
// builds' sections: one line under VKATTN_LOG=files, the device table's
// choice (source=table), right answers; the other sections stay.
TEST(Tuning, DamagedForeignAndStaleFilesAreIgnored) {
  TempDir dir(/*with_pipelines=*/true);
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    Events ev;
    ASSERT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  const std::string path = tuning_file(dir.path);
  const std::string good = slurp(path);
  const std::string header = good.substr(0, good.find('\n'));
  auto replace_field = [&](const char* field, const char* value) {
    std::string t = good;
    const size_t at = t.find(field) + std::strlen(field);
    t.replace(at, t.find_first_of(" \n", at) - at, value);
    return t;
  };
  struct Damage {
    const char* name;
    std::string text;
    const char* why;
  };
  const std::vector<Damage> cases = {
      {"foreign device", replace_field("device=", "00112233445566778899aabbccddeeff"),
       "no section for this device, driver and vkattn build"},
      {"stale build", replace_field("build=", "0123456789abcdef"), "no section for this device"},
      {"other driver", replace_field("driver=", "deadbeef"), "no section for this device"},
      {"corrupt", header + "\n" + kClass + " kernel=banana 1 2\nend\n", "corrupt line"},
      {"truncated", good.substr(0, good.rfind("end")), "truncated"},
      {"not ours", "hello\n", "a line outside any section"},
  };
  for (const Damage& c : cases) {
    SCOPED_TRACE(c.name);
    spit(path, c.text);
    const std::string log =
        with_context(dir.path, {{"VKATTN_LOG", "kernels,files"}}, [&](vkattn_context* ctx) {
          const CallResult r = decode_call(ctx);
          ASSERT_EQ(r.status, VKATTN_SUCCESS) << vkattn_last_error();
          EXPECT_LT(r.max_err, 2e-3);
        });
    EXPECT_TRUE(contains(log, "vkattn: ignoring tuning file")) << log;
    EXPECT_TRUE(contains(log, c.why)) << log;
    EXPECT_TRUE(contains(log, "source=table")) << log;
  }
}

// E6 defect 3, the tuning file: another build's winners stay in the file
// (its section, after this build's, byte for byte) when this build tunes;
// before, this build's vkattn_tune replaced them.
TEST(Tuning, AnotherBuildsWinnersStay) {
  TempDir dir(/*with_pipelines=*/true);
  auto run_tune = [&] {
    return with_context(dir.path, {}, [&](vkattn_context* ctx) {
      Events ev;
      ASSERT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
    });
  };
  run_tune();
  const std::string path = tuning_file(dir.path);
  std::string theirs = slurp(path);
  theirs.replace(theirs.find("build=") + 6, 16, "00000000000000b2");
  spit(path, theirs);
  const std::string log = run_tune();
  EXPECT_FALSE(contains(log, "vkattn: ")) << log;  // nothing said unasked
  const std::string now = slurp(path);
  size_t n = 0, sections = 0;
  EXPECT_TRUE(valid_tuning(now, &n, &sections)) << now;
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(sections, 2u) << now;
  EXPECT_EQ(device_file_sections(now)[1], theirs);
}

// The table's choice faulted (VKATTN_FAULT_KERNEL on its family): it and
// every candidate of that family fail their self-checks and are never
// chosen.
TEST(Tuning, CandidatesFailingTheirChecksAreNeverChosen) {
  TempDir dir(/*with_pipelines=*/true);
  Events ev;
  const char* table_family = "lanes";  // lavapipe's device table
  with_context(dir.path, {{"VKATTN_FAULT_KERNEL", table_family}}, [&](vkattn_context* ctx) {
    ASSERT_EQ(tune(ctx, 30, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  bool table_failed = false;
  for (const Event& e : ev.list) {
    if (e.candidate == "-") table_failed = e.ms == -1;
    if (contains(e.candidate, std::string("kernel=") + table_family) &&
        e.candidate.rfind("winner", 0) != 0)
      EXPECT_EQ(e.ms, -1) << e.candidate;
  }
  EXPECT_TRUE(table_failed);
  // A winner, if any candidate passed within the budget (cold compiles on
  // a fresh machine may use it up), is neither of them.
  const std::string path = tuning_file(dir.path);
  if (path.empty()) return;
  const std::string text = slurp(path);
  size_t n = 0;
  ASSERT_TRUE(valid_tuning(text, &n)) << text;
  EXPECT_FALSE(contains(text, std::string(kClass) + " - ")) << text;
  EXPECT_FALSE(contains(text, std::string("kernel=") + table_family)) << text;
}

// No candidate starts after the budget: each report but the last comes
// before the deadline (the one under way may end past it).
TEST(Tuning, BudgetIsHeld) {
  TempDir dir(/*with_pipelines=*/true);
  Events ev;
  const double budget = 4;
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    ASSERT_EQ(tune(ctx, budget, nullptr, &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  ASSERT_FALSE(ev.list.empty());
  std::vector<double> ends;
  for (const Event& e : ev.list)
    if (e.candidate.rfind("winner", 0) != 0 && e.ms != -2) ends.push_back(e.at);
  for (size_t i = 0; i + 1 < ends.size(); ++i) EXPECT_LT(ends[i], budget + 0.5) << i;
}

TEST(Tuning, BadDescriptorsAreRefused) {
  TempDir dir(/*with_pipelines=*/true);
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    Events ev;
    EXPECT_INVALID(tune(ctx, 0, "decode-16x512", &ev), "seconds");
    EXPECT_INVALID(tune(ctx, -1, "decode-16x512", &ev), "seconds");
    EXPECT_INVALID(tune(ctx, NAN, "decode-16x512", &ev), "seconds");
    EXPECT_INVALID(tune(ctx, 1, "no-such-case*", &ev), "matches no case");
    vkattn_tune_desc d;
    vkattn_tune_desc_init(&d);
    d.num_cases = 2;
    EXPECT_INVALID(vkattn_tune(ctx, &d), "cases is NULL");
    d.num_cases = 0;
    d.reserved[1] = 1;
    EXPECT_INVALID(vkattn_tune(ctx, &d), "reserved");
    d.reserved[1] = 0;
    d.struct_size = 3;
    EXPECT_INVALID(vkattn_tune(ctx, &d), "struct_size");
    EXPECT_INVALID(vkattn_tune(ctx, nullptr), "desc");
    EXPECT_EQ(vkattn_tune_case_name(0) != nullptr, true);
    EXPECT_EQ(vkattn_tune_case_name(1000), nullptr);
  });
}

// A child of TwoTunersLeaveAValidFile (run with
// --gtest_also_run_disabled_tests): tunes the case VKATTN_TEST_TUNE_CASE names.
TEST(Tuning, DISABLED_ChildTunes) {
  ForcedContext fc;
  ASSERT_NE(fc.ctx, nullptr);
  Events ev;
  ASSERT_EQ(tune(fc.ctx, 6, std::getenv("VKATTN_TEST_TUNE_CASE"), &ev), VKATTN_SUCCESS)
      << vkattn_last_error();
}

TEST(Tuning, TwoTunersLeaveAValidFile) {
  VKATTN_NEEDS_SHELL();
  TempDir dir(/*with_pipelines=*/true);
  const std::string exe = self_path();
  ASSERT_FALSE(exe.empty());
  auto child = [&](const char* c) {
    return std::string("VKATTN_TEST_TUNE_CASE=") + c + " VKATTN_PIPELINE_CACHE_DIR='" + dir.path +
           "' '" + exe +
           "' --gtest_also_run_disabled_tests --gtest_filter=Tuning.DISABLED_ChildTunes "
           ">/dev/null 2>&1";
  };
  const std::string both = "(" + child("decode-16x512") + ") & a=$!; (" + child("decode-1x4096") +
                           "); b=$?; wait $a && exit $b";
  ASSERT_EQ(std::system(("sh -c \"" + both + "\"").c_str()), 0);
  size_t n = 0;
  const std::string text = slurp(tuning_file(dir.path));
  EXPECT_TRUE(valid_tuning(text, &n)) << text;
  EXPECT_GE(n, 1u) << text;
}

// A batch-invariant context tunes classes that leave the keys out (the
// part decides prefill or decode), so a tuned choice never depends on
// what else is in the batch; a later batch-invariant context uses it.
TEST(Tuning, BatchInvariantClassesLeaveTheKeysOut) {
  TempDir dir(/*with_pipelines=*/true);
  Events ev;
  with_context(dir.path, {{"VKATTN_BATCH_INVARIANT", "1"}}, [&](vkattn_context* ctx) {
    ASSERT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  const std::string text = slurp(tuning_file(dir.path));
  size_t n = 0;
  ASSERT_TRUE(valid_tuning(text, &n)) << text;
  EXPECT_TRUE(contains(text, "decode/d128/dv128/g4/q=f16/kv=f16/paged/inv ")) << text;
  EXPECT_FALSE(contains(text, "/k512")) << text;
  const std::string log =
      with_context(dir.path, {{"VKATTN_BATCH_INVARIANT", "1"}, {"VKATTN_LOG", "kernels"}},
                   [&](vkattn_context* ctx) {
                     const CallResult r = decode_call(ctx);
                     ASSERT_EQ(r.status, VKATTN_SUCCESS) << vkattn_last_error();
                     EXPECT_LT(r.max_err, 2e-3);
                   });
  EXPECT_TRUE(contains(log, "source=tuned")) << log;
  // The same file means nothing to a context that is not batch-invariant.
  const std::string plain =
      with_context(dir.path, {{"VKATTN_LOG", "kernels"}}, [&](vkattn_context* ctx) {
        ASSERT_EQ(decode_call(ctx).status, VKATTN_SUCCESS) << vkattn_last_error();
      });
  EXPECT_TRUE(contains(plain, "source=table")) << plain;
}

// 8-bit caches are classes of their own (the K/V dtype): tuned over a
// cache appended and read back, the answers checked against what it holds.
TEST(Tuning, EightBitCachesAreClassesOfTheirOwn) {
  TempDir dir(/*with_pipelines=*/true);
  Events ev;
  with_context(dir.path, {}, [&](vkattn_context* ctx) {
    ASSERT_EQ(tune(ctx, 1, "decode-16x2048-int8", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  ASSERT_FALSE(ev.list.empty());
  EXPECT_EQ(ev.list.front().candidate, "-");
  EXPECT_GE(ev.list.front().ms, 0) << "the table's choice failed its checks on an int8 cache";
  const std::string text = slurp(tuning_file(dir.path));
  EXPECT_TRUE(contains(text, "decode/d128/dv128/g4/q=f16/kv=i8/paged/k2048 ")) << text;
}

namespace {

// A valid tuning file of this device, driver and build in `dir` (a short
// tuning run), with class `key`'s entry set to `options`.
std::string file_with_entry(const std::string& dir, const std::string& key,
                            const std::string& options) {
  std::string path = tuning_file(dir);
  if (path.empty()) {
    with_context(dir, {}, [&](vkattn_context* ctx) {
      Events ev;
      ASSERT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
    });
    path = tuning_file(dir);
  }
  std::string text = slurp(path);
  const std::string line = key + " " + options + " 1 2\n";
  const size_t at = text.find("\n" + key + " ");
  if (at != std::string::npos)
    text.replace(at + 1, text.find('\n', at + 1) - at, line);
  else
    text.insert(text.rfind("end\n"), line);
  spit(path, text);
  return path;
}

}  // namespace

// E4 defects 1 and 2: a tuning entry is a suggestion. Entries whose values
// are out of range (lanes_per_row=0 killed every process making a decode
// call of the class: SIGFPE), that the chosen family refuses, or that this
// device cannot run are ignored with one line per process and entry
// (naming the file and the entry); the call takes the device table's
// choice and is right.
TEST(Tuning, EntriesTheDeviceCannotRunAreIgnored) {
  TempDir dir(/*with_pipelines=*/true);
  const char* entries[] = {"kernel=decode,lanes_per_row=0",
                           "rows=100000",
                           "block_keys=0",
                           "wg=0",
                           "kernel=tiled,tile_keys=1000",
                           "kernel=tiled,rows=32",
                           "kernel=lanes,target_items=0",
                           "kernel=coopmat,subgroups=99"};
  for (const char* e : entries) {
    SCOPED_TRACE(e);
    const std::string path = file_with_entry(dir.path, kClass, e);
    auto run = [&] {
      return with_context(dir.path, {{"VKATTN_LOG", "kernels,files"}}, [&](vkattn_context* ctx) {
        const CallResult r = decode_call(ctx);
        ASSERT_EQ(r.status, VKATTN_SUCCESS) << vkattn_last_error();
        EXPECT_LT(r.max_err, 2e-3);
      });
    };
    const std::string log = run();
    EXPECT_TRUE(contains(log, "vkattn: tuning file " + path + ": ignoring entry \"" +
                                  std::string(kClass) + " " + e + "\""))
        << log;
    EXPECT_TRUE(contains(log, "source=table")) << log;
    EXPECT_FALSE(contains(log, "source=tuned")) << log;
    // Once per process and entry.
    const std::string again = run();
    EXPECT_FALSE(contains(again, "ignoring entry")) << again;
    EXPECT_TRUE(contains(again, "source=table")) << again;
  }
}

// A damaged file is said once per process, not at every context.
TEST(Tuning, AnIgnoredFileIsLoggedOncePerProcess) {
  TempDir dir;
  const std::string path = dir.path + "/tuning.txt";
  spit(path, "hello\n");
  auto make = [&] {
    return with_context(dir.path, {{"VKATTN_TUNING_FILE", path.c_str()}, {"VKATTN_LOG", "files"}},
                        [](vkattn_context*) {});
  };
  const std::string first = make();
  EXPECT_TRUE(contains(first, "vkattn: ignoring tuning file " + path)) << first;
  const std::string second = make();
  EXPECT_FALSE(contains(second, "ignoring tuning file")) << second;
}

// E4 defect 5: VKATTN_TUNING_FILE with a bare name means the current
// folder (it made a directory of that name and wrote nothing, while
// vkattn_tune returned success); a write that fails fails vkattn_tune with
// UNSUPPORTED naming the path and the OS's reason.
TEST(Tuning, BareFileNameIsInTheCurrentFolderAndFailedWritesFail) {
  TempDir dir(/*with_pipelines=*/true);
  char cwd[4096] = {};
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir.path.c_str()), 0);
  with_context(dir.path, {{"VKATTN_TUNING_FILE", "bare-tuning.txt"}}, [&](vkattn_context* ctx) {
    Events ev;
    EXPECT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_SUCCESS) << vkattn_last_error();
  });
  ASSERT_EQ(chdir(cwd), 0);
  size_t n = 0;
  const std::string text = slurp(dir.path + "/bare-tuning.txt");
  EXPECT_TRUE(valid_tuning(text, &n)) << text;
  EXPECT_EQ(n, 1u);
  // A folder that cannot be made (its parent is a file): UNSUPPORTED.
  spit(dir.path + "/a-file", "x");
  const std::string bad = dir.path + "/a-file/tuning.txt";
  with_context(dir.path, {{"VKATTN_TUNING_FILE", bad.c_str()}}, [&](vkattn_context* ctx) {
    Events ev;
    EXPECT_EQ(tune(ctx, 0.5, "decode-16x512", &ev), VKATTN_ERROR_UNSUPPORTED);
    EXPECT_TRUE(contains(vkattn_last_error(), bad)) << vkattn_last_error();
    EXPECT_TRUE(contains(vkattn_last_error(), "Not a directory")) << vkattn_last_error();
  });
}

// E4 defect 6: vkattn_context_self_check covers the pipelines a call of
// the shape could run at any key count: a tuning entry for the 2048-key
// class of a decode (whose check used to build a call of one key, class
// k64) is checked up front, so a faulted family there is caught before an
// engine's external-mode call over 2048 keys could run it unchecked.
TEST(Tuning, UpFrontCheckCoversEveryKeyClass) {
  TempDir dir(/*with_pipelines=*/true);
  const std::string k2048 = "decode/d128/dv128/g4/q=f16/kv=f16/paged/k2048";
  file_with_entry(dir.path, k2048, "kernel=tiled,lanes_per_row=8");
  vkattn_attention_desc d;
  vkattn_attention_desc_init(&d);
  d.num_heads = 32, d.num_kv_heads = 8, d.head_dim = 128;
  uint32_t passed = 0, failed = 0;
  const std::string log = with_context(
      dir.path, {{"VKATTN_FAULT_KERNEL", "tiled"}, {"VKATTN_LOG", "kernels"}},
      [&](vkattn_context* ctx) {
        EXPECT_EQ(vkattn_context_self_check(ctx, &d, VKATTN_F16, VKATTN_F16, 1, 1), VKATTN_SUCCESS)
            << vkattn_last_error();
        ASSERT_EQ(vkattn_context_self_check_counts(ctx, 1, &passed, &failed), VKATTN_SUCCESS);
      });
  EXPECT_GE(failed, 1u) << "the tuned tiled pipeline of class k2048 was not checked\n" << log;
  EXPECT_TRUE(contains(log, "self-check family=tiled FAILED")) << log;
}
