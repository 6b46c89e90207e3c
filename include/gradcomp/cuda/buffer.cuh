// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Grow-only storage in a backend's memory: gradcomp::cuda::buffer (typed) and
//! gradcomp::cuda::caching_allocator (the temporary storage Thrust asks for), so that a
//! compressor allocates on its first calls and never again once sizes stop growing.
#pragma once

#include <gradcomp/cuda/backend.cuh>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace gradcomp::cuda {

//! @brief `capacity()` elements of T in Backend's memory; reserve() only ever grows it (the old
//! contents are not kept). Move-only. Not thread-safe.
template <class T, class Backend>
class buffer {
public:
  buffer() = default;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  //! Takes `o`'s storage; `o` is left empty (capacity 0).
  buffer(buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), capacity_(std::exchange(o.capacity_, 0)) {}
  //! Frees this buffer's storage and takes `o`'s; `o` is left empty (capacity 0).
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  ~buffer() { release(); }

  //! Makes room for at least `n` elements; allocates (through Backend) only when growing, and
  //! then to max(n, 2 x capacity). Returns data(). @throws what Backend::allocate throws.
  T* reserve(std::size_t n) {
    if (n > capacity_) {
      const std::size_t grown = std::max(n, 2 * capacity_);
      release();
      data_ = static_cast<T*>(Backend::allocate(grown * sizeof(T)));
      capacity_ = grown;
    }
    return data_;
  }
  //! The storage, in Backend's memory (null before the first reserve()).
  [[nodiscard]] T* data() const noexcept { return data_; }
  //! Elements the storage holds (0 before the first reserve()).
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

private:
  void release() noexcept {
    if (data_ != nullptr) {
      Backend::deallocate(data_);
      data_ = nullptr;
      capacity_ = 0;
    }
  }
  T* data_ = nullptr;
  std::size_t capacity_ = 0;
};

//! @brief The allocator handed to Thrust algorithms (`policy(alloc)`): keeps every block it
//! allocated and hands a free one back when it is large enough (smallest fit), so repeated
//! calls with the same sizes allocate nothing. Frees everything on destruction. Not
//! thread-safe: one per compressor object.
template <class Backend>
class caching_allocator {
public:
  //! Thrust's temporary-storage allocators allocate bytes.
  using value_type = char;

  caching_allocator() = default;
  caching_allocator(const caching_allocator&) = delete;
  caching_allocator& operator=(const caching_allocator&) = delete;
  ~caching_allocator() {
    for (const block& b : blocks_) {
      Backend::deallocate(b.data);
    }
  }

  //! A block of at least `bytes`, cached or new. @throws what Backend::allocate throws.
  char* allocate(std::ptrdiff_t bytes) {
    const auto wanted = static_cast<std::size_t>(bytes < 1 ? 1 : bytes);
    block* best = nullptr;
    for (block& b : blocks_) {
      if (!b.in_use && b.bytes >= wanted && (best == nullptr || b.bytes < best->bytes)) {
        best = &b;
      }
    }
    if (best == nullptr) {
      blocks_.push_back({static_cast<char*>(Backend::allocate(wanted)), wanted, false});
      best = &blocks_.back();
    }
    best->in_use = true;
    return best->data;
  }
  //! Returns a block to the cache (it stays allocated).
  void deallocate(char* p, std::size_t) noexcept {
    for (block& b : blocks_) {
      if (b.data == p) {
        b.in_use = false;
        return;
      }
    }
  }

private:
  struct block {
    char* data;
    std::size_t bytes;
    bool in_use;
  };
  std::vector<block> blocks_;
};

} // namespace gradcomp::cuda
