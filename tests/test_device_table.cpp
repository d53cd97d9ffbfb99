// The device table (src/ops/attention/devices.cpp) for every kind of device
// it has a row for: vendor, driver and device name, CPU or GPU, subgroup
// size and compute units. Each case's every field is compared with what
// the table gave when its rows were code (issue A: the rows became data;
// the choices must not move), so a change to a row shows up here, named.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>

#include "core/device.h"
#include "core/host.h"
#include "ops/attention/devices.h"

using namespace vkattn;

namespace {

struct FakeDevice {
  const char* what;
  uint32_t vendor;
  vkattn_device_type type;
  const char* driver;
  const char* name;
  uint32_t subgroup, compute_units;
};

// Every field, one line; the CPU row's thread chunks as "threads" (the host's).
std::string fields(const AttentionDefaults& d) {
  std::ostringstream o;
  o << "family " << int(d.family) << " lanes " << d.lanes_wg << "/" << d.lanes_max_rows << "/"
    << d.lanes_decode_merge << " chunks "
    << (d.static_chunks && d.static_chunks == cpu_device_threads()
            ? std::string("threads")
            : std::to_string(d.static_chunks))
    << " items " << d.target_items << " tiled " << d.tiled_lanes_per_row << "/" << d.tiled_wg << "/"
    << d.tiled_row_floats << "/" << d.tiled_tile_keys << "/" << d.tiled_f16_math << "/"
    << d.tiled_double_buffer << " coopmat " << d.coopmat_prefill << "/" << d.coopmat_min_rows << "/"
    << d.coopmat_subgroups << "/" << d.coopmat_tile_keys << " decode " << d.decode_default << "/"
    << d.decode_wg << "/" << d.decode_keys_per_group << "/" << d.decode_lane_vec4 << "/"
    << d.decode_row_splits << "/" << d.decode_max_tiles << " invariant " << d.invariant_split_keys
    << " | " << d.row << (*d.source ? ", " : "") << d.source << " | " << d.why << " | "
    << d.coopmat_why << " | " << d.decode_why;
  return o.str();
}

AttentionDefaults defaults_of(const FakeDevice& f) {
  vkattn_device_info info;
  vkattn_device_info_init(&info);
  info.vendor_id = f.vendor;
  info.device_type = f.type;
  std::snprintf(info.driver_name, sizeof info.driver_name, "%s", f.driver);
  std::snprintf(info.name, sizeof info.name, "%s", f.name);
  DeviceCaps caps;
  caps.subgroup_size = f.subgroup;
  caps.compute_units = f.compute_units;
  return attention_defaults(info, caps);
}

}  // namespace

namespace {

const FakeDevice kDevices[] = {
    {"lavapipe", 0x10005, VKATTN_DEVICE_CPU, "llvmpipe", "llvmpipe (LLVM 15.0.6, 256 bits)", 8, 6},
    {"lavapipe, unknown units", 0x10005, VKATTN_DEVICE_CPU, "llvmpipe", "llvmpipe", 8, 0},
    {"H100", 0x10DE, VKATTN_DEVICE_DISCRETE_GPU, "NVIDIA", "NVIDIA H100 80GB HBM3", 32, 132},
    {"NVK Ampere", 0x10DE, VKATTN_DEVICE_DISCRETE_GPU, "NVK", "NVIDIA GeForce RTX 3090 (NVK GA102)",
     32, 0},
    {"RADV RDNA3", 0x1002, VKATTN_DEVICE_DISCRETE_GPU, "radv", "AMD Radeon RX 7900 (RADV NAVI31)",
     64, 48},
    {"AMDVLK", 0x1002, VKATTN_DEVICE_DISCRETE_GPU, "AMD open-source driver", "AMD Radeon RX 6800",
     64, 0},
    {"ANV", 0x8086, VKATTN_DEVICE_INTEGRATED_GPU, "Intel open-source Mesa driver",
     "Intel(R) Arc(tm) A770 Graphics (DG2)", 32, 0},
    {"Intel proprietary", 0x8086, VKATTN_DEVICE_INTEGRATED_GPU, "Intel Corporation", "Intel UHD",
     16, 0},
    {"Mali", 0x13B5, VKATTN_DEVICE_INTEGRATED_GPU, "Arm", "Mali-G715", 16, 0},
    {"Adreno 660", 0x5143, VKATTN_DEVICE_INTEGRATED_GPU, "turnip Mesa driver",
     "Turnip Adreno (TM) 660", 64, 0},
    {"Adreno 740", 0x5143, VKATTN_DEVICE_INTEGRATED_GPU, "turnip Mesa driver",
     "Turnip Adreno (TM) 740", 64, 0},
    {"MoltenVK", 0x106B, VKATTN_DEVICE_INTEGRATED_GPU, "MoltenVK", "Apple M2", 32, 0},
    {"Honeykrisp", 0x10005, VKATTN_DEVICE_INTEGRATED_GPU, "Honeykrisp", "Apple M1 (G13G B1)", 32,
     0},
    {"other GPU", 0x1234, VKATTN_DEVICE_DISCRETE_GPU, "some driver", "some GPU", 0, 0},
};

}  // namespace

// What the table gave each device when its rows were code (commit
// e165bc4), printed by this test with VKATTN_DEVICE_TABLE_PRINT=1.
struct Expected {
  const char* what;
  const char* fields;
};
const Expected kBefore[] = {
    {"lavapipe",
     "family 0 lanes 8/32/0 chunks threads items 12 tiled 8/32/0/16/0/0 coopmat 0/8/1/16 decode "
     "0/8/8/32/1/2 invariant 2048 | CPU device (lavapipe / llvmpipe) | lanes, one 8-lane subgroup "
     "per workgroup: lanes never talk, because on lavapipe a barrier or shared-memory staging "
     "costs more than it saves (LAVAPIPE.md; tiled measured 26-57x slower here); decode lanes "
     "write partials (shared-memory merge 40 ms vs 26 ms, decode-16x512); items balanced over the "
     "thread pool's contiguous chunks (lp_cs_tpool) | never by default on a CPU: lavapipe 26.1's "
     "8x8x8 matrices are scalar code (docs/guide/testing.md); forced with "
     "VKATTN_ATTN_KERNEL=coopmat for tests | forced only on a CPU: slower than lanes on most "
     "decode cases (decode-16x2048 54 vs 45 ms, decode-1x32768 106 vs 48 ms; "
     "docs/guide/benchmark.md); VKATTN_ATTN_KERNEL=decode for tests"},
    {"lavapipe, unknown units",
     "family 0 lanes 8/32/0 chunks threads items 8 tiled 8/32/0/16/0/0 coopmat 0/8/1/16 decode "
     "0/8/8/32/1/2 invariant 2048 | CPU device (lavapipe / llvmpipe) | lanes, one 8-lane subgroup "
     "per workgroup: lanes never talk, because on lavapipe a barrier or shared-memory staging "
     "costs more than it saves (LAVAPIPE.md; tiled measured 26-57x slower here); decode lanes "
     "write partials (shared-memory merge 40 ms vs 26 ms, decode-16x512); items balanced over the "
     "thread pool's contiguous chunks (lp_cs_tpool) | never by default on a CPU: lavapipe 26.1's "
     "8x8x8 matrices are scalar code (docs/guide/testing.md); forced with "
     "VKATTN_ATTN_KERNEL=coopmat for tests | forced only on a CPU: slower than lanes on most "
     "decode cases (decode-16x2048 54 vs 45 ms, decode-1x32768 106 vs 48 ms; "
     "docs/guide/benchmark.md); VKATTN_ATTN_KERNEL=decode for tests"},
    {"H100",
     "family 1 lanes 32/1/1 chunks 0 items 264 tiled 4/128/32/32/0/0 coopmat 0/8/4/64 decode "
     "1/128/2/8/4/2 invariant 256 | NVIDIA (0x10DE), measured: H100 and H200 (driver 580.159.04, "
     "2026-11-23/27); static: GA102 NAK (Mesa 26.1, 2026-11-27) | 32-lane warps: lanes workgroup "
     "of one warp; tiled 128 lanes (4 warps, as FlashAttention-2's forward and ggml's scalar "
     "path), 4 lanes per row; 48 KiB of shared memory under Vulkan bounds the tile | NVIDIA: wrong "
     "answers measured on H100 (driver 580.159.04: Q K^T from shared memory lost head-dim "
     "elements, O reloaded as an accumulator read 0); forced only, until a kernel passes the tests "
     "there | GPUs: decode-shaped calls (at most 8 query tokens per sequence) read K/V once per "
     "GQA group with 16-byte loads and a tile in flight (unmeasured: the next GPU run decides)"},
    {"NVK Ampere",
     "family 1 lanes 32/1/1 chunks 0 items 256 tiled 4/128/32/32/0/0 coopmat 0/8/4/64 decode "
     "1/128/2/8/4/2 invariant 256 | NVIDIA (0x10DE), measured: H100 and H200 (driver 580.159.04, "
     "2026-11-23/27); static: GA102 NAK (Mesa 26.1, 2026-11-27) | 32-lane warps: lanes workgroup "
     "of one warp; tiled 128 lanes (4 warps, as FlashAttention-2's forward and ggml's scalar "
     "path), 4 lanes per row; 48 KiB of shared memory under Vulkan bounds the tile | NVIDIA: wrong "
     "answers measured on H100 (driver 580.159.04: Q K^T from shared memory lost head-dim "
     "elements, O reloaded as an accumulator read 0); forced only, until a kernel passes the tests "
     "there | GPUs: decode-shaped calls (at most 8 query tokens per sequence) read K/V once per "
     "GQA group with 16-byte loads and a tile in flight (unmeasured: the next GPU run decides)"},
    {"RADV RDNA3",
     "family 1 lanes 64/1/1 chunks 0 items 96 tiled 4/128/32/32/0/0 coopmat 1/8/4/32 decode "
     "1/128/2/8/4/2 invariant 256 | AMD (0x1002), static: navi21/navi31/gfx1201 ACO (Mesa 26.1, "
     "2026-11-27) | 64-lane waves (RDNA may run 32): lanes workgroup of one wave; tiled 128 lanes, "
     "4 per row; 64 KiB of LDS per workgroup | RADV: cooperative matrices on RDNA3+ WMMA for "
     "prefill (unmeasured here); 32 keys per tile (64 took navi31's LDS from 41 to 44 KiB a "
     "workgroup: 3 -> 2 waves/SIMD) | GPUs: decode-shaped calls (at most 8 query tokens per "
     "sequence) "
     "read K/V once per GQA group with 16-byte loads and a tile in flight (unmeasured: the next "
     "GPU run decides)"},
    {"AMDVLK",
     "family 1 lanes 64/1/1 chunks 0 items 256 tiled 4/128/32/32/0/0 coopmat 0/8/4/32 decode "
     "1/128/2/8/4/2 invariant 256 | AMD (0x1002), static: navi21/navi31/gfx1201 ACO (Mesa 26.1, "
     "2026-11-27) | 64-lane waves (RDNA may run 32): lanes workgroup of one wave; tiled 128 lanes, "
     "4 per row; 64 KiB of LDS per workgroup | AMD drivers other than RADV advertise cooperative "
     "matrices on pre-RDNA3 chips and emulate them: forced only | GPUs: decode-shaped calls (at "
     "most 8 query tokens per sequence) read K/V once per GQA group with 16-byte loads and a tile "
     "in flight (unmeasured: the next GPU run decides)"},
    {"ANV",
     "family 1 lanes 32/1/1 chunks 0 items 256 tiled 4/128/32/16/0/0 coopmat 1/8/2/32 decode "
     "1/128/2/8/4/2 invariant 256 | Intel (0x8086), unmeasured | SIMD8-32 subgroups: lanes "
     "workgroup of one subgroup; tiled 128 lanes, 4 per row, 16 keys per tile (64 KiB SLM shared "
     "by more threads) | ANV: XMX matrix engines (Arc, Xe2) for prefill (unmeasured here) | GPUs: "
     "decode-shaped calls (at most 8 query tokens per sequence) read K/V once per GQA group with "
     "16-byte loads and a tile in flight (unmeasured: the next GPU run decides)"},
    {"Intel proprietary",
     "family 1 lanes 16/1/1 chunks 0 items 256 tiled 4/128/32/16/0/0 coopmat 0/8/2/32 decode "
     "1/128/2/8/4/2 invariant 256 | Intel (0x8086), unmeasured | SIMD8-32 subgroups: lanes "
     "workgroup of one subgroup; tiled 128 lanes, 4 per row, 16 keys per tile (64 KiB SLM shared "
     "by more threads) | no known-good cooperative-matrix driver for this row: forced only | GPUs: "
     "decode-shaped calls (at most 8 query tokens per sequence) read K/V once per GQA group with "
     "16-byte loads and a tile in flight (unmeasured: the next GPU run decides)"},
    {"Mali",
     "family 1 lanes 16/1/1 chunks 0 items 256 tiled 4/64/32/16/0/0 coopmat 0/8/4/32 decode "
     "1/64/2/16/4/2 invariant 256 | Arm Mali (0x13B5), unmeasured | mobile GPUs: 16-128 lane "
     "subgroups, 32 KiB of shared memory and few registers: tiled 64 lanes, 4 per row, 16 keys per "
     "tile | unmeasured mobile cooperative matrices: forced only | GPUs: decode-shaped calls (at "
     "most 8 query tokens per sequence) read K/V once per GQA group with 16-byte loads and a tile "
     "in flight (unmeasured: the next GPU run decides)"},
    {"Adreno 660",
     "family 1 lanes 64/1/1 chunks 0 items 256 tiled 4/64/16/16/0/0 coopmat 0/8/4/32 decode "
     "1/64/2/16/4/2 invariant 256 | Qualcomm Adreno (0x5143), static: Adreno 740/660 ir3 (Mesa "
     "26.1, 2026-11-27) | mobile GPUs: 16-128 lane subgroups, 32 KiB of shared memory and few "
     "registers: tiled 64 lanes, 4 per row, 16 keys per tile | Adreno's cooperative matrices gave "
     "wrong results with masks (ggml-vulkan reports): forced only | GPUs: decode-shaped calls (at "
     "most 8 query tokens per sequence) read K/V once per GQA group with 16-byte loads and a tile "
     "in flight (unmeasured: the next GPU run decides)"},
    {"Adreno 740",
     "family 1 lanes 64/1/1 chunks 0 items 256 tiled 4/64/32/16/0/0 coopmat 0/8/4/32 decode "
     "1/64/2/16/4/2 invariant 256 | Qualcomm Adreno (0x5143), static: Adreno 740/660 ir3 (Mesa "
     "26.1, 2026-11-27) | mobile GPUs: 16-128 lane subgroups, 32 KiB of shared memory and few "
     "registers: tiled 64 lanes, 4 per row, 16 keys per tile | Adreno's cooperative matrices gave "
     "wrong results with masks (ggml-vulkan reports): forced only | GPUs: decode-shaped calls (at "
     "most 8 query tokens per sequence) read K/V once per GQA group with 16-byte loads and a tile "
     "in flight (unmeasured: the next GPU run decides)"},
    {"MoltenVK",
     "family 1 lanes 32/1/1 chunks 0 items 256 tiled 4/128/32/16/0/0 coopmat 0/8/4/32 decode "
     "1/128/2/8/4/2 invariant 256 | Apple via MoltenVK (0x106B), unmeasured | 32-lane SIMD groups, "
     "32 KiB of threadgroup memory: tiled 128 lanes, 4 per row, 16 keys per tile | no known-good "
     "cooperative-matrix driver for this row: forced only | GPUs: decode-shaped calls (at most 8 "
     "query tokens per sequence) read K/V once per GQA group with 16-byte loads and a tile in "
     "flight (unmeasured: the next GPU run decides)"},
    {"Honeykrisp",
     "family 1 lanes 32/1/1 chunks 0 items 256 tiled 4/128/16/32/0/0 coopmat 0/8/4/32 decode "
     "1/128/2/8/4/2 invariant 256 | other GPU (Apple M1 on Honeykrisp among them), static: M1 AGX "
     "(Mesa 26.1, 2026-11-27) | no vendor row: the tiled family with the GPU defaults; Honeykrisp "
     "(AGX): 16 floats of a row a lane (static: M1, no spills) | no known-good cooperative-matrix "
     "driver for this row: forced only | GPUs: decode-shaped calls (at most 8 query tokens per "
     "sequence) read K/V once per GQA group with 16-byte loads and a tile in flight (unmeasured: "
     "the next GPU run decides)"},
    {"other GPU",
     "family 1 lanes 32/1/1 chunks 0 items 256 tiled 4/128/32/32/0/0 coopmat 0/8/4/32 decode "
     "1/128/2/8/4/2 invariant 256 | other GPU (Apple M1 on Honeykrisp among them), static: M1 AGX "
     "(Mesa 26.1, 2026-11-27) | no vendor row: the tiled family with the GPU defaults | no "
     "known-good cooperative-matrix driver for this row: forced only | GPUs: decode-shaped calls "
     "(at most 8 query tokens per sequence) read K/V once per GQA group with 16-byte loads and a "
     "tile in flight (unmeasured: the next GPU run decides)"},
};

TEST(DeviceTable, EveryRowGivesTheChoicesItGaveAsCode) {
  const bool print = std::getenv("VKATTN_DEVICE_TABLE_PRINT") != nullptr;
  ASSERT_EQ(std::size(kDevices), std::size(kBefore));
  for (size_t i = 0; i < std::size(kDevices); ++i) {
    const FakeDevice& f = kDevices[i];
    SCOPED_TRACE(f.what);
    const std::string got = fields(defaults_of(f));
    if (print) std::printf("      {\"%s\",\n       \"%s\"},\n", f.what, got.c_str());
    EXPECT_STREQ(kBefore[i].what, f.what);
    // The one text the change made: every row names its source (issue A:
    // "unmeasured" rows are "reasoned"; the CPU row says where it was
    // measured). Every number and every reason stays, but for NVIDIA's
    // coopmat reason and source, rewritten after the H200 of 2026-11-28
    // found coopmat right there.
    std::string want = kBefore[i].fields;
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"), unmeasured | ", "), reasoned | "},
          {"CPU device (lavapipe / llvmpipe) | ",
           "CPU device (lavapipe / llvmpipe), measured: llvmpipe (Mesa 22.3.6, "
           "LLVM 15.0.6, 2 cores), 2026-11-25 | "},
          {"2026-11-23/27); static", "2026-11-23/27/28); static"},
          {"NVIDIA: wrong answers measured on H100 (driver 580.159.04: Q K^T from shared memory "
           "lost head-dim elements, O reloaded as an accumulator read 0); forced only, until a "
           "kernel passes the tests there",
           "NVIDIA: right on an H200 since 2026-11-28 (driver 580.159.04) but faster than tiled "
           "only at d 64-128 without a causal mask (docs/bench/h200-2026-11-28.md); forced only "
           "until it wins in repeated processes"}}) {
      const size_t at = want.find(from);
      if (at != std::string::npos) want.replace(at, from.size(), to);
    }
    EXPECT_EQ(got, want);
  }
}
