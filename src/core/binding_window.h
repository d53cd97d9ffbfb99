// Windows of buffers for bindings: an op whose data is larger than what one
// binding may cover (maxStorageBufferRange for storage buffers,
// maxTexelBufferElements for texel views) binds the part a dispatch needs
// and passes the window's first element to the shader, which subtracts it.
// Windows start at the device's offset alignment; the limits below are what
// a planner may ask one window to cover so that the aligned window fits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/buffer.h"
#include "core/device.h"
#include "core/error.h"
#include "core/pipeline.h"

namespace vkattn {

// A byte range of one buffer that bindings window into: a tensor's whole
// buffer, a region of a plan buffer, a slice of the recorder's ring.
struct Region {
  std::shared_ptr<Buffer> buffer;  // kept alive by the recorder
  Buffer* raw = nullptr;           // ring memory of the open batch (buffer null)
  uint64_t offset = 0;             // aligned for storage bindings
  uint64_t size = 0;
  static Region whole(const std::shared_ptr<Buffer>& b) { return Region{b, nullptr, 0, b->size()}; }
};

inline uint64_t storage_alignment(const DeviceCaps& caps) {
  return std::max<uint64_t>(16, caps.min_storage_offset_alignment);
}

// Bytes one storage window may be asked to cover.
inline uint64_t storage_window_limit(const DeviceCaps& caps) {
  return caps.max_storage_buffer_range / 16 * 16 - storage_alignment(caps) - 16;
}

// Bytes of `texel`-byte texels one texel window may be asked to cover
// (texel indices stay below 2^31: shaders fetch with int indices).
inline uint64_t texel_window_limit(const DeviceCaps& caps, uint64_t texel) {
  const uint64_t texels = std::min<uint64_t>(caps.max_texel_buffer_elements, (1ull << 31) - 1);
  const uint64_t align = std::max<uint64_t>(texel, caps.min_texel_offset_alignment);
  return texels * texel - align - texel;
}

// Storage binding of bytes [lo, hi) of `r` (relative to r.offset; clamped
// to the region; an empty range binds a few bytes at the start). *start = first bound byte,
// relative to r.offset.
inline BoundBuffer storage_window(const DeviceCaps& caps, const Region& r, uint64_t lo, uint64_t hi,
                                  uint64_t* start) {
  const uint64_t align = storage_alignment(caps);
  hi = std::min(hi, r.size);
  if (hi <= lo) lo = 0, hi = std::min<uint64_t>(16, r.size);  // absent or empty: a stub
  BoundBuffer b;
  b.buffer = r.buffer;
  b.raw = r.raw;
  b.offset = (r.offset + lo) / align * align;
  const uint64_t end = std::min(r.offset + r.size, (r.offset + hi + 3) / 4 * 4);
  b.range = std::max<uint64_t>(4, end - b.offset);
  *start = b.offset - r.offset;
  return b;
}

// Texel view of bytes [lo, hi) of `r` in `format`; *start_texel = the
// view's first texel, counted from r.offset.
inline BoundBuffer texel_window(const DeviceCaps& caps, const Region& r, VkFormat format,
                                uint64_t lo, uint64_t hi, uint64_t* start_texel) {
  const uint64_t tb = texel_format_bytes(format);
  uint64_t align = std::max<uint64_t>(tb, caps.min_texel_offset_alignment);
  while (align % tb) align += align;  // a multiple of both (powers of two)
  const uint64_t usable = r.size / tb * tb;
  hi = std::min(hi, usable);
  if (hi <= lo) lo = 0, hi = std::min(tb, usable);  // absent or empty: a stub
  BoundBuffer b;
  b.buffer = r.buffer;
  b.raw = r.raw;
  b.format = format;
  b.offset = (r.offset + lo) / align * align;
  const uint64_t end = std::min(r.offset + usable, (r.offset + hi + tb - 1) / tb * tb);
  b.range = std::max(tb, end - b.offset);
  // One compiled variant per pipeline on lavapipe (core/buffer.h,
  // texel_buffer_bytes): a view whose byte size has bits 8..15 zero grows
  // by 256 bytes (into the room vkattn's buffers keep after their data),
  // or starts 256 bytes earlier where there is no room after it.
  const uint64_t step = std::max<uint64_t>(kTexelViewRoom, align);
  const uint64_t max_range = std::min<uint64_t>(caps.max_texel_buffer_elements, 1ull << 31) * tb;
  if (((b.range >> 8) & 0xff) == 0 && b.range + step <= max_range) {
    if (b.offset + b.range + step <= r.offset + usable)
      b.range += step;
    else if (b.offset >= r.offset + step)
      b.offset -= step, b.range += step;
  }
  *start_texel = (b.offset - r.offset) / tb;
  return b;
}

// Storage binding of a small input a shader reads from the start of its
// buffer (ALiBi slopes, sinks, an fp8 scale table: `bytes` of them), or,
// when it is absent (buf null), a 16-byte stub of `dummy`: only what a
// shader may read is bound, so a small binding limit never meets a large
// buffer. UNSUPPORTED, naming `what`, when `bytes` exceed one storage
// binding of the device.
inline BoundBuffer small_input(const DeviceCaps& caps, const std::shared_ptr<Buffer>& buf,
                               uint64_t bytes, const std::shared_ptr<Buffer>& dummy,
                               const char* what) {
  BoundBuffer b;
  b.buffer = buf ? buf : dummy;
  b.offset = 0;
  b.range =
      std::min<uint64_t>(buf ? std::max<uint64_t>((bytes + 3) / 4 * 4, 4) : 16, b.buffer->size());
  if (b.range > caps.max_storage_buffer_range)
    fail(VKATTN_ERROR_UNSUPPORTED, what, " (", b.range,
         " bytes) is larger than one storage binding of this device (",
         caps.max_storage_buffer_range, " bytes)");
  return b;
}

}  // namespace vkattn
