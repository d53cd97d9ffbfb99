// The submission side of a context (the recording side is the command
// stream, core/recorder.h): batches submitted to the queue (each with its
// fence) or recorded into a caller's command buffer (complete when the
// caller's timeline semaphore reaches a value), in serial order; waiting
// for them; the lost-device state. A completed batch is handed back to the
// stream (the `recycle` callback) for its command buffer, descriptor pools
// and ring memory to be reused.
#pragma once

#include <volk.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "core/batch.h"

namespace vkattn {

class Device;

class Submitter {
 public:
  Submitter(Device& device, std::function<void(std::unique_ptr<Batch>)> recycle);
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  // Throws DEVICE_LOST once the device was lost.
  void check_alive() const;
  bool lost() const { return lost_; }
  void set_lost(const std::string& why);

  // Serial the batch being recorded now gets.
  uint64_t next_serial() const { return next_serial_; }
  // Work with a serial <= s has not yet completed on the device.
  bool busy(uint64_t serial) const { return serial > completed_serial_; }
  bool submitted_any() const { return submitted_any_; }
  uint64_t last_gpu_ns() const { return last_gpu_ns_; }
  bool idle() const { return in_flight_.empty(); }

  // Submits the ended batch `b`, waiting on `wait` >= wait_value and on
  // every caller batch still in flight, signalling `signal` =
  // signal_value (VK_NULL_HANDLE: none). On success `b` is in flight and a
  // new serial begins. A lost device recycles `b` and throws DEVICE_LOST;
  // any other failure throws and leaves `b` with the caller, whole (it is
  // submitted first next time).
  void submit(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
              uint64_t signal_value);
  // A batch recorded into a caller's command buffer: in flight until its
  // semaphore reaches its value; a new serial begins.
  void add_external(std::unique_ptr<Batch> b);

  // Retires completed batches, oldest first, without waiting.
  void poll();
  // Waits for the oldest batch in flight and retires it.
  void wait_oldest();
  // Waits until every batch with a serial <= `serial` has completed.
  void wait_through(uint64_t serial);
  void wait_all();
  // For destruction: waits for vkattn's own batches, never on a caller's
  // semaphore that has not been reached (the whole device instead). Never
  // throws.
  void drain(bool external_open);
  // Hands every batch still in flight back (destruction, after drain).
  std::deque<std::unique_ptr<Batch>> release_all() { return std::move(in_flight_); }

 private:
  bool complete(const Batch& b) const;
  void retire(std::unique_ptr<Batch> b);

  Device& device_;
  std::function<void(std::unique_ptr<Batch>)> recycle_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  uint64_t next_serial_ = 1;
  uint64_t completed_serial_ = 0;
  uint64_t submissions_ = 0;
  uint64_t lose_at_submission_ = 0;  // VKATTN_FAULT_DEVICE_LOST (0: never)
  bool submitted_any_ = false;
  bool lost_ = false;
  std::string lost_why_;
  uint64_t last_gpu_ns_ = 0;
};

}  // namespace vkattn
