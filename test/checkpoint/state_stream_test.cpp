// SPDX-License-Identifier: Apache-2.0
// The checkpoint format (checkpoint/state_stream.hpp): a state written field by field reads back
// bit for bit, in memory and through streams; the container is laid out as its doc comment says
// (magic, version, length, payload, FNV-1a 64 of the payload against the published test
// vectors); every truncation of a checkpoint, a flipped byte, another version, another
// structure, a count larger than the bytes left and bytes left over are refused with
// state_error naming what is wrong, leaving the object unchanged.
#include <gradcomp/checkpoint/state_stream.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../common/catch.hpp"

namespace checkpoint_state_stream_test {

using namespace gradcomp;
using Catch::Contains;

namespace {

// An object with one field of every kind the writer has.
struct sample_state {
  bool on = true;
  std::uint32_t small = 0xdeadbeefu;
  std::uint64_t big = 0x0123456789abcdefull;
  float f = -0.0f;
  double d = 1.0 / 3.0;
  std::string name = "layer \"fc1\"";
  std::vector<float> floats{1.5f, std::numeric_limits<float>::quiet_NaN(), -2.0f};
  std::vector<double> doubles{0.1, 1e300};

  void save_state(state_writer& w) const {
    w.tag("sample");
    w.flag(on);
    w.u32(small);
    w.u64(big);
    w.f32(f);
    w.f64(d);
    w.string(name);
    w.floats(floats);
    w.doubles(doubles);
  }
  void load_state(state_reader& r) {
    r.expect_tag("sample");
    on = r.flag("on");
    small = r.u32("small");
    big = r.u64("big");
    f = r.f32("f");
    d = r.f64("d");
    name = r.string("name");
    r.floats_into("floats", floats);
    r.doubles_into("doubles", doubles);
  }
};

static_assert(has_binary_state<sample_state>);
static_assert(!has_binary_state<int>);

// the bits of every field, for comparing NaNs and signed zeros
std::vector<std::uint64_t> bits_of(const sample_state& s) {
  std::vector<std::uint64_t> b{s.on, s.small, s.big, std::bit_cast<std::uint32_t>(s.f),
                               std::bit_cast<std::uint64_t>(s.d)};
  for (const float v : s.floats) {
    b.push_back(std::bit_cast<std::uint32_t>(v));
  }
  for (const double v : s.doubles) {
    b.push_back(std::bit_cast<std::uint64_t>(v));
  }
  return b;
}

sample_state other_values() {
  sample_state s;
  s.on = false;
  s.small = 7;
  s.big = 8;
  s.f = 9.0f;
  s.d = 10.0;
  s.name = std::string(1, 'x'); // not = "x": g++ 12 warns (-Wrestrict) on that
  s.floats = {0.0f, 0.0f, 0.0f};
  s.doubles = {0.0, 0.0};
  return s;
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

} // namespace

TEST_CASE("state_stream: FNV-1a 64 against the published test vectors", "[checkpoint]") {
  CHECK(detail::fnv1a64({}) == 0xcbf29ce484222325ull);
  CHECK(detail::fnv1a64(bytes_of("a")) == 0xaf63dc4c8601ec8cull);
  CHECK(detail::fnv1a64(bytes_of("foobar")) == 0x85944171f73967e8ull);
}

TEST_CASE("state_stream: every field round-trips bit for bit, the container as documented",
          "[checkpoint]") {
  const sample_state original;
  const std::vector<std::byte> saved = save_state(original);
  CHECK(save_state(original) == saved); // deterministic

  // the payload, field by field: tag (8 + 6), flag 1, u32 4, u64 8, f32 4, f64 8, string
  // (8 + 11), floats (8 + 12), doubles (8 + 16)
  const std::size_t payload = 14 + 1 + 4 + 8 + 4 + 8 + 19 + 20 + 24;
  REQUIRE(saved.size() == 16 + 4 + 8 + payload + 8);
  CHECK(std::memcmp(saved.data(), "GRADCOMPSTATE\0\0\0", 16) == 0);
  std::uint32_t version = 0;
  std::uint64_t length = 0, checksum = 0;
  std::memcpy(&version, saved.data() + 16, 4);
  std::memcpy(&length, saved.data() + 20, 8);
  std::memcpy(&checksum, saved.data() + 28 + payload, 8);
  CHECK(version == state_format_version);
  CHECK(version == 1);
  CHECK(length == payload);
  CHECK(checksum == detail::fnv1a64(std::span<const std::byte>(saved).subspan(28, payload)));
  // the tag's length, then its characters, little-endian
  CHECK(saved[28] == std::byte{6});
  CHECK(std::memcmp(saved.data() + 36, "sample", 6) == 0);

  sample_state loaded = other_values();
  load_state(loaded, saved);
  CHECK(bits_of(loaded) == bits_of(original));
  CHECK(loaded.name == original.name);

  // through streams
  std::stringstream stream;
  save_state(original, stream);
  CHECK(stream.str().size() == saved.size());
  sample_state from_stream = other_values();
  load_state(from_stream, stream);
  CHECK(bits_of(from_stream) == bits_of(original));
}

TEST_CASE("state_stream: every truncation and a flipped byte are refused, the object unchanged",
          "[checkpoint]") {
  const std::vector<std::byte> saved = save_state(sample_state{});
  const sample_state untouched = other_values();
  for (std::size_t size = 0; size < saved.size(); ++size) {
    CAPTURE(size);
    sample_state s = other_values();
    REQUIRE_THROWS_AS(load_state(s, std::span<const std::byte>(saved).first(size)), state_error);
    REQUIRE(bits_of(s) == bits_of(untouched));
  }
  sample_state s = other_values();
  CHECK_THROWS_WITH(load_state(s, std::span<const std::byte>(saved).first(10)),
                    Contains("not a gradcomp checkpoint (10 bytes, no GRADCOMPSTATE header)"));
  CHECK_THROWS_WITH(load_state(s, std::span<const std::byte>(saved).first(saved.size() - 1)),
                    Contains("truncated or corrupted"));
  for (std::size_t at = 28; at < saved.size(); at += 7) { // the payload and the checksum
    CAPTURE(at);
    std::vector<std::byte> flipped = saved;
    flipped[at] ^= std::byte{0x10};
    REQUIRE_THROWS_WITH(load_state(s, flipped), Contains("checksum mismatch"));
  }
  std::vector<std::byte> other_version = saved;
  other_version[16] = std::byte{2};
  CHECK_THROWS_WITH(load_state(s, other_version),
                    Contains("format version 2, this library reads version 1"));
  std::vector<std::byte> longer = saved;
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH(load_state(s, longer), Contains("the payload is stated as"));
  CHECK(bits_of(s) == bits_of(untouched));
}

TEST_CASE("state_stream: a reader refuses another structure naming the field", "[checkpoint]") {
  state_writer w;
  w.tag("pipeline");
  w.flag(true);
  w.u64(4);
  w.u64(1000); // a count of 1000 floats, with no bytes left for them
  const std::span<const std::byte> p = w.payload();

  state_reader tags(p);
  CHECK_THROWS_WITH(tags.expect_tag("sample"),
                    Contains("expected section 'sample', found 'pipeline'"));
  state_reader r(p);
  r.expect_tag("pipeline");
  CHECK_FALSE(r.at_end());
  CHECK(r.flag("on"));
  CHECK_THROWS_WITH(r.expect_u64("layers", 5), Contains("layers is 4 in the checkpoint, 5 here"));
  std::vector<float> thousand(1000);
  CHECK_THROWS_WITH(r.floats_into("residual", thousand),
                    Contains("truncated or corrupted at byte 33 of 33 reading residual (4000 bytes "
                             "stated)"));
  std::vector<float> three(3);
  // a flag byte other than 0 or 1
  state_writer bad_flag;
  bad_flag.u32(2);
  state_reader f(bad_flag.payload());
  CHECK_THROWS_WITH(f.flag("momentum on"), Contains("momentum on is 2, not a flag (0 or 1)"));
  // a count that does not match the object's size
  state_writer counts;
  counts.floats(std::vector<float>{1, 2});
  state_reader c(counts.payload());
  CHECK_THROWS_WITH(c.floats_into("velocity", three),
                    Contains("velocity has 2 elements in the checkpoint, 3 here"));
  // a string longer than its limit, and reading past the end
  state_writer long_string;
  long_string.string(std::string(5000, 'x'));
  state_reader ls(long_string.payload());
  CHECK_THROWS_WITH(ls.string("name"), Contains("reading name (5000 bytes stated)"));
  state_reader ok(long_string.payload());
  CHECK(ok.string("name", 5000).size() == 5000);
  CHECK(ok.at_end());
  CHECK_NOTHROW(ok.require_end());
  CHECK_THROWS_WITH(ok.u32("more"), Contains("truncated or corrupted at byte 5008 of 5008"));
  // bytes left over
  state_writer extra;
  extra.u64(1);
  extra.u32(2);
  state_reader e(extra.payload());
  e.u64("one");
  CHECK_THROWS_WITH(e.require_end(), Contains("4 bytes left over after the state"));
}

TEST_CASE("state_stream: load_state refuses left-over bytes and leaves the object unchanged",
          "[checkpoint]") {
  // a payload with one more field than sample_state reads
  state_writer w;
  sample_state{}.save_state(w);
  w.u32(99);
  const std::vector<std::byte> with_extra = detail::state_container(w.payload());
  sample_state s = other_values();
  CHECK_THROWS_WITH(load_state(s, with_extra), Contains("4 bytes left over"));
  CHECK(bits_of(s) == bits_of(other_values()));
  // and a stream that cannot be read
  std::stringstream broken;
  broken.setstate(std::ios::badbit);
  CHECK_THROWS_AS(load_state(s, broken), state_error);
}

} // namespace checkpoint_state_stream_test
