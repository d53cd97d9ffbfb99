// The per-device table: which attention family and shape each kind of
// device starts from, and why. choose_attention_variant()
// (ops/attention/variant.cpp) reads a call's defaults from here; every
// value can still be forced through the environment (ops/attention/variant.h).
// Rows marked "unmeasured" are starting points from published kernels, to
// be replaced by numbers from vkattn-bench on that device.
#pragma once

#include <cstdint>
#include <string>

#include "ops/attention/variant.h"

namespace vkattn {

class Device;
struct DeviceCaps;

struct AttentionDefaults {
  const char* row;     // the table row that matched
  const char* source;  // where its numbers come from: "measured: ...", "static: ...", "reasoned"
  AttentionFamily family;
  // lanes
  uint32_t lanes_wg;        // lanes per workgroup
  uint32_t lanes_max_rows;  // rows per lane at most (registers, compile time)
  bool lanes_decode_merge;  // decode-mode lanes merge in shared memory
  uint32_t static_chunks;   // ScheduleLimits::static_chunks (0: heaviest first)
  uint32_t target_items;    // work items one dispatch should have
  // tiled
  uint32_t tiled_lanes_per_row;  // at head dims d + dv <= 4 * tiled_row_floats
  uint32_t tiled_wg;             // likewise
  // Floats of q and accumulator per lane and row at most (0: no limit):
  // larger head dims get more lanes per row, and the workgroup grows with
  // them so that it keeps its rows (each K/V tile serves as many queries).
  uint32_t tiled_row_floats;
  uint32_t tiled_tile_keys;  // halved until a tile fits shared memory
  bool tiled_f16_math;       // f16 arithmetic where the device has shaderFloat16
  bool tiled_double_buffer;  // next tile's loads in registers during this tile's math
  // coopmat: the table picks it for calls with more than coopmat_min_rows
  // rows per tile where the device offers usable shapes (DeviceCaps) and
  // this row's driver is known good; forced with VKATTN_ATTN_KERNEL=coopmat.
  bool coopmat_prefill;
  uint32_t coopmat_min_rows;
  uint32_t coopmat_subgroups;  // halved until the shared arrays fit
  uint32_t coopmat_tile_keys;  // halved likewise
  const char* coopmat_why;
  // decode (ops/attention/families/decode.cpp): the table picks it for
  // calls whose sequences have at most kDecodeMaxTokens query tokens where
  // decode_default is set and the GQA group x tokens takes at most
  // decode_max_tiles tiles (each tile reads the keys once).
  bool decode_default;
  uint32_t decode_wg;              // lanes per workgroup (at least one key row's lanes)
  uint32_t decode_keys_per_group;  // keys of a tile per key group
  uint32_t decode_lane_vec4;       // q + accumulator vec4 one lane may hold (rows per lane)
  uint32_t decode_row_splits;      // a tile's rows split over up to this many lane sets
  uint32_t decode_max_tiles;
  // Rows past a lane's budget on their own (MLA's d 576 / dv 512) take a
  // wider workgroup of up to 16 row splits instead of several tiles
  // (families/decode.cpp, widen_for_wide_rows).
  bool decode_wide_rows;
  // Top-k calls: each tile also touches the listed K/V rows of the tile
  // this many tiles past the one it loads (0: none), so a CPU's loads of
  // scattered rows overlap (families/decode.cpp).
  uint32_t decode_touch_ahead;
  const char* decode_why;
  // Batch-invariant contexts: keys per split of a decode-shaped sequence.
  uint32_t invariant_split_keys;
  const char* why;
};

AttentionDefaults attention_defaults(const Device& device);
// The same from a device's description and capabilities (tests: any
// vendor, driver and device type without that device).
AttentionDefaults attention_defaults(const vkattn_device_info& info, const DeviceCaps& caps);

// The row and the choices it gives, as text (vkattn-bench --variants).
std::string describe_attention_defaults(const Device& device);

}  // namespace vkattn
