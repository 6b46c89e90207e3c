// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief gradcomp::any_transport: a pipeline transport chosen at run time (type erasure), for
//! programs that pick the exchange from a command line or a configuration file.
#pragma once

#include <gradcomp/pipeline/transport.hpp>
#include <gradcomp/sparse/sparse_message.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief A pipeline transport chosen at run time: holds any pipeline_policy::transport T
//! (constructed in place by make<T>(args...), so non-movable MPI operations fit) and forwards
//! every call to it through one virtual call. A pipeline is a compile-time composition; with
//! `pipeline<C, any_transport>` one pipeline type serves every single-message transport, e.g.
//! `any_transport::make<mpi::dense_exchange>(comm, options)` or `...make<mpi::sparse_exchange>
//! (comm)` chosen by name.
//!
//! It models pipeline_policy::transport, in_place_transport (accepts_in_place() is the wrapped
//! transport's, false if it has no in-place form) and byte_counting_transport (the wrapped
//! transport's counters, 0 if it has none: counts_bytes() tells which). Multi-part transports
//! (pipeline_policy::multi_part_transport, S3's coded exchanges) are not erased here: their
//! pipeline takes several messages per rank and is a different type.
//!
//! Semantics, determinism, bytes on the wire and what each call throws are the wrapped
//! transport's; the erasure adds one heap allocation at make() and one indirect call per
//! operation, no copies. Collective exactly when the wrapped transport is (MPI transports:
//! every rank must start the same sequence of operations). Movable, not copyable; a moved-from
//! any_transport must not be used (its calls throw std::logic_error).
class any_transport {
public:
  using transport_concept = transport_tag; //!< opts in (pipeline_policy::transport).

  //! @brief A transport holding a T constructed from `args`. Allocates once.
  //! @throws whatever T's constructor throws; std::bad_alloc.
  template <pipeline_policy::transport T, class... Args>
  [[nodiscard]] static any_transport make(Args&&... args) {
    any_transport t;
    t.impl_ = std::make_unique<model<T>>(std::forward<Args>(args)...);
    return t;
  }

  //! Starts averaging `m` into `average` (the wrapped transport's start()).
  void start(const sparse_message& m, std::span<float> average) { get().start(m, average); }
  //! @brief Starts averaging `values` in place (the wrapped transport's start_in_place()).
  //! @throws std::logic_error if accepts_in_place() is false.
  void start_in_place(std::span<float> values) { get().start_in_place(values); }
  //! Whether start_in_place() may be used: the wrapped transport's answer, false if it has no
  //! in-place form. The pipeline asks once, at construction.
  [[nodiscard]] bool accepts_in_place() const { return get().accepts_in_place(); }
  //! Progress without blocking; true once the average is complete.
  bool test() { return get().test(); }
  //! Completes the operation.
  void wait() { get().wait(); }
  //! Bytes this rank sent in its last operation; 0 if the wrapped transport does not count.
  [[nodiscard]] std::size_t bytes_sent() const { return get().bytes_sent(); }
  //! Bytes this rank received in its last operation; 0 if the wrapped transport does not count.
  [[nodiscard]] std::size_t bytes_received() const { return get().bytes_received(); }
  //! Whether the wrapped transport models byte_counting_transport (else the counts are 0).
  [[nodiscard]] bool counts_bytes() const { return get().counts_bytes(); }
  //! The wrapped transport's selected_indices() (pipeline_policy::selecting_transport), nullptr
  //! if it has none (every sent value is summed).
  [[nodiscard]] const std::vector<std::uint32_t>* selected_indices() const {
    return get().selected_indices();
  }

private:
  any_transport() = default;

  struct interface {
    virtual ~interface() = default;
    virtual void start(const sparse_message&, std::span<float>) = 0;
    virtual void start_in_place(std::span<float>) = 0;
    [[nodiscard]] virtual bool accepts_in_place() const = 0;
    virtual bool test() = 0;
    virtual void wait() = 0;
    [[nodiscard]] virtual std::size_t bytes_sent() const = 0;
    [[nodiscard]] virtual std::size_t bytes_received() const = 0;
    [[nodiscard]] virtual bool counts_bytes() const = 0;
    [[nodiscard]] virtual const std::vector<std::uint32_t>* selected_indices() const = 0;
  };

  template <class T>
  struct model final : interface {
    template <class... Args>
    explicit model(Args&&... args) : t(std::forward<Args>(args)...) {}
    void start(const sparse_message& m, std::span<float> a) override { t.start(m, a); }
    void start_in_place(std::span<float> values) override {
      if constexpr (pipeline_policy::in_place_transport<T>) {
        if (t.accepts_in_place()) {
          t.start_in_place(values);
          return;
        }
      }
      throw std::logic_error("any_transport: start_in_place() on a transport that does not "
                             "accept it (accepts_in_place() is false)");
    }
    [[nodiscard]] bool accepts_in_place() const override {
      if constexpr (pipeline_policy::in_place_transport<T>) {
        return t.accepts_in_place();
      } else {
        return false;
      }
    }
    bool test() override { return t.test(); }
    void wait() override { t.wait(); }
    [[nodiscard]] std::size_t bytes_sent() const override {
      if constexpr (pipeline_policy::byte_counting_transport<T>) {
        return t.bytes_sent();
      } else {
        return 0;
      }
    }
    [[nodiscard]] std::size_t bytes_received() const override {
      if constexpr (pipeline_policy::byte_counting_transport<T>) {
        return t.bytes_received();
      } else {
        return 0;
      }
    }
    [[nodiscard]] bool counts_bytes() const override {
      return pipeline_policy::byte_counting_transport<T>;
    }
    [[nodiscard]] const std::vector<std::uint32_t>* selected_indices() const override {
      if constexpr (pipeline_policy::selecting_transport<T>) {
        return t.selected_indices();
      } else {
        return nullptr;
      }
    }
    T t;
  };

  [[nodiscard]] interface& get() const {
    if (!impl_) {
      throw std::logic_error("any_transport: used after it was moved from");
    }
    return *impl_;
  }

  std::unique_ptr<interface> impl_;
};

static_assert(pipeline_policy::transport<any_transport>);
static_assert(pipeline_policy::in_place_transport<any_transport>);
static_assert(pipeline_policy::byte_counting_transport<any_transport>);
static_assert(pipeline_policy::selecting_transport<any_transport>);

} // namespace gradcomp
