// Prototype: the allgather's receive side for 4 messages of 5 % of 1,663,370 values (fp16,
// delta + varint): clear + decode each + accumulate (as now) against clear + a fused
// decode-and-add loop (no decoded copy). One core.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/sparse/detail/float16.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <algorithm>
using namespace gradcomp;
constexpr std::size_t n = 1663370;
sparse_message draw(unsigned seed) {
  const std::size_t k = n / 20;
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(k); std::sort(all.begin(), all.end());
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  sparse_message m; m.clear(n); m.values_type = value_type::fp16; m.indices = all; m.values.resize(k);
  for (float& v : m.values) v = round_to(value_type::fp16, normal(rng));
  return m;
}
// fused: varint indices + fp16 values straight into sum (checks as the decoder's)
void fused(std::span<const std::byte> b, std::span<float> sum) {
  const std::byte* p = b.data();
  const auto nnz = detail::load_le<std::uint64_t>(p + 16);
  const auto ib = detail::load_le<std::uint64_t>(p + 24);
  const std::byte* q = p + 32; const std::byte* end = q + ib; const std::byte* v = end;
  std::uint64_t next = 0;
  for (std::uint64_t i = 0; i < nnz; ++i) {
    std::uint32_t gap;
    if (q != end && static_cast<std::uint32_t>(*q) < 0x80u) gap = static_cast<std::uint32_t>(*q++);
    else if (!detail::read_varint(q, end, gap)) throw 1;
    const std::uint64_t idx = next + gap;
    if (idx >= sum.size()) throw 2;
    const float x = detail::half_bits_to_float(detail::load_le<std::uint16_t>(v + 2 * i));
    if (x != x) throw 3;
    sum[idx] += x;
    next = idx + 1;
  }
}
int main() {
  std::vector<std::vector<std::byte>> msgs;
  for (unsigned r = 0; r < 4; ++r) msgs.push_back(encode(draw(r + 1), index_encoding::delta_varint));
  std::vector<float> sum(n), sum2(n);
  std::vector<sparse_message> dec(4);
  auto now = [] { return std::chrono::steady_clock::now(); };
  double a = 0, b = 0, c = 0; const int reps = 200;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = now();
    std::fill(sum.begin(), sum.end(), 0.0f);
    auto t1 = now();
    for (int r = 0; r < 4; ++r) decode(msgs[r], dec[r]);
    for (int r = 0; r < 4; ++r) accumulate(dec[r], sum);
    auto t2 = now();
    std::fill(sum2.begin(), sum2.end(), 0.0f);
    for (int r = 0; r < 4; ++r) fused(msgs[r], sum2);
    auto t3 = now();
    a += std::chrono::duration<double, std::milli>(t1 - t0).count();
    b += std::chrono::duration<double, std::milli>(t2 - t1).count();
    c += std::chrono::duration<double, std::milli>(t3 - t2).count();
  }
  std::printf("clear %.3f ms, decode+accumulate x4 %.3f ms, clear+fused x4 %.3f ms, identical %d\n", a / reps, b / reps, c / reps, (int)std::equal(sum.begin(), sum.end(), sum2.begin()));
}
