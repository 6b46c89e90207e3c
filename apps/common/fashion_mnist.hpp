// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the LibTorch programs share: the Fashion-MNIST IDX reader (gzip-compressed, as
//! Debian's dataset-fashion-mnist ships them, or uncompressed), the data folder default, and
//! the networks (ddp-baseline's CNN, a deeper VGG-style net and S3's MLP).
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <zlib.h>

namespace gradcomp_apps {

namespace fs = std::filesystem;

//! Debian's dataset-fashion-mnist folder (gzip-compressed IDX files).
inline const char* const debian_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

//! The four IDX files, without the optional ".gz".
inline constexpr std::array<const char*, 4> idx_files = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte"};

//! The path of IDX file `name` in `dir`: uncompressed if present, else `name`.gz; nothing if
//! neither exists.
inline std::optional<fs::path> find_idx(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (const fs::path& p : {dir / name, dir / (name + ".gz")}) {
    if (fs::is_regular_file(p, ec)) {
      return p;
    }
  }
  return std::nullopt;
}

//! The IDX files missing from `dir` (empty when all four are there, compressed or not).
inline std::vector<std::string> missing_idx_files(const fs::path& dir) {
  std::vector<std::string> missing;
  for (const char* f : idx_files) {
    if (!find_idx(dir, f)) {
      missing.emplace_back(f);
    }
  }
  return missing;
}

//! Reads a whole file, decompressing it if it is gzip (zlib's gzread reads both).
//! @throws std::runtime_error naming the file if it cannot be read.
inline std::vector<std::uint8_t> read_maybe_gzip(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw std::runtime_error("cannot open " + path.string());
  }
  std::vector<std::uint8_t> bytes;
  std::array<std::uint8_t, 1 << 16> chunk{};
  for (;;) {
    const int got = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      gzclose(f);
      throw std::runtime_error("cannot read " + path.string() + " (corrupt gzip?)");
    }
    if (got == 0) {
      break;
    }
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  gzclose(f);
  return bytes;
}

//! An IDX file (unsigned bytes): its dimensions and data.
struct idx_array {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};

//! Parses IDX (magic 0x00 0x00 0x08 ndim, big-endian u32 dimensions, then the bytes) and checks
//! that the data length matches the dimensions.
//! @throws std::runtime_error naming the file otherwise.
inline idx_array read_idx(const fs::path& path, int expected_dims) {
  std::vector<std::uint8_t> b = read_maybe_gzip(path);
  const auto bad = [&](const std::string& why) {
    return std::runtime_error(path.string() + ": not an IDX file of unsigned bytes (" + why + ")");
  };
  if (b.size() < 4 || b[0] != 0 || b[1] != 0 || b[2] != 0x08) {
    throw bad("bad magic");
  }
  if (b[3] != expected_dims) {
    throw bad("expected " + std::to_string(expected_dims) + " dimensions, found " +
              std::to_string(b[3]));
  }
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(b[3]);
  if (b.size() < header) {
    throw bad("truncated header");
  }
  idx_array a;
  std::size_t count = 1;
  for (int d = 0; d < b[3]; ++d) {
    const std::size_t o = 4 + 4 * static_cast<std::size_t>(d);
    const std::uint32_t v = (std::uint32_t{b[o]} << 24) | (std::uint32_t{b[o + 1]} << 16) |
                            (std::uint32_t{b[o + 2]} << 8) | std::uint32_t{b[o + 3]};
    a.dims.push_back(v);
    count *= v;
  }
  if (b.size() - header != count) {
    throw bad(std::to_string(b.size() - header) + " data bytes for " + std::to_string(count) +
              " elements");
  }
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

//! Images (N x 1 x 28 x 28, float, normalised with Fashion-MNIST's training mean 0.2860 and
//! standard deviation 0.3530) and labels (N, int64).
struct dataset {
  torch::Tensor images;
  torch::Tensor labels;
  [[nodiscard]] std::int64_t size() const { return images.size(0); }
};

//! Loads the training (`train` = true) or test set from `dir`, the first `limit` samples if
//! limit > 0. @throws std::runtime_error on missing or malformed files, or images and labels of
//! different counts.
inline dataset load_fashion_mnist(const fs::path& dir, bool train, std::int64_t limit = 0) {
  const std::string prefix = train ? "train" : "t10k";
  const auto images_path = find_idx(dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = find_idx(dir, prefix + "-labels-idx1-ubyte");
  if (!images_path || !labels_path) {
    throw std::runtime_error("Fashion-MNIST " + prefix + " files missing in " + dir.string());
  }
  idx_array images = read_idx(*images_path, 3);
  idx_array labels = read_idx(*labels_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    throw std::runtime_error(dir.string() + ": " + std::to_string(images.dims[0]) + " images but " +
                             std::to_string(labels.dims[0]) + " labels");
  }
  std::int64_t n = images.dims[0];
  if (limit > 0) {
    n = std::min(n, limit);
  }
  const std::int64_t h = images.dims[1];
  const std::int64_t w = images.dims[2];
  torch::Tensor x = torch::from_blob(images.data.data(), {n, 1, h, w}, torch::kUInt8)
                        .to(torch::kFloat32)
                        .div_(255.0)
                        .sub_(0.2860)
                        .div_(0.3530);
  torch::Tensor y = torch::from_blob(labels.data.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return {x.contiguous(), y.contiguous()};
}

//! Replacements of a model's fully connected layers by name: gradcomp-train --parallel hybrid
//! runs some of them model parallel (apps/gradcomp-train/hybrid.hpp). Empty, or disabled,
//! every layer runs as itself.
struct fc_overrides {
  std::map<std::string, std::function<torch::Tensor(const torch::Tensor&)>> by_name;
  bool enabled = true;
  //! `layer` applied to x, or its replacement when there is one and replacements are enabled.
  torch::Tensor
  operator()(const std::string& name, torch::nn::Linear& layer, const torch::Tensor& x) const {
    if (enabled) {
      const auto found = by_name.find(name);
      if (found != by_name.end()) {
        return found->second(x);
      }
    }
    return layer->forward(x);
  }
};

//! ddp-baseline.md's CNN: conv 1->32 5x5 (padding 2) + ReLU + max-pool 2, conv 32->64 5x5 +
//! ReLU + max-pool 2, fc 3136->512 + ReLU, fc 512->10. 1.66 M parameters in 8 tensors.
struct cnn_impl : torch::nn::Module {
  cnn_impl()
      : conv1(register_module("conv1",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 5).padding(2)))),
        conv2(register_module("conv2",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 5).padding(2)))),
        fc1(register_module("fc1", torch::nn::Linear(7 * 7 * 64, 512))),
        fc2(register_module("fc2", torch::nn::Linear(512, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    x = torch::relu(fc("fc1", fc1, x.flatten(1)));
    return fc("fc2", fc2, x);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  fc_overrides fc;
};
TORCH_MODULE_IMPL(cnn, cnn_impl);

//! A VGG-style net for 28x28 inputs (as the sources' VGG-16, scaled to Fashion-MNIST and CPU):
//! three blocks of two 3x3 convolutions (32, 64, 128 channels, padding 1, ReLU) each followed
//! by max-pool 2, then fc 1152->256 + ReLU, fc 256->256 + ReLU, fc 256->10. 0.65 M parameters
//! in 18 tensors, most of them small: the case where merging layers matters.
struct vgg_impl : torch::nn::Module {
  vgg_impl() {
    const std::array<std::int64_t, 4> channels = {1, 32, 64, 128};
    for (std::size_t block = 0; block < 3; ++block) {
      for (int j = 0; j < 2; ++j) {
        const std::int64_t in = j == 0 ? channels[block] : channels[block + 1];
        convs.push_back(register_module(
            "conv" + std::to_string(block + 1) + "_" + std::to_string(j + 1),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(in, channels[block + 1], 3).padding(1))));
      }
    }
    fc1 = register_module("fc1", torch::nn::Linear(128 * 3 * 3, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 256));
    fc3 = register_module("fc3", torch::nn::Linear(256, 10));
  }

  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t i = 0; i < convs.size(); ++i) {
      x = torch::relu(convs[i]->forward(x));
      if (i % 2 == 1) {
        x = torch::max_pool2d(x, 2); // 28 -> 14 -> 7 -> 3
      }
    }
    x = torch::relu(fc("fc1", fc1, x.flatten(1)));
    x = torch::relu(fc("fc2", fc2, x));
    return fc("fc3", fc3, x);
  }

  std::vector<torch::nn::Conv2d> convs;
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  fc_overrides fc;
};
TORCH_MODULE_IMPL(vgg, vgg_impl);

//! A multilayer perceptron like CSSGD's (S3) MNIST MLP, the classic 784-512-512-10: fc 784->512
//! + ReLU, fc 512->512 + ReLU, fc 512->10 on the flattened image. 0.67 M parameters in 6 tensors,
//! no convolutions: computation is cheap next to its gradient's size.
struct mlp_impl : torch::nn::Module {
  mlp_impl()
      : fc1(register_module("fc1", torch::nn::Linear(28 * 28, 512))),
        fc2(register_module("fc2", torch::nn::Linear(512, 512))),
        fc3(register_module("fc3", torch::nn::Linear(512, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc("fc1", fc1, x.flatten(1)));
    x = torch::relu(fc("fc2", fc2, x));
    return fc("fc3", fc3, x);
  }

  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Linear fc3;
  fc_overrides fc;
};
TORCH_MODULE_IMPL(mlp, mlp_impl);

} // namespace gradcomp_apps
