#include "core/overlap.h"

#include <algorithm>
#include <vector>

#include "core/int_div.h"

namespace vkattn {

namespace {

using Int = __int128;  // sums of products of 63-bit offsets and strides

Int gcd(Int a, Int b) {
  while (b != 0) {
    Int t = a % b;
    a = b;
    b = t;
  }
  return a < 0 ? -a : a;
}

// Is there z_k in [lo_k, hi_k] with sum c_k z_k = target (and some z_k != 0
// when `nonzero`)? Depth-first over the coefficients, largest first; each
// level keeps only the z its coefficient can take while the smaller ones
// still reach the rest of the target.
class Search {
 public:
  struct Term {
    Int c, lo, hi;  // c > 0
  };
  Search(std::vector<Term> terms, bool nonzero, uint64_t budget)
      : nonzero_(nonzero), budget_(budget) {
    // Equal coefficients are one variable whose range is the sum of theirs
    // (not for `nonzero`: the caller refuses repeated strides first).
    std::sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) { return x.c > y.c; });
    for (const Term& x : terms) {
      if (!t_.empty() && t_.back().c == x.c && !nonzero)
        t_.back().lo += x.lo, t_.back().hi += x.hi;
      else
        t_.push_back(x);
    }
    const size_t n = t_.size();
    lo_.assign(n + 1, 0), hi_.assign(n + 1, 0), g_.assign(n + 1, 0);
    for (size_t i = n; i-- > 0;) {
      lo_[i] = lo_[i + 1] + t_[i].c * t_[i].lo;
      hi_[i] = hi_[i + 1] + t_[i].c * t_[i].hi;
      g_[i] = gcd(g_[i + 1], t_[i].c);
    }
  }
  // true: a solution, or the budget ran out (conservative).
  bool run(Int target) { return solve(0, target, false); }

 private:
  bool solve(size_t i, Int target, bool moved) {
    if (i == t_.size()) return target == 0 && (moved || !nonzero_);
    if (budget_ == 0) return exhausted_ = true;
    --budget_;
    if (target < lo_[i] || target > hi_[i]) return false;
    if (g_[i] != 0 && target % g_[i] != 0) return false;
    const Term& x = t_[i];
    const Int zlo = std::max(x.lo, ceil_div(target - hi_[i + 1], x.c));
    const Int zhi = std::min(x.hi, floor_div(target - lo_[i + 1], x.c));
    for (Int z = zlo; z <= zhi; ++z) {
      if (solve(i + 1, target - x.c * z, moved || z != 0)) return true;
      if (exhausted_) return true;
    }
    return false;
  }

  std::vector<Term> t_;
  std::vector<Int> lo_, hi_, g_;  // per suffix: reachable range, gcd of coefficients
  bool nonzero_;
  uint64_t budget_;
  bool exhausted_ = false;
};

bool empty(const StridedSpan& s) {
  for (uint32_t k = 0; k < s.ndim; ++k)
    if (s.shape[k] == 0) return true;
  return false;
}

}  // namespace

bool spans_overlap(const StridedSpan& a, const StridedSpan& b, uint64_t budget) {
  if (empty(a) || empty(b)) return false;
  std::vector<Search::Term> terms;
  for (uint32_t k = 0; k < a.ndim; ++k)
    if (a.shape[k] > 1 && a.strides[k] > 0)
      terms.push_back({Int(a.strides[k]) * Int(a.es), 0, Int(a.shape[k] - 1)});
  for (uint32_t k = 0; k < b.ndim; ++k)
    if (b.shape[k] > 1 && b.strides[k] > 0)
      terms.push_back({Int(b.strides[k]) * Int(b.es), -Int(b.shape[k] - 1), 0});
  // A byte x of a's element and a byte y of b's: x - y.
  terms.push_back({1, -(Int(b.es) - 1), Int(a.es) - 1});
  return Search(std::move(terms), false, budget).run(Int(b.offset) - Int(a.offset));
}

bool span_self_overlaps(const StridedSpan& a, uint64_t budget) {
  if (empty(a)) return false;
  std::vector<Search::Term> terms;
  for (uint32_t k = 0; k < a.ndim; ++k) {
    if (a.shape[k] <= 1) continue;
    if (a.strides[k] == 0) return true;
    for (const Search::Term& x : terms)
      if (x.c == a.strides[k]) return true;  // index 1 of one dim = index 1 of the other
    terms.push_back({Int(a.strides[k]), -Int(a.shape[k] - 1), Int(a.shape[k] - 1)});
  }
  // Two indices i != j with sum (i_k - j_k) s_k = 0 (elements of one size
  // overlap only where they coincide).
  return Search(std::move(terms), true, budget).run(0);
}

}  // namespace vkattn
