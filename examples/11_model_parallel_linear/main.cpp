// SPDX-License-Identifier: Apache-2.0
// Model parallelism for one fully connected layer (docs/hybrid.md): y = x W^T + b with K = 4096
// inputs and N = 1000 outputs, W and b split by output over the ranks, each rank holding only
// its rows; every rank passes its own m samples and gets all N outputs of them. Backward gives
// each rank the gradient of its slice (averaged over the ranks, as data-parallel training
// would have it) and dL/dx of its own samples. The GEMMs run on any CBLAS
// (gradcomp::blas::cblas_gemm).
// The check: every rank computes the whole layer alone, in double, for every rank's samples
// (the weights and each rank's inputs are functions of their indices), and compares y, dW, db
// and dx within 1e-4 relative. Exits 1 on every rank on a mismatch.
// Needs gradcomp::mpi and gradcomp::blas. Run:
//   mpiexec -n 2 build/examples/11_model_parallel_linear/gradcomp_example_model_parallel_linear
#include <gradcomp/blas/cblas_gemm.hpp>
#include <gradcomp/mpi.hpp>
#include <gradcomp/mpi/column_parallel_linear.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr std::size_t m = 4; // samples per rank

float weight(std::size_t o, std::size_t k) {
  return std::sin(static_cast<float>(o * 4096 + k) * 1e-3f) / 64.0f;
}
float bias(std::size_t o) {
  return static_cast<float>(o % 7) * 0.1f;
}
float input(int rank, std::size_t s, std::size_t k) {
  return std::cos(static_cast<float>((static_cast<std::size_t>(rank) * m + s) * 131 + k) * 1e-2f);
}
//! The loss's gradient dL/dy for the output y (here L = 0.5 ||y||^2 / 1000: dL/dy = y / 1000).
std::vector<float> loss_gradient(const std::vector<float>& y) {
  std::vector<float> dy(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    dy[i] = y[i] / 1000.0f;
  }
  return dy;
}

bool close(double got, double want) {
  return std::abs(got - want) <= 1e-4 * (1.0 + std::abs(want));
}

//! Rank r's outputs y = x W^T + b (M x N) computed alone, in double.
std::vector<double> reference_outputs(int r) {
  std::vector<double> y(m * 1000);
  for (std::size_t s = 0; s < m; ++s) {
    for (std::size_t o = 0; o < 1000; ++o) {
      double sum = bias(o);
      for (std::size_t k = 0; k < 4096; ++k) {
        sum += static_cast<double>(input(r, s, k)) * weight(o, k);
      }
      y[s * 1000 + o] = sum;
    }
  }
  return y;
}

} // namespace

int main(int argc, char** argv) {
  const gradcomp::mpi::environment mpi(MPI_THREAD_MULTIPLE, &argc, &argv);
  gradcomp::mpi::communicator comm(MPI_COMM_WORLD);
  // y = x W^T + b, K = 4096 inputs, N = 1000 outputs, split by output over the ranks
  gradcomp::mpi::column_parallel_linear<gradcomp::blas::cblas_gemm> fc(comm, 4096, 1000);
  const gradcomp::column_slice mine = fc.slice();       // rows [offset, offset + rows) of W and b
  std::vector<float> w(mine.rows * 4096), b(mine.rows); // this rank's slice
  std::vector<float> x(m * 4096), y(m * 1000);          // this rank's m samples
  for (std::size_t o = 0; o < mine.rows; ++o) {
    for (std::size_t k = 0; k < 4096; ++k) {
      w[o * 4096 + k] = weight(mine.offset + o, k);
    }
    b[o] = bias(mine.offset + o);
  }
  for (std::size_t s = 0; s < m; ++s) {
    for (std::size_t k = 0; k < 4096; ++k) {
      x[s * 4096 + k] = input(comm.rank(), s, k);
    }
  }
  fc.forward(x, w, b, y);                   // collective
  std::vector<float> dy = loss_gradient(y); // the loss, dL/dy
  std::vector<float> dw(w.size()), db(b.size()), dx(x.size());
  fc.backward(dy, x, w, dw, db, dx); // collective
  // dw, db: gradient of the slice averaged over ranks (as a data-parallel allreduce would give);
  // dx: dL/dx of this rank's own samples. start_forward / start_backward + test() / wait() are
  // the nonblocking forms.

  // the reference: every rank's outputs and output gradients, computed alone
  bool ok = true;
  std::vector<std::vector<double>> dy_of(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    dy_of[static_cast<std::size_t>(r)] = reference_outputs(r);
    for (double& v : dy_of[static_cast<std::size_t>(r)]) {
      v /= 1000.0; // dL/dy
    }
  }
  const std::vector<double>& own_dy = dy_of[static_cast<std::size_t>(comm.rank())];
  for (std::size_t i = 0; i < y.size(); ++i) {
    ok = ok && close(y[i], own_dy[i] * 1000.0);
  }
  for (std::size_t o = 0; o < mine.rows; ++o) { // dW_o = mean over ranks of dy^T x, db_o
    double bias_grad = 0.0;
    for (int r = 0; r < comm.size(); ++r) {
      for (std::size_t s = 0; s < m; ++s) {
        bias_grad += dy_of[static_cast<std::size_t>(r)][s * 1000 + mine.offset + o];
      }
    }
    ok = ok && close(db[o], bias_grad / comm.size());
    for (std::size_t k = 0; k < 4096; k += 97) { // a sample of the columns
      double g = 0.0;
      for (int r = 0; r < comm.size(); ++r) {
        for (std::size_t s = 0; s < m; ++s) {
          g += dy_of[static_cast<std::size_t>(r)][s * 1000 + mine.offset + o] * input(r, s, k);
        }
      }
      ok = ok && close(dw[o * 4096 + k], g / comm.size());
    }
  }
  for (std::size_t s = 0; s < m; ++s) { // dx = dy W, this rank's samples
    for (std::size_t k = 0; k < 4096; ++k) {
      double g = 0.0;
      for (std::size_t o = 0; o < 1000; ++o) {
        g += own_dy[s * 1000 + o] * weight(o, k);
      }
      ok = ok && close(dx[s * 4096 + k], g);
    }
  }
  int all = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (comm.rank() == 0) {
    std::printf(all ? "ok: %d ranks, y, dW, db and dx match the layer computed alone\n"
                    : "FAILED: %d ranks, a result differs from the layer computed alone\n",
                comm.size());
  }
  return all ? 0 : 1;
}
