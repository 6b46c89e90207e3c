// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The binary form of gradcomp's training state (error-feedback residuals, velocities,
//! compressor state, pipeline state) for checkpoints: gradcomp::state_writer, state_reader,
//! state_error, and save_state / load_state of any object that writes itself to a state_writer.
#pragma once

#include <gradcomp/error.hpp>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <istream>
#include <iterator>
#include <limits>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace gradcomp {

//! @brief A checkpoint that cannot be loaded: truncated, corrupted (checksum), of another format
//! version, or holding the state of another configuration (layer sizes, compressor, options).
//! The message names what differs. The object being loaded is then unchanged (loads read into
//! temporaries and commit at the end) unless the message says otherwise.
class state_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! @brief The container: magic "GRADCOMPSTATE\0\0\0" (16 bytes), format version (u32), payload
//! length (u64), the payload, and its FNV-1a 64-bit checksum (u64). All integers little-endian.
inline constexpr std::array<char, 16> state_magic = {'G', 'R', 'A', 'D', 'C', 'O', 'M', 'P',
                                                     'S', 'T', 'A', 'T', 'E', 0,   0,   0};
//! Format version written by this library; a reader accepts exactly this version.
inline constexpr std::uint32_t state_format_version = 1;

namespace detail {
//! FNV-1a 64 over `bytes`. O(n).
inline std::uint64_t fnv1a64(std::span<const std::byte> bytes) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (const std::byte b : bytes) {
    h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  }
  return h;
}
static_assert(std::endian::native == std::endian::little,
              "gradcomp's state format is written in the host byte order, little-endian");

//! Bytes of the container's head: magic, version, payload length.
inline constexpr std::size_t state_head_bytes = 16 + 4 + 8;

//! `payload` in the checkpoint container (magic, version, length, payload, checksum; see
//! state_magic). O(payload).
inline std::vector<std::byte> state_container(std::span<const std::byte> payload) {
  std::vector<std::byte> out(state_head_bytes + payload.size() + 8);
  const std::uint32_t version = state_format_version;
  const std::uint64_t length = payload.size();
  const std::uint64_t sum = fnv1a64(payload);
  std::memcpy(out.data(), state_magic.data(), state_magic.size());
  std::memcpy(out.data() + 16, &version, 4);
  std::memcpy(out.data() + 20, &length, 8);
  if (!payload.empty()) {
    std::memcpy(out.data() + state_head_bytes, payload.data(), payload.size());
  }
  std::memcpy(out.data() + state_head_bytes + payload.size(), &sum, 8);
  return out;
}
} // namespace detail

//! @brief Appends typed fields to a state payload. Every field is written in the host
//! (little-endian) representation; tag() writes a named marker that the reader checks, so a
//! load against another structure fails naming both names. Not thread-safe. O(bytes) memory.
class state_writer {
public:
  //! A named marker (the reader's expect_tag() must see the same name).
  void tag(std::string_view name) { string(name); }
  //! One byte, 0 or 1 (the reader's flag() refuses anything else).
  void flag(bool v) {
    const std::uint8_t b = v ? 1 : 0;
    put(&b, 1);
  }
  void u32(std::uint32_t v) { put(&v, sizeof v); } //!< 4 bytes.
  void u64(std::uint64_t v) { put(&v, sizeof v); } //!< 8 bytes.
  void f32(float v) { put(&v, sizeof v); }         //!< 4 bytes, the float's bits.
  void f64(double v) { put(&v, sizeof v); }        //!< 8 bytes, the double's bits.
  //! u64 length, then the characters.
  void string(std::string_view s) {
    u64(s.size());
    put(s.data(), s.size());
  }
  //! u64 count, then the floats' bits (4 bytes each).
  void floats(std::span<const float> v) { values(v); }
  //! u64 count, then the doubles' bits (8 bytes each).
  void doubles(std::span<const double> v) { values(v); }
  //! The payload written so far.
  [[nodiscard]] std::span<const std::byte> payload() const noexcept { return bytes_; }

private:
  template <class T>
  void values(std::span<const T> v) {
    u64(v.size());
    put(v.data(), v.size_bytes());
  }
  void put(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<std::byte> bytes_;
};

//! @brief Reads the fields of a state payload in the order they were written. Every read is
//! bounds-checked: reading past the end, a tag with another name, a count larger than the bytes
//! left, or an expected value that differs throws state_error naming the field. Not
//! thread-safe.
class state_reader {
public:
  //! Reads `payload` (not copied: must outlive the reader).
  explicit state_reader(std::span<const std::byte> payload) noexcept : bytes_(payload) {}

  //! @throws state_error if the next field is not the tag `name` (naming both).
  void expect_tag(std::string_view name) {
    const std::string got = string("tag");
    if (got != name) {
      throw state_error(detail::concat("gradcomp state: expected section '", name, "', found '",
                                       got,
                                       "' (the checkpoint was written by another "
                                       "structure)"));
    }
  }
  //! A flag written by state_writer::flag(). @throws state_error if the byte is not 0 or 1.
  bool flag(std::string_view what) {
    const auto b = get<std::uint8_t>(what);
    if (b > 1) {
      throw state_error(detail::concat("gradcomp state: ", what, " is ", static_cast<int>(b),
                                       ", not a flag (0 or 1)"));
    }
    return b == 1;
  }
  std::uint32_t u32(std::string_view what) { return get<std::uint32_t>(what); } //!< 4 bytes.
  std::uint64_t u64(std::string_view what) { return get<std::uint64_t>(what); } //!< 8 bytes.
  float f32(std::string_view what) { return get<float>(what); }                 //!< 4 bytes.
  double f64(std::string_view what) { return get<double>(what); }               //!< 8 bytes.
  //! A string of at most `max_chars` characters.
  std::string string(std::string_view what, std::uint64_t max_chars = 4096) {
    const std::uint64_t n = u64(what);
    require_left(what, n, max_chars);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  //! Floats into `out`, whose length must be the stored count (a layer's size).
  //! @throws state_error naming `what` and both counts if they differ.
  void floats_into(std::string_view what, std::span<float> out) { values_into(what, out); }
  //! Doubles into `out`, whose length must be the stored count.
  //! @throws state_error naming `what` and both counts if they differ.
  void doubles_into(std::string_view what, std::span<double> out) { values_into(what, out); }
  //! Reads a u64 and checks it equals `expected`. @throws state_error naming both.
  void expect_u64(std::string_view what, std::uint64_t expected) {
    const std::uint64_t got = u64(what);
    if (got != expected) {
      throw state_error(detail::concat("gradcomp state: ", what, " is ", got,
                                       " in the checkpoint, ", expected, " here"));
    }
  }
  //! True once every byte was read.
  [[nodiscard]] bool at_end() const noexcept { return pos_ == bytes_.size(); }
  //! @throws state_error unless every byte was read (the state was written by another
  //! structure, or is followed by bytes that do not belong to it).
  void require_end() const {
    if (!at_end()) {
      throw state_error(detail::concat("gradcomp state: ", bytes_.size() - pos_,
                                       " bytes left over after the state (written by another "
                                       "structure)"));
    }
  }

private:
  template <class T>
  void values_into(std::string_view what, std::span<T> out) {
    const std::uint64_t n = u64(what);
    if (n != out.size()) {
      throw state_error(detail::concat("gradcomp state: ", what, " has ", n,
                                       " elements in the checkpoint, ", out.size(), " here"));
    }
    require_left(what, n * sizeof(T), std::numeric_limits<std::uint64_t>::max());
    if (n > 0) { // an empty span's data() may be null, which memcpy must not get
      std::memcpy(out.data(), bytes_.data() + pos_, out.size_bytes());
      pos_ += out.size_bytes();
    }
  }
  void require_left(std::string_view what, std::uint64_t n, std::uint64_t limit) const {
    if (n > limit || n > bytes_.size() - pos_) {
      throw state_error(detail::concat("gradcomp state: truncated or corrupted at byte ", pos_,
                                       " of ", bytes_.size(), " reading ", what, " (", n,
                                       " bytes stated)"));
    }
  }
  template <class T>
  T get(std::string_view what) {
    require_left(what, sizeof(T), sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

//! @brief An object with a binary state: `save_state(state_writer&) const` and
//! `load_state(state_reader&)` (error_feedback, the host compressors, pipeline).
template <class T>
concept has_binary_state = requires(const T& ct, T& t, state_writer& w, state_reader& r) {
  ct.save_state(w);
  t.load_state(r);
};

//! @brief The state of `object` in gradcomp's checkpoint container (magic, version, length,
//! payload, checksum). O(state size). Deterministic: the same state gives the same bytes.
//! @throws whatever object.save_state throws (std::logic_error mid-iteration for a pipeline).
template <has_binary_state T>
[[nodiscard]] std::vector<std::byte> save_state(const T& object) {
  state_writer w;
  object.save_state(w);
  return detail::state_container(w.payload());
}

//! @brief Restores `object` from bytes written by save_state(). Checks the container (magic,
//! version, length, checksum) before reading, then the object checks that the state is its own
//! (sizes, compressor, options) and that every byte is used. O(state size); a copyable object is
//! loaded into a copy first (its size in memory again), which replaces it at the end.
//! @throws state_error naming what is wrong; `object` is then unchanged.
template <has_binary_state T>
void load_state(T& object, std::span<const std::byte> bytes) {
  constexpr std::size_t head = detail::state_head_bytes;
  if (bytes.size() < head + 8 ||
      std::memcmp(bytes.data(), state_magic.data(), state_magic.size()) != 0) {
    throw state_error(detail::concat("gradcomp state: not a gradcomp checkpoint (", bytes.size(),
                                     " bytes, no GRADCOMPSTATE header)"));
  }
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 16, 4);
  if (version != state_format_version) {
    throw state_error(detail::concat("gradcomp state: format version ", version,
                                     ", this library reads version ", state_format_version));
  }
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data() + 20, 8);
  if (length != bytes.size() - head - 8) {
    throw state_error(detail::concat("gradcomp state: the payload is stated as ", length,
                                     " bytes, the checkpoint holds ", bytes.size() - head - 8,
                                     " (truncated or corrupted)"));
  }
  const std::span<const std::byte> payload = bytes.subspan(head, length);
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + head + length, 8);
  if (stored != detail::fnv1a64(payload)) {
    throw state_error("gradcomp state: checksum mismatch (the checkpoint is corrupted)");
  }
  state_reader r(payload);
  if constexpr (std::is_copy_constructible_v<T> && std::is_move_assignable_v<T>) {
    T copy(object); // so that bytes left over also leave `object` unchanged
    copy.load_state(r);
    r.require_end();
    object = std::move(copy);
  } else {
    // a type that cannot be copied (pipeline) calls r.require_end() itself before it commits
    object.load_state(r);
    r.require_end();
  }
}

//! Writes save_state(object) to `out`; a write error sets out's failbit (check the stream).
template <has_binary_state T>
void save_state(const T& object, std::ostream& out) {
  const std::vector<std::byte> bytes = save_state(object);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

//! Reads `in` to its end and load_state()s `object` from it.
//! @throws state_error as load_state(object, bytes), or if reading fails.
template <has_binary_state T>
void load_state(T& object, std::istream& in) {
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    throw state_error("gradcomp state: reading the checkpoint stream failed");
  }
  load_state(object, std::as_bytes(std::span<const char>(chars)));
}

} // namespace gradcomp
