// SPDX-License-Identifier: Apache-2.0
// Checked views of LibTorch tensors (gradcomp/tensor/torch.hpp): the view aliases the tensor's
// storage, compressors give the same message on it as on a copy, and every property a view
// needs (defined, float32, contiguous, device) is checked with a message that names it.
#include <gradcomp/gradcomp.hpp>
#include <gradcomp/tensor/torch.hpp>

#include <torch/torch.h>

#include <vector>

#include "../common/catch.hpp"

using namespace gradcomp;

TEST_CASE("torch_host_view aliases a CPU float tensor", "[torch]") {
  torch::manual_seed(3);
  torch::Tensor t = torch::randn({7, 300});
  const host_view<float> v = torch_host_view(t);
  REQUIRE(v.size() == 2100);
  CHECK(v.data() == t.data_ptr<float>());
  v.data()[5] = 42.0f; // writes go to the tensor
  CHECK(t.flatten()[5].item<float>() == 42.0f);

  // a compressor sees the same gradient through the view as through a copy
  const std::vector<float> copy(v.data(), v.data() + v.size());
  exact_top_k topk(0.01);
  sparse_message from_view, from_copy;
  topk.compress(v, from_view);
  topk.compress(copy, from_copy);
  CHECK(from_view.indices == from_copy.indices);
  CHECK(from_view.values == from_copy.values);
  CHECK(from_view.nnz() == 21);
}

TEST_CASE("torch views reject what a compressor cannot read, naming the property", "[torch]") {
  CHECK_THROWS_WITH(torch_host_view(torch::Tensor()), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(torch_host_view(torch::zeros({4}, torch::kDouble)),
                    Catch::Contains("dtype is Double"));
  CHECK_THROWS_WITH(torch_host_view(torch::zeros({4, 5}).t()), Catch::Contains("not contiguous"));
  CHECK_THROWS_WITH(torch_host_view(torch::zeros({4, 5}).to_sparse()),
                    Catch::Contains("layout is Sparse"));
  CHECK_NOTHROW(torch_host_view(torch::zeros({4, 5}).t().contiguous()));
  // a CPU tensor is not device memory: refused by the device view (a CUDA tensor, likewise, by
  // the host view; LibTorch here is CPU-only, so that direction is not exercised)
  CHECK_THROWS_WITH(torch_device_view(torch::zeros({4})), Catch::Contains("on device cpu"));
  CHECK(torch_host_view(torch::zeros({0})).size() == 0);
}
