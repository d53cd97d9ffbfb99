// The submission side of a context (the recording side is the command
// stream, core/recorder.h): batches submitted to the queue (each with its
// fence) or recorded into a caller's command buffer (complete when the
// caller's timeline semaphore reaches a value); waiting for them; the
// lost-device state. A completed batch is handed back to the stream (the
// `recycle` callback) for its command buffer, descriptor pools and ring
// memory to be reused.
//
// Work only the caller can submit: a batch recorded into a caller's
// command buffer (external mode) completes when the caller has submitted
// it. vkattn never submits a batch that uses a buffer such a batch used
// while it is incomplete (it may read what that work writes, or overwrite
// what it reads): the batch, and later ones that share a buffer with it,
// are held back, in order, and submitted once the caller's work has
// completed, which vkattn checks at every call. It never submits anything that waits for a
// submission the caller has not made, which on a queue that runs submissions in order (lavapipe)
// would wedge the caller's own later submission behind it. Batches that use none of its buffers run
// at once. The host waits for the caller's work only when a call asks for its results (a read of
// what it wrote or of what depends on it, synchronize); the cap on batches in flight never waits
// for the caller (issue E3: the 8th flush after vkattn_context_end_external hung).
// vkattn_context_flush_with, whose semaphores the caller orders against, submits everything now,
// the held batches waiting for the caller's semaphore on the GPU.
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
  using Queue = std::deque<std::unique_ptr<Batch>>;
  Submitter(Device& device, std::function<void(std::unique_ptr<Batch>)> recycle,
            bool inject_faults = true);
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;

  // Throws DEVICE_LOST once the device was lost.
  void check_alive() const;
  bool lost() const { return lost_; }
  void set_lost(const std::string& why);

  // Serial the batch being recorded now gets.
  uint64_t next_serial() const { return next_serial_; }
  // Batch `serial` (the open one, or one in flight) has not completed.
  bool busy(uint64_t serial) const;
  bool submitted_any() const { return submitted_any_; }
  uint64_t last_gpu_ns() const { return last_gpu_ns_; }
  bool idle() const { return in_flight_.empty(); }

  // Submits the ended batch `b` (or holds it back, see above), waiting on
  // `wait` >= wait_value (and on the GPU for held-back work's caller
  // batches when semaphores are given), signalling `signal` =
  // signal_value (VK_NULL_HANDLE: none). On success `b` is in flight and a
  // new serial begins. A lost device recycles `b` and throws DEVICE_LOST;
  // any other failure throws and leaves `b` with the caller, whole (it is
  // submitted first next time).
  void submit(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value, VkSemaphore signal,
              uint64_t signal_value);
  // A batch recorded into a caller's command buffer: in flight until its
  // semaphore reaches its value; a new serial begins.
  void add_external(std::unique_ptr<Batch> b);

  // Submits held-back batches whose caller work has completed, and retires
  // every completed batch, without waiting.
  void poll();
  // Waits until batch `serial` has completed (it and the batches it
  // depends on: the caller's, where it waits for them).
  void wait_for(uint64_t serial);
  void wait_all();
  // For destruction: waits for vkattn's own batches that can complete
  // without the caller, never on a caller's semaphore that has not been
  // reached (the whole device instead). Never throws.
  void drain(bool external_open);
  // Hands every batch still in flight or held back back (destruction,
  // after drain: held-back work that never became runnable is dropped).
  Queue release_all() {
    Queue all = std::move(in_flight_);
    for (auto& b : deferred_) all.push_back(std::move(b));
    deferred_.clear();
    return all;
  }

 private:
  bool complete(const Batch& b) const;
  // `b` uses a buffer (not the stub) that `other` used.
  static bool shares(const Batch& b, const Batch& other);
  // `b` uses a buffer that a caller's batch in flight used and has not
  // completed.
  bool uses_pending_caller_work(const Batch& b) const;
  void submit_now(std::unique_ptr<Batch>& b, VkSemaphore wait, uint64_t wait_value,
                  VkSemaphore signal, uint64_t signal_value);
  // Submits held-back batch *it; the next one.
  Queue::iterator submit_deferred(Queue::iterator it);
  // Submits the held-back batches that no longer use incomplete caller
  // work nor share a buffer with an older held-back batch, in order.
  void pump();
  // If batch `serial` is held back (UINT64_MAX: any), waits on the host
  // for the caller's batches it waits for and submits it (and the
  // held-back batches before it that it shares buffers with).
  void release_deferred(uint64_t serial);
  // An own batch that waits on the GPU for a caller's batch not yet
  // complete: the host must not wait for it unasked.
  bool blocked(const Batch& b) const;
  // Waits for batch *it and retires it.
  void wait_batch(Queue::iterator it);
  void retire(std::unique_ptr<Batch> b);
  // Keeps at most kMaxInFlight batches in flight where that needs no wait
  // for the caller's work.
  void limit_in_flight();

  Device& device_;
  std::function<void(std::unique_ptr<Batch>)> recycle_;
  Queue in_flight_;  // submitted (or the caller's), by serial
  Queue deferred_;   // held back for the caller's work, by serial
  uint64_t next_serial_ = 1;
  uint64_t submissions_ = 0;
  uint64_t lose_at_submission_ = 0;  // VKATTN_FAULT_DEVICE_LOST (0: never)
  bool submitted_any_ = false;
  bool lost_ = false;
  std::string lost_why_;
  uint64_t last_gpu_ns_ = 0;
};

}  // namespace vkattn
